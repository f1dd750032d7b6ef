"""A running sweep's time left: each pack's seconds from a line fitted to the reported trials'
(seconds against pack_cost: a trial's fixed part and its cost's), the packs not started played out
over the slots after the running trials' rest, in the order Ray Tune starts them; before a trial
reports, at the pace of the plan `vitsweep plan` saved under the home. Only where every pack is
known before the sweep starts (a grid, a one-pass N* search); a strategy that plans rounds from
results has no such list.
"""

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from services.search.packs import pack_cost
from services.search.planners import first_packs
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
        if not packs or sweep.strategy.trials(len(packs)) != len(packs):
            return None
        cost = pack_cost(sweep)
        costs = tuple(cost(p) for p in packs)
        return cls(costs, max(1, slots), planned_s * max(1, slots) / sum(costs) if planned_s else None)

    def seconds(self, trials: Trials) -> tuple[float, float] | None:
        """(a, b): a pack of cost c takes a + b c seconds; least squares over the reported trials,
        neither below 0 (the main job's one-pass packs take about the same time whatever their
        cost: their models stop early), else the prior's (0, seconds per unit); None with neither."""
        if not trials.ended:
            return None if self.prior is None else (0.0, self.prior)
        costs, seconds = np.array(trials.ended).T
        if np.ptp(costs) == 0:
            return float(seconds.mean()), 0.0
        b = float(np.polyfit(costs, seconds, 1)[0])
        if b * np.ptp(costs) <= 1e-9 * seconds.mean():  # no slope, but for rounding
            return float(seconds.mean()), 0.0
        a = float(seconds.mean() - b * costs.mean())
        return (a, b) if a >= 0 else (0.0, float(seconds.sum() / costs.sum()))

    def left(self, trials: Trials, now: float) -> float | None:
        """Seconds until the last pack ends: each running trial's rest (its expected seconds less
        its time so far), then the packs not started, each on the slot that frees first."""
        line = self.seconds(trials)
        if line is None:
            return None
        a, b = line
        free = [max(0.0, a + b * r.cost - (now - r.since)) for r in trials.running][: self.slots]
        free += [0.0] * (self.slots - len(free))
        for cost in self.costs[trials.done + len(trials.running) :]:
            free.sort()
            free[0] += a + b * cost
        return max(free)
