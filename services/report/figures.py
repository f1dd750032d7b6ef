"""A sweep's figures, drawn from its summary and cells beside the papers' own values. Matplotlib's
object API (Figure, no pyplot): no backend to choose, no global figure state. No I/O: the caller
saves or logs them."""

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.ticker import FormatStrFormatter, NullFormatter

from services.plotting import colours, legend_beside, panels, readable_log, subplots
from services.report.answer_figures import answer_figure, regime_map_figure
from services.report.compare import Comparison, PaperGrid
from services.report.text import ANSWER_FIGURE, REGIME_MAP_FIGURE
from services.results import Cell, CellResult
from services.spec import Sweep
from services.stats import paper, statistics
from services.stats.base import fmt
from services.stats.rows import CellRow, Summary
from vit_core.family import Family
from vit_core.outcomes import Outcome


def _phase(ax, family: Family, group: str, rows: list["CellRow"], fit: dict, p: float) -> None:
    """Fig 1's layout: success rate over x^power x N (power: the model's theory exponent, Paper A:
    the ViT over alpha*^-2 and the CNN over alpha*^-4), with our fitted N* and the paper's."""
    model, scaling = rows[0].model, family.scaling
    theory = family.theory.get(model)
    power = theory.exponent if theory else 1

    def at(value: float) -> float:
        return scaling.x(value) ** power

    x = [at(r.alpha_effective) for r in rows for _ in r.rates]
    ns = [int(n) for r in rows for n in r.rates]
    rates = [v for r in rows for v in r.rates.values()]
    scatter = ax.scatter(x, ns, c=rates, cmap="viridis", vmin=0, vmax=1, marker="s", s=40)
    stars = [(at(r.alpha_effective), r.n_star) for r in rows if r.n_star is not None]
    if stars:
        ax.plot(*zip(*sorted(stars)), "r-o", ms=4, label=f"our N* (p = {p})")
    if fit.value is not None:
        grid = np.linspace(min(x), max(x), 50)
        ax.plot(
            grid,
            np.exp(fit.intercept) * grid ** (fit.value / power),
            "r--",
            lw=1,
            label=f"fit: N* ~ ({scaling.symbol})^{fit.value:.2f}",
        )
    if model in family.reference:
        ref = paper.n_star(family, model, p)
        ax.plot([at(a) for a, _ in ref], [s for _, s in ref], "kx--", lw=0.8, label="paper's N*")
    ax.set(xlabel=f"({scaling.x_label})^{power:g}", ylabel="N", yscale="log", title=f"{group}: success rate")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=3, frameon=False)
    ax.figure.colorbar(scatter, ax=ax, label="success rate")


def _loglog(ax, summary: "Summary", key: str, ylabel: str, xlabel: str) -> None:
    """Each group's fitted points and line on log-log axes; N*'s points with their 95% CIs."""
    for group, fit in getattr(summary, key).items():
        if not fit.points:
            continue
        xs, ys = np.array(fit.points).T
        (line,) = ax.plot(xs, ys, "o", label=None)
        if key == "exponent":
            ends = np.array([_n_star_ci(summary, fit.cells, y) for y in ys], dtype=float).T
            ax.errorbar(xs, ys, yerr=[ys - ends[0], ends[1] - ys], fmt="none", color=line.get_color(), capsize=2)
        if fit.value is not None:
            grid = np.geomspace(xs.min(), xs.max(), 20)
            ax.plot(
                grid,
                np.exp(fit.intercept) * grid**fit.value,
                "-",
                color=line.get_color(),
                label=f"{group}: k = {fit.value:.2f} {fmt(fit.ci95, '.2f')}",
            )
    ax.set(xscale="log", yscale="log", xlabel=xlabel, ylabel=ylabel)
    readable_log(ax)


def _n_star_ci(summary: "Summary", cells: list[str], n_star: float) -> tuple[float, float]:
    """The 95% CI of the N* ``n_star`` of one of ``cells`` (an open end at N* itself)."""
    row = next((r for r in summary.cells if r.label in cells and r.n_star == n_star), None)
    lo, hi = (row.n_star_ci95 if row and row.n_star_ci95 else None) or (None, None)
    return (lo or n_star), (hi or n_star)


