"""`vitsweep plan`: what a sweep will train and how long it should take, before anything runs.

Per cell: its first round's packs and trainings (a grid's are all it trains; an adaptive search and
tuning add rounds that depend on the results), the most trainings and model-steps its protocol
allows (the budgets: ``max_steps``, the N* search's ``n_max`` and step cap, tuning's caps and
extensions), and the model-steps it is expected to take. A grid with a fixed step count takes
exactly its budget; otherwise the mode says what a run's steps come to in the cell
(``expected_total``: an N* search its grid and one grid step bisected; a tuned one-pass cell its
search played out on its pilot's stops, services.app.rehearsal). Runs that stop early (settled, or
a one-pass window confirmed) take less, by how much only a run shows. So each cell gets a pilot
here (``pilot``: PILOT_MODELS models at the cell's own settings in one run, cut after PILOT_S,
longer while it sees nothing stop, BLIND; a tuned one-pass cell's at its grid's smallest and at its
largest batch size): the steps of each model that stopped; where a one-pass model was cut inside a
run of zero test error, the step its window would confirm; otherwise a guess between the soonest it
can stop (the cut; one pass: W x the cut) and the budget (not a bound, which "at most" is). A
step's time is timed once per kind of cell (``probe``: a pack's step costs a + b·k with k models in
it; a one-pass evaluation apart, at what the cell's pilot paid for its own). The newest finished
sweep of the same name under the home, where there is one, gives the steps per cell and the rate
instead. The wall time on S slots is Ray Tune's own time plus the larger of the work over S and the
longest cell's work over its packs (where trials share a GPU, the work at the pace of packs timed
side by side on it: ``sharing``); the bound ("at most") allows the trials to run IN_SWEEP slower
than timed here. Like the time `run` reports, it counts from Ray Tune's start to the last trial's
end: starting Ray and logging to MLflow (~15 s here) come on top.
"""

import dataclasses
import json
import math
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from services.app.rehearsal import Seen, rehearse
from services.results import SweepResult, model_of
from services.search.planners import first_packs
from services.spec import SweepSpec
from services.store import state
from services.store.files import write_atomic

if TYPE_CHECKING:
    from services.results import Cell

# A sweep's time beside its trials' (its wall time less their time over its slots) without an
# earlier one to learn it from: the smoke sweep's, 2 cores (4.6 s, 2.7 s in trials on 2 slots,
# 2026-11-25; the four other sweeps under 25 s measured 2.5-3.2 s). The 6.0 s it was (issue 31, two
# days of changes before) put the example family's 4-second sweeps 2x over.
START_S = 3.2
# Ray Tune's own cost per trial (suggest, start on a reused actor, report): 40 trials that train
# nothing took 2.1 s on 2 slots, 4 took 1.5 s (2026-11-25, services.execution.ray_tune.run_sweep)
TRIAL_S = 0.05
# How much slower a trial's steps may run inside a sweep than this process times them alone: the
# bound's allowance. association_sensitivity's packs took 16.4 s in the sweep against 12.7 s timed
# (1.29x, 2 cores, 2026-11-25): two trials at once in Ray lose 1.07x, the driver (its live MLflow
# record's figures) and Ray's own processes use ~0.17 of a core beside them.
IN_SWEEP = 1.5
# A cell's pilot is cut after PILOT_S, or PILOT_SHARE of the cell's most work, whichever is less:
# at 1 s (a pack of the cell's own size, its limit doubled) pilots saw few one-pass ViTs' windows
# confirmed, and the budget they were then counted at put 11 of 29 specs' expectations 2.5x-25x
# above their sweeps (docs/performance.md, 2026-11-26)
PILOT_S = 3.0
PILOT_SHARE = 0.1
PILOT_MODELS = 4  # models in a pilot's pack: a small pack takes more steps a second
# A pilot that by then has seen none of its models stop, and must guess some (one pass: not at zero
# test error), goes on up to BLIND x its allowance: each guess lies between the cut and a budget up to
# three decades above it. Cut at 3 s, sample_complexity_wide's ViT pilots (step 6-14 of 2,000-45,255)
# put its plan 2.06x above its sweep; going on only until one model reached zero test error, arms'
# two never-confirming cells foresaw runs of zero error that broke (2.5x under its sweep)
BLIND = 10
TIMING_S = 0.5  # a step time is measured once the last try took this much longer than the first
SIDE_BY_SIDE_S = 300.0  # the longest ``sharing``'s processes wait for each other to start (spawned, each imports torch)


