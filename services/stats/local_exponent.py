"""N*'s local slope between neighbouring values of the scaling field, per group, with CIs: where
along alpha* the exponent the whole range gives holds, and where it bends."""

from dataclasses import replace
from typing import Any

from services.analysis import local_slopes
from services.results import CellResult
from services.spec import Sweep
from services.stats import fitting
from services.stats.base import Statistic


class LocalExponent(Statistic):
    """The summary's local_exponent: group -> N*'s slope between each two neighbouring values,
    named by their x (headline criterion)."""

    name, order = "local_exponent", 1

    def applies(self, sweep: Sweep) -> bool:
        return fitting.scaled(sweep)

    def compute(self, sweep: Sweep, cells: list[CellResult]) -> dict[str, Any]:
        scaling, statistic = sweep.family.scaling, fitting.NStar(sweep.success_rate, sweep.criterion)
        return {
            self.name: {
                name: [
                    replace(slope, between=[round(scaling.x(v), 4) for v in slope.between])
                    for slope in local_slopes(values, outcomes, statistic)
                ]
                for name, (values, outcomes) in fitting.fit_inputs(sweep, cells, fitting.flagged(sweep, cells)).items()
            }
        }


STATISTIC = LocalExponent()
