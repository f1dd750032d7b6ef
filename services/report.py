"""A sweep's results as numbers, figures and a summary table: N* per cell with its bracket and CI,
the exponents of N* and of the steps to zero error in 1/alpha* (and in 1/eta) with bootstrap CIs,
attention concentration, sparsification effects, and the adaptive search's savings.

``summarize`` and ``figures`` work on per-cell results, wherever they come from: a sweep that just
ran (``vitsweep run`` logs them to the parent MLflow run) or one read back from MLflow by
``load_sweep`` (``vitsweep report``). What a sweep varies decides what is reported: an alpha_star
axis gives the N* and T exponents, an lr axis the T-against-eta exponent, a sparsify axis the
sparsification effects.
"""

import json
import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import yaml  # noqa: E402
from mlflow.tracking import MlflowClient  # noqa: E402

from services import paper  # noqa: E402
from services.analysis import fit_exponent, full_grid_size, mean_ci, n_star_ci, paired_difference, steps_ratio  # noqa: E402
from services.spec import SweepSpec, spec_from_dict  # noqa: E402
from services.sweep import CellResult  # noqa: E402
from services.uris import redact  # noqa: E402
from vit_core.spatial import SpatialDataConfig, set_matrix  # noqa: E402
from vit_core.train import OUTCOMES  # noqa: E402

PHASE_POWER = {"vit": 2, "cnn": 4}  # Fig 1 draws the ViT over alpha*^-2 and the CNN over alpha*^-4
THEORY_T_EXPONENT = 1.0  # T = Theta(1 / (alpha* eta))


def _group(cell: CellResult, without: tuple[str, ...]) -> str:
    """The cell's model and its axis values other than ``without``: the cells fitted together."""
    return " ".join([cell.cell.model, *(f"{k}={v}" for k, v in cell.cell.values.items() if k not in without)])


def _cell_row(spec: SweepSpec, cell: CellResult) -> dict:
    data, _, training = spec.configs(cell.cell)
    row = {"label": cell.cell.label, "model": cell.cell.model, "values": cell.cell.values,
           "alpha_effective": getattr(data, "effective_alpha_star", None), "lr": training.lr,
           "trainings": len({r["seeds"] for r in cell.records}) if training.protocol == "one_pass" else len(cell.records),
           "failed": bool(cell.failures), "n_star": None, "n_star_known": False, "bracket_lo": None, "n_star_ci95": None,
           "monotone": None, "steps_to_zero": None, "rates": {}, "outcomes": {}, "not_converged_share": None, "flagged": False,
           "protocol": training.protocol, "batch_size": training.batch_size, "t_star": None, "per_seed": None}
    if not cell.records:
        return row
    by_n = cell.by_n()
    share = max((r["not_converged"] + r["diverged"]) / r["models"] for r in by_n)  # above max_not_converged, N* says little
    row |= {"outcomes": {str(r["n"]): {name: r[name] for name in OUTCOMES} for r in by_n}, "not_converged_share": share,
            "flagged": share > spec.max_not_converged}
    o, p = cell.outcomes(), spec.success_rate
    lo, star = o.bracket(p)
    row |= {"n_star": None if cell.failures else star, "bracket_lo": lo, "n_star_known": o.n_star_known(p) is not None, "n_star_ci95": list(n_star_ci(o, p)),
            "monotone": o.monotone(p), "steps_to_zero": o.steps(), "rates": dict(zip(o.ns.tolist(), o.rates().tolist())),
            "t_star": o.t_star(p) if not cell.failures else None, "per_seed": per_seed(cell)}
    return row


def per_seed(cell: CellResult) -> dict | None:
    """One pass: each seed's first N with zero test error and its stable N (-1: never), by seed."""
    firsts = {r["seeds"]: (r["n_first_zero"], r["n_stable"]) for r in cell.records if "n_stable" in r}
    return {"seeds": sorted(firsts), "n_first_zero": [firsts[s][0] for s in sorted(firsts)],
            "n_stable": [firsts[s][1] for s in sorted(firsts)]} if firsts else None