@dataclass(frozen=True)
class CellPlan:
    """One cell's work: first-round packs and trainings, the most it may train, and the model-steps
    (SGD steps summed over its models) expected, with where that expectation comes from."""

    label: str
    packs: int
    trainings: int
    trainings_most: int
    model_steps: int
    model_steps_most: int
    step_s: float  # seconds a model adds to a pack's step here (timed, at the history's rate where there is one)
    basis: str  # where model_steps comes from: "budget" (fixed steps), "history SWEEP_ID" or "pilot: ..."
    pack_s: float = 0.0  # a trial's cost besides its steps: building the pack, its test set, Tune's own
    pack_step_s: float = 0.0  # a pack's step's cost besides its models' (launches, Python): the steps a pack takes
    pack_steps: int = 0  # the steps its packs are expected to take: each pack's, its longest model's
    guessed: bool = False  # its pilot cut a model it could not foresee: its steps are in part a guess
    evals_s: float = 0.0  # one pass: the seconds its models' evaluations are expected to take, apart from steps
    evals_most_s: float = 0.0  # one pass: the most seconds one training's evaluations take
    size: int = 1  # models per pack
    most_step_s: float | None = None  # the bound's step_s, timed at the smallest batch it counts (None: step_s)
    most_pack_step_s: float | None = None  # the bound's pack_step_s, likewise
    rounds_most: int = 1  # the longest chain of its rounds, each waiting for the one before
    steps_most: int = 0  # the most steps one training takes
    later_packs: int = 0  # the packs its later rounds are expected to train (an adaptive search's)

    @property
    def seconds(self) -> float:
        """The cell's expected time on one slot: its model-steps, its packs' steps and its trials."""
        steps = self.model_steps * self.step_s + self.pack_steps * self.pack_step_s + self.evals_s
        return steps + (self.packs + self.later_packs) * self.pack_s

    @property
    def most_s(self) -> float:
        """The most time the cell can take on one slot: every training it may run at its step
        budget, in packs of ``size`` (each round's last pack may be smaller)."""
        step_s, pack_step_s = self.most_rates
        packs = math.ceil(self.trainings_most / self.size) + self.rounds_most
        evals = self.trainings_most * self.evals_most_s
        return self.model_steps_most * step_s + evals + packs * (self.steps_most * pack_step_s + self.pack_s)

    @property
    def chain_s(self) -> float:
        """The most time its chain of rounds can take, each round's longest pack after the other."""
        step_s, pack_step_s = self.most_rates
        pack = self.steps_most * (self.size * step_s + pack_step_s) + self.size * self.evals_most_s
        return self.rounds_most * (self.pack_s + pack)

    @property
    def most_rates(self) -> tuple[float, float]:
        """(a model-step's, a pack-step's seconds) as the bound counts its steps."""
        return (
            self.step_s if self.most_step_s is None else self.most_step_s,
            self.pack_step_s if self.most_pack_step_s is None else self.most_pack_step_s,
        )


@dataclass(frozen=True)
class SweepPlan:
    """A spec's plan: its cells, Ray Tune's own time beside the trials, and the slots this machine gives it."""

    name: str
    cells: list[CellPlan]
    start_s: float
    start_basis: str
    slots: int  # trials this machine runs at once
    share: int = 1  # trials that train on one GPU at once (1: each has its own, or none is used)
    sharing: float = 1.0  # how much slower a step runs beside them than alone, timed here (``sharing``)

    @property
    def work_s(self) -> float:
        return sum(c.seconds for c in self.cells)

    @property
    def guessed_share(self) -> float:
        """The share of the expected work in cells whose steps are a guess (``Pilot``)."""
        return sum(c.seconds for c in self.cells if c.guessed) / self.work_s if self.work_s else 0.0

    @property
    def longest_s(self) -> float:
        """The longest cell's work over its packs: no number of slots makes the sweep shorter."""
        return max((c.seconds / max(1, c.packs) for c in self.cells), default=0.0)

    def wall_s(self, slots: int | None = None) -> float:
        """The expected wall time on ``slots`` trials at once (default: this machine's): start-up,
        then the work spread over the slots, never shorter than the longest cell's share."""
        return self.start_s + max(self.work_s * self.sharing / max(1, slots or self.slots), self.longest_s)

    def most_wall_s(self, slots: int | None = None) -> float:
        """An upper bound of the wall time on ``slots``, its trials up to IN_SWEEP slower than timed
        here: Ray Tune starts a trial whenever a slot is free and a pack is planned, and such a
        schedule of work W with dependent rounds ends within W / slots plus its longest chain
        (Graham, 1966)."""
        most = sum(c.most_s for c in self.cells) / (slots or self.slots)
        chain = max((c.chain_s for c in self.cells), default=0.0)
        return self.start_s + IN_SWEEP * self.sharing * (most + chain)

    def to_dict(self, cluster_slots: int | None = None) -> dict:
        cluster = {
            "cluster_slots": cluster_slots,
            "cluster_wall_s": round(self.wall_s(cluster_slots), 1),
            "cluster_most_wall_s": round(self.most_wall_s(cluster_slots), 1),
        }
        return {
            "name": self.name,
            "cells": [dataclasses.asdict(c) | {"seconds": round(c.seconds, 2)} for c in self.cells],
            "trainings": sum(c.trainings for c in self.cells),
            "trainings_most": sum(c.trainings_most for c in self.cells),
            "model_steps": sum(c.model_steps for c in self.cells),
            "model_steps_most": sum(c.model_steps_most for c in self.cells),
            "work_s": round(self.work_s, 1),
            "longest_s": round(self.longest_s, 1),
            "start_s": self.start_s,  # unrounded, as each cell's rates: ``load`` rebuilds the plan from them
            "start_basis": self.start_basis,
            "slots": self.slots,
            "share": self.share,
            "sharing": self.sharing,
            "wall_s": round(self.wall_s(), 1),
            "guessed_share": round(self.guessed_share, 3),
            "most_wall_s": round(self.most_wall_s(), 1),
            **(cluster if cluster_slots else {}),
        }


