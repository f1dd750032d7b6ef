"""The iteration gap: per axis values where both of a family's compared models ran, the T (steps
to zero test error at the largest N) of the model its theory beats over that of the one it
favours (Paper A: the CNN's over the ViT's), with a 95% CI."""

from services.ratios import steps_ratio
from services.results import CellResult
from services.spec import Sweep
from services.stats.base import Statistic, fmt
from services.stats.rows import Summary


class IterationGap(Statistic):
    name, order = "iteration_gap", 10

    def applies(self, sweep: Sweep) -> bool:
        return sweep.family.favoured is not None

    def compute(self, sweep: Sweep, cells: list[CellResult]) -> dict:
        favoured, beaten = sweep.family.favoured
        by_values: dict[str, dict[str, CellResult]] = {}
        for c in cells:
            if c.measured() and not c.failures:
                by_values.setdefault(c.cell.setting, {})[c.cell.model] = c
        gaps = {
            values: steps_ratio(pair[beaten].outcomes(), pair[favoured].outcomes())
            for values, pair in by_values.items()
            if {favoured, beaten} <= set(pair)
        }
        return {self.name: gaps}

    def lines(self, summary: Summary) -> list[str]:
        lines = []
        for values, gap in summary.stats[self.name].items():
            if gap.value is not None:
                favoured, beaten = (summary.experiment.name_of(kind) for kind in summary.experiment.favoured)
                lines.append(
                    f"iteration gap, {values}: the {beaten} needs {gap.value:.2f}x the {favoured}'s steps to zero "
                    f"test error, 95% CI {fmt(gap.ci95, '.2f')}"
                )
        return lines


STATISTIC = IterationGap()
