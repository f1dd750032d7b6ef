"""Matplotlib's object API without pyplot (no backend to choose, no global figure state), loaded
only where a figure is drawn."""

DPI = 120  # a figure's resolution in a report folder, and a sweep's figures' in MLflow too
SAVE = {"dpi": DPI, "bbox_inches": "tight"}  # how every figure is saved: a legend beside its axes stays in the file


def legend_beside(ax, fontsize: float = 7, **kw) -> None:
    """The axes' legend to their right, off the data."""
    ax.legend(fontsize=fontsize, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, **kw)


def subplots(rows: int = 1, cols: int = 1, figsize: tuple[float, float] | None = None, **kw):
    """pyplot.subplots without pyplot: (figure, axes)."""
    from matplotlib.figure import Figure  # noqa: PLC0415  (matplotlib loads on use)

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
    from matplotlib import rcParams  # noqa: PLC0415  (matplotlib loads on use)

    return rcParams["axes.prop_cycle"].by_key()["color"]


def readable_log(ax, x: bool = True, y: bool = True) -> None:
    """Log axes with plain numbers (2, 5, 10, 20, ...) as ticks, not 2 x 10^0 overprinting its neighbours."""
    from matplotlib import ticker  # noqa: PLC0415  (matplotlib loads on use)

    for axis, on in ((ax.xaxis, x), (ax.yaxis, y)):
        if on:
            axis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0), numticks=12))
            axis.set_major_formatter(ticker.FormatStrFormatter("%g"))
            axis.set_minor_formatter(ticker.NullFormatter())