def local_slots(spec: "SweepSpec") -> int:
    """Trials this machine runs at once: its CPUs (GPUs, where a trial asks for one) over a trial's."""
    import torch

    return slots_of(spec, os.cpu_count() or 1, torch.cuda.device_count())


def slots_of(spec: "SweepSpec", cpus: float, gpus: float) -> int:
    """Trials that ``cpus`` CPUs and ``gpus`` GPUs run at once under the spec's per-trial resources."""
    r = spec.resources
    by_gpu = math.floor(gpus / r.gpus_per_trial + 1e-9) if r.gpus_per_trial else math.inf
    return max(1, min(math.floor(cpus / r.cpus_per_trial + 1e-9), by_gpu))


def make_plan(spec: "SweepSpec", home: Path, slots: int, pilot_s: float = PILOT_S) -> SweepPlan:
    """The spec's plan on ``slots`` trials at once, from its history under ``home`` and a pilot of
    each cell here, cut after ``pilot_s`` at most."""
    earlier = _earlier(spec, home)
    steps_by_cell = {c.cell.key: _model_steps(c.records) for c in earlier.cells} if earlier else {}
    first = first_packs(spec, slots)
    timed: dict[str, tuple[Probe, Probe]] = {}  # a step's costs, and as the bound counts them
    cells = []
    for index, cell in enumerate(spec.cells):
        trainings, most, per_model = _budget(spec, cell)
        cell_packs = sum(p.cell == index for p in first) or math.ceil(trainings / spec.resources.models_per_pack)
        size = max(1, min(spec.resources.models_per_pack, math.ceil(trainings / cell_packs)))
        later = spec.mode.expected_trainings(spec, cell) - trainings  # a later round trains one N of each seed
        key = _timing_key(spec, cell, size)
        if key not in timed:
            rate = probe(spec, cell, size)
            timed[key] = rate, most_probe(spec, cell, size, rate)
        rate, most_rate = timed[key]
        history = (earlier.sweep_id, steps_by_cell[cell.key]) if cell.key in steps_by_cell else None
        expected = _expectation(spec, index, size, (rate, most_rate), history, pilot_s)
        cells.append(
            CellPlan(
                label=cell.label,
                packs=cell_packs,
                trainings=trainings,
                trainings_most=most,
                model_steps=expected.model_steps,
                model_steps_most=most * per_model,
                step_s=rate.step_s,
                basis=expected.basis,
                pack_s=rate.pack_s,
                pack_step_s=rate.pack_step_s,
                pack_steps=round(expected.pack_steps),
                guessed=expected.guessed,
                evals_s=expected.evals_s,
                evals_most_s=expected.evals_most_s,
                size=size,
                most_step_s=most_rate.step_s,
                most_pack_step_s=most_rate.pack_step_s,
                rounds_most=spec.mode.most_rounds(spec, cell),
                steps_most=per_model,
                later_packs=(
                    math.ceil(later / min(size, spec.seeds))
                    if expected.packs is None
                    else max(0, round(expected.packs) - cell_packs)
                ),
            )
        )
    if earlier and earlier.train_s and earlier.trainings and not earlier.cache_hits:
        cells = _at_measured_rate(cells, earlier, steps_by_cell, {c.label: c.key for c in spec.cells})
    start_s, start_basis = START_S, "assumed: the smoke sweep's on 2 cores"
    if earlier and earlier.slots and earlier.trainings and not earlier.cache_hits:
        start_s, start_basis = max(0.0, earlier.wall_s - earlier.train_s / earlier.slots), f"history {earlier.sweep_id}"
    share, slowed = gpu_share(spec, slots), 1.0
    if share > 1 and cells:
        heaviest = max(range(len(cells)), key=lambda i: cells[i].seconds)
        slowed = sharing(spec, spec.cells[heaviest], cells[heaviest].size, share)
    return SweepPlan(spec.name, cells, start_s, start_basis, slots, share, slowed)


@dataclass(frozen=True)
class Expectation:
    """What a cell is expected to train, and where that comes from (``CellPlan``'s fields of the same names)."""

    model_steps: int
    pack_steps: float
    evals_s: float
    evals_most_s: float
    basis: str
    guessed: bool = False
    packs: float | None = None  # every pack it is expected to train, where its search was played out


