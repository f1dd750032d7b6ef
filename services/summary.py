"""A sweep's results as numbers: N* per cell with its bracket and CI, the exponents of N* and of
the steps to zero error in 1/alpha* (and in 1/eta) with bootstrap CIs, attention concentration,
patch association, sparsification effects and the adaptive search's savings. What a sweep varies
decides what is computed: an alpha_star axis gives the N* and T exponents, an lr axis the
T-against-eta exponent, a sparsify axis the sparsification effects. No I/O: the same summary
comes from a sweep that just ran and from one read back from MLflow.
"""

from dataclasses import asdict, dataclass, field, replace
from functools import cache, partial
from typing import Any

import numpy as np

from services import paper
from services.analysis import (
    Difference,
    Estimate,
    Fit,
    LocalSlope,
    Mean,
    Outcomes,
    fit_exponent,
    full_grid_size,
    local_slopes,
    mean_ci,
    n_star_ci,
    paired_difference,
    paired_slope_difference,
    steps_ratio,
)
from services.results import MEASUREMENT, SELECTION, CellResult
from services.search.selection import Run, at_edge, best, selection_table, setting_n_star
from services.spec import GridMode, SampleComplexityMode, Setting, SweepSpec
from vit_core.family import Family, Premise, Scaling, families
from vit_core.outcomes import OUTCOMES

CONFIDENCE = 0.95


def error_bound(n_test: int) -> float:
    """The one-sided 95% upper bound on a model's error rate when it makes 0 errors on n_test
    independent test samples: 1 - 0.05^(1/n), about 3/n (the rule of three)."""
    return 1 - (1 - CONFIDENCE) ** (1 / n_test)


@dataclass
class TuningRow:
    """A tuned cell: the setting chosen on the selection seeds, each setting's N* there, whether
    the choice sits at an edge of what was tried, and which seeds chose and which measured."""

    chosen: dict[str, float]  # batch_size, lr of the setting N* was measured at
    selection: list[dict]  # per setting tried: batch_size, lr, n_star (None: not known; then n_star_above, the
    # bound its runs' cap gives: N* > cap / W), seeds, without_stable
    at_edge: list[str]  # edges of the values tried the chosen setting sits at ([]: inside)
    selection_seeds: list[int]
    measurement_seeds: list[int]

    @property
    def selection_n_star(self) -> int | None:
        """The chosen setting's N* on the selection seeds."""
        chosen = (self.chosen["batch_size"], self.chosen["lr"])
        return next((s["n_star"] for s in self.selection if (s["batch_size"], s["lr"]) == chosen), None)


@dataclass
class WindowRow:
    """The stability window a one-pass cell's measured runs were checked over."""

    stability_window: float  # W: each run followed to W times its own stable N
    cap: int  # the runs' cap, in samples (B x their step budget)
    checked: float | None  # the smallest (last N evaluated / stable N) over the runs confirmed (>= W)
    censored: int  # runs stopped by the cap before their window closed: no stable N
    runs: int


@dataclass
class CellRow:
    """One cell in the summary: its setting, N* (bracket, CI, whether it is known), the success
    rate and outcome counts per N, T and T*, and whether too many of its models did not converge."""

    label: str
    model: str
    values: dict[str, Any]
    alpha_effective: float | None  # the family's scaling value the samples really have (Paper A: alpha*)
    lr: float
    trainings: int  # models trained (one pass: runs, each evaluated at every N)
    failed: bool  # a pack of the cell failed: N* is not given
    n_star: int | None = None  # at threshold p; None: not reached (or the cell failed)
    n_star_known: bool = False  # False where N* is only bounded (reached at the smallest N tried)
    bracket_lo: int | None = None  # N* lies in (bracket_lo, n_star]
    n_star_ci95: list[int | None] | None = None
    monotone: bool | None = None  # no N below the bracket already reached p
    steps_to_zero: float | None = None  # T at the largest N
    rates: dict[int, float] = field(default_factory=dict)  # N -> success rate (NaN: no model counted)
    outcomes: dict[str, dict[str, int]] = field(default_factory=dict)  # N -> outcome class -> models
    not_converged_share: float | None = None  # the largest share of an N's models not converged or diverged
    flagged: bool = False  # that share is above max_not_converged: left out of the fits
    protocol: str = "multi_pass"
    batch_size: int = 16
    t_star: float | None = None  # one pass: N*/B
    per_seed: dict | None = None  # one pass: each seed's first and stable N
    n_star_first_zero: int | None = None  # one pass: the smallest N by which a share p of seeds had zero error once
    n_test: int = 1000  # test samples: zero errors on them bound the error by error_bound(n_test) at 95%
    tuning: TuningRow | None = None
    window: WindowRow | None = None
    premises: list[Premise] = field(default_factory=list)  # the theory's premises checked on the cell
    difficulty: dict[str, float] = field(default_factory=dict)  # oracle rules on the cell's data (family's names)

    @property
    def violated(self) -> list[Premise]:
        return [p for p in self.premises if not p.met]


