"""What every fit of a sweep's cells shares: which cells a fit along an axis uses (groups of cells
differing only in it, the flagged ones left out), the family's variable x, the statistic N* is
fitted on, and a log-log fit per group. The fits themselves are Statistic units, one module each
(n_star_fits, local_exponent, steps_exponent, t_star_exponent, lr_exponent), as any other's would be."""

from collections import Counter
from dataclasses import dataclass, replace

import numpy as np

from services.analysis import Outcomes, fit_exponent
from services.results import CellResult
from services.spec import Sweep
from vit_core.outcomes import Outcome


def not_converged_share(cell: CellResult) -> float:
    """The largest share of one N's measured models that did not converge or diverged, counted from
    the records' outcomes: every fit asks it of every cell, and summarize_by_n's whole table cost 16x
    as much on the main job's cells."""
    models, off = Counter(), Counter()
    for r in cell.measured():
        models[r.n_train] += 1
        off[r.n_train] += r.outcome in (Outcome.NOT_CONVERGED, Outcome.DIVERGED)
    return max(off[n] / models[n] for n in models)


def flagged(sweep: Sweep, cells: list[CellResult]) -> set[str]:
    """The labels of the measured cells above the sweep's max_not_converged: left out of every fit."""
    return {c.cell.label for c in cells if c.measured() and not_converged_share(c) > sweep.max_not_converged}


def groups(cells: list[CellResult], flagged: set[str], axis: str) -> dict[str, list[CellResult]]:
    """The cells a fit along ``axis`` uses, per group of cells differing only in it (at least two
    values of it; cells that failed, are flagged, have nothing measured or whose model does not
    sweep it (a per_model axis) left out)."""
    found: dict[str, list[CellResult]] = {}
    for c in cells:
        if axis in c.cell.values and c.measured() and not c.failures and c.cell.label not in flagged:
            found.setdefault(c.cell.group((axis,)), []).append(c)
    return {name: members for name, members in found.items() if len({c.cell.values[axis] for c in members}) >= 2}


def fits(cells: list[CellResult], flagged: set[str], axis: str, x_of, statistic) -> dict:
    """Per group of cells differing only in ``axis``: the log-log slope of statistic against x
    (cells that failed or are ``flagged``, by label, left out)."""
    return {
        name: replace(
            fit_exponent([x_of(c) for c in members], [c.outcomes() for c in members], statistic),
            cells=[c.cell.label for c in members],
        )
        for name, members in groups(cells, flagged, axis).items()
    }


@dataclass(frozen=True)
class NStar:
    """What the N* exponent is fitted on: a cell's N* at threshold p under ``criterion`` (the stable
    one where the cell defines no other: multi-pass) where it is known (None where it is censored),
    over the given columns (seeds) of its outcomes; ``draws``: over many resamples at once."""

    p: float
    criterion: str = "stable"

    def __call__(self, outcomes: Outcomes, columns) -> int | None:
        return outcomes.n_star_known(self.p, columns, outcomes.as_defined(self.criterion))

    def draws(self, outcomes: Outcomes, columns: np.ndarray) -> np.ndarray:
        return outcomes.n_star_draws(self.p, columns, outcomes.as_defined(self.criterion), known=True)


def scaled(sweep: Sweep) -> bool:
    """Whether the sweep varies its family's scaling field (Paper A: alpha*): what N* is fitted on."""
    return sweep.family.scaling is not None and sweep.family.scaling.field in sweep.swept


def x(sweep: Sweep, cell: CellResult) -> float:
    """The family's scaling variable x at a cell (Paper A: 1/alpha*_eff)."""
    return sweep.family.scaling.x(sweep.family.scaling_value(sweep.resolved_cell(cell.cell).data))


def fit_inputs(sweep: Sweep, cells: list[CellResult], flagged: set[str]) -> dict[str, tuple]:
    """What the N* exponent of each group is fitted on: (x per cell, the cells' outcomes), x the
    family's scaling variable (Paper A: 1/alpha*_eff); {} where the sweep does not vary it."""
    if not scaled(sweep):
        return {}
    return {
        name: ([x(sweep, c) for c in members], [c.outcomes() for c in members])
        for name, members in groups(cells, flagged, sweep.family.scaling.field).items()
    }


def one_pass(sweep: Sweep, cells: list[CellResult]) -> list[CellResult]:
    """The cells trained one pass (their N* has three criteria; a multi-pass cell's has one)."""
    return [c for c in cells if sweep.resolved_cell(c.cell).one_pass]