def _expectation(
    spec: "SweepSpec",
    index: int,
    size: int,
    rates: tuple["Probe", "Probe"],
    history: tuple[str, int] | None,
    pilot_s: float,
) -> Expectation:
    """A cell's expected work at ``rates`` (a step's costs, and at the smallest batch the bound
    counts): every run at its budget where none stops early, else the model-steps an earlier sweep
    recorded (``history``: its id and their sum), else a pilot's (a tuned one-pass cell: its
    search played out on the pilot's stops, ``_rehearsed``)."""
    cell, rate = spec.cells[index], rates[0]
    trainings, most, per_model = _budget(spec, cell)
    graded = _piloted(spec, cell)[2]
    evals = _evaluations(graded, rate.eval_s)
    if not _stops_early(spec, cell) and (spec.mode.fixed or history is None):
        expected = min(most * per_model, round(spec.mode.expected_total(spec, cell, (per_model,))))
        evals_s = spec.mode.expected_total(spec, cell, (per_model,), evals)
        return Expectation(expected, expected / size, evals_s, evals(per_model), "budget")
    if history is not None:
        sweep_id, expected = history
        each = (expected / max(1, spec.mode.expected_trainings(spec, cell)),)
        evals_s = spec.mode.expected_total(spec, cell, each, evals)
        # its packs' steps are not recorded: as if they stayed full
        return Expectation(expected, expected / size, evals_s, evals(per_model), f"history {sweep_id}")
    allowance = min(pilot_s, PILOT_SHARE * most * per_model * (rate.step_s + rate.pack_step_s / size))
    tried = pilot(spec, cell, min(PILOT_MODELS, trainings), allowance)
    evals = _evaluations(graded, tried.evaluation_s(rate))
    if spec.tuning is not None and spec.resolved_cell(cell).one_pass:
        largest = max(spec.tuning_of(cell.model).batch_size or [graded.batch_size])
        tried_at = {graded.batch_size: tried}
        # a run's samples to stop change with B (the main job's ViT at 0.15: 5,120 at B = 32, > 10,400 at 8)
        if largest != graded.batch_size:
            tried_at[largest] = pilot(spec, cell, min(PILOT_MODELS, trainings), allowance, largest)
        return _rehearsed(spec, index, tried_at, rates, evals)
    expected = min(most * per_model, round(spec.mode.expected_total(spec, cell, tried.steps)))
    # a pack steps until its longest model stops: every training as long as the pilot's longest
    pack_steps = min(most * per_model, spec.mode.expected_total(spec, cell, (max(tried.steps),))) / size
    evals_s = spec.mode.expected_total(spec, cell, tried.steps, evals)
    return Expectation(expected, pack_steps, evals_s, evals(per_model), tried.basis, tried.guessed)


def _rehearsed(
    spec: "SweepSpec",
    index: int,
    tried_at: dict[int, "Pilot"],
    rates: tuple["Probe", "Probe"],
    evals: Callable[[float], float],
) -> Expectation:
    """A tuned one-pass cell's expected work: the mean over its search's rehearsals
    (services.app.rehearsal) on the stops of its pilots (one per batch size: the grid's smallest,
    at which ``rates`` were timed, and its largest), each pack at its own batch's step costs, its
    runs' evaluations at ``evals``."""
    cell, rate = spec.cells[index], rates[0]
    batch = min(tried_at)
    cost = _batch_costs(batch, spec.mode.smallest_batch(spec, cell), rates)
    seen = []
    for b, tried in tried_at.items():
        lrs = _step_sizes(spec, cell, len(tried.steps)) or [_piloted(spec, cell, b)[2].lr] * len(tried.steps)
        seen += [Seen(b, lr, steps * b) for lr, steps in zip(lrs, tried.steps)]
    worlds = rehearse(spec, index, seen)
    model_s = pack_s = evals_s = 0.0
    for trained in (t for world in worlds for t in world):
        model, pack = cost(trained.batch_size)
        model_s += model * sum(trained.steps)
        pack_s += pack * max(trained.steps)
        evals_s += sum(evals(s) for s in trained.steps)
    draws = len(worlds)
    return Expectation(
        round(model_s / draws / rate.step_s) if rate.step_s else 0,
        pack_s / draws / rate.pack_step_s if rate.pack_step_s else 0.0,
        evals_s / draws,
        evals(_budget(spec, cell)[2]),
        "; ".join(f"at B = {b}, {tried.basis}" for b, tried in tried_at.items())
        + f"; its search played out in {draws} draws of them",
        any(tried.guessed for tried in tried_at.values()),
        sum(map(len, worlds)) / draws,
    )


def _batch_costs(batch: int, smallest: int, rates: tuple["Probe", "Probe"]) -> Callable[[int], tuple[float, float]]:
    """(a model-step's, a pack-step's seconds) at batch size B, from ``rates`` timed at ``batch``
    and at ``smallest``: in between, on the line through the two (a + b·B); above ``batch``, its
    cost a sample (nothing was timed there: as the expectation has always counted a larger batch)."""
    at, least = rates

    def cost(b: int) -> tuple[float, float]:
        if b >= batch:  # below it only where the smallest reachable batch lies below it, timed apart
            return at.step_s * b / batch, at.pack_step_s * b / batch
        t = (b - smallest) / (batch - smallest)
        return (
            least.step_s + t * (at.step_s - least.step_s),
            least.pack_step_s + t * (at.pack_step_s - least.pack_step_s),
        )

    return cost