@cache
def _difficulty(family: Family, data) -> dict[str, float]:
    """The family's difficulty diagnostic of one data config (the same for every cell sharing it)."""
    return family.difficulty(data)


def _premises(spec: SweepSpec, cell: CellResult, row: CellRow) -> list[Premise]:
    """The family's premises on a cell at the setting it was measured at, N its N* (else its largest N)."""
    data, model, _ = spec.plan(cell.cell).configs
    n = row.n_star or max((r.n_train for r in cell.records), default=1)
    return spec.FAMILY.premises(data, model, row.batch_size, row.lr, max(n, 2))


def _cell_row(spec: SweepSpec, cell: CellResult) -> CellRow:
    data, _, training = spec.plan(cell.cell).configs
    one_pass = training.protocol == "one_pass"
    measured = cell.measured()
    row = CellRow(
        cell.cell.label,
        cell.cell.model,
        cell.cell.values,
        spec.FAMILY.scaling_value(data) if spec.FAMILY.scaling else None,
        measured[0].lr if measured else training.lr,
        len({(r.seed, r.lr, r.batch_size, r.phase) for r in cell.records}) if one_pass else len(cell.records),
        bool(cell.failures),
        protocol=training.protocol,
        batch_size=(measured[0].batch_size or training.batch_size) if measured else training.batch_size,
        n_test=training.n_test,
    )
    if not cell.records:
        return row
    by_n = cell.by_n()
    row.not_converged_share = max((r["not_converged"] + r["diverged"]) / r["models"] for r in by_n)
    row.outcomes = {str(r["n"]): {name: r[name] for name in OUTCOMES} for r in by_n}
    row.flagged = row.not_converged_share > spec.max_not_converged  # above it, N* says little
    o, p = cell.outcomes(), spec.success_rate
    row.bracket_lo, star = o.bracket(p)
    row.n_star = None if cell.failures else star
    row.n_star_known, row.n_star_ci95 = o.n_star_known(p) is not None, list(n_star_ci(o, p))
    row.monotone, row.steps_to_zero = o.monotone(p), o.steps()
    row.rates = dict(zip(o.ns.tolist(), o.rates().tolist()))
    row.t_star = None if cell.failures else o.t_star(p)
    row.per_seed = cell.per_seed()
    row.n_star_first_zero = o.n_star_first_zero(p)
    row.tuning = _tuning_row(spec, cell)
    row.window = _window_row(training, cell)
    row.premises = _premises(spec, cell, row)
    row.difficulty = _difficulty(spec.FAMILY, data)
    return row


def _tuning_row(spec: SweepSpec, cell: CellResult) -> TuningRow | None:
    """What tuning chose for a cell, from its records (the planner chose from the same ones)."""
    table = selection_table(cell.records)
    measured = [r for r in cell.records if r.phase == MEASUREMENT]
    if spec.tuning is None or not table:
        return None
    chosen = Setting(measured[0].batch_size, measured[0].lr) if measured else best(table, spec.success_rate)
    window = spec.plan(cell.cell).training.stability_window
    selection = [
        {"batch_size": s.batch_size, "lr": s.lr, "n_star": (star := setting_n_star(result, spec.success_rate))}
        | _selection_seeds(result, s, window, star)
        for s, result in sorted(table.items())
    ]
    return TuningRow(
        {"batch_size": chosen.batch_size, "lr": chosen.lr},
        selection,
        at_edge(chosen, set(table), spec.tuning_of(cell.cell.model).searched),
        sorted({r.seed for r in cell.records if r.phase == SELECTION}),
        sorted({r.seed for r in measured}),
    )