def _fits(cells: list[CellResult], flagged: set[str], axis: str, x_of, statistic) -> dict:
    """Per group of cells differing only in ``axis``: the log-log slope of statistic against x
    (cells that failed or are ``flagged``, by label, left out)."""
    groups: dict[str, list[CellResult]] = {}
    for c in cells:
        if c.records and not c.failures and c.cell.label not in flagged:
            groups.setdefault(_group(c, (axis,)), []).append(c)
    return {name: fit_exponent([x_of(c) for c in members], [c.outcomes() for c in members], statistic).as_dict()
            | {"cells": [c.cell.label for c in members]}
            for name, members in groups.items() if len({c.cell.values[axis] for c in members}) >= 2}


def _attention(cells: list[CellResult]) -> dict:
    """Per ViT cell, at its largest N: the mean label-relevant attention mass at the first and
    last evaluation, and whether the mean curve never falls (by more than 0.005)."""
    out = {}
    for c in cells:
        curves = c.curves("attention_mass")
        if c.cell.model == "vit" and curves:
            values = np.array([v for _, v in curves[max(curves)]])
            out[c.cell.label] = {"n": max(curves), "start": float(values[0]), "end": float(values[-1]),
                                 "monotone": bool(np.all(np.diff(values) > -0.005))}
    return out


def _structure(cells: list[CellResult]) -> dict:
    """Per cell at its largest N: mean test error with a bootstrap CI over seeds; for Paper B's
    synthetic data also the fraction of models whose every row of A is associated with its
    patch's set, and the median cos(v, w*)."""
    out: dict = {"test_error": {}, "patch_association": {}, "patch_association_rows": {}, "cos_v_wstar": {}}
    for c in cells:
        if not c.records:
            continue
        last = [r for r in c.records if r["n_train"] == max(r["n_train"] for r in c.records)]
        out["test_error"][c.cell.label] = mean_ci(np.array([r["test_error"] for r in last], dtype=float))
        if "patch_association" in c.records[0]:
            out["patch_association"][c.cell.label] = float(np.mean([r["patch_association"] == 1.0 for r in last]))
            out["patch_association_rows"][c.cell.label] = float(np.mean([r["patch_association"] for r in last]))
            out["cos_v_wstar"][c.cell.label] = float(np.median([r["cos_v_wstar"] for r in last]))
    return out


def _iteration_gap(spec: SweepSpec, cells: list[CellResult]) -> dict:
    """Per axis values where both models ran: the CNN's T over the ViT's (steps to zero test
    error at the largest N), with a 95% CI."""
    by_values: dict[str, dict[str, CellResult]] = {}
    for c in cells:
        if c.records and not c.failures:
            by_values.setdefault(" ".join(f"{k}={v}" for k, v in c.cell.values.items()) or "all", {})[c.cell.model] = c
    return {values: steps_ratio(pair["cnn"].outcomes(), pair["vit"].outcomes())
            for values, pair in by_values.items() if {"vit", "cnn"} <= set(pair)}


def _sparsification(spec: SweepSpec, cells: list[CellResult]) -> dict:
    """Per strategy and k: the change in final test loss against k = 0 (same seeds, largest N)."""
    if "sparsify_k" not in spec.swept:
        return {}
    by_group: dict[str, dict[int, np.ndarray]] = {}
    for c in cells:
        if c.records and not c.failures:
            data = spec.configs(c.cell)[0]
            by_group.setdefault(_group(c, ("sparsify_k",)), {})[data.sparsify_k] = c.outcomes().test_loss[-1]
    out = {}
    for name, losses in by_group.items():
        if 0 in losses:
            out[name] = {k: {"test_loss": mean_ci(losses[k]), "change": paired_difference(losses[k], losses[0])}
                         for k in sorted(losses)}
    return out


def _adaptive(spec: SweepSpec, cells: list[CellResult]) -> dict | None:
    """Trainings of the adaptive search against a grid of ratio 1 + precision over the same range."""
    if spec.search.mode != "sample_complexity":
        return None
    done = [c for c in cells if c.records]
    trained = sum(len(c.records) for c in done)
    grid = sum(full_grid_size(int(o.ns[0]), int(o.ns[-1]), spec.search.precision) * len(o.seeds) for o in (c.outcomes() for c in done))
    return {"precision": spec.search.precision, "trainings": trained, "full_grid_trainings": grid,
            "ratio": grid / trained if trained else None}