def figures(sweep: Sweep, summary: "Summary", cells: list[CellResult]) -> dict:
    """name.png -> matplotlib figure, for whatever the sweep measured (the answer's first, where it has one)."""
    figs = {ANSWER_FIGURE: answer_figure(summary)} if summary.answer and summary.answer.primary.points else {}
    if summary.answer and summary.answer.regimes:
        figs[REGIME_MAP_FIGURE] = regime_map_figure(summary)
    figs |= {"success_rate_vs_n.png": _success_figure(sweep, summary), "outcomes.png": _outcomes_figure(summary)}
    if any(fit.value is not None for fit in summary.exponent.values()):
        groups = summary.exponent
        fig, axes = panels(len(groups), 2, (6, 4.5))  # two a row: eight groups were one 48-inch strip
        for ax, (group, fit) in zip(axes, groups.items()):
            rows = [r for r in summary.cells if r.label in fit.cells]
            _phase(ax, sweep.family, group, rows, fit, sweep.success_rate)
        fig.tight_layout()
        figs["phase_diagram.png"] = fig
        fig, ax = subplots(figsize=(6, 4.5))
        family = sweep.family
        _loglog(ax, summary, "exponent", "N*", family.scaling.x_label)
        for model in (m for m in sweep.models if m in family.reference):
            ref = paper.n_star(family, model, sweep.success_rate)
            ax.plot(
                [family.scaling.x(a) for a, _ in ref],
                [s for _, s in ref],
                "x",
                label=f"paper {model}: k = {paper.exponent(family, model, sweep.success_rate):.2f}",
            )
        claims = ", ".join(f"{m} {t.exponent:g}" for m, t in family.theory.items())
        ax.set_title(f"N* against {family.scaling.symbol}" + (f" (theory: {claims})" if claims else ""))
        legend_beside(ax)
        figs["n_star_fit.png"] = fig
    if summary.forms:
        figs["n_star_forms.png"] = _forms_figure(summary)
    if any(r.tuning for r in summary.cells):
        figs["tuning.png"] = _tuning_figure(sweep, summary)
    if any(any(s.value is not None for s in slopes) for slopes in summary.local_exponent.values()):
        figs["local_exponent.png"] = _local_figure(summary)
    if summary.iterations_exponent or summary.lr_exponent:
        keys = [k for k in ("iterations_exponent", "lr_exponent") if getattr(summary, k)]
        fig, axes = subplots(1, len(keys), figsize=(6 * len(keys), 4.5), squeeze=False)
        for ax, key in zip(axes[0], keys):
            _loglog(
                ax,
                summary,
                key,
                "T: steps to zero test error",
                sweep.family.scaling.x_label if key == "iterations_exponent" else "1 / eta",
            )
            claim = sweep.family.iterations_exponent
            ax.set_title(f"theory: slope {claim:g}" if claim is not None else "")
            legend_beside(ax)
        fig.tight_layout()
        figs["iterations.png"] = fig
    for unit in statistics():
        figs |= unit.figures(sweep, summary, cells)
    return figs


def _forms_figure(summary: "Summary"):
    """Per group: N* under the headline criterion (filled), under the others (open), the plug-in rule's
    N (x) against the scaling value, with the four forms fitted to the headline N* (services.stats.forms),
    the preferred one drawn thick where the data decide it."""
    groups = summary.forms
    fig, axes = panels(len(groups), 2, (7.5, 4.5))  # two a row, each legend beside its panel
    scaling = summary.scaling
    for ax, (group, forms) in zip(axes, groups.items()):
        rows = [r for r in summary.cells if r.label in forms.cells]
        values = np.array([r.alpha_effective for r in rows])
        others = [c for c in rows[0].criteria if c != summary.criterion]
        series = [([r.n_star if r.n_star_known else np.nan for r in rows], "o", f"N* ({summary.criterion})")]
        series += [([_known(r, c) for r in rows], marker, f"N* ({c})") for c, marker in zip(others, "sD")]
        series += [
            ([r.floor.n_star if r.floor and r.floor.n_star else np.nan for r in rows], "x", "plug-in rule's N"),
            ([r.n_star_above or np.nan for r in rows], "^", "N* above (not reached under the cap)"),
        ]
        for y, style, label in series:
            open_marker = label.startswith("N* (") and summary.criterion not in label
            ax.plot(values, np.array(y, dtype=float), style, mfc="none" if open_marker else None, label=label)
        grid = np.linspace(values.min(), values.max(), 60)
        sign = -1.0 if scaling.inverse else 1.0
        for fit in forms.fits:
            if fit.k.value is None or fit.c.value is None or fit.K.value is None:
                continue
            above = grid[grid > fit.c.value]  # the form has no finite N at or below its shift
            curve = fit.K.value * (above - fit.c.value) ** (sign * fit.k.value)
            bold = fit.form == forms.verdict
            ax.plot(
                above,
                curve,
                "-",
                lw=2.5 if bold else 1,
                label=f"{fit.form}: c = {fit.c.value:.3f}" + (" (preferred)" if bold else ""),
            )
        ax.set(
            xscale="log",
            yscale="log",
            xlabel=scaling.value_label,
            ylabel="N",
            title=f"{group}: N = K ({scaling.name} - c)^-k",
        )
        readable_log(ax)
        legend_beside(ax)
    fig.tight_layout()
    return fig