def _selection_seeds(result: "dict[int, Run] | Outcomes", setting: Setting, window: float, star) -> dict:
    """A setting's selection seeds; those without a stable N (one pass) or failing at the largest
    N trained (multi-pass); and, without an N*, the N it lies above."""
    if isinstance(result, Outcomes):
        seeds, without, above = len(result.seeds), int(np.sum(result.success[-1] != 1)), float(result.ns[-1])
    else:
        seeds, without = len(result), sum(r.n_stable < 0 or r.diverged for r in result.values())
        above = max(r.budget for r in result.values()) * setting.batch_size / window
    return {"n_star_above": None if star is not None else above, "seeds": seeds, "without_stable": without}


def _window_row(training, cell: CellResult) -> WindowRow | None:
    """The window the cell's measured runs were checked over (None: no stability window)."""
    measured = [r for r in cell.records if r.phase != SELECTION and r.censored is not None]
    runs = {r.seed: r for r in measured}
    if not training.stability_window or not runs:
        return None
    last: dict[int, int] = {}
    for r in measured:
        last[r.seed] = max(last.get(r.seed, 0), r.n_train)
    ratios = [last[s] / r.n_stable for s, r in runs.items() if not r.censored and r.n_stable > 0]
    return WindowRow(
        training.stability_window,
        max(r.max_steps * r.batch_size for r in runs.values()),
        round(min(ratios), 3) if ratios else None,
        sum(bool(r.censored) for r in runs.values()),
        len(runs),
    )


def _fits(cells: list[CellResult], flagged: set[str], axis: str, x_of, statistic) -> dict:
    """Per group of cells differing only in ``axis``: the log-log slope of statistic against x
    (cells that failed or are ``flagged``, by label, left out)."""
    return {
        name: replace(
            fit_exponent([x_of(c) for c in members], [c.outcomes() for c in members], statistic),
            cells=[c.cell.label for c in members],
        )
        for name, members in _groups(cells, flagged, axis).items()
    }


def _groups(cells: list[CellResult], flagged: set[str], axis: str) -> dict[str, list[CellResult]]:
    """The cells a fit along ``axis`` uses, per group of cells differing only in it (at least two
    values of it; cells that failed or are flagged left out)."""
    groups: dict[str, list[CellResult]] = {}
    for c in cells:
        if c.records and not c.failures and c.cell.label not in flagged:
            groups.setdefault(c.cell.group((axis,)), []).append(c)
    return {name: members for name, members in groups.items() if len({c.cell.values[axis] for c in members}) >= 2}


def n_star_statistic(p: float):
    """What the N* exponent is fitted on: a cell's N* at threshold p where it is known (None where it
    is censored), over the given columns (seeds) of its outcomes."""
    return lambda outcomes, columns: outcomes.n_star_known(p, columns)


def first_zero_statistic(p: float):
    """What the first-zero exponent is fitted on: the smallest N by which a share p of a cell's seeds
    had zero test error at least once (one pass)."""
    return lambda outcomes, columns: outcomes.n_star_first_zero(p, columns)


def _differences(spec: SweepSpec, inputs: dict[str, tuple], exponent: dict[str, Fit]) -> dict[str, Difference]:
    """Each later model's N* exponent minus each earlier one's (spec order: "cnn - vit"), per value
    of the other axes, with a paired bootstrap CI: their cells share seeds, resampled together."""
    by_rest: dict[str, dict[str, str]] = {}  # other axis values -> model -> its group
    for group in inputs:
        model, _, rest = group.partition(" ")
        by_rest.setdefault(rest, {})[model] = group
    out = {}
    for rest, groups in by_rest.items():
        models = [m for m in spec.models if m in groups]
        for i, a in enumerate(models):
            for b in models[i + 1 :]:
                ga, gb = groups[a], groups[b]
                estimate = paired_slope_difference(inputs[ga], inputs[gb], n_star_statistic(spec.success_rate))
                name = f"{b} - {a}" + (f" {rest}" if rest else "")
                cells = exponent[ga].cells + exponent[gb].cells
                out[name] = Difference(estimate.value, estimate.ci95, pair=f"{b} - {a}", cells=cells)
    return out