def summarize(spec: SweepSpec, sweep_id: str, cells: list[CellResult]) -> dict:
    """Everything the report shows, JSON-ready."""
    p = spec.success_rate
    alpha = lambda c: 1 / spec.configs(c.cell)[0].effective_alpha_star  # noqa: E731
    summary = {"sweep_id": sweep_id, "name": spec.name, "models": spec.models, "success_rate": p, "max_not_converged": spec.max_not_converged, "cells": [_cell_row(spec, c) for c in cells],
               "exponent": {}, "iterations_exponent": {}, "t_star_exponent": {}, "lr_exponent": {}, "theory": {"exponent": paper.THEORY_EXPONENT, "iterations_exponent": THEORY_T_EXPONENT},
               "paper": {m: {"exponent": paper.exponent(m, p), "n_star": paper.n_star(m, p)} for m in spec.models if m in paper.SUCCESS},
               **_structure(cells),
               "attention": _attention(cells), "sparsification": _sparsification(spec, cells), "adaptive": _adaptive(spec, cells),
               "iteration_gap": _iteration_gap(spec, cells)}
    flagged = {r["label"] for r in summary["cells"] if r["flagged"]}
    if "alpha_star" in spec.swept:
        summary["exponent"] = _fits(cells, flagged, "alpha_star", alpha, lambda o, cols: o.n_star_known(p, cols))
        summary["iterations_exponent"] = _fits(cells, flagged, "alpha_star", alpha, lambda o, cols: o.steps(cols))
        one_pass = [c for c in cells if spec.one_pass(c.cell)]
        summary["t_star_exponent"] = _fits(one_pass, flagged, "alpha_star", alpha, lambda o, cols: o.t_star(p, cols))
    if "lr" in spec.swept:
        summary["lr_exponent"] = _fits(cells, flagged, "lr", lambda c: 1 / spec.configs(c.cell)[2].lr, lambda o, cols: o.steps(cols))
    summary["n_star"] = {row["label"]: row["n_star"] for row in summary["cells"]}
    protocols = {row["protocol"] for row in summary["cells"]}
    summary["protocol"] = protocols.pop() if len(protocols) == 1 else {row["label"]: row["protocol"] for row in summary["cells"]}
    return summary


def _fmt(value, spec: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_fmt(v, spec) for v in value) + "]"
    return format(value, spec)


def table_rows(summary: dict) -> list[list[str]]:
    """The per-cell table: cell, effective alpha*, N* with bracket and CI, T, trainings."""
    rows = []
    for r in summary["cells"]:
        if r["failed"] or not r["rates"]:
            star, bracket = "FAILED" if r["failed"] else "-", "-"
        elif r["n_star"] is None:  # even the largest N missed p
            star, bracket = "-", f"> {r['bracket_lo']}"
        else:  # "<= N": the smallest N tried already reached p
            star, bracket = ("" if r["n_star_known"] else "<= ") + str(r["n_star"]), f"({r['bracket_lo'] or 0}, {r['n_star']}]"
        counted = list(r["outcomes"].values())[-1:] if r["protocol"] == "one_pass" else r["outcomes"].values()  # one pass: at its budget N
        totals = [sum(counts[name] for counts in counted) for name in OUTCOMES]
        rows.append([r["label"] + (" (FLAGGED)" if r["flagged"] else ""), _fmt(r["alpha_effective"], ".4f"), star, bracket, _fmt(r["n_star_ci95"]),
                     "yes" if r["monotone"] else ("no" if r["monotone"] is False else "-"), _fmt(r["steps_to_zero"], ".0f"), _fmt(r["t_star"], ".0f"),
                     str(r["trainings"]), "/".join(map(str, totals))])
    return rows


TABLE_HEADER = ["cell", "alpha* (effective)", "N*", "bracket", "N* 95% CI", "monotone", "T (steps to 0)", "T* = N*/B", "trainings",
                "outcomes s/fc/f/nc/d"]
OUTCOMES_LEGEND = ("outcomes: s succeeded, fc failed-converged, f failed (one pass), nc not-converged, d diverged; "
                   "over every N (one pass: at the cell's largest N)")


