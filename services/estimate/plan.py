"""`vitsweep plan`: what a sweep will train and how long it should take, before anything runs.

Per cell: its first round's packs and trainings, the most trainings and model-steps its protocol
allows (the budgets, from its strategy), and the work it is expected to take: its strategy's round
planner played out (services.estimate.rehearse) in worlds where each run stops as the cell's pilot
models did (services.estimate.pilot: as its strategy pilots it), or as an earlier sweep of the name under
the home did, or at its budget where no run stops early; each pack at the step costs timed here
(services.estimate.timing). The wall time on S slots is Ray Tune's own time plus the larger of the work
over S and the longest cell's work over its packs (where trials share a GPU, at the pace of packs
timed side by side on it); the bound ("at most") allows the trials to run IN_SWEEP slower than
timed here. Like the time `run` reports, it counts from Ray Tune's start to the last trial's end:
starting Ray and logging to MLflow (~15 s here) come on top. docs/performance.md: against sweeps.
"""

import dataclasses
import json
import math
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from services.estimate import worlds
from services.estimate.rehearse import Trained, rehearse
from services.estimate.timing import (
    batch_steps,
    evaluations_s,
    gpu_share,
    sharing,
    step_costs_of,
    timed_configs,
    timing_key,
)
from services.estimate.worlds import PILOT_S
from services.search.planners import first_packs
from services.store import state
from services.store.files import CorruptFile, read_json, write_atomic

if TYPE_CHECKING:
    from services.spec import Sweep

# A sweep's time beside its trials' (its wall time less their time over its slots) without an
# earlier one to learn it from: the smoke sweep's on 2 cores (short sweeps spend 2.5-3.2 s so).
START_S = 3.2
# How much slower a trial's steps may run inside a sweep than this process times them alone: the
# bound's allowance. Packs run ~1.3x slower in a sweep on 2 cores than
# timed alone: two trials at once in Ray lose ~1.07x, the driver and Ray take ~0.17 core.
IN_SWEEP = 1.5


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
    pack_s: float = 0.0  # a trial's cost besides its steps and its models': building the pack, Tune's own
    pack_step_s: float = 0.0  # a pack's step's cost besides its models' (launches, Python): the steps a pack takes
    pack_steps: int = 0  # the steps its packs are expected to take: each pack's, its longest model's
    guessed: bool = False  # its pilot cut a model it could not foresee: its steps are in part a guess
    evals_s: float = 0.0  # the seconds its models' evaluations are expected to take, apart from steps
    evals_most_s: float = 0.0  # the most seconds one training's evaluations take
    size: int = 1  # models per pack
    most_step_s: float | None = None  # the bound's step_s, timed at the smallest batch it counts (None: step_s)
    most_pack_step_s: float | None = None  # the bound's pack_step_s, likewise
    rounds_most: int = 1  # the longest chain of its rounds, each waiting for the one before
    steps_most: int = 0  # the most steps one training takes
    later_packs: int = 0  # the packs its later rounds are expected to train (an adaptive search's)
    model_s: float = 0.0  # a model's share of a trial's cost besides steps (``Probe.model_s``)
    runs: int = 0  # the trainings it is expected to take, every round's

    @property
    def seconds(self) -> float:
        """The cell's expected time on one slot: its model-steps, its packs' steps and its trials."""
        return self.model_steps * self.step_s + self.pack_steps * self.pack_step_s + self.evals_s + self.set_up_s

    @property
    def set_up_s(self) -> float:
        """Its trials' expected cost besides their steps: each pack's own and each model's."""
        return (self.packs + self.later_packs) * self.pack_s + self.runs * self.model_s

    @property
    def most_s(self) -> float:
        """The most time the cell can take on one slot: every training it may run at its step
        budget, in packs of ``size`` (each round's last pack may be smaller)."""
        step_s, pack_step_s = self.most_rates
        packs = math.ceil(self.trainings_most / self.size) + self.rounds_most
        evals = self.trainings_most * (self.evals_most_s + self.model_s)
        return self.model_steps_most * step_s + evals + packs * (self.steps_most * pack_step_s + self.pack_s)

    @property
    def chain_s(self) -> float:
        """The most time its chain of rounds can take, each round's longest pack after the other."""
        step_s, pack_step_s = self.most_rates
        pack = self.steps_most * (self.size * step_s + pack_step_s) + self.size * (self.evals_most_s + self.model_s)
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


