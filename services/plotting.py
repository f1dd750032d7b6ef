"""Matplotlib's object API without pyplot (no backend to choose, no global figure state), loaded
only where a figure is drawn."""


def subplots(rows: int = 1, cols: int = 1, figsize: tuple[float, float] | None = None, **kw):
    """pyplot.subplots without pyplot: (figure, axes)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize)
    return fig, fig.subplots(rows, cols, **kw)


def colours() -> list[str]:
    """Matplotlib's default colour cycle."""
    from matplotlib import rcParams

    return rcParams["axes.prop_cycle"].by_key()["color"]