def _known(row, criterion: str) -> float:
    """A cell's N* under ``criterion`` where it is known, NaN elsewhere (a figure's gap)."""
    c = row.criteria.get(criterion)
    return float(c.n_star) if c is not None and c.known and c.n_star is not None else np.nan


def _success_figure(sweep: Sweep, summary: "Summary"):
    """Success rate against N, one line per cell, one panel per model."""
    fig, axes = subplots(1, len(sweep.models), figsize=(7.5 * len(sweep.models), 4.5), squeeze=False)
    for ax, model in zip(axes[0], sweep.models):
        rows = [r for r in summary.cells if r.model == model and any(v == v for v in r.rates.values())]
        shades = colormaps["viridis"](np.linspace(0, 0.9, max(1, len(rows))))  # one colour a cell, however many
        for r, shade in zip(rows, shades):
            label = Cell(r.model, r.values).setting
            points = [(int(n), v) for n, v in r.rates.items() if v == v]  # NaN: no model of that N converged
            ax.plot(*zip(*points), marker="o", ms=2.5, lw=1, color=shade, label=label)
        ax.axhline(sweep.success_rate, color="grey", lw=0.8, ls="--")
        ax.set(xlabel="N (training samples)", ylabel="success rate (zero test error)", title=model, ylim=(-0.05, 1.05))
        if rows:
            ax.set_xscale("log")
            legend_beside(ax, fontsize=6)
        else:
            ax.text(
                0.5, 0.5, "no results: every trial failed, or no model converged", ha="center", transform=ax.transAxes
            )
    fig.tight_layout()
    return fig