def make_plan(sweep: "Sweep", home: Path, slots: int, pilot_s: float = PILOT_S) -> SweepPlan:
    """The spec's plan on ``slots`` trials at once, from its history under ``home`` or a pilot of
    each cell here, cut after ``pilot_s`` at most, probes and pilots within worlds.PLAN_PILOTS x it;
    the cells whose pilots that deadline cut short, leaving guesses, piloted again within a
    worlds.SPENT-th of the sweep the plan then expects, where that ends later."""
    began = time.monotonic()
    deadline = began + worlds.PLAN_PILOTS * pilot_s
    earlier = worlds.earlier(sweep, home)
    cells = _timed(sweep, slots, earlier)
    piloted = [(i, size, rates[0], was) for i, _, size, rates, was in cells]
    found = worlds.worlds_of(sweep, piloted, pilot_s, slots, deadline)
    made = _played(sweep, slots, cells, found, earlier)
    again = [p for p in piloted if found[p[0]][1].guessed and found[p[0]][1].short]
    if again and (longer := began + made.wall_s() / worlds.SPENT) > deadline:
        made = _played(sweep, slots, cells, found | worlds.worlds_of(sweep, again, pilot_s, slots, longer), earlier)
    share, slowed = gpu_share(sweep, slots), 1.0
    if share > 1 and made.cells:
        heaviest = max(range(len(made.cells)), key=lambda i: made.cells[i].seconds)
        slowed = sharing(sweep, sweep.cells[heaviest], made.cells[heaviest].size, share)
    return dataclasses.replace(made, share=share, sharing=slowed)


def _timed(sweep: "Sweep", slots: int, earlier) -> list[tuple]:
    """Each cell's (index, first-round packs, pack size, step costs timed here, history: the
    earlier sweep's id and its records of the cell, or None)."""
    recorded = {c.cell.key: c.records for c in earlier.cells} if earlier else {}
    first, probes, cells = first_packs(sweep, slots), {}, []
    for index, cell in enumerate(sweep.cells):
        trainings = sweep.strategy.first_trainings(sweep, cell)
        packs = sum(p.cell == index for p in first) or math.ceil(trainings / sweep.resources.models_per_pack)
        size = max(1, min(sweep.resources.models_per_pack, math.ceil(trainings / packs)))
        key = timing_key(sweep, cell, size)
        probes.setdefault(key, (sweep, cell, size))
        history = (earlier.sweep_id, recorded[cell.key]) if cell.key in recorded else None
        cells.append((index, packs, size, key, history))
    timed = step_costs_of(sweep, probes, slots)
    return [(index, packs, size, timed[key], history) for index, packs, size, key, history in cells]


def _played(sweep: "Sweep", slots: int, cells: list[tuple], found: dict, earlier) -> SweepPlan:
    """The plan of ``cells`` (``_timed``) with their searches played out in the worlds ``found``,
    at the earlier sweep's measured rate and start where it has them."""
    played = rehearse(
        sweep, lambda: sweep.strategy.make_planner(sweep, slots), {index: seen for index, (seen, _) in found.items()}
    )
    plans = [_cell_plan(sweep, played, *cell[:4], found[cell[0]][1]) for cell in cells]
    steps_by_cell = {c.cell.key: worlds.model_steps(c.records) for c in earlier.cells} if earlier else {}
    if earlier and earlier.train_s and earlier.trainings and not earlier.cache_hits:
        plans = worlds.at_measured_rate(plans, earlier, steps_by_cell, {c.label: c.key for c in sweep.cells})
    start_s, start_basis = START_S, "assumed: the smoke sweep's on 2 cores"
    if earlier and earlier.slots and earlier.trainings and not earlier.cache_hits:
        start_s, start_basis = max(0.0, earlier.wall_s - earlier.train_s / earlier.slots), f"history {earlier.sweep_id}"
    return SweepPlan(sweep.name, plans, start_s, start_basis, slots)