def _evaluations(training, eval_s: float) -> Callable[[float], float]:
    """The seconds a one-pass run's evaluations take when it stops after s steps, ``eval_s`` each
    (multi-pass: none apart, its step's time holds them)."""
    if training.protocol != "one_pass":
        return lambda steps: 0.0
    return lambda steps: eval_s * len(training.evaluation_steps(round(steps)))


def _timing_key(spec: "SweepSpec", cell: "Cell", size: int) -> str:
    """What a model-step's time depends on: the model's kind and shape (its fields but the floats,
    which set values: initial scales, a fixed diagonal, a step size's scale; association_sensitivity's
    40 cells were timed one by one, its plan 171 s), the data's shape, the training's batch,
    evaluation and test set (not the step size, nor alpha*), and the pack's size."""
    data, model, training = _piloted(spec, cell)
    shape = {name: value for name, value in dataclasses.asdict(model).items() if not isinstance(value, float)}
    kept = dataclasses.asdict(training) | {"lr": None, "max_steps": None}
    return json.dumps([cell.model, spec.sample_cost(cell), shape, kept, size], default=str)


def _at_measured_rate(cells: list[CellPlan], earlier: SweepResult, steps: dict[str, int], keys: dict[str, str]):
    """The cells' step times scaled so that the earlier sweep's recorded steps take the training
    time it measured: the pilots keep the ratios between cells, the history sets the rate (a short
    pilot evaluates more often per step than a long run does)."""
    piloted = sum(c.seconds - (c.packs + c.later_packs) * c.pack_s for c in cells if keys[c.label] in steps)
    scale = earlier.train_s / piloted if piloted else 1.0
    rates = ("step_s", "pack_step_s", "evals_s", "evals_most_s", "most_step_s", "most_pack_step_s")
    return [dataclasses.replace(c, **{r: getattr(c, r) and getattr(c, r) * scale for r in rates}) for c in cells]


def _earlier(spec: "SweepSpec", home: Path) -> SweepResult | None:
    """The newest finished sweep under ``home`` of a spec of this name (ids are NAME-DATE-TIME[-K])."""
    for sweep_id, _ in state.markers(home):
        named = re.fullmatch(r"(.+)-\d{8}-\d{6}(-\d+)?", sweep_id)
        if named and named.group(1) == spec.name and (result := state.load_result(home, sweep_id)):
            return result
    return None


def _model_steps(records) -> int:
    """SGD steps a cell's records took: each run's largest, a run being a model (results.model_of)
    trained once under one step budget."""
    runs: dict[tuple, int] = {}
    for r in records:
        run = (model_of(r), r.max_steps)
        runs[run] = max(runs.get(run, 0), r.steps)
    return sum(runs.values())


def _stops_early(spec: "SweepSpec", cell: "Cell") -> bool:
    """Whether the cell's runs may stop before their budget: multi-pass ones once their training
    hinge loss is 0 (a logistic loss never is: Paper B's specs run every step, where their pilots'
    guesses put five grids 2-2.6x under their sweeps), one-pass ones once a window is confirmed."""
    training = spec.resolved_cell(cell).training
    if training.protocol == "multi_pass":
        return training.loss == "hinge"
    return training.stability_window > 0


def _budget(spec: "SweepSpec", cell: "Cell") -> tuple[int, int, int]:
    """(first-round trainings, most trainings, most steps of one training) of a cell, as its search mode counts them."""
    mode = spec.mode
    return mode.first_trainings(spec, cell), mode.most_trainings(spec, cell), mode.most_steps(spec, cell)


@dataclass(frozen=True)
class Probe:
    """A pack's step's cost here, ``pack_step_s`` + ``step_s`` x the models still in it (on a
    GPU the first dominates: its steps are launched, not computed), a model's one-pass
    evaluation's, and the pack's own cost."""

    step_s: float
    pack_s: float
    pack_step_s: float = 0.0
    eval_s: float = 0.0  # one pass: a model's evaluation (its test subset scored), apart from its steps


def probe(spec: "SweepSpec", cell: "Cell", size: int) -> Probe:
    """A model-step's time in a pack of ``size`` of ``cell`` and in a pack of one (``_slope``):
    a pack's step costs a + b·k with k models in it, and a pack's cost stays a·(its longest
    model's steps) where its models stop early, which a cost per model-step alone misses. One
    pass evaluates every step at first and ever more rarely after (a geometric grid), so its
    steps are timed without evaluations and an evaluation apart (``_evaluation_s``): timed
    together in short tries, stability_checks' steps came out 2.5x their cost in a whole run."""
    data, model, training = _piloted(spec, cell)
    quiet = _quiet(training)
    full, pack_s = _slope(spec, cell, (data, model, quiet), size)
    one_pass = training.protocol == "one_pass"
    evals = _evaluation_s(spec, cell, (data, model, training), size, pack_s - TRIAL_S, full) if one_pass else 0.0
    return _split(spec, cell, (data, model, quiet), size, full, Probe(0.0, pack_s, 0.0, evals))


