"""The adaptive N* search's savings: its trainings against a grid of ratio 1 + precision over the
same N range (a tuned cell's: its measurement's, on the seeds the grid would use)."""

from services.analysis import full_grid_size
from services.results import SELECTION, CellResult
from services.spec import Sweep
from services.stats.base import Statistic, fmt
from services.stats.rows import Summary


class Adaptive(Statistic):
    name, order = "adaptive", 20

    def empty(self) -> dict:
        return {self.name: None}

    def applies(self, sweep: Sweep) -> bool:
        return sweep.search.adaptive() is not None

    def compute(self, sweep: Sweep, cells: list[CellResult]) -> dict:
        done = [c for c in cells if c.records]
        trained = sum(r.phase != SELECTION for c in done for r in c.records)
        grid = sum(
            full_grid_size(int(o.ns[0]), int(o.ns[-1]), sweep.search.adaptive().precision) * len(o.seeds)
            for o in (c.outcomes() for c in done)
        )
        return {
            self.name: {
                "precision": sweep.search.adaptive().precision,
                "trainings": trained,
                "full_grid_trainings": grid,
                "ratio": grid / trained if trained else None,
            }
        }

    def lines(self, summary: Summary) -> list[str]:
        a = summary.stats[self.name]
        if not a:
            return []
        return [
            f"adaptive search: {a['trainings']} trainings against {a['full_grid_trainings']} for a grid of ratio "
            f"{1 + a['precision']:g} over the same N range ({fmt(a['ratio'], '.1f')}x fewer)"
        ]


STATISTIC = Adaptive()
