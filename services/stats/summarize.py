"""A sweep's results as numbers: a row per cell (N* under each criterion with its bracket and CI,
premises, vote margins, the plug-in rule's N, what tuning chose), and every registered statistic
(services.stats), the fits among them: the exponents of N* and of the steps to zero error in the
family's x (n_star_fits, local_exponent, steps_exponent, t_star_exponent) and in 1/eta
(lr_exponent), each a unit that says when it applies. No I/O: the same summary comes from a sweep
that just ran and from one read back from MLflow.
"""

import dataclasses
from functools import cache

import numpy as np

from services.analysis import Outcomes, n_star_ci
from services.results import MEASUREMENT, SELECTION, CellResult
from services.search.selection import Run, at_edge, best, selection_table, setting_n_star
from services.spec import Setting, Sweep
from services.stats import paper, statistics
from services.stats.answer import answer
from services.stats.fitting import not_converged_share
from services.stats.rows import (
    CellRow,
    CriterionRow,
    FloorRow,
    LostRow,
    SamplesRow,
    Summary,
    TuningRow,
    WindowRow,
    error_bound,
)
from vit_core.family import Family, FloorTable, Premise
from vit_core.outcomes import OUTCOMES
from vit_core.seeding import Stream

FLOOR_N = 2048  # the plug-in rule's N is looked for among N = 1 .. this (above it: reported as not reached)


@cache
def _difficulty(family: Family, data) -> dict[str, float]:
    """The family's difficulty diagnostic of one data config (the same for every cell sharing it)."""
    return family.difficulty(data)


def _premises(sweep: Sweep, cell: CellResult, row: CellRow, seeds: tuple[int, ...]) -> list[Premise]:
    """The family's premises on a cell at the setting it was measured at, N its N* (else its largest N),
    on the models of its measurement ``seeds`` as built."""
    data, model, _ = sweep.resolved_cell(cell.cell).configs
    n = row.n_star or max((r.n_train for r in cell.records), default=1)
    return sweep.family.premises(data, model, row.batch_size, row.lr, max(n, 2), list(seeds))


@cache
def _floor_table(
    family: Family, data, seeds: tuple[int, ...], n_test: int, test_seeds: tuple[int, ...]
) -> FloorTable | None:
    """The family's plug-in rule on one data config and ``seeds`` (the same for every cell sharing them)."""
    return family.information_floor(data, list(seeds), FLOOR_N, n_test, list(test_seeds))


@cache
def _floor_star(family: Family, data, seeds: tuple[int, ...], n_test: int, test_seeds: tuple[int, ...], p: float):
    """The plug-in rule's N* at share p of the seeds and its bootstrap CI (a live record's
    summaries ask again for the same cells: computed once), or None where the family has no rule."""
    table = _floor_table(family, data, seeds, n_test, test_seeds)
    if table is None:
        return None
    # a run of equal rows has equal rates in every resample, and the stable N* is the first N of a run:
    # the runs' first rows alone give the same N* and CI (at alpha* = 0.1, 16 seeds: 168 of 2,048 rows, 2.5x faster)
    changed = np.r_[True, np.any(table.zero_error[1:] != table.zero_error[:-1], axis=1)]
    success = table.zero_error[changed]
    nan = np.full(success.shape, np.nan)
    outcomes = Outcomes(np.arange(1, FLOOR_N + 1)[changed], np.array(seeds), success, nan, nan)
    return outcomes.n_star(p), list(n_star_ci(outcomes, p))


TRAIN_SAMPLES = 2000  # each seed's first training samples whose per-sample premises are counted