def scaled(spec: SweepSpec) -> bool:
    """Whether the sweep varies its family's scaling field (Paper A: alpha*): what N* is fitted on."""
    return spec.FAMILY.scaling is not None and spec.FAMILY.scaling.field in spec.swept


def n_star_fit_inputs(spec: SweepSpec, summary: "Summary", cells: list[CellResult]) -> dict[str, tuple]:
    """What the N* exponent of each group is fitted on: (x per cell, the cells' outcomes), x the
    family's scaling variable (Paper A: 1/alpha*_eff)."""
    if not scaled(spec):
        return {}
    return _fit_inputs(spec, cells, {r.label for r in summary.cells if r.flagged})


def _x(spec: SweepSpec, cell: CellResult) -> float:
    """The family's scaling variable x at a cell (Paper A: 1/alpha*_eff)."""
    return spec.FAMILY.scaling.x(spec.FAMILY.scaling_value(spec.plan(cell.cell).data))


def _fit_inputs(spec: SweepSpec, cells: list[CellResult], flagged: set[str]) -> dict[str, tuple]:
    return {
        name: ([_x(spec, c) for c in members], [c.outcomes() for c in members])
        for name, members in _groups(cells, flagged, spec.FAMILY.scaling.field).items()
    }


def _attention(cells: list[CellResult]) -> dict:
    """Per cell that measures it (Paper A's ViT), at its largest N: the mean label-relevant attention
    mass at the first and last evaluation, and whether the mean curve never falls (by more than 0.005)."""
    out = {}
    for c in cells:
        if measured := c.attention_curve():
            n, curve = measured
            values = np.array([v for _, v in curve])
            out[c.cell.label] = {
                "n": n,
                "start": float(values[0]),
                "end": float(values[-1]),
                "monotone": bool(np.all(np.diff(values) > -0.005)),
            }
    return out


UNDERFIT_SHARE, UNDERFIT_FLOOR = 0.8, 0.05


def underfits(test_error: float | None, train_error: float | None) -> bool:
    """A model that cannot fit its own training data: mean training error at least 5% and at least
    80% of its test error. Its test error then says what the model class cannot represent, not
    how it generalises, so such a cell cannot test a claim about what training finds."""
    if test_error is None or train_error is None:
        return False
    return train_error >= UNDERFIT_FLOOR and train_error >= UNDERFIT_SHARE * test_error


def _structure(spec: SweepSpec, cells: list[CellResult]) -> dict:
    """Per cell at its largest N, or on a multi-pass grid at each of its N (labels end "N=n" where a
    cell has several; a search's N are its own steps, a one-pass run's its evaluations): mean test
    and training error with bootstrap CIs over seeds; for
    Paper B's synthetic data also the lowest error its data allow (bayes_error), the fraction of
    models whose every row of A is associated with its patch's set (and of rows, on A and for
    vanilla attention on P P^T), and the median cos(v, w*) where the models have a v."""
    names = (
        "test_error",
        "train_error",
        "bayes_error",
        "patch_association",
        "patch_association_rows",
        "patch_association_gram",
        "cos_v_wstar",
    )
    out: dict = {name: {} for name in names}
    for c in cells:
        if not c.records:
            continue
        bayes = spec.FAMILY.bayes_error(spec.plan(c.cell).data)
        if bayes is not None:
            out["bayes_error"][c.cell.label] = bayes
        measured = [r for r in c.measured() if not r.diverged]  # a diverged model's metrics are NaN
        ns = sorted({r.n_train for r in measured})
        if not isinstance(spec.search, GridMode) or spec.plan(c.cell).one_pass:  # a search's N, or a run's evaluations
            ns = ns[-1:]
        for n in ns:
            label = c.cell.label if len(ns) == 1 else at_n(c.cell.label, n)
            _structure_at(out, label, [r.metrics for r in measured if r.n_train == n])
    return out


def at_n(label: str, n: int) -> str:
    """The label of a cell's entry at one of its several N ("vanilla teacher=shared N=400")."""
    return f"{label} N={n}"


