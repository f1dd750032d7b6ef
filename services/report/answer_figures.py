"""The answer's figures (services.stats.answer): the headline one, N* against the family's x for both
models with CIs, fits and the theory's slopes, the checks from the same runs as small panels beside it;
and a regime map's grid. Matplotlib's object API, no I/O: the caller saves or logs them."""

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import FormatStrFormatter, LogLocator, NullFormatter

from services.plotting import colours, subplots
from services.stats.base import fmt
from services.stats.rows import Statements, Summary


def _answer_panel(ax, summary: "Summary", statements: "Statements", small: bool = False) -> None:
    """One reading's N* against x on log-log axes: per model its N* with its 95% CI (an open end drawn
    to the edge, ^ where N* lies above the grid), its fitted line, and the theory's slopes as guides
    through the favoured model's points."""
    family, scaling = summary.experiment, summary.scaling
    fits = (
        summary.criteria[statements.criterion].exponent
        if statements.criterion in summary.criteria
        else summary.exponent
    )
    for colour, model in zip(colours(), statements.models):
        rows = [(scaling.x(p.effective or p.value), p.n_star.get(model)) for p in statements.points]
        known = [(x, r) for x, r in rows if r and r.n_star is not None]
        if known:
            xs = np.array([x for x, _ in known])
            ys = np.array([r.n_star for _, r in known], dtype=float)
            lo = np.array([(r.ci95 or [None, None])[0] or y for (_, r), y in zip(known, ys)], dtype=float)
            hi = np.array([(r.ci95 or [None, None])[1] or y * 2 for (_, r), y in zip(known, ys)], dtype=float)
            k = statements.exponents.get(model)
            label = f"{family.name_of(model)}" + (f": k = {k.value:.2f} {fmt(k.ci95, '.2f')}" if k else "")
            ax.errorbar(
                xs, ys, yerr=[ys - lo, hi - ys], fmt="o", ms=3 if small else 5, capsize=2, color=colour, label=label
            )
            fit = fits.get(model if statements.setting == "all" else f"{model} {statements.setting}")
            if fit is not None and fit.value is not None and fit.intercept is not None:
                grid = np.geomspace(xs.min(), xs.max(), 20)
                ax.plot(grid, np.exp(fit.intercept) * grid**fit.value, "-", color=colour, lw=1)
        above = [(x, r.bracket_lo) for x, r in rows if r and r.n_star is None and r.bracket_lo]
        if above:
            ax.plot(*zip(*above), "^", color=colour, ms=6)
    ax.set(xscale="log", yscale="log")
    ax.autoscale_view()
    limits = ax.get_ylim()
    _guides(ax, summary, statements)
    ax.set_ylim(*limits)  # the guides run on off the data's range: the data's range it is
    ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 3.0, 5.0), numticks=12))
    if not small:
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0), numticks=12))
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(FormatStrFormatter("%g"))
        axis.set_minor_formatter(NullFormatter())
    which = "primary" if statements.name == "primary" else "check"
    ax.set_title(f"{which}: {statements.setting}, {statements.criterion}", fontsize=8 if small else 10)
    if not small:
        ax.set(xlabel=scaling.x_label, ylabel="N* (95% CI)")


def _guides(ax, summary: "Summary", statements: "Statements") -> None:
    """The theory's exponents as grey guides through the favoured model's points' geometric centre."""
    lead = statements.models[0]
    points = [
        (summary.scaling.x(p.effective or p.value), p.n_star[lead].n_star)
        for p in statements.points
        if p.n_star.get(lead) and p.n_star[lead].n_star
    ]
    if len(points) < 2:
        return
    xs, ys = np.array(points, dtype=float).T
    centre = np.exp(np.log(xs).mean()), np.exp(np.log(ys).mean())
    grid = np.geomspace(xs.min(), xs.max(), 20)
    for style, (model, theory) in zip((":", "--"), summary.experiment.theory.items()):
        ax.plot(
            grid,
            centre[1] * (grid / centre[0]) ** theory.exponent,
            style,
            color="grey",
            lw=0.8,
            label=f"slope {theory.exponent:g} ({theory.source or model})",
        )


def answer_figure(summary: "Summary"):
    """The headline figure: the primary's N* against x for both models, with CIs, fits and the
    theory's slopes; each check from the same runs as a small panel beside it."""
    answer = summary.answer
    checks = [c.statements for c in answer.checks]
    fig = Figure(figsize=(11 if checks else 7, 6))
    grid = fig.add_gridspec(max(1, len(checks)), 2 if checks else 1, width_ratios=[2.2, 1] if checks else None)
    main = fig.add_subplot(grid[:, 0])
    _answer_panel(main, summary, answer.primary)
    main.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=2, frameon=False)
    for row, statements in enumerate(checks):
        _answer_panel(fig.add_subplot(grid[row, 1]), summary, statements, small=True)
    fig.suptitle(f"{summary.sweep_id}: N* against {summary.scaling.symbol} (primary left, checks right)", fontsize=10)
    fig.tight_layout()
    return fig


def regime_map_figure(summary: "Summary"):
    """The regime map (answer.regimes) as a grid, the first regime axis down and the others across: per
    regime the difference of the exponents (the later model's less the favoured one's) with its 95%
    CI, coloured by its value, and the ratio of N* at the smallest value of the scaling field; a
    regime whose premises fail in some cell hatched and marked."""
    answer, family = summary.answer, summary.experiment
    regimes = answer.regimes
    down, across = list(regimes[0].values)[:1], list(regimes[0].values)[1:]
    rows = list(dict.fromkeys(tuple(r.values[a] for a in down) for r in regimes))
    cols = list(dict.fromkeys(tuple(r.values[a] for a in across) for r in regimes))
    fig, ax = subplots(figsize=(2.6 * len(cols) + 2.5, 1.5 * len(rows) + 1.8))
    grid = np.full((len(rows), len(cols)), np.nan)
    a, b = (family.name_of(m) for m in (answer.primary.models * 2)[:2])
    low = min((p.value for p in answer.primary.points), default=None)
    for regime in regimes:
        i = rows.index(tuple(regime.values[x] for x in down))
        j = cols.index(tuple(regime.values[x] for x in across))
        d, s = regime.statements.difference, regime.statements
        grid[i, j] = np.nan if d is None or d.value is None else d.value
        at = next((p for p in s.points if p.value == low and p.ratio is not None), None)
        text = "not fitted" if d is None else f"{d.value:+.2f}\n{fmt(d.ci95, '+.2f')}"
        text += f"\nratio {at.ratio.value:.2f}" if at and at.ratio.value is not None else ""
        if regime.violated:
            ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="//", edgecolor="grey", lw=0))
            text += "\npremises fail"
        ax.text(j, i, text, ha="center", va="center", fontsize=8)
    shown = ax.imshow(grid, cmap="coolwarm", vmin=-2.5, vmax=2.5, aspect="auto")
    ax.set_xticks(range(len(cols)), [" ".join(f"{k}={v}" for k, v in zip(across, c)) or "-" for c in cols])
    ax.set_yticks(range(len(rows)), [" ".join(f"{k}={v}" for k, v in zip(down, r)) for r in rows])
    ax.set_title(
        f"{b} - {a}: exponent of N* in {family.scaling.symbol} [95% CI], and N* ratio at "
        f"{family.scaling.name} = {fmt(low, 'g')} (hatched: premises fail)",
        fontsize=9,
    )
    fig.colorbar(shown, ax=ax, label=f"{b} - {a} exponent (Proposition 1 against Theorem 1: +{answer.excess or 0:g})")
    fig.tight_layout()
    return fig
