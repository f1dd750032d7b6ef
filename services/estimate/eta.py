"""A running sweep's time left: each pack's seconds from a line fitted to the reported trials'
(seconds against pack_cost: a trial's fixed part and its cost's), the packs not started played out
over the slots after the running trials' rest, in the order Ray Tune starts them. Before a trial
reports, the packs go at the pace of an expected wall time (the plan `vitsweep plan` saved under the
home, else the spec's published result); once trials report, that expectation's time left and the
fitted line's are weighed by the share of trials done: the first trials to end are the sweep's
longest packs (Tune starts them first), whose line alone overstated the rest 1.6x on the main job.
Only where every pack is known before the sweep starts (a grid, a one-pass N* search); a strategy
that plans rounds from results has no such list.
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
    """``costs``: every pack's cost, in the order Tune starts them; ``expected_s``: the sweep's
    expected wall time on these slots (None: no ETA until a trial reports), from ``began``
    (time.monotonic())."""

    costs: tuple[float, ...]
    slots: int
    expected_s: float | None = None
    began: float = 0.0

    @property
    def prior(self) -> float | None:
        """Seconds per unit of cost before any trial reports: the expected wall time's pace."""
        return None if self.expected_s is None else self.expected_s * self.slots / sum(self.costs)

    @classmethod
    def of(cls, sweep: "Sweep", slots: int, expected_s: float | None, began: float = 0.0) -> "Eta | None":
        """The sweep's, where its packs are known before it starts (else None); ``expected_s``: the
        wall time expected on these slots (None: none known), from ``began``."""
        packs = first_packs(sweep, slots)
        if not packs or sweep.strategy.trials(len(packs)) != len(packs):
            return None
        cost = pack_cost(sweep)
        return cls(tuple(cost(p) for p in packs), max(1, slots), expected_s or None, began)

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
        """Seconds until the last pack ends: the packs played out (played), weighed, once trials
        report, against the expected wall time's rest by the share of trials done."""
        played = self.played(trials, now)
        if played is None or self.expected_s is None or not trials.ended:
            return played
        done = min(1.0, trials.done / len(self.costs))
        return (1 - done) * max(0.0, self.expected_s - (now - self.began)) + done * played

    def played(self, trials: Trials, now: float) -> float | None:
        """Each running trial's rest (its expected seconds less its time so far), then the packs
        not started, each on the slot that frees first, at the line's seconds (seconds)."""
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
