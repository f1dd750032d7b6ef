"""The steps to zero error fitted against 1/eta where the sweep varies lr: T ~ (1/eta)^k per group
(the summary's lr_exponent)."""

from typing import Any

from services.results import CellResult
from services.spec import Sweep
from services.stats import fitting
from services.stats.base import Statistic


class LrExponent(Statistic):
    name, order = "lr_exponent", 4

    def applies(self, sweep: Sweep) -> bool:
        return "lr" in sweep.swept

    def compute(self, sweep: Sweep, cells: list[CellResult]) -> dict[str, Any]:
        inverse_lr = lambda c: 1 / sweep.resolved_cell(c.cell).training.lr  # noqa: E731
        return {
            self.name: fitting.fits(
                cells, fitting.flagged(sweep, cells), "lr", inverse_lr, lambda o, cols: o.steps(cols)
            )
        }


STATISTIC = LrExponent()