def _fit_lines(summary: dict) -> list[str]:
    lines = []
    for key, title, theory in (("exponent", "N* ~ (1/alpha*)^k", summary["theory"]["exponent"]),
                               ("iterations_exponent", "T ~ (1/alpha*)^k", None), ("t_star_exponent", "T* = N*/B ~ (1/alpha*)^k", None),
                               ("lr_exponent", "T ~ (1/eta)^k", None)):
        unfitted = [group for group, fit in summary[key].items() if fit["value"] is None]
        if unfitted:
            lines.append(f"{title}: not fitted for {', '.join(unfitted)}: fewer than two cells with a known, positive value")
        for group, fit in summary[key].items():
            expected = theory.get(group.split()[0]) if theory else THEORY_T_EXPONENT
            if fit["value"] is not None:
                lines.append(f"{title}, {group}: k = {fit['value']:.2f}, 95% CI {_fmt(fit['ci95'], '.2f')} (theory: {expected:g})")
    fitted = any(fit["value"] is not None for fit in summary["exponent"].values())
    for model, ref in summary["paper"].items():
        if ref["exponent"] is not None and fitted:
            lines.append(f"paper's Fig 1, {model}: k = {ref['exponent']:.2f} from its own N* at p = {summary['success_rate']}")
    return lines


def notes(summary: dict) -> list[str]:
    """One line per finding below the table: fits against theory and the paper, the adaptive
    search's savings, attention concentration, sparsification effects."""
    lines = [*_fit_lines(summary), OUTCOMES_LEGEND]
    flagged = [r["label"] for r in summary["cells"] if r["flagged"]]
    if flagged:
        lines.append(f"FLAGGED (more than {summary['max_not_converged']:.0%} of an N's models not converged or diverged; left out of the fits; "
                     f"raise training.max_steps or search.max_steps_cap): {', '.join(flagged)}")
    for values, gap in summary.get("iteration_gap", {}).items():
        if gap["value"] is not None:
            lines.append(f"iteration gap, {values}: the CNN needs {gap['value']:.2f}x the ViT's steps to zero test error, 95% CI {_fmt(gap['ci95'], '.2f')}")
    if summary["adaptive"]:
        a = summary["adaptive"]
        lines.append(f"adaptive search: {a['trainings']} trainings against {a['full_grid_trainings']} for a grid of ratio "
                     f"{1 + a['precision']:g} over the same N range ({_fmt(a['ratio'], '.1f')}x fewer)")
    for label, a in summary["attention"].items():
        lines.append(f"attention mass, {label} (N = {a['n']}): {a['start']:.3f} -> {a['end']:.3f}, {'monotone' if a['monotone'] else 'not monotone'}")
    if not any(m in paper.SUCCESS for m in summary["models"]):
        for label, error in summary["test_error"].items():
            lines.append(f"test error, {label}: {_fmt(error['mean'], '.4f')}, 95% CI {_fmt(error['ci95'], '.4f')} over {error['seeds']} seeds")
    for label, share in summary["patch_association"].items():
        lines.append(f"patch association, {label}: every row associated in {share:.0%} of seeds, {summary['patch_association_rows'][label]:.0%} "
                     f"of rows on average; median cos(v, w*) {summary['cos_v_wstar'][label]:.3f}")
    for group, ks in summary["sparsification"].items():
        k = max(ks)
        change = ks[k]["change"]
        lines.append(f"sparsification, {group}: test loss change at k = {k}: {_fmt(change['mean'], '+.4f')}, 95% CI {_fmt(change['ci95'], '+.4f')}")
    return lines


def markdown(summary: dict) -> str:
    """The summary table and the notes as Markdown."""
    lines = [f"# {summary['sweep_id']}", "", f"N*: the smallest N from which the success rate stays >= {summary['success_rate']}.", "",
             "| " + " | ".join(TABLE_HEADER) + " |", "|" + " --- |" * len(TABLE_HEADER)]
    lines += ["| " + " | ".join(row) + " |" for row in table_rows(summary)]
    return "\n".join([*lines, "", *[f"- {line}" for line in notes(summary)]]) + "\n"


def _phase(ax, group: str, rows: list[dict], fit: dict, p: float) -> None:
    """Fig 1's layout: success rate over alpha*^-power x N, with our fitted N* and the paper's."""
    model = rows[0]["model"]
    power = PHASE_POWER[model]
    x = [r["alpha_effective"] ** -power for r in rows for _ in r["rates"]]
    ns = [int(n) for r in rows for n in r["rates"]]
    rates = [v for r in rows for v in r["rates"].values()]
    scatter = ax.scatter(x, ns, c=rates, cmap="viridis", vmin=0, vmax=1, marker="s", s=40)
    stars = [(r["alpha_effective"] ** -power, r["n_star"]) for r in rows if r["n_star"] is not None]
    if stars:
        ax.plot(*zip(*sorted(stars)), "r-o", ms=4, label=f"our N* (p = {p})")
    if fit["value"] is not None:
        grid = np.linspace(min(x), max(x), 50)
        ax.plot(grid, np.exp(fit["intercept"]) * grid ** (fit["value"] / power), "r--", lw=1, label=f"fit: N* ~ (1/alpha*)^{fit['value']:.2f}")
    ref = paper.n_star(model, p)
    ax.plot([a ** -power for a, _ in ref], [s for _, s in ref], "kx--", lw=0.8, label="paper's N* (Fig 1)")
    ax.set(xlabel=f"alpha*^-{power} (effective alpha*)", ylabel="N", yscale="log", title=f"{group}: success rate")
    ax.legend(fontsize=7)
    plt.colorbar(scatter, ax=ax, label="success rate")