def _split(spec: "SweepSpec", cell: "Cell", configs: tuple, size: int, full: float, rest: Probe) -> Probe:
    """``rest`` with the step costs of a pack of ``size`` whose step took ``full`` a model: a
    pack of one timed too, a + b·k split into a pack's and a model's share."""
    if size == 1:
        return dataclasses.replace(rest, step_s=full)
    alone, _ = _slope(spec, cell, configs, 1)
    per_model = max(0.0, (size * full - alone) / (size - 1))
    return dataclasses.replace(rest, step_s=per_model, pack_step_s=max(0.0, size * (full - per_model)))


def most_probe(spec: "SweepSpec", cell: "Cell", size: int, rate: Probe) -> Probe:
    """The step costs the bound counts a cell's steps at: ``rate``'s, or a tuned one-pass cell's at
    the smallest batch its extensions may reach below its grid's (``Tuned.most_steps`` counts its
    runs in those steps: timed at the grid's smallest, 8x the steps of sample_complexity_arms' B = 8
    at B = 1 made its bound 18x, where a step at B = 1 took a seventh of one at B = 8). A run's cost,
    budget / B steps of a + b·B each, is the largest at the smallest B."""
    data, model, training = _piloted(spec, cell)
    smallest = spec.mode.smallest_batch(spec, cell)
    if smallest >= training.batch_size:
        return rate
    budget = training.batch_size * training.max_steps // smallest
    quiet = dataclasses.replace(_quiet(training), batch_size=smallest, max_steps=budget)
    full, pack_s = _slope(spec, cell, (data, model, quiet), size)
    timed = _split(spec, cell, (data, model, quiet), size, full, Probe(0.0, pack_s))
    least = smallest / training.batch_size  # a + b·B: never below the grid's cost a sample
    return Probe(
        max(timed.step_s, rate.step_s * least),
        timed.pack_s,
        max(timed.pack_step_s, rate.pack_step_s * least),
        rate.eval_s,
    )


def _quiet(training):
    """One pass: the training's steps alone, no evaluation between the ends and a test set of one
    (scoring a test set in full once a model is error-free on its subset made stability_checks'
    160 steps 6.0 s where 80 took 1.1 s). Multi-pass: the training as it is."""
    if training.protocol != "one_pass":
        return training
    return dataclasses.replace(training, eval_every=10**9, stability_window=0.0, n_test=1, eval_subset=1)


def gpu_share(spec: "SweepSpec", slots: int) -> int:
    """Trials that train on one GPU at once here: 1 where each has a GPU of its own, or none is used."""
    import torch

    r = spec.resources
    if not 0 < r.gpus_per_trial < 1 or not torch.cuda.is_available():
        return 1
    return max(1, min(slots, math.floor(1 / r.gpus_per_trial + 1e-9)))


