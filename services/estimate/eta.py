"""A running sweep's time left: each pack's seconds from a power law in its cost (pack_cost) fitted to
the reported trials of its model kind (the trials of every kind where its own have one cost or none),
the packs not started played out over the slots after the running trials' rest, in the order Ray
Tune starts them. Before a trial reports, the packs go at the pace of an expected wall time (the plan
`vitsweep plan` saved under the home, else the spec's published result); once trials report, that
expectation's time left and the played-out one are weighed by the share of trials done: the first
trials to end are the sweep's longest packs (Tune starts them first), from which alone the rest was
overstated. Only where every pack is known before the sweep starts (a grid, a one-pass N* search); a
strategy that plans rounds from results has no such list.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from services.search.packs import pack_cost
from services.search.planners import first_packs
from services.sweep_run import Ended, Trials

if TYPE_CHECKING:
    from services.spec import Sweep


@dataclass(frozen=True)
class Eta:
    """``costs``: every pack's cost, in the order Tune starts them, and ``kinds`` its model kind;
    ``expected_s``: the sweep's expected wall time on these slots (None: no ETA until a trial
    reports), from ``began`` (time.monotonic())."""

    costs: tuple[float, ...]
    slots: int
    expected_s: float | None = None
    began: float = 0.0
    kinds: tuple[str, ...] = ()

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
        cost, kinds = pack_cost(sweep), tuple(sweep.cells[p.cell].model for p in packs)
        return cls(tuple(cost(p) for p in packs), max(1, slots), expected_s or None, began, kinds)

    def pace(self, trials: Trials) -> Callable[[float, str], float] | None:
        """A pack's expected seconds from its cost and model kind: seconds = A cost^beta, fitted in logs
        to the reported trials of its kind (beta in [0, 1]: the main job's one-pass packs take about
        as long whatever their cost, their models stop early; a grid's take their cost's time), with
        the fit of all kinds' beta where its own trials have one cost, all kinds' fit where it has
        none; before any report the expected wall time's seconds per unit of cost; None with neither."""
        if not trials.ended:
            return None if self.prior is None else (lambda cost, kind: self.prior * cost)
        pooled = _power_law(trials.ended)
        kinds = {e.kind for e in trials.ended}
        fits = {kind: _power_law([e for e in trials.ended if e.kind == kind], pooled[1]) for kind in kinds}
        return lambda cost, kind: float(np.exp(_log_at(fits.get(kind, pooled), cost)))

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
        not started, each on the slot that frees first, at their expected seconds (pace)."""
        pace = self.pace(trials)
        if pace is None:
            return None
        free = [max(0.0, pace(r.cost, r.kind) - (now - r.since)) for r in trials.running][: self.slots]
        free += [0.0] * (self.slots - len(free))
        started = trials.done + len(trials.running)
        kinds = self.kinds or ("",) * len(self.costs)
        for cost, kind in zip(self.costs[started:], kinds[started:]):
            free.sort()
            free[0] += pace(cost, kind)
        return max(free)


def _power_law(ended: Sequence[Ended], beta: float = 0.0) -> tuple[float, float]:
    """(log A, beta) of seconds = A cost^beta, least squares in logs over ``ended`` (one or more),
    beta kept in [0, 1]; where their costs are all one, the ``beta`` given."""
    costs = np.log(np.maximum([e.cost for e in ended], 1e-12))
    seconds = np.log(np.maximum([e.seconds for e in ended], 1e-3))
    if np.ptp(costs) > 1e-9:
        beta = float(np.clip(np.polyfit(costs, seconds, 1)[0], 0.0, 1.0))
    return float(np.mean(seconds - beta * costs)), beta


def _log_at(fit: tuple[float, float], cost: float) -> float:
    return fit[0] + fit[1] * float(np.log(max(cost, 1e-12)))
