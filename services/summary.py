"""A sweep's results as numbers: N* per cell with its bracket and CI, the exponents of N* and of
the steps to zero error in 1/alpha* (and in 1/eta) with bootstrap CIs, attention concentration,
patch association, sparsification effects and the adaptive search's savings. What a sweep varies
decides what is computed: an alpha_star axis gives the N* and T exponents, an lr axis the
T-against-eta exponent, a sparsify axis the sparsification effects. No I/O: the same summary
comes from a sweep that just ran and from one read back from MLflow.
"""

import numpy as np

from services import paper
from services.analysis import fit_exponent, full_grid_size, mean_ci, n_star_ci, paired_difference, steps_ratio
from services.results import CellResult
from services.spec import SweepSpec
from vit_core.outcomes import OUTCOMES

THEORY_T_EXPONENT = 1.0  # T = Theta(1 / (alpha* eta))


def _cell_row(spec: SweepSpec, cell: CellResult) -> dict:
    data, _, training = spec.configs(cell.cell)
    row = {
        "label": cell.cell.label,
        "model": cell.cell.model,
        "values": cell.cell.values,
        "alpha_effective": getattr(data, "effective_alpha_star", None),
        "lr": training.lr,
        "trainings": len({r.seed for r in cell.records}) if training.protocol == "one_pass" else len(cell.records),
        "failed": bool(cell.failures),
        "n_star": None,
        "n_star_known": False,
        "bracket_lo": None,
        "n_star_ci95": None,
        "monotone": None,
        "steps_to_zero": None,
        "rates": {},
        "outcomes": {},
        "not_converged_share": None,
        "flagged": False,
        "protocol": training.protocol,
        "batch_size": training.batch_size,
        "t_star": None,
        "per_seed": None,
    }
    if not cell.records:
        return row
    by_n = cell.by_n()
    share = max(
        (r["not_converged"] + r["diverged"]) / r["models"] for r in by_n
    )  # above max_not_converged, N* says little
    row |= {
        "outcomes": {str(r["n"]): {name: r[name] for name in OUTCOMES} for r in by_n},
        "not_converged_share": share,
        "flagged": share > spec.max_not_converged,
    }
    o, p = cell.outcomes(), spec.success_rate
    lo, star = o.bracket(p)
    row |= {
        "n_star": None if cell.failures else star,
        "bracket_lo": lo,
        "n_star_known": o.n_star_known(p) is not None,
        "n_star_ci95": list(n_star_ci(o, p)),
        "monotone": o.monotone(p),
        "steps_to_zero": o.steps(),
        "rates": dict(zip(o.ns.tolist(), o.rates().tolist())),
        "t_star": o.t_star(p) if not cell.failures else None,
        "per_seed": cell.per_seed(),
    }
    return row


def _fits(cells: list[CellResult], flagged: set[str], axis: str, x_of, statistic) -> dict:
    """Per group of cells differing only in ``axis``: the log-log slope of statistic against x
    (cells that failed or are ``flagged``, by label, left out)."""
    groups: dict[str, list[CellResult]] = {}
    for c in cells:
        if c.records and not c.failures and c.cell.label not in flagged:
            groups.setdefault(c.cell.group((axis,)), []).append(c)
    return {
        name: fit_exponent([x_of(c) for c in members], [c.outcomes() for c in members], statistic).as_dict()
        | {"cells": [c.cell.label for c in members]}
        for name, members in groups.items()
        if len({c.cell.values[axis] for c in members}) >= 2
    }


def _attention(cells: list[CellResult]) -> dict:
    """Per ViT cell, at its largest N: the mean label-relevant attention mass at the first and
    last evaluation, and whether the mean curve never falls (by more than 0.005)."""
    out = {}
    for c in cells:
        curves = c.curves("attention_mass")
        if c.cell.model == "vit" and curves:
            values = np.array([v for _, v in curves[max(curves)]])
            out[c.cell.label] = {
                "n": max(curves),
                "start": float(values[0]),
                "end": float(values[-1]),
                "monotone": bool(np.all(np.diff(values) > -0.005)),
            }
    return out


def _structure(cells: list[CellResult]) -> dict:
    """Per cell at its largest N: mean test error with a bootstrap CI over seeds; for Paper B's
    synthetic data also the fraction of models whose every row of A is associated with its
    patch's set, and the median cos(v, w*)."""
    out: dict = {"test_error": {}, "patch_association": {}, "patch_association_rows": {}, "cos_v_wstar": {}}
    for c in cells:
        if not c.records:
            continue
        largest = max(r.n_train for r in c.records)
        last = [r.metrics for r in c.records if r.n_train == largest]
        out["test_error"][c.cell.label] = mean_ci(np.array([m["test_error"] for m in last], dtype=float))
        if "patch_association" in last[0]:
            out["patch_association"][c.cell.label] = float(np.mean([m["patch_association"] == 1.0 for m in last]))
            out["patch_association_rows"][c.cell.label] = float(np.mean([m["patch_association"] for m in last]))
            out["cos_v_wstar"][c.cell.label] = float(np.median([m["cos_v_wstar"] for m in last]))
    return out


