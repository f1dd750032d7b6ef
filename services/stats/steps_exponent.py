"""The steps to zero error fitted along the scaling field: T ~ x^k per group (the summary's
iterations_exponent), against the family's iterations claim."""

from functools import partial
from typing import Any

from services.results import CellResult
from services.spec import Sweep
from services.stats import fitting
from services.stats.base import Statistic


class StepsExponent(Statistic):
    name, order = "iterations_exponent", 2

    def applies(self, sweep: Sweep) -> bool:
        return fitting.scaled(sweep)

    def compute(self, sweep: Sweep, cells: list[CellResult]) -> dict[str, Any]:
        axis, x = sweep.family.scaling.field, partial(fitting.x, sweep)
        return {self.name: fitting.fits(cells, fitting.flagged(sweep, cells), axis, x, lambda o, cols: o.steps(cols))}


STATISTIC = StepsExponent()