@cache
def _samples(family: Family, data, n_test: int, seeds: tuple[int, ...], test_seeds: tuple[int, ...]):
    """A cell's samples one by one (SamplesRow), the same for every cell sharing its data and seeds;
    None where the family's data have no vote."""
    found = [family.vote_margins(data, n_test, s) for s in test_seeds]
    if found[0] is None:
        return None
    counts = np.stack([np.bincount(np.clip(m, 0, 5), minlength=6)[1:] for m in found]).mean(0)
    margins = {str(k): round(float(v), 2) for k, v in zip(range(1, 5), counts)} | {">=5": round(float(counts[4]), 2)}
    shares = []
    for stream, n, which in ((Stream.TRAIN_DATA, TRAIN_SAMPLES, seeds), (Stream.TEST_DATA, n_test, test_seeds)):
        met = [family.sample_premises(data, n, s, stream) for s in which]
        shares.append({name: round(float(np.mean([m[name] for m in met])), 4) for name in met[0]})
    smallest = int(min(m.min() for m in found))
    return SamplesRow(len(test_seeds), n_test, margins, smallest, TRAIN_SAMPLES, *shares)


def _floor(sweep: Sweep, data, training, seeds: tuple[int, ...], n_star: int | None) -> FloorRow | None:
    """The plug-in rule's N on a cell's data and seeds, and how many seeds' first N* samples
    (the cell's SGD N*) hold both labels."""
    args = (sweep.family, data, seeds, training.n_test, tuple(training.test_seeds(list(seeds))))
    star = _floor_star(*args, sweep.success_rate)
    if star is None:
        return None
    first = _floor_table(*args).both_labels_from
    both = None if n_star is None else int(np.sum((first > 0) & (first <= n_star)))
    return FloorRow(*star, FLOOR_N, both, len(seeds))


def _cell_row(sweep: Sweep, cell: CellResult) -> CellRow:
    data, _, training = sweep.resolved_cell(cell.cell).configs
    one_pass = training.protocol == "one_pass"
    measured = cell.measured()
    row = CellRow(
        cell.cell.label,
        cell.cell.model,
        cell.cell.values,
        sweep.family.scaling_value(data) if sweep.family.scaling else None,
        measured[0].lr if measured else training.lr,
        cell.trainings,
        bool(cell.failures),
        protocol=training.protocol,
        batch_size=(measured[0].batch_size or training.batch_size) if measured else training.batch_size,
        n_test=training.n_test,
    )
    if not measured:  # nothing measured yet (a sweep so far), or every measurement pack failed
        row.tuning = _tuning_row(sweep, cell) if cell.records else None
        return row
    by_n = cell.by_n()
    row.not_converged_share = not_converged_share(cell)
    row.outcomes = {str(r["n"]): {name: r[name] for name in OUTCOMES} for r in by_n}
    row.flagged = row.not_converged_share > sweep.max_not_converged  # above it, N* says little
    o, p = cell.outcomes(), sweep.success_rate
    row.criterion = headline = o.as_defined(sweep.criterion)
    row.criteria = {c: _criterion_row(o, p, c, bool(cell.failures)) for c in o.criteria}
    h = row.criteria[headline]
    row.bracket_lo, row.n_star, row.n_star_known, row.n_star_ci95 = h.bracket_lo, h.n_star, h.known, h.ci95
    row.monotone, row.steps_to_zero = o.monotone(p, headline), o.steps()
    row.rates = dict(zip(o.ns.tolist(), o.rates(table=o.table(headline)).tolist()))
    row.t_star = None if cell.failures else o.t_star(p, criterion=headline)
    row.per_seed = cell.per_seed()
    row.lost = _lost_row(measured) if one_pass else None
    row.tuning = _tuning_row(sweep, cell)
    row.window = _window_row(training, cell)
    seeds = tuple(sorted({r.seed for r in measured}))
    row.premises = _premises(sweep, cell, row, seeds)
    row.difficulty = _difficulty(sweep.family, data)
    row.floor = _floor(sweep, data, training, seeds, row.n_star)
    test_seeds = tuple(dict.fromkeys(training.test_seeds(list(seeds))))
    row.samples = _samples(sweep.family, data, training.n_test, seeds, test_seeds)
    return row


def _criterion_row(o: Outcomes, p: float, criterion: str, failed: bool) -> CriterionRow:
    """A cell's N* under one criterion: its value (None where the cell failed), CI and bracket."""
    lo, star = o.bracket(p, criterion)
    known = o.n_star_known(p, criterion=criterion) is not None
    return CriterionRow(None if failed else star, known, list(n_star_ci(o, p, criterion=criterion)), lo)


