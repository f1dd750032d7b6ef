"""Where zero test error is lost: per one-pass cell, at each evaluation where a seed had zero test
error the evaluation before and errs now, its errors at each vote margin (vit_core counts them on
the whole test set there), summed. Near ties (margin 1) losing it say the test set's tie tail, not
the bulk, decides the stable and iterate N* of that cell."""

from dataclasses import dataclass

import numpy as np

from services.results import CellResult, ModelRecord, model_of
from services.spec import Sweep
from services.stats.base import Statistic
from services.stats.rows import Summary
from vit_core.tokens import MARGIN_BINS, MARGIN_ERRORS


@dataclass
class LosingErrors:
    """A cell's evaluations that lost zero test error: how many, of how many seeds, and their errors
    per vote margin (MARGIN_BINS -> errors, summed over them)."""

    evaluations: int
    seeds: int
    by_margin: dict[str, int]


def losing_evaluations(records: list[ModelRecord]) -> list[ModelRecord]:
    """The one-pass records, per run in N order, whose test error is above 0 where the one before was 0."""
    runs: dict[tuple, list[ModelRecord]] = {}
    for r in (r for r in records if r.n_stable is not None):
        runs.setdefault(model_of(r), []).append(r)
    lost = []
    for mine in runs.values():
        mine.sort(key=lambda r: r.n_train)
        lost += [r for before, r in zip(mine, mine[1:]) if before.test_error == 0 < r.test_error]
    return lost


class ErrorsByMargin(Statistic):
    name, order = "errors_by_margin", 35

    def compute(self, sweep: Sweep, cells: list[CellResult]) -> dict:
        out = {}
        for c in cells:
            lost = losing_evaluations(c.measured())
            counted = [r for r in lost if np.isfinite(r.metrics.get(MARGIN_ERRORS[0], np.nan))]
            if counted:
                sums = {b: int(sum(r.metrics[name] for r in counted)) for b, name in zip(MARGIN_BINS, MARGIN_ERRORS)}
                out[c.cell.label] = LosingErrors(len(counted), len({r.seed for r in counted}), sums)
        return {self.name: out}

    def lines(self, summary: Summary) -> list[str]:
        return [
            f"zero error lost, {label}: {e.evaluations} evaluations ({e.seeds} seeds) erred right after a zero, "
            f"{sum(e.by_margin.values())} test errors; by vote margin "
            + ", ".join(f"{b}: {n}" for b, n in e.by_margin.items())
            + " (the test sets' margins: above)"
            for label, e in summary.stats[self.name].items()
        ]


STATISTIC = ErrorsByMargin()