def sharing(spec: "SweepSpec", cell: "Cell", size: int, share: int) -> float:
    """How much longer a pack of ``size`` of ``cell`` takes its steps when ``share`` trials train
    on one GPU at once, each in its own process as Ray's are, than alone (its set-up apart: a
    pack of one step). Their kernels take turns: on an H100, eight of the main job's packs of 16
    took 17.2 ms a step each, one alone 3.7 ms (4.6x), and the plan, timing one alone, had
    expected the main job 3.0x under its sweep there."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    data, model, training = _piloted(spec, cell)
    configs = (data, model, _quiet(training))
    _, first = _steps_s(spec, cell, configs, 20, size)  # the kernels' first launch, then a short run
    limit = min(training.max_steps, max(20, round(20 * 2 * TIMING_S / max(first, 1e-6))))  # ~1 s alone
    spawn = multiprocessing.get_context("spawn")  # CUDA is not forked
    with spawn.Manager() as manager, ProcessPoolExecutor(share, mp_context=spawn) as pool:
        ready = manager.Barrier(share)
        started = [pool.submit(_beside, spec, cell, configs, limit, size, ready) for _ in range(share)]
        beside = [each.result() for each in started]
    alone = _steps_s(spec, cell, configs, limit, size)[1]
    return max(1.0, float(np.mean(beside)) / alone) if alone > 0 else 1.0


def _steps_s(spec: "SweepSpec", cell: "Cell", configs: tuple, limit: int, size: int, ready=None) -> tuple[float, float]:
    """(a pack's set-up: its seconds for one step, its steps' seconds under ``limit``), the
    latter once the others are ``ready`` where it trains beside them."""
    set_up = _train(spec, cell, configs, 1, size)[0]
    if ready is not None:
        ready.wait(timeout=SIDE_BY_SIDE_S)  # a process that died breaks the barrier, not the plan's wait
    return set_up, max(0.0, _train(spec, cell, configs, limit, size)[0] - set_up)


def _beside(spec: "SweepSpec", cell: "Cell", configs: tuple, limit: int, size: int, ready) -> float:
    """One of ``sharing``'s processes: warm, then its steps timed beside the others'."""
    _train(spec, cell, configs, 10, size)
    return _steps_s(spec, cell, configs, limit, size, ready)[1]


def _evaluation_s(spec: "SweepSpec", cell: "Cell", configs: tuple, size: int, fixed_s: float, step_s: float) -> float:
    """Seconds one one-pass evaluation of a model takes: ``size`` models trained with their
    evaluations (no window: every model to the limit) under limits doubling from 10 until they
    took TIMING_S longer than their steps alone would (``fixed_s`` + ``step_s`` a model-step), or
    a try took 4 TIMING_S (its evaluations are then a small part of a run: the example family's,
    every 10 steps, doubled to 20,000 steps and 112 s of planning for a 4 s sweep), that
    difference over the evaluations beyond the two at the ends."""
    data, model, training = configs
    graded, limit = dataclasses.replace(training, stability_window=0.0), min(10, training.max_steps)
    while True:
        took, _ = _train(spec, cell, (data, model, graded), limit, size)
        extra_s = took - fixed_s - step_s * size * limit
        if extra_s >= TIMING_S or took >= 4 * TIMING_S or limit >= training.max_steps:
            break
        limit = min(training.max_steps, 2 * limit)
    evaluations = size * (len(graded.evaluation_steps(limit)) - 2)
    return max(0.0, extra_s) / evaluations if evaluations > 0 else 0.0


def _slope(spec: "SweepSpec", cell: "Cell", configs: tuple, size: int) -> tuple[float, float]:
    """(seconds a model-step, a pack's own seconds) of ``size`` models of ``cell`` (its first seeds
    at its largest N; a tuned cell at its smallest batch size and middle step size) trained under
    step limits growing from 10 until the limit is the budget, its steps stopped growing, or the
    last try took TIMING_S, and half the first try, longer than the first. The step's time is the
    slope through the first and the last try, at the cell's own step size (the test set is scored
    only for models that moved); the rest of the last try is the pack's own cost. A slope through
    one try alone counted a pack's set-up and its training-set scoring as steps (linear_fails'
    linear cells: 22-60 ms a model-step against ~0.2 ms in a run), and a difference of 0.5 s
    beside a set-up of 6 s was that set-up's noise (linear at 32 patches: 3.2 ms)."""
    budget, limit, tries = configs[2].max_steps, min(10, configs[2].max_steps), []
    while True:
        took, result = _train(spec, cell, configs, limit, size)
        tries.append((took, int(result.steps.sum())))
        need = max(TIMING_S, tries[0][0] / 2)  # a difference beyond the set-up's own noise
        grew = len(tries) == 1 or tries[-1][1] > tries[-2][1]
        if limit >= budget or (len(tries) > 1 and (took - tries[0][0] >= need or not grew)):
            break
        limit = min(budget, (2 if took - tries[0][0] >= need / 8 else 8) * limit)  # 8x while set-up dominates
    (first_s, first), (last_s, last) = tries[0], tries[-1]
    step_s = (last_s - first_s) / (last - first) if last > first and last_s > first_s else last_s / max(1, last)
    return step_s, max(0.0, last_s - step_s * last) + TRIAL_S


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
        paid = max(0.0, self.took - (rate.pack_s - TRIAL_S) - steps) / self.evaluations
        return max(paid, rate.eval_s) if self.cut else paid

    @property
    def basis(self) -> str:
        at_zero = f", {self.foreseen} at zero test error (stopping at W x its start)" if self.foreseen else ""
        rest = ""
        if self.guessed:
            soonest = f"step {self.soonest}" if self.soonest != self.cut else "it"
            rest = f", {self.left} cut at step {self.cut} (guessed between {soonest} and their budget)"
        return f"pilot: {self.seen} of {len(self.steps)} stopped{at_zero}{rest}"


def pilot(spec: "SweepSpec", cell: "Cell", models: int, allowance: float, batch: int | None = None) -> Pilot:
    """``models`` models of ``cell`` (as ``probe`` trains them; a tuned cell's at step sizes
    spread over those it tries, at ``batch`` where given, an untuned multi-pass cell's at Ns
    spread over its grid) in one run up to their budget, cut at the first evaluation after
    ``allowance`` seconds, or after BLIND x it while none of them has stopped and some are
    guesses (one pass: not at zero test error). One run, not a limit doubled: a one-pass run's
    first steps are the same under any limit, so each try repeated the one before. At the middle
    step size alone, the pilots of fig1_grid_one_pass_tuned's cells saw a fifth of the steps
    their selections took."""
    configs = _piloted(spec, cell, batch)
    budget, window, began, cut = configs[2].max_steps, configs[2].stability_window, time.perf_counter(), []

    def out_of_time(step: int, still: int, at_zero: int) -> bool:
        blind = still == models and at_zero < still  # no model stopped, some not even at zero test error
        if still and time.perf_counter() - began >= (BLIND * allowance if blind else allowance):
            cut.append(step)
        return bool(cut)

    one_pass = configs[2].protocol == "one_pass"
    lr, n = _step_sizes(spec, cell, models), _sample_sizes(spec, cell, models)
    took, result = _train(spec, cell, configs, budget, models, progress=out_of_time, lr=lr, n=n)
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
    return Pilot(tuple(steps.tolist()), seen, int(foreseen.sum()), cut_at, took, ran, evaluations, soonest)


