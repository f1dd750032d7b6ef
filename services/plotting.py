"""Matplotlib's object API without pyplot (no backend to choose, no global figure state), loaded
only where a figure is drawn."""

DPI = 120  # a figure's resolution in a report folder, and a sweep's figures' in MLflow too (not yet a comparison's)


def subplots(rows: int = 1, cols: int = 1, figsize: tuple[float, float] | None = None, **kw):
    """pyplot.subplots without pyplot: (figure, axes)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize)
    return fig, fig.subplots(rows, cols, **kw)


def panels(n: int, cols: int, size: tuple[float, float]):
    """A figure of n panels, at most ``cols`` a row, each ``size`` inches: (figure, the n axes in
    reading order); the grid's spare panels are hidden."""
    cols = max(1, min(cols, n))
    rows = -(-n // cols)
    fig, axes = subplots(rows, cols, figsize=(size[0] * cols, size[1] * rows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


def colours() -> list[str]:
    """Matplotlib's default colour cycle."""
    from matplotlib import rcParams

    return rcParams["axes.prop_cycle"].by_key()["color"]