def _lost_row(measured: list) -> LostRow | None:
    """The seeds of a one-pass cell that reached zero test error and kept it over no window (LostRow)."""
    runs: dict[int, list] = {}
    for r in measured:
        if r.n_stable is not None and r.n_first_zero >= 0 and r.n_stable < 0 and not r.diverged:
            runs.setdefault(r.seed, []).append(r)
    if not runs:
        return None
    worst, share, at_zero, first_mass, end_mass = [], [], 0, [], []
    for mine in runs.values():
        mine.sort(key=lambda r: r.n_train)
        after = [r for r in mine if r.n_train >= r.n_first_zero]
        errors = np.array([r.test_error for r in after])
        worst.append(float(np.nanmax(errors)))
        share.append(float(np.mean(errors > 0)))
        at_zero += bool(errors[-1] == 0)
        first_mass.append(after[0].metrics.get("attention_mass", np.nan))
        end_mass.append(after[-1].metrics.get("attention_mass", np.nan))
    mass = [None if np.all(np.isnan(m)) else round(float(np.nanmedian(m)), 4) for m in (first_mass, end_mass)]
    return LostRow(len(runs), float(np.median(worst)), round(float(np.median(share)), 4), at_zero, *mass)


def _tuning_row(sweep: Sweep, cell: CellResult) -> TuningRow | None:
    """What tuning chose for a cell, from its records (the planner chose from the same ones)."""
    table = selection_table(cell.records)
    measured = [r for r in cell.records if r.phase == MEASUREMENT]
    if sweep.tuning is None or not table:
        return None
    chosen = Setting(measured[0].batch_size, measured[0].lr) if measured else best(table, sweep.success_rate)
    window = sweep.resolved_cell(cell.cell).training.stability_window
    selection = [
        {"batch_size": s.batch_size, "lr": s.lr, "n_star": (star := setting_n_star(result, sweep.success_rate))}
        | _selection_seeds(result, s, window, star)
        for s, result in sorted(table.items())
    ]
    return TuningRow(
        {"batch_size": chosen.batch_size, "lr": chosen.lr},
        selection,
        at_edge(chosen, set(table), sweep.tuning_of(cell.cell.model).searched),
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


def summarize(sweep: Sweep, sweep_id: str, cells: list[CellResult]) -> Summary:
    """Every statistic of the report, from the cells' results (no I/O): a row per cell, then every
    registered unit's entries (services.stats.statistics), the fits among them; an entry the
    Summary has a field for fills it, the others are its ``stats``."""
    p = sweep.success_rate
    rows = [_cell_row(sweep, c) for c in cells]
    entries = {
        name: value
        for unit in statistics()
        for name, value in (unit.compute(sweep, cells) if unit.applies(sweep) else unit.empty()).items()
    }
    fields = {f.name for f in dataclasses.fields(Summary)}
    protocols = {r.protocol for r in rows}
    summary = Summary(
        sweep_id,
        sweep.name,
        sweep.models,
        p,
        sweep.max_not_converged,
        rows,
        **{name: value for name, value in entries.items() if name in fields},
        theory={
            "exponent": {m: t.claim for m, t in sweep.family.theory.items()},
            "iterations_exponent": sweep.family.iterations_exponent,
        },
        paper={
            m: {"exponent": paper.exponent(sweep.family, m, p), "n_star": paper.n_star(sweep.family, m, p)}
            for m in sweep.models
            if m in sweep.family.reference
        },
        stats={name: value for name, value in entries.items() if name not in fields},
        n_star={r.label: r.n_star for r in rows},
        protocol=protocols.pop() if len(protocols) == 1 else {r.label: r.protocol for r in rows},
        family=sweep.family.name,
        error_bound={str(r.n_test): round(error_bound(r.n_test), 6) for r in rows},
        seeds=sorted({r.seed for c in cells for r in c.measured()}),
        criterion=sweep.criterion if entries["criteria"] else "stable",
    )
    summary.answer = answer(summary, sweep.answer)
    return summary