def _cell_plan(sweep, played: list[list[Trained]], index, packs, size, rates, basis: worlds.Basis) -> CellPlan:
    """A cell's plan from its packs in every played world, each pack at its own batch's step costs."""
    cell, (rate, most_rate) = sweep.cells[index], rates
    training = timed_configs(sweep, cell)[2]
    per_model, most = sweep.strategy.most_steps(sweep, cell), sweep.strategy.most_trainings(sweep, cell)
    as_steps = batch_steps(training.batch_size, sweep.strategy.smallest_batch(sweep, cell), rates)
    evals = evaluations_s(training, basis.eval_s)
    model_steps = pack_steps = evals_s = 0.0
    mine = [t for world in played for t in world if t.cell == index]
    for trained in mine:
        model, pack = as_steps(trained.batch_size or training.batch_size)
        model_steps += model * sum(trained.steps)
        pack_steps += pack * max(trained.steps)
        evals_s += sum(evals(s) for s in trained.steps)
    draws = len(played)
    words = basis.words + (f"; its search played out in {draws} draws" if not sweep.strategy.fixed else "")
    return CellPlan(
        label=cell.label,
        packs=packs,
        trainings=sweep.strategy.first_trainings(sweep, cell),
        trainings_most=most,
        model_steps=min(most * per_model, round(model_steps / draws)),
        model_steps_most=most * per_model,
        step_s=rate.step_s,
        basis=words,
        pack_s=rate.pack_s,
        pack_step_s=rate.pack_step_s,
        pack_steps=round(pack_steps / draws),
        guessed=basis.guessed,
        evals_s=evals_s / draws,
        evals_most_s=evals(per_model),
        size=size,
        most_step_s=most_rate.step_s,
        most_pack_step_s=most_rate.pack_step_s,
        rounds_most=sweep.strategy.most_rounds(sweep, cell),
        steps_most=per_model,
        later_packs=max(0, round(len(mine) / draws) - packs),
        model_s=rate.model_s,
        runs=round(sum(len(t.steps) for t in mine) / draws),
    )


def plan_path(sweep: "Sweep", home: Path) -> Path:
    """Where a spec's latest plan is kept under ``home``: run reads it to report its estimate."""
    return home / "plans" / f"{state.spec_key(sweep)}.json"


PLAN_FORMAT = 1  # what save writes: to_dict's keys, and its format


def save(plan: SweepPlan, sweep: "Sweep", home: Path) -> None:
    write_atomic(plan_path(sweep, home), json.dumps({"format": PLAN_FORMAT} | plan.to_dict()))


def load(sweep: "Sweep", home: Path) -> SweepPlan | None:
    """The latest plan of this very spec under ``home``, rebuilt from what ``save`` kept (None:
    never planned, or kept in a form this version does not read)."""
    path = plan_path(sweep, home)
    if not path.exists():
        return None
    try:
        saved = read_json(path, "plan", PLAN_FORMAT, ("cells",))
        names = {f.name for f in dataclasses.fields(CellPlan)}
        cells = [CellPlan(**{k: v for k, v in c.items() if k in names}) for c in saved["cells"]]
        parts = {f.name: saved[f.name] for f in dataclasses.fields(SweepPlan) if f.name in saved.keys() - {"cells"}}
    except (CorruptFile, KeyError, TypeError, AttributeError) as error:  # a cache: passed over, said once
        why = str(error) if isinstance(error, CorruptFile) else f"{path}: a plan in another form ({error!r})"
        warnings.warn(f"{why}; passed over (vitsweep plan makes it again)", stacklevel=2)
        return None
    return SweepPlan(cells=cells, **parts)