def _structure_at(out: dict, label: str, models: list[dict]) -> None:
    """``_structure``'s entries for one cell at one N, from its models' final metrics."""
    for name in ("test_error", "train_error"):
        out[name][label] = mean_ci(np.array([m[name] for m in models], dtype=float))
    if "patch_association" in models[0]:
        out["patch_association"][label] = float(np.mean([m["patch_association"] == 1.0 for m in models]))
        out["patch_association_rows"][label] = float(np.mean([m["patch_association"] for m in models]))
    if "patch_association_gram" in models[0]:
        out["patch_association_gram"][label] = float(np.mean([m["patch_association_gram"] for m in models]))
    if "cos_v_wstar" in models[0]:
        out["cos_v_wstar"][label] = float(np.median([m["cos_v_wstar"] for m in models]))


def _iteration_gap(spec: SweepSpec, cells: list[CellResult]) -> dict:
    """Per axis values where both of the family's compared models ran: the T of the model its theory
    beats over the T of the one it favours (Paper A: the CNN's over the ViT's; steps to zero test
    error at the largest N), with a 95% CI."""
    if spec.FAMILY.favoured is None:
        return {}
    favoured, beaten = spec.FAMILY.favoured
    by_values: dict[str, dict[str, CellResult]] = {}
    for c in cells:
        if c.records and not c.failures:
            by_values.setdefault(c.cell.setting, {})[c.cell.model] = c
    return {
        values: steps_ratio(pair[beaten].outcomes(), pair[favoured].outcomes())
        for values, pair in by_values.items()
        if {favoured, beaten} <= set(pair)
    }


def _sparsification(spec: SweepSpec, cells: list[CellResult]) -> dict:
    """Per strategy and k: the change in final test loss against k = 0 (same seeds, largest N)."""
    if "sparsify_k" not in spec.swept:
        return {}
    by_group: dict[str, dict[int, np.ndarray]] = {}
    for c in cells:
        if c.records and not c.failures:
            data = spec.plan(c.cell).data
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
    """Trainings of the adaptive search against a grid of ratio 1 + precision over the same range
    (a tuned cell's: its measurement's, on the seeds the grid would use)."""
    if not isinstance(spec.search, SampleComplexityMode):
        return None
    done = [c for c in cells if c.records]
    trained = sum(r.phase != SELECTION for c in done for r in c.records)
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


@dataclass
class Summary:
    """Everything a sweep's report shows (``to_dict``: the same, JSON-ready). Fits map a group of
    cells (the model and its other axis values) to an analysis.Fit."""

    sweep_id: str
    name: str
    models: list[str]
    success_rate: float  # the threshold p of N* (the spec's success_rate)
    max_not_converged: float
    cells: list[CellRow]
    exponent: dict[str, Fit]  # N* ~ x^k, x the family's scaling variable (Paper A: 1/alpha*)
    iterations_exponent: dict[str, Fit]  # T ~ x^k
    t_star_exponent: dict[str, Fit]  # one pass: T* = N*/B ~ x^k
    exponent_first_zero: dict[str, Fit]  # one pass: the first-zero N* ~ x^k
    local_exponent: dict[str, list[LocalSlope]]  # group -> N*'s slope between neighbouring values, with CIs
    exponent_difference: dict[str, Difference]  # "cnn - vit" (per other axis values), paired bootstrap CI
    lr_exponent: dict[str, Fit]  # T ~ (1/eta)^k
    theory: dict[str, Any]
    paper: dict[str, dict]  # model -> the paper's own exponent and N* (Fig 1)
    test_error: dict[str, Mean]  # cell (and N, where a cell has several) -> mean test error, with a CI
    train_error: dict[str, Mean]  # the same for the training error
    bayes_error: dict[str, float]  # cell -> the lowest test error its data allow, where its family knows it
    patch_association: dict[str, float]  # Paper B: cell -> share of models with every row associated
    patch_association_rows: dict[str, float]  # cell -> mean share of associated rows
    patch_association_gram: dict[str, float]  # vanilla cell -> mean share of rows associated on P P^T
    cos_v_wstar: dict[str, float]  # cell -> median cos(v, w*)
    attention: dict[str, dict]  # ViT cell -> attention mass at the first and last evaluation
    sparsification: dict[str, dict]  # group -> k -> test loss and its change against k = 0
    adaptive: dict | None  # the adaptive search's trainings against a full grid's
    iteration_gap: dict[str, Estimate]  # setting -> the T of the kind the theory beats over the favoured one's
    n_star: dict[str, int | None]  # cell label -> N*
    protocol: str | dict[str, str]  # the sweep's training protocol, or each cell's
    family: str  # the experiment family (vit_core.family): its theory's words and its variable x

    @property
    def experiment(self) -> Family:
        """The installed family the sweep belongs to: its theory's words and its variable x."""
        return families()[self.family]

    @property
    def scaling(self) -> "Scaling | None":
        return self.experiment.scaling

    def to_dict(self) -> dict:
        """JSON-ready; a local slope names its two values by the scaling field ({"alpha_star": [a, b], ...}), a
        difference of exponents gives its value and CI (its pair and cells are the report's)."""
        out = asdict(self)
        out["exponent_difference"] = {
            name: {"value": d.value, "ci95": d.ci95} for name, d in self.exponent_difference.items()
        }
        out["local_exponent"] = {
            group: [{self.scaling.field: s.between, "value": s.value, "ci95": s.ci95} for s in slopes]
            for group, slopes in self.local_exponent.items()
        }
        return out


