"""A cell's pilot for `vitsweep plan`: a few models trained here as its strategy says
(``Strategy.pilots``), cut after an allowance, and the steps each took to stop, is foreseen to, or
is guessed to (``Pilot``): the world its search is then played out in (services.estimate.rehearse)."""

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from services.estimate.rehearse import Seen
from services.estimate.timing import TRIAL_S, Probe, train

if TYPE_CHECKING:
    from services.results import Cell
    from services.spec import PilotRun, Sweep

# A pilot that by then has seen none of its models stop, and must guess some (one pass: not at zero
# test error), goes on up to BLIND x its allowance: each guess lies between the cut and a budget up to
# three decades above it. Cut at 3 s, sample_complexity_wide's ViT pilots (step 6-14 of 2,000-45,255)
# put its plan 2.06x above its sweep; going on only until one model reached zero test error, arms'
# two never-confirming cells foresaw runs of zero error that broke (2.5x under its sweep)
BLIND = 10


@dataclass(frozen=True)
class Pilot:
    """Each of a pilot's models' steps to stop: seen (it settled, its window confirmed, it diverged
    or spent its budget), foreseen (one pass, cut inside a run of zero test error that began at
    step s: its window of W confirms at W·s if that run holds), or cut at step L otherwise: a
    guess, the mean of a log-uniform law between the soonest it can stop and its budget b, L (one
    pass: W·L, where a run of zero test error begun after L confirms at the soonest). Nothing the
    pilot sees stops past there: counting such runs as the foreseen ones' stops put
    sample_complexity_arms 3.6x under its sweep (those runs of zero error broke), at their budget
    11 of 29 specs' expectations 2.5-25x above theirs."""

    steps: tuple[float, ...]
    seen: int
    foreseen: int
    cut: int = 0  # the step the pilot was cut at (0: it ran to its end)
    took: float = 0.0  # its seconds
    ran: tuple[int, ...] = ()  # the steps each model took in it
    evaluations: int = 0  # one pass: the evaluations its models took, summed
    soonest: int = 0  # where a model cut at ``cut`` stops at the soonest: the cut (one pass: W x the cut)
    succeeded: tuple[bool | None, ...] = ()  # whether each model ended at zero test error (None: cut)

    @property
    def left(self) -> int:
        """Its models cut neither stopped nor foreseen: those counted at the log-uniform guess."""
        return len(self.steps) - self.seen - self.foreseen

    @property
    def guessed(self) -> bool:
        return self.left > 0

    def evaluation_s(self, rate: "Probe") -> float:
        """A one-pass evaluation's seconds as this run paid them (its models scored on the whole
        test set once error-free on the subset, not scored again while their loss stayed 0): its
        time less its set-up and its steps at ``rate``, over its evaluations. A pilot cut before
        its runs ended saw the cheap early ones only (fig1_grid_one_pass: 0.027 s, where a whole
        pack paid 0.069 s): then at least the probe's, whose models ran on to a limit unwindowed."""
        if not self.evaluations:
            return rate.eval_s
        steps = rate.pack_step_s * max(self.ran) + rate.step_s * sum(self.ran)
        set_up = rate.pack_s - TRIAL_S + len(self.ran) * rate.model_s
        paid = max(0.0, self.took - set_up - steps) / self.evaluations
        return max(paid, rate.eval_s) if self.cut else paid

    @property
    def basis(self) -> str:
        at_zero = f", {self.foreseen} at zero test error (stopping at W x its start)" if self.foreseen else ""
        rest = ""
        if self.guessed:
            soonest = f"step {self.soonest}" if self.soonest != self.cut else "it"
            rest = f", {self.left} cut at step {self.cut} (guessed between {soonest} and their budget)"
        return f"pilot: {self.seen} of {len(self.steps)} stopped{at_zero}{rest}"


def pilot(sweep: "Sweep", cell: "Cell", run: "PilotRun", allowance: float, blind_s: float | None = None) -> Pilot:
    """The models of ``run`` (Strategy.pilots) in one run up to their budget, cut at the first
    evaluation after ``allowance`` seconds, or after ``blind_s`` (default BLIND x the allowance)
    while none of them has stopped and some are guesses (one pass: not at zero test error). One
    run, not a limit doubled: a one-pass run's first steps are the same under any limit, so each
    try repeated the one before."""
    blind_s = BLIND * allowance if blind_s is None else max(allowance, blind_s)
    data, model, _ = sweep.resolved_cell(cell).configs
    training = run.training
    models = run.models
    budget, window, began, cut = training.max_steps, training.stability_window, time.perf_counter(), []

    def out_of_time(step: int, still: int, at_zero: int) -> bool:
        blind = still == models and at_zero < still  # no model stopped, some not even at zero test error
        if still and time.perf_counter() - began >= (blind_s if blind else allowance):
            cut.append(step)
        return bool(cut)

    one_pass = training.protocol == "one_pass"
    lr, n = list(run.lr) if run.lr else None, list(run.n) if run.n else None
    took, result = train(sweep, cell, (data, model, training), budget, models, progress=out_of_time, lr=lr, n=n)
    ran = tuple(int(s) for s in result.steps)
    evaluations = sum(int((result.eval_steps <= s).sum()) for s in ran) if one_pass else 0
    steps = result.steps.astype(float)
    running = (result.steps == cut[0]) & ~result.settled & ~result.diverged if cut else np.zeros(models, bool)
    streak = result.streak_start
    foreseen = running & (streak > 0) & (window > 0) & one_pass
    steps[foreseen] = np.minimum(budget, np.maximum(steps[foreseen], np.ceil(window * streak[foreseen])))
    cut_at = cut[0] if cut else 0
    soonest = min(budget, math.ceil(window * cut_at)) if one_pass and window > 0 else cut_at
    steps[running & ~foreseen] = _log_uniform_mean(soonest, budget)
    seen = int((~running).sum())
    succeeded = tuple(None if going else bool(ok) for ok, going in zip(result.success, running))
    return Pilot(tuple(steps.tolist()), seen, int(foreseen.sum()), cut_at, took, ran, evaluations, soonest, succeeded)


def seen(sweep: "Sweep", cell: "Cell", run: "PilotRun", tried: Pilot) -> list[Seen]:
    """The pilot's models as the world of its search sees them: each one's setting and steps."""
    training, resolved = run.training, sweep.resolved_cell(cell)
    count = len(tried.steps)
    lrs = run.lr or (training.lr,) * count
    ns = run.n or (None if resolved.one_pass else max(resolved.n_values),) * count
    told = tried.succeeded or (None,) * count
    return [Seen(training.batch_size, lr, n, steps, ok) for lr, n, steps, ok in zip(lrs, ns, tried.steps, told)]


def _log_uniform_mean(low: float, high: float) -> float:
    """The mean of a log-uniform law on [low, high]."""
    return (high - low) / math.log(high / low) if high > low > 0 else high