def _loglog(ax, summary: dict, key: str, ylabel: str, xlabel: str) -> None:
    for group, fit in summary[key].items():
        if not fit["points"]:
            continue
        xs, ys = np.array(fit["points"]).T
        line, = ax.plot(xs, ys, "o", label=None)
        if fit["value"] is not None:
            grid = np.geomspace(xs.min(), xs.max(), 20)
            ax.plot(grid, np.exp(fit["intercept"]) * grid ** fit["value"], "-", color=line.get_color(),
                    label=f"{group}: k = {fit['value']:.2f} {_fmt(fit['ci95'], '.2f')}")
    ax.set(xscale="log", yscale="log", xlabel=xlabel, ylabel=ylabel)


def figures(spec: SweepSpec, summary: dict, cells: list[CellResult]) -> dict:
    """name.png -> matplotlib figure, for whatever the sweep measured."""
    figs = {"success_rate_vs_n.png": _success_figure(spec, summary), "outcomes.png": _outcomes_figure(summary)}
    if any(fit["value"] is not None for fit in summary["exponent"].values()):
        groups = summary["exponent"]
        fig, axes = plt.subplots(1, len(groups), figsize=(6 * len(groups), 4.5), squeeze=False)
        for ax, (group, fit) in zip(axes[0], groups.items()):
            rows = [r for r in summary["cells"] if r["label"] in fit["cells"]]
            _phase(ax, group, rows, fit, spec.success_rate)
        fig.tight_layout()
        figs["phase_diagram.png"] = fig
        fig, ax = plt.subplots(figsize=(6, 4.5))
        _loglog(ax, summary, "exponent", "N*", "1 / alpha* (effective)")
        for model in spec.models:
            ref = paper.n_star(model, spec.success_rate)
            ax.plot([1 / a for a, _ in ref], [s for _, s in ref], "x", label=f"paper {model}: k = {paper.exponent(model, spec.success_rate):.2f}")
        ax.set_title("N* against 1/alpha* (theory: ViT <= 2, CNN 4)")
        ax.legend(fontsize=7)
        figs["n_star_fit.png"] = fig
    if summary["iterations_exponent"] or summary["lr_exponent"]:
        keys = [k for k in ("iterations_exponent", "lr_exponent") if summary[k]]
        fig, axes = plt.subplots(1, len(keys), figsize=(6 * len(keys), 4.5), squeeze=False)
        for ax, key in zip(axes[0], keys):
            _loglog(ax, summary, key, "T: steps to zero test error", "1 / alpha* (effective)" if key == "iterations_exponent" else "1 / eta")
            ax.set_title("theory: slope 1")
            ax.legend(fontsize=7)
        fig.tight_layout()
        figs["iterations.png"] = fig
    if summary["attention"]:
        figs["attention_mass.png"] = _attention_figure(cells)
    if summary["sparsification"]:
        figs["sparsification.png"] = _sparsification_figure(summary)
    if not any(m in paper.SUCCESS for m in spec.models):
        figs["structure.png"] = _structure_figure(cells)
    if any(c.mean_scores() for c in cells):
        figs["learned_attention.png"] = _scores_figure(spec, cells)
    return figs


