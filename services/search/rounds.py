"""The shape every strategy's round planner has: rounds of packs per cell, planned as results come
in (a pure object; services.execution.ray_tune adapts any of them to Ray Tune's Searcher)."""

from services import legacy
from services.search.packs import Pack, TrialConfig, len_of_pack


class RoundPlanner:
    """Plans a sweep's packs round by round, per cell: a cell's next round is planned as soon as
    all packs of its current one have reported, and the queue stays ordered longest pack first
    (``cost``), so that a late round of a slow cell does not run alone at the end while the other
    slots idle. ``suggest`` answers a pack, None while rounds are in flight, or FINISHED when no
    cell has anything left to train. Subclasses say what a cell's next round is (``next_round``)
    and what a trial's records teach them (``learn``). Pure: Ray Tune's Searcher adapts it
    (services.execution.ray_tune.PlanSearcher)."""

    FINISHED = "FINISHED"

    def __init__(self, cells: int, cost=len_of_pack):
        self.queue: list[Pack] = []
        self.in_flight: dict[str, Pack] = {}  # trial id -> pack
        self.failed: set[int] = set()  # cells a failed trial stopped
        self.cell_count, self.cost = cells, cost

    def suggest(self, trial_id: str) -> "Pack | str | None":
        busy = {p.cell for p in [*self.queue, *self.in_flight.values()]} | self.failed
        new = [pack for index in range(self.cell_count) if index not in busy for pack in self.next_round(index)]
        if new:
            self.queue = sorted(self.queue + new, key=self.cost, reverse=True)  # stable: equal costs keep their order
        if not self.queue:
            return None if self.in_flight else self.FINISHED
        pack = self.queue.pop(0)
        self.in_flight[trial_id] = pack
        return pack

    def trial_config(self, trial_id: str, pack: Pack) -> TrialConfig:
        """What the trial that trains ``pack`` trains: the pack (Optuna adds its sampled values)."""
        return TrialConfig(pack)

    def complete(self, trial_id: str, records: list | None, metrics: dict | None = None) -> None:
        """A trial ended with these records (and ``metrics``, what it reported besides); None: it
        failed (Ray already retried it max_failures times), and its cell stops (reported FAILED)."""
        pack = self.in_flight.pop(trial_id, None)
        if pack is None:
            return
        if records is None:
            self.failed.add(pack.cell)
            self.queue = [p for p in self.queue if p.cell != pack.cell]
            return
        self.learn(pack, records)

    def next_round(self, cell: int) -> list[Pack]:
        raise NotImplementedError

    def learn(self, pack: Pack, records: list) -> None:
        raise NotImplementedError

    def get_state(self) -> dict:
        return {
            "queue": [p.config() for p in self.queue],
            "in_flight": {t: p.config() for t, p in self.in_flight.items()},
            "failed": sorted(self.failed),
        }

    def set_state(self, state: dict) -> None:
        state = legacy.planner_state(state)
        self.queue = [Pack.from_config(p) for p in state["queue"]]
        self.in_flight = {t: Pack.from_config(p) for t, p in state["in_flight"].items()}
        self.failed = set(state["failed"])