def _log_uniform_mean(low: float, high: float) -> float:
    """The mean of a log-uniform law on [low, high]."""
    return (high - low) / math.log(high / low) if high > low > 0 else high


def _step_sizes(spec: "SweepSpec", cell: "Cell", models: int) -> list[float] | None:
    """A tuned cell's step sizes spread over ``models`` models, smallest to largest (None: untuned)."""
    if spec.tuning is None or not spec.tuning_of(cell.model).lr:
        return None
    return _spread(spec.tuning_of(cell.model).lr, models)


def _sample_sizes(spec: "SweepSpec", cell: "Cell", models: int) -> list[int] | None:
    """An untuned multi-pass cell's N spread over ``models`` models, smallest to largest, as its
    grid or N* search trains them: a run to zero training loss grows with N, and at the largest N
    alone fig1_grid_multi_pass's ViT pilots counted 2.2-3.6x the model-steps its sweep took. None
    for one pass (its N is the steps it takes) and for a tuned cell: its models go to step sizes,
    at the largest N; paired with Ns as well they saw only short runs, and the two tuned
    multi-pass specs came out 2.4x and 2.9x under (docs/performance.md)."""
    resolved = spec.resolved_cell(cell)
    return None if resolved.one_pass or spec.tuning is not None else _spread(resolved.n_values, models)


def _spread(values, models: int) -> list:
    """``models`` of ``values`` evenly spaced from the smallest to the largest."""
    ordered = sorted(values)
    return [ordered[round(k * (len(ordered) - 1) / max(1, models - 1))] for k in range(models)]


def _piloted(spec: "SweepSpec", cell: "Cell", batch: int | None = None) -> tuple:
    """The cell's configs as its pilot trains them: a tuned cell at its smallest batch size (or
    ``batch``) and middle step size, over its sample budget."""
    data, model, training = spec.resolved_cell(cell).configs
    tuning = spec.tuning_of(cell.model) if spec.tuning is not None else None
    if tuning is not None:
        lrs = sorted(tuning.lr or [training.lr])
        batch = batch or min(tuning.batch_size or [training.batch_size])
        budget = training.batch_size * training.max_steps // batch
        training = dataclasses.replace(training, batch_size=batch, max_steps=budget, lr=lrs[len(lrs) // 2])
    return data, model, training


def _train(spec: "SweepSpec", cell: "Cell", configs: tuple, limit: int, size: int, progress=None, lr=None, n=None):
    """(seconds, PackResult) of ``size`` models of the cell trained at most ``limit`` steps, with
    the threads and device a trial has; multi-pass, each at its ``n`` (default: the grid's largest
    N, the slowest step)."""
    import torch

    from vit_core import train_pack

    data, model, training = configs
    largest = training.batch_size * limit if training.protocol == "one_pass" else max(spec.resolved_cell(cell).n_values)
    device = "cuda" if spec.resources.gpus_per_trial and torch.cuda.is_available() else "cpu"
    threads = torch.get_num_threads()
    torch.set_num_threads(max(1, int(spec.resources.cpus_per_trial)))
    try:
        began = time.perf_counter()
        tried = dataclasses.replace(training, max_steps=limit)
        seeds = list(range(size))
        result = train_pack(data, model, tried, n or [largest] * size, seeds, lr=lr, device=device, progress=progress)
        return time.perf_counter() - began, result
    finally:
        torch.set_num_threads(threads)


def plan_path(spec: "SweepSpec", home: Path) -> Path:
    """Where a spec's latest plan is kept under ``home``: run reads it to report its estimate."""
    return home / "plans" / f"{state.spec_key(spec)}.json"


def save(plan: SweepPlan, spec: "SweepSpec", home: Path) -> None:
    write_atomic(plan_path(spec, home), json.dumps(plan.to_dict()))


def load(spec: "SweepSpec", home: Path) -> SweepPlan | None:
    """The latest plan of this very spec under ``home``, rebuilt from what ``save`` kept (None:
    never planned, or kept in a form this version does not read)."""
    path = plan_path(spec, home)
    if not path.exists():
        return None
    saved = json.loads(path.read_text())
    names = {f.name for f in dataclasses.fields(CellPlan)}
    try:
        cells = [CellPlan(**{k: v for k, v in c.items() if k in names}) for c in saved["cells"]]
        parts = {f.name: saved[f.name] for f in dataclasses.fields(SweepPlan) if f.name in saved.keys() - {"cells"}}
    except (KeyError, TypeError):
        return None
    return SweepPlan(cells=cells, **parts)