def _scores_figure(spec: SweepSpec, cells: list[CellResult]):
    """Paper B's Fig 4 left: the learned positional scores (mean over seeds, largest N) of every
    cell, beside the true set matrix where the data has one."""
    shown = [c for c in cells if c.mean_scores()]
    data = spec.configs(shown[0].cell)[0]
    truth = set_matrix(data) if isinstance(data, SpatialDataConfig) else None
    panels = len(shown) + (truth is not None)
    fig, axes = plt.subplots(1, panels, figsize=(4 * panels, 3.6), squeeze=False)
    for ax, c in zip(axes[0], shown):
        scores = c.mean_scores()
        n = max(scores)
        image = ax.imshow(scores[n], cmap="viridis")
        ax.set_title(f"{c.cell.label}\nlearned scores, N={n}", fontsize=8)
        plt.colorbar(image, ax=ax, fraction=0.046)
    if truth is not None:
        axes[0][-1].imshow(truth, cmap="Greys")
        axes[0][-1].set_title("true sets (same-set pairs)", fontsize=8)
    fig.tight_layout()
    return fig


def _structure_figure(cells: list[CellResult]):
    """Paper B's Fig 4 curves: test error, patch association and cos(v, w*) against the step
    (those the models have)."""
    names = {"test_error": "test error", "patch_association": "rows of A associated", "cos_v_wstar": "cos(v, w*)"}
    names = {k: v for k, v in names.items() if any(c.curves(k) for c in cells)}
    fig, axes = plt.subplots(1, len(names), figsize=(5 * len(names), 4), squeeze=False)
    axes = axes[0]
    for c in cells:
        for ax, name in zip(axes, names):
            curves = c.curves(name)
            if curves:
                n = max(curves)
                ax.plot(*zip(*curves[n]), label=f"{c.cell.label} N={n}")
    for ax, (name, title) in zip(axes, names.items()):
        ax.set(xlabel="SGD step", title=title + " (mean over seeds)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def _success_figure(spec: SweepSpec, summary: dict):
    """Success rate against N, one line per cell, one panel per model."""
    fig, axes = plt.subplots(1, len(spec.models), figsize=(5 * len(spec.models), 4), squeeze=False)
    for ax, model in zip(axes[0], spec.models):
        rows = [r for r in summary["cells"] if r["model"] == model and any(v == v for v in r["rates"].values())]
        for r in rows:
            label = " ".join(f"{k}={v}" for k, v in r["values"].items()) or model
            points = [(int(n), v) for n, v in r["rates"].items() if v == v]  # NaN: no model of that N converged
            ax.plot(*zip(*points), marker="o", label=label)
        ax.axhline(spec.success_rate, color="grey", lw=0.8, ls="--")
        ax.set(xlabel="N (training samples)", ylabel="success rate (zero test error)", title=model, ylim=(-0.05, 1.05))
        if rows:
            ax.set_xscale("log")
            ax.legend(fontsize=7)
        else:
            ax.text(0.5, 0.5, "no results: every trial failed, or no model converged", ha="center", transform=ax.transAxes)
    fig.tight_layout()
    return fig


def _outcomes_figure(summary: dict):
    """Per cell, the share of each outcome class at every N (stacked bars)."""
    rows = [r for r in summary["cells"] if r["outcomes"]] or summary["cells"][:1]
    cols = min(4, len(rows))
    fig, axes = plt.subplots(-(-len(rows) // cols), cols, figsize=(4 * cols, 3 * -(-len(rows) // cols)), squeeze=False)
    colours = {"succeeded": "tab:green", "failed_converged": "tab:red", "failed": "tab:purple", "not_converged": "tab:orange", "diverged": "black"}
    for ax, r in zip(axes.flat, rows):
        ns = list(r["outcomes"])
        bottom = np.zeros(len(ns))
        for name, colour in colours.items():
            share = np.array([r["outcomes"][n][name] / max(1, sum(r["outcomes"][n].values())) for n in ns])
            ax.bar(range(len(ns)), share, bottom=bottom, color=colour, label=name.replace("_", "-"))
            bottom += share
        ax.set_xticks(range(len(ns)), ns, fontsize=7)
        ax.set(xlabel="N", ylabel="share of models", title=r["label"] + (" (flagged)" if r["flagged"] else ""), ylim=(0, 1))
    for ax in list(axes.flat)[len(rows):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    fig.tight_layout()
    return fig


def _attention_figure(cells: list[CellResult]):
    """Mean label-relevant attention mass against the SGD step, beside the paper's Fig 2(a)."""
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for c in cells:
        curves = c.curves("attention_mass")
        if c.cell.model == "vit" and curves:
            n = max(curves)
            ax.plot(*zip(*curves[n]), label=f"{' '.join(f'{k}={v}' for k, v in c.cell.values.items())} N={n}")
    ax.plot(*paper.attention_mass(), "kx--", label="paper (Fig 2a)")
    ax.set(xlabel="SGD step", ylabel="attention mass on label-relevant tokens", ylim=(0, 1.02), title="attention concentration (Prop. 2)")
    ax.legend(fontsize=7)
    return fig


def _sparsification_figure(summary: dict):
    """Final test loss against tokens removed, per strategy, with 95% CIs, beside Fig 2(b)."""
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for group, ks in summary["sparsification"].items():
        k = np.array(sorted(ks))
        mean = np.array([ks[i]["test_loss"]["mean"] for i in k])
        ci = np.array([ks[i]["test_loss"]["ci95"] for i in k]).T
        ax.errorbar(k, mean, yerr=[mean - ci[0], ci[1] - mean], marker="o", capsize=3, label=group)
    for strategy, points in paper.sparsification().items():
        ax.plot(*zip(*points), "x--", lw=0.8, label=f"paper: {strategy}")
    ax.set(xlabel="tokens removed per sample", ylabel="test hinge loss", title="token sparsification (Fig 2b)")
    ax.legend(fontsize=7)
    return fig


def write(folder: Path, summary: dict, figs: dict) -> Path:
    """The figures, summary.md, summary.html and summary.json in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, fig in figs.items():
        fig.savefig(folder / name, dpi=120)
    text = markdown(summary)
    (folder / "summary.md").write_text(text)
    (folder / "summary.json").write_text(json.dumps(summary, indent=1))
    (folder / "summary.html").write_text(_html(summary, list(figs)))
    return folder


def _html(summary: dict, images: list[str]) -> str:
    from html import escape

    head = "".join(f"<th>{escape(h)}</th>" for h in TABLE_HEADER)
    body = "".join("<tr>" + "".join(f"<td>{escape(v)}</td>" for v in row) + "</tr>" for row in table_rows(summary))
    fits = "".join(f"<li>{escape(line)}</li>" for line in notes(summary))
    pictures = "".join(f'<p><img src="{escape(name)}" alt="{escape(name)}"></p>' for name in images)
    return (f"<!doctype html><meta charset=utf-8><title>{escape(summary['sweep_id'])}</title><h1>{escape(summary['sweep_id'])}</h1>"
            f"<table border=1><tr>{head}</tr>{body}</table><ul>{fits}</ul>{pictures}")


def load_sweep(tracking_uri: str, sweep_id: str | None) -> tuple[SweepSpec, str, list[CellResult]]:
    """A recorded sweep read back from MLflow (the latest when ``sweep_id`` is None): its
    resolved spec and every cell's per-model records, attention curves and failures."""
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # one bar per artifact otherwise
    client = MlflowClient(tracking_uri)
    experiments = [e.experiment_id for e in client.search_experiments()]
    where = f"tags.`vitsweep.sweep_id` = '{sweep_id}'" if sweep_id else "tags.`vitsweep.sweep_id` LIKE '%'"
    parents = client.search_runs(experiments, where, order_by=["attributes.start_time DESC"], max_results=1) if experiments else []
    if not parents:
        raise LookupError(f"no sweep {sweep_id or ''} in {redact(tracking_uri)}".replace("  ", " "))
    parent = parents[0]
    spec = spec_from_dict(yaml.safe_load(Path(client.download_artifacts(parent.info.run_id, "resolved_spec.yaml")).read_text()))
    by_label = {cell.label: cell for cell in spec.cells}
    children = client.search_runs([parent.info.experiment_id], f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    cells = []
    for child in children:
        artifacts = {a.path for a in client.list_artifacts(child.info.run_id)}
        cell = CellResult(by_label[child.info.run_name])
        if "models.json" in artifacts:
            table = json.loads(Path(client.download_artifacts(child.info.run_id, "models.json")).read_text())
            cell.records = [{k: float("nan") if v is None else v for k, v in zip(table["columns"], row)} for row in table["data"]]  # JSON null was NaN
        if "curves.json" in artifacts:
            cell.curve_parts = json.loads(Path(client.download_artifacts(child.info.run_id, "curves.json")).read_text())
        cell.failures = [f for f in child.data.tags.get("vitsweep.failures", "").split("\n") if f]
        cells.append(cell)
    cells.sort(key=lambda c: spec.cells.index(c.cell))
    return spec, parent.data.tags["vitsweep.sweep_id"], cells