def _outcomes_figure(summary: "Summary"):
    """Per cell, the share of each outcome class at every N (stacked bars)."""
    rows = [r for r in summary.cells if r.outcomes] or summary.cells[:1]
    fig, axes = panels(len(rows), 4, (4, 3))
    colours = {
        Outcome.SUCCEEDED: "tab:green",
        Outcome.FAILED_CONVERGED: "tab:red",
        Outcome.FAILED: "tab:purple",
        Outcome.NOT_CONVERGED: "tab:orange",
        Outcome.DIVERGED: "black",
    }
    for ax, r in zip(axes, rows):
        ns = list(r.outcomes)
        bottom = np.zeros(len(ns))
        for name, colour in colours.items():
            share = np.array([r.outcomes[n][name] / max(1, sum(r.outcomes[n].values())) for n in ns])
            ax.bar(range(len(ns)), share, bottom=bottom, color=colour, label=name.replace("_", "-"))
            bottom += share
        every = max(1, -(-len(ns) // 8))  # at most eight N labelled: a one-pass cell has dozens
        ax.set_xticks(range(0, len(ns), every), ns[::every], fontsize=7)
        ax.set(xlabel="N", ylabel="share of models", title=r.label + (" (flagged)" if r.flagged else ""), ylim=(0, 1))
    handles, labels = axes[0].get_legend_handles_labels()
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.legend(handles, labels, loc="upper center", ncol=len(labels), fontsize=8, frameon=False)
    return fig


def _tuning_figure(sweep: Sweep, summary: "Summary"):
    """Per model: each setting's N* on the selection seeds against eta, one colour per cell (its
    axis values), one line style per batch size; the chosen setting starred, and the N* measured
    there on the held-out seeds with its CI beside it."""
    fig, axes = subplots(1, len(sweep.models), figsize=(6 * len(sweep.models), 4.5), squeeze=False)
    styles = ["-", "--", ":", "-."]
    for ax, model in zip(axes[0], sweep.models):
        rows = [r for r in summary.cells if r.model == model and r.tuning]
        batches = sorted({s["batch_size"] for r in rows for s in r.tuning.selection})
        for colour, r in zip(colours() * 4, rows):
            for style, b in zip(styles * 4, batches):
                points = sorted((s["lr"], s["n_star"]) for s in r.tuning.selection if s["batch_size"] == b)
                known = [(lr, n) for lr, n in points if n is not None]
                above = [
                    (s["lr"], s["n_star_above"])
                    for s in r.tuning.selection
                    if s["batch_size"] == b and s["n_star"] is None
                ]
                if above:  # N* above cap / W: drawn at that bound, pointing up
                    ax.plot(*zip(*above), "^", ms=5, mfc="none", color=colour, ls="none")
                if known:
                    ax.plot(
                        *zip(*known),
                        style,
                        marker="o",
                        ms=3,
                        color=colour,
                        label=f"{Cell(r.model, r.values).setting} B={b}",
                    )
            chosen = r.tuning.chosen
            ax.plot(chosen["lr"], r.tuning.selection_n_star or np.nan, "*", ms=12, color=colour)
            if r.n_star is not None:
                lo, hi = (v if v is not None else np.nan for v in (r.n_star_ci95 or (None, None)))
                ax.errorbar(
                    chosen["lr"] * 1.15,
                    r.n_star,
                    yerr=[[r.n_star - lo], [hi - r.n_star]],
                    fmt="D",
                    ms=4,
                    color=colour,
                    capsize=2,
                )
        ax.set(
            xscale="log",
            yscale="log",
            xlabel="eta (step size)",
            ylabel="N* on the selection seeds",
            title=f"{model}: N* against eta (star: chosen; diamond: held-out N*, 95% CI; ^: N* above)",
        )
        ax.title.set_fontsize(9)
        ax.xaxis.set_major_formatter(FormatStrFormatter("%g"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        if rows:
            legend_beside(ax, fontsize=6)
    fig.tight_layout()
    return fig


def _local_figure(summary: "Summary"):
    """N*'s slope between neighbouring values of the scaling field (at their geometric mean) with
    95% CIs, per model, and each model's exponent over the whole range dashed: where the curve is heading."""
    fig, ax, scaling = *subplots(figsize=(6, 4.5)), summary.scaling
    for colour, (group, slopes) in zip(colours() * 4, summary.local_exponent.items()):
        done = [s for s in slopes if s.value is not None]
        if not done:
            continue
        mid = [float(np.sqrt(np.prod(s.between))) for s in done]
        value = np.array([s.value for s in done])
        ci = np.array([s.ci95 or [v, v] for s, v in zip(done, value)]).T
        ax.errorbar(mid, value, yerr=[value - ci[0], ci[1] - value], marker="o", capsize=3, color=colour, label=group)
        whole = summary.exponent[group].value if group in summary.exponent else None
        if whole is not None:
            ax.axhline(whole, color=colour, ls="--", lw=0.8, label=f"{group}: whole range, k = {whole:.2f}")
    ax.set(
        xscale="log",
        xlabel=f"{scaling.name} (geometric mean of the two neighbours)",
        ylabel=f"local exponent of N* in {scaling.symbol}",
        title="local slopes of N* (95% CI, paired bootstrap)",
    )
    if scaling.inverse:  # x grows to the right
        ax.invert_xaxis()
    legend_beside(ax)
    return fig


def comparison_figure(comparison: Comparison) -> Figure:
    """N* against the family's x (Paper A: 1/alpha*) of two sweeps on one log-log plot: each fitted
    group in one colour, A's points and fit solid, B's dashed, with each exponent and B's minus A's
    in the legend."""
    fig, ax = subplots(figsize=(7, 5))
    for colour, group in zip(colours(), comparison.groups):
        for sweep, fits, marker, style in (
            (comparison.sweep_a, comparison.exponent_a, "o", "-"),
            (comparison.sweep_b, comparison.exponent_b, "s", "--"),
        ):
            fit = fits.get(group)
            if fit is None or not fit.points:
                continue
            xs, ys = np.array(fit.points).T
            label = f"{sweep}: {group}"
            if fit.value is not None:
                grid = np.geomspace(xs.min(), xs.max(), 20)
                ax.plot(grid, np.exp(fit.intercept) * grid**fit.value, style, color=colour, lw=1)
                label += f", k = {fit.value:.2f} {fmt(fit.ci95, '.2f')}"
            ax.plot(xs, ys, marker, color=colour, ls="none", label=label)
        diff = comparison.difference.get(group)
        if diff is not None and diff.value is not None:
            ax.plot([], [], " ", label=f"{group}: B - A = {diff.value:+.2f} {fmt(diff.ci95, '+.2f')}")
    scaling = comparison.scaling
    ax.set(xscale="log", yscale="log", xlabel=scaling.x_label if scaling else "x", ylabel="N*")
    title = f"N* against {scaling.symbol if scaling else 'x'}\nA = {comparison.sweep_a}\nB = {comparison.sweep_b}"
    ax.set_title(title, fontsize=9)
    legend_beside(ax)
    fig.tight_layout()
    return fig


def paper_grid_figure(grid: PaperGrid) -> Figure:
    """Per model, N* against the power of x its paper's figure plots (Paper A's Fig 1: alpha*^-2,
    alpha*^-4, a linear axis as the paper's): the paper's boundary (its N* per column, black,
    dashed; ^ where it lies above its largest N) over each sweep's N* with its 95% CI (an open CI
    drawn to the sweep's largest N; ^: N* above it). N on a log axis: arms differ by 100x."""
    models = list(grid.x_power)
    fig, axes = subplots(1, len(models), figsize=(6 * len(models), 4.5), squeeze=False)
    scaling = grid.scaling
    for ax, model in zip(axes[0], models):
        power, mine = grid.x_power[model], [g for g in grid.points if g.model == model]

        def at(value: float, power=power) -> float:
            return scaling.x(value) ** power

        paper_points = sorted(
            (at(g.value), g.paper_n_star or g.paper_ns[1], g.paper_n_star is None) for g in mine if g.paper_ns
        )
        if paper_points:
            xs, ys, above = zip(*paper_points)
            ax.plot(xs, ys, "k--", lw=1.2, label="paper's boundary (its N*)", zorder=3)
            ax.plot([x for x, a in zip(xs, above) if a], [y for y, a in zip(ys, above) if a], "k^", ms=6)
        for k, (colour, sweep) in enumerate(zip(colours(), grid.sweeps)):
            points = sorted((at(g.value), g.ours[sweep]) for g in mine if sweep in g.ours)
            if not points:
                continue
            label = f"{sweep}: {points[0][1].setting}"
            shift = 1 + 0.01 * (k - len(grid.sweeps) / 2)  # side by side where they share an x
            known = [(x * shift, m) for x, m in points if m.n_star is not None]
            if known:
                xs = np.array([x for x, _ in known])
                ys = np.array([m.n_star for _, m in known], dtype=float)
                lo = np.array([(m.ci95 or [None, None])[0] or m.n_star for _, m in known], dtype=float)
                hi = np.array([(m.ci95 or [None, None])[1] or m.largest_n for _, m in known], dtype=float)
                ax.errorbar(
                    xs,
                    ys,
                    yerr=[ys - lo, np.maximum(hi - ys, 0)],
                    fmt="o-",
                    ms=4,
                    lw=1,
                    capsize=2,
                    color=colour,
                    label=label,
                )
                label = None
            beyond = [(x * shift, m.largest_n) for x, m in points if m.n_star is None]
            if beyond:
                ax.plot(*zip(*beyond), "^", color=colour, label=label)
        symbol = f"({scaling.symbol})^{power:g}" if power != 1 else scaling.symbol
        ax.set(xlabel=symbol, ylabel="N*", yscale="log", title=f"{model}: N* at p = {grid.p:g}")
        legend_beside(ax)
    fig.tight_layout()
    return fig
