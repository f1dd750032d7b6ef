"""A sweep's search played out before it runs, for `vitsweep plan`'s expectation: any strategy's
round planner, driven through the RoundPlanner protocol alone (``suggest`` and ``complete``, as
Ray Tune drives it), in a World where each run stops as the pilot model nearest its setting did.

So the plan counts the rounds only results decide (later caps, settings past an edge, an N*
search's bisection, retries, the measurement's seeds that run to the budget) the way the search
takes them, and a new strategy gets an expectation with no code of the plan's. Counting a tuned
cell's first round and its measurement at the soonest stop alone put sample_complexity_arms 3.9x
under its sweep, its runs past the grid a third of it; drawing every run's stop from every pilot
model alike put the main job of then 2.9x over (docs/performance.md).
"""

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from services.results import ModelRecord, trial_metrics
from services.search.packs import Pack
from services.search.rounds import RoundPlanner
from services.spec import Sweep
from vit_core.outcomes import Outcome

DRAWS = 16  # worlds a sweep's search is played out in; the expectation is their mean


@dataclass(frozen=True)
class Seen:
    """One pilot model (or an earlier sweep's run): where it trained and the steps it took to stop,
    or is guessed to (inf: it runs to any budget)."""

    batch_size: int
    lr: float
    n_train: int | None  # multi-pass: its N (one pass: None, its N is the samples it reads)
    steps: float
    succeeded: bool | None = None  # multi-pass: whether it ended at zero test error (None: not seen)


@dataclass(frozen=True)
class Trained:
    """One pack the search trains: its cell, its batch size (None: the cell's) and each model's steps."""

    cell: int
    batch_size: int | None
    steps: tuple[int, ...]


class World:
    """Where each run of a sweep stops: at the steps (one pass: the samples) of the seen model
    nearest its setting, on log scales (|log B ratio| + |log eta ratio| + |log N ratio|), ties
    drawn once per run; a one-pass run confirms its window there when its cap allows it, else
    trains to the cap and stays open. A multi-pass run succeeds from ``succeeds_from`` of its cell
    on (``_succeeds_from``: an N* search then bisects around it, as it will), and has not
    converged where it spends its budget."""

    def __init__(self, sweep: Sweep, seen: dict[int, Sequence[Seen]], rng: np.random.Generator):
        self.sweep, self.seen, self.rng = sweep, seen, rng
        self.stops: dict[tuple, float] = {}
        self.succeeds_from = {index: _succeeds_from(sweep, index, seen[index]) for index in seen}

    def records(self, pack: Pack) -> list[ModelRecord]:
        """What the pack's models would report here."""
        training = pack.training(self.sweep.resolved_cell(self.sweep.cells[pack.cell]).training)
        lrs = pack.lr or (training.lr,) * len(pack.seeds)
        return [self._record(pack, training, n, seed, lr) for n, seed, lr in zip(pack.n_train, pack.seeds, lrs)]

    def _record(self, pack: Pack, training, n: int, seed: int, lr: float) -> ModelRecord:
        one_pass, budget, b = training.protocol == "one_pass", training.steps_for(n), training.batch_size
        stop = self._stop(pack.cell, b, lr, None if one_pass else n, seed)
        if one_pass:
            confirmed = stop <= n and training.stability_window > 0
            steps = min(budget, math.ceil(stop / b)) if math.isfinite(stop) else budget
            n_stable = math.ceil(stop / training.stability_window) if confirmed else -1
            outcome = Outcome.SUCCEEDED if confirmed else Outcome.FAILED
            run = {"n_stable": n_stable, "n_first_zero": n_stable, "censored": not confirmed}
        else:
            steps = min(budget, math.ceil(stop)) if math.isfinite(stop) else budget
            succeeded = n >= self.succeeds_from[pack.cell]
            outcome = Outcome.NOT_CONVERGED if steps >= budget else Outcome.SUCCEEDED if succeeded else Outcome.FAILED
            run = {}
        return ModelRecord(
            n, seed, outcome, lr, outcome == Outcome.SUCCEEDED, False, steps < budget, steps, steps,
            {"test_error": 0.0 if outcome == Outcome.SUCCEEDED else 1.0},
            max_steps=budget, batch_size=b, phase=pack.phase, **run,
        )  # fmt: skip

    def _stop(self, cell: int, batch: int, lr: float, n: int | None, seed: int) -> float:
        """The run's stop in samples (one pass) or steps (multi-pass), drawn once per run."""
        key = (cell, batch, lr, n, seed)
        if key not in self.stops:
            seen = self.seen[cell]
            nearest = seen[self.rng.choice(_nearest(seen, batch, lr, n))]
            self.stops[key] = nearest.steps * nearest.batch_size if n is None else nearest.steps
        return self.stops[key]