def summarize(spec: SweepSpec, sweep_id: str, cells: list[CellResult]) -> Summary:
    """Every statistic of the report, from the cells' results (no I/O)."""
    p = spec.success_rate
    rows = [_cell_row(spec, c) for c in cells]
    flagged = {r.label for r in rows if r.flagged}
    names = ("exponent", "iterations_exponent", "t_star_exponent", "lr_exponent", "exponent_first_zero")
    fits: dict[str, dict] = {name: {} for name in (*names, "local_exponent", "exponent_difference")}
    if scaled(spec):
        axis, scaling, x = spec.FAMILY.scaling.field, spec.FAMILY.scaling, partial(_x, spec)
        fits["exponent"] = _fits(cells, flagged, axis, x, n_star_statistic(p))
        fits["iterations_exponent"] = _fits(cells, flagged, axis, x, lambda o, cols: o.steps(cols))
        one_pass = [c for c in cells if spec.plan(c.cell).one_pass]
        fits["t_star_exponent"] = _fits(one_pass, flagged, axis, x, lambda o, cols: o.t_star(p, cols))
        fits["exponent_first_zero"] = _fits(one_pass, flagged, axis, x, first_zero_statistic(p))
        inputs = _fit_inputs(spec, cells, flagged)
        fits["local_exponent"] = {
            name: [
                replace(slope, between=[round(scaling.x(v), 4) for v in slope.between])
                for slope in local_slopes(values, outcomes, n_star_statistic(p))
            ]
            for name, (values, outcomes) in inputs.items()
        }
        fits["exponent_difference"] = _differences(spec, inputs, fits["exponent"])
    if "lr" in spec.swept:
        fits["lr_exponent"] = _fits(
            cells, flagged, "lr", lambda c: 1 / spec.plan(c.cell).training.lr, lambda o, cols: o.steps(cols)
        )
    protocols = {r.protocol for r in rows}
    return Summary(
        sweep_id,
        spec.name,
        spec.models,
        p,
        spec.max_not_converged,
        rows,
        **fits,
        theory={
            "exponent": {m: t.claim for m, t in spec.FAMILY.theory.items()},
            "iterations_exponent": spec.FAMILY.iterations_exponent,
        },
        paper={
            m: {"exponent": paper.exponent(spec.FAMILY, m, p), "n_star": paper.n_star(spec.FAMILY, m, p)}
            for m in spec.models
            if m in spec.FAMILY.reference
        },
        **_structure(spec, cells),
        attention=_attention(cells),
        sparsification=_sparsification(spec, cells),
        adaptive=_adaptive(spec, cells),
        iteration_gap=_iteration_gap(spec, cells),
        n_star={r.label: r.n_star for r in rows},
        protocol=protocols.pop() if len(protocols) == 1 else {r.label: r.protocol for r in rows},
        family=spec.family,
    )