def _iteration_gap(spec: SweepSpec, cells: list[CellResult]) -> dict:
    """Per axis values where both models ran: the CNN's T over the ViT's (steps to zero test
    error at the largest N), with a 95% CI."""
    by_values: dict[str, dict[str, CellResult]] = {}
    for c in cells:
        if c.records and not c.failures:
            by_values.setdefault(c.cell.setting, {})[c.cell.model] = c
    return {
        values: steps_ratio(pair["cnn"].outcomes(), pair["vit"].outcomes())
        for values, pair in by_values.items()
        if {"vit", "cnn"} <= set(pair)
    }


def _sparsification(spec: SweepSpec, cells: list[CellResult]) -> dict:
    """Per strategy and k: the change in final test loss against k = 0 (same seeds, largest N)."""
    if "sparsify_k" not in spec.swept:
        return {}
    by_group: dict[str, dict[int, np.ndarray]] = {}
    for c in cells:
        if c.records and not c.failures:
            data = spec.configs(c.cell)[0]
            by_group.setdefault(c.cell.group(("sparsify_k",)), {})[data.sparsify_k] = c.outcomes().test_loss[-1]
    out = {}
    for name, losses in by_group.items():
        if 0 in losses:
            out[name] = {
                k: {"test_loss": mean_ci(losses[k]), "change": paired_difference(losses[k], losses[0])}
                for k in sorted(losses)
            }
    return out


def _adaptive(spec: SweepSpec, cells: list[CellResult]) -> dict | None:
    """Trainings of the adaptive search against a grid of ratio 1 + precision over the same range."""
    if spec.search.mode != "sample_complexity":
        return None
    done = [c for c in cells if c.records]
    trained = sum(len(c.records) for c in done)
    grid = sum(
        full_grid_size(int(o.ns[0]), int(o.ns[-1]), spec.search.precision) * len(o.seeds)
        for o in (c.outcomes() for c in done)
    )
    return {
        "precision": spec.search.precision,
        "trainings": trained,
        "full_grid_trainings": grid,
        "ratio": grid / trained if trained else None,
    }


def summarize(spec: SweepSpec, sweep_id: str, cells: list[CellResult]) -> dict:
    """Everything the report shows, JSON-ready."""
    p = spec.success_rate
    alpha = lambda c: 1 / spec.configs(c.cell)[0].effective_alpha_star  # noqa: E731
    summary = {
        "sweep_id": sweep_id,
        "name": spec.name,
        "models": spec.models,
        "success_rate": p,
        "max_not_converged": spec.max_not_converged,
        "cells": [_cell_row(spec, c) for c in cells],
        "exponent": {},
        "iterations_exponent": {},
        "t_star_exponent": {},
        "lr_exponent": {},
        "theory": {"exponent": paper.THEORY_EXPONENT, "iterations_exponent": THEORY_T_EXPONENT},
        "paper": {
            m: {"exponent": paper.exponent(m, p), "n_star": paper.n_star(m, p)}
            for m in spec.models
            if m in paper.SUCCESS
        },
        **_structure(cells),
        "attention": _attention(cells),
        "sparsification": _sparsification(spec, cells),
        "adaptive": _adaptive(spec, cells),
        "iteration_gap": _iteration_gap(spec, cells),
    }
    flagged = {r["label"] for r in summary["cells"] if r["flagged"]}
    if "alpha_star" in spec.swept:
        summary["exponent"] = _fits(cells, flagged, "alpha_star", alpha, lambda o, cols: o.n_star_known(p, cols))
        summary["iterations_exponent"] = _fits(cells, flagged, "alpha_star", alpha, lambda o, cols: o.steps(cols))
        one_pass = [c for c in cells if spec.one_pass(c.cell)]
        summary["t_star_exponent"] = _fits(one_pass, flagged, "alpha_star", alpha, lambda o, cols: o.t_star(p, cols))
    if "lr" in spec.swept:
        summary["lr_exponent"] = _fits(
            cells, flagged, "lr", lambda c: 1 / spec.configs(c.cell)[2].lr, lambda o, cols: o.steps(cols)
        )
    summary["n_star"] = {row["label"]: row["n_star"] for row in summary["cells"]}
    protocols = {row["protocol"] for row in summary["cells"]}
    summary["protocol"] = (
        protocols.pop() if len(protocols) == 1 else {row["label"]: row["protocol"] for row in summary["cells"]}
    )
    return summary
