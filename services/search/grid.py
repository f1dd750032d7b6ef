"""Strategy ``grid``: its section and budget (a Strategy's) and its planner, one round holding
every pack of the sweep (services.search.packs)."""

from typing import TYPE_CHECKING, ClassVar, Literal

from services.search.packs import Pack, pack_cost, packs
from services.search.rounds import RoundPlanner
from services.spec import Strategy
from services.spec.strategies import renamed

if TYPE_CHECKING:
    from services.spec import Sweep


class GridStrategy(Strategy):
    """grid: every cell of the axes at every N of n_train (one pass: at its sample budget)."""

    mode: Literal["grid"] = "grid"
    fixed: ClassVar[bool] = True

    def make_planner(self, sweep: "Sweep", slots: int | None = None) -> "GridPlanner":
        return GridPlanner(sweep, slots)


class GridPlanner(RoundPlanner):
    """Every cell at every N of its grid, in one round: the packs of ``packs(sweep, slots)``."""

    def __init__(self, sweep: "Sweep", slots: int | None = None):
        super().__init__(len(sweep.cells), pack_cost(sweep))
        self.rounds: dict[int, list[Pack]] = {}
        for pack in packs(sweep, slots):
            self.rounds.setdefault(pack.cell, []).append(pack)

    def next_round(self, cell: int) -> list[Pack]:
        return self.rounds.pop(cell, [])

    def learn(self, pack: Pack, records: list) -> None:
        """A grid plans nothing from what it learns."""

    def get_state(self) -> dict:
        return super().get_state() | {"rounds": {i: [p.config() for p in ps] for i, ps in self.rounds.items()}}

    def set_state(self, state: dict) -> None:
        super().set_state(state)
        self.rounds = {int(i): [Pack.from_config(p) for p in ps] for i, ps in state["rounds"].items()}


__getattr__ = renamed(__name__, {"GridMode": ("GridStrategy", GridStrategy)})