def _nearest(seen: Sequence[Seen], batch: int, lr: float, n: int | None) -> np.ndarray:
    """The seen models nearest a run at (batch, lr, n), on log scales."""

    def gap(s: Seen) -> float:
        ns = abs(math.log(s.n_train / n)) if n and s.n_train else 0.0
        return abs(math.log(s.batch_size / batch)) + abs(math.log(s.lr / lr)) + ns

    gaps = np.array([gap(s) for s in seen])
    return np.flatnonzero(gaps <= gaps.min() + 1e-9)


def _succeeds_from(sweep: Sweep, index: int, seen: Sequence[Seen]) -> float:
    """Where a cell's multi-pass runs succeed in a world: from the smallest N at which the seen
    models succeeded at the spec's rate there and at every larger N seen, the geometric middle
    between it and the largest N below it where they did not (where none did not: half of it);
    twice the largest N seen where they failed there; without such models, the middle of the N
    grid's widest step (fig1_grid_multi_pass_tuned's N* is 2, under its grid of 4-256, where
    that middle put it at 8)."""
    told: dict[int, list[bool]] = {}
    for s in seen:
        if s.n_train and s.succeeded is not None:
            told.setdefault(s.n_train, []).append(s.succeeded)
    if not told:
        return _middle_of_widest_step(sweep, index)
    ns = sorted(told)
    good = [sum(told[n]) >= sweep.success_rate * len(told[n]) for n in ns]
    if not good[-1]:
        return 2.0 * ns[-1]
    first = next(i for i in range(len(ns)) if all(good[i:]))
    below = ns[first - 1] if first else ns[0] / 2
    return math.sqrt(below * ns[first])


def _middle_of_widest_step(sweep: Sweep, index: int) -> float:
    """The geometric middle of the widest step of a cell's N grid (its only N where there is one)."""
    grid = sorted(sweep.resolved_cell(sweep.cells[index]).n_values)
    lo, hi = max(zip(grid, grid[1:]), key=lambda pair: pair[1] / pair[0], default=(grid[0], grid[0]))
    return math.sqrt(lo * hi)


def play(planner: RoundPlanner, world: World) -> list[Trained]:
    """The packs ``planner`` has trained once it is done, each trial's records made by ``world``,
    one trial finishing whenever the planner waits (the longest-queued first, as slots free up)."""
    trained, in_flight, count = [], {}, 0
    while True:
        pack = planner.suggest(str(count))
        if pack == RoundPlanner.FINISHED:
            return trained
        if pack is None:
            if not in_flight:
                return trained  # a planner that waits on nothing: nothing more will come
            trial_id, waiting = next(iter(in_flight.items()))
            del in_flight[trial_id]
            records = world.records(waiting)
            trained.append(Trained(waiting.cell, waiting.batch_size, tuple(r.steps for r in records)))
            planner.complete(trial_id, records, trial_metrics(records, max(r.max_steps for r in records)))
            continue
        in_flight[str(count)], count = pack, count + 1


def rehearse(
    sweep: Sweep, make: Callable[[], RoundPlanner], seen: dict[int, Sequence[Seen]], draws: int = DRAWS
) -> list[list[Trained]]:
    """Each of ``draws`` worlds' packs: a fresh planner (``make``) played out where each run
    stops as the seen model nearest it did (per cell, ``seen``)."""
    return [play(make(), World(sweep, seen, np.random.default_rng(draw))) for draw in range(draws)]


def at_budget(sweep: Sweep, index: int) -> list[Seen]:
    """A cell whose runs never stop early: one seen model that runs to any budget."""
    training = sweep.resolved_cell(sweep.cells[index]).training
    return [Seen(training.batch_size, training.lr, None, math.inf)]
