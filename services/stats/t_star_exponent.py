"""One pass: T* = N*/B fitted along the scaling field, T* ~ x^k per group (the summary's
t_star_exponent, headline criterion): Theorem 1's T against 1/alpha*."""

from functools import partial
from typing import Any

from services.results import CellResult
from services.spec import Sweep
from services.stats import fitting
from services.stats.base import Statistic


class TStarExponent(Statistic):
    name, order = "t_star_exponent", 3

    def applies(self, sweep: Sweep) -> bool:
        return fitting.scaled(sweep)

    def compute(self, sweep: Sweep, cells: list[CellResult]) -> dict[str, Any]:
        axis, x, p, criterion = (
            sweep.family.scaling.field,
            partial(fitting.x, sweep),
            sweep.success_rate,
            sweep.criterion,
        )
        one_pass, flagged = fitting.one_pass(sweep, cells), fitting.flagged(sweep, cells)
        return {
            self.name: fitting.fits(
                one_pass, flagged, axis, x, lambda o, cols: o.t_star(p, cols, o.as_defined(criterion))
            )
        }


STATISTIC = TStarExponent()
