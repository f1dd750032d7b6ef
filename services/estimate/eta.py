"""A running sweep's time left: its packs' costs (pack_cost, in the order Ray Tune starts them) at
the pace its trials kept so far (seconds per unit of cost), played out over its slots, the running
trials' rest first; before a trial reports, at the pace of the plan `vitsweep plan` saved under
the home. Only where every pack is known before the sweep starts (a grid, a one-pass N* search);
a strategy that plans rounds from results has no such list."""

from dataclasses import dataclass
from typing import TYPE_CHECKING

from services.search.packs import pack_cost
from services.search.planners import first_packs, trial_count
from services.sweep_run import Trials

if TYPE_CHECKING:
    from services.spec import Sweep


@dataclass(frozen=True)
class Eta:
    """``costs``: every pack's cost, in the order Tune starts them; ``prior``: seconds per unit of
    cost before any trial reports (None: no ETA until one does)."""

    costs: tuple[float, ...]
    slots: int
    prior: float | None = None

    @classmethod
    def of(cls, sweep: "Sweep", slots: int, planned_s: float | None) -> "Eta | None":
        """The sweep's, where its packs are known before it starts (else None); ``planned_s``: the
        wall time its saved plan expects on these slots (None: never planned)."""
        packs = first_packs(sweep, slots)
        if not packs or trial_count(sweep, slots) != len(packs):
            return None
        cost = pack_cost(sweep)
        costs = tuple(cost(p) for p in packs)
        return cls(costs, max(1, slots), planned_s * max(1, slots) / sum(costs) if planned_s else None)

    def pace(self, trials: Trials) -> float | None:
        """Seconds per unit of cost: the reported trials' (their seconds over their packs' costs), else the prior."""
        units = sum(cost for cost, _ in trials.ended)
        return sum(seconds for _, seconds in trials.ended) / units if units else self.prior

    def left(self, trials: Trials, now: float) -> float | None:
        """Seconds until the last pack ends: each running trial's rest at the pace (its cost less
        its time so far), then the packs not started, each on the slot that frees first."""
        pace = self.pace(trials)
        if pace is None:
            return None
        free = [max(0.0, r.cost * pace - (now - r.since)) for r in trials.running][: self.slots]
        free += [0.0] * (self.slots - len(free))
        for cost in self.costs[trials.done + len(trials.running) :]:
            free.sort()
            free[0] += cost * pace
        return max(free)
