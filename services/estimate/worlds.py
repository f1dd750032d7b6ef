"""Where a cell's runs stop, for `vitsweep plan` (services.estimate.plan): at their budget where none
stops early, as an earlier sweep of the name under the home recorded them, or as the cell's pilots
saw (services.estimate.pilot, run as its strategy says: Strategy.pilots). Its search is then played out
in that world (services.estimate.rehearse)."""

import dataclasses
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from services.estimate.pilot import BLIND, Pilot, pilot, seen
from services.estimate.rehearse import Seen, at_budget
from services.estimate.timing import side_by_side, width
from services.results import SweepResult, model_of
from services.store import state

if TYPE_CHECKING:
    from services.results import Cell
    from services.spec import Sweep

# A cell's pilot is cut after PILOT_S, or PILOT_SHARE of the cell's most work, whichever is less:
# much shorter pilots see few one-pass ViTs' windows confirmed, and counting those runs at their budget
# puts expectations far above their sweeps
PILOT_S = 3.0
PILOT_SHARE = 0.1
PILOT_MODELS = 4  # models in a pilot's pack: a small pack takes more steps a second
# A plan's probes and pilots end within PLAN_PILOTS x the pilot's allowance from its start (24 s at
# the default 3 s: the command within 30 s with its start, its play-out and a pilot's cut at its next
# evaluation), each pilot, blind or not, cut at its share of what is left as it starts: pilots that each
# ran to their own limit made a plan of many cells take minutes
PLAN_PILOTS = 8
# ... but no pilot shorter than LEAST_PILOT x the allowance, however little is left: one cut at its
# first evaluation sees nothing (its world all guesses), and the plan then overruns by that at most
LEAST_PILOT = 0.1
# Where pilots cut short by that deadline left guesses, they run again within a SPENT-th of the
# sweep that first plan expects (plan.make_plan): a plan's expectation lies within about 0.5-2.3x of
# its sweep on every bundled spec (docs/performance.md), so the plan stays within a tenth of the sweep.
# Without it, a spec of many cells whose pilots share the 24 s sees almost nothing and is planned far over
SPENT = 30


@dataclass(frozen=True)
class Basis:
    """Where a cell's world comes from (``CellPlan.basis``), whether in part a guess, and what a
    one-pass evaluation costs there."""

    words: str
    guessed: bool
    eval_s: float
    short: bool = False  # a pilot of it was cut at its share of the plan's time, before its allowance


def worlds_of(
    sweep: "Sweep", cells: list[tuple], pilot_s: float, slots: int, deadline: float
) -> dict[int, tuple[list[Seen], Basis]]:
    """Each cell's world (``cells``: its index, pack size, step costs and history: an earlier
    sweep's id and its records, or None): every run at its budget where none stops early, else the
    runs an earlier sweep recorded, else its pilots' (Strategy.pilots), run side by side on ``slots``
    as a sweep's trials are, all ended by ``deadline`` (``time.monotonic``; ``_pilot_job``)."""
    found, jobs = {}, []
    for index, size, rate, history in cells:
        cell = sweep.cells[index]
        if not stops_early(sweep, cell) and (sweep.strategy.fixed or history is None):
            found[index] = at_budget(sweep, index), Basis("budget", False, rate.eval_s)
        elif history is not None and history[1]:  # a cell an earlier sweep recorded no run of: piloted
            found[index] = _recorded(sweep, cell, history[1]), Basis(f"history {history[0]}", False, rate.eval_s)
        else:
            most = sweep.strategy.most_trainings(sweep, cell) * sweep.strategy.most_steps(sweep, cell)
            allowance = min(pilot_s, PILOT_SHARE * most * (rate.step_s + rate.pack_step_s / size))
            models = min(PILOT_MODELS, sweep.strategy.first_trainings(sweep, cell))
            jobs += [(sweep, index, run, allowance, rate) for run in sweep.strategy.pilots(sweep, cell, models)]
    wide, least = width(sweep, slots, len(jobs)), LEAST_PILOT * pilot_s
    jobs = [(*job, _Turn(len(jobs) - order, wide, deadline, least)) for order, job in enumerate(jobs)]
    tried: dict[int, list] = {}
    for (_, index, run, _, rate, _), (result, short) in zip(jobs, side_by_side(_pilot_job, jobs, sweep, slots)):
        tried.setdefault(index, []).append((run, result, rate, short))
    return found | {index: _piloted(sweep, index, runs) for index, runs in tried.items()}


@dataclass(frozen=True)
class _Turn:
    """A pilot's place in the plan's time: the pilots not yet started as it starts (itself among
    them), the processes they run on, the plan's deadline for them and the least it may take."""

    left: int
    width: int
    deadline: float
    least: float

    def share(self) -> float:
        """Its seconds: what is left to the deadline on ``width`` processes over the pilots still to
        come and those still running beside it (each counted at a share as large as its own)."""
        left_s = (self.deadline - time.monotonic()) * self.width / (self.left + self.width - 1)
        return max(self.least, left_s)


def _pilot_job(job: tuple) -> tuple[Pilot, bool]:
    """A pilot cut at its allowance, and one that has seen nothing stop at BLIND times it, each
    at most its share of the plan's time left (``_Turn``), and whether that share was the shorter."""
    sweep, index, run, allowance, _, turn = job
    share = turn.share()
    return pilot(
        sweep, sweep.cells[index], run, min(allowance, share), min(BLIND * allowance, share)
    ), share < allowance


def _piloted(sweep: "Sweep", index: int, tried: list[tuple]) -> tuple[list[Seen], Basis]:
    """A cell's world from its pilots: each model's setting and steps, and what they say of it."""
    cell = sweep.cells[index]
    words = "; ".join(
        (f"at B = {run.training.batch_size}, " if len(tried) > 1 else "") + p.basis for run, p, _, _ in tried
    )
    eval_s = tried[0][1].evaluation_s(tried[0][2])
    guessed, short = any(p.guessed for _, p, _, _ in tried), any(cut for *_, cut in tried)
    return [s for run, p, _, _ in tried for s in seen(sweep, cell, run, p)], Basis(words, guessed, eval_s, short)


def _recorded(sweep: "Sweep", cell: "Cell", records) -> list[Seen]:
    """An earlier sweep's runs of the cell as a world sees them: each run's setting and steps."""
    batch = sweep.resolved_cell(cell).training.batch_size
    return [
        Seen(r.batch_size or batch, r.lr, None if r.n_stable is not None else r.n_train, r.steps, r.success)
        for r in _runs(records)
    ]


def earlier(sweep: "Sweep", home: Path) -> SweepResult | None:
    """The newest finished sweep under ``home`` of a spec of this name (ids are NAME-DATE-TIME[-K])."""
    for sweep_id, _ in state.markers(home):
        named = re.fullmatch(r"(.+)-\d{8}-\d{6}(-\d+)?", sweep_id)
        if named and named.group(1) == sweep.name and (result := state.load_result(home, sweep_id)):
            return result
    return None


def model_steps(records) -> int:
    """SGD steps a cell's records took: each run's (_runs)."""
    return sum(r.steps for r in _runs(records))


def _runs(records) -> list:
    """A cell's runs, each its record of the most steps, a run being a model (results.model_of)
    trained once under one step budget (one pass records a run at every N it was evaluated at)."""
    runs: dict[tuple, object] = {}
    for r in records:
        key = (model_of(r), r.max_steps)
        if key not in runs or r.steps > runs[key].steps:
            runs[key] = r
    return list(runs.values())


def stops_early(sweep: "Sweep", cell: "Cell") -> bool:
    """Whether the cell's runs may stop before their budget: multi-pass ones once their training
    hinge loss is 0 (a logistic loss never is: Paper B's specs run every step, where their pilots'
    guesses put five grids 2-2.6x under their sweeps), one-pass ones once a window is confirmed."""
    training = sweep.resolved_cell(cell).training
    if training.protocol == "multi_pass":
        return training.loss == "hinge"
    return training.stability_window > 0


def at_measured_rate(cells: list, earlier: SweepResult, steps: dict[str, int], keys: dict[str, str]) -> list:
    """The cells' step times scaled so that the earlier sweep's recorded steps take the training
    time it measured: the pilots keep the ratios between cells, the history sets the rate (a short
    pilot evaluates more often per step than a long run does)."""
    piloted = sum(c.seconds - c.set_up_s for c in cells if keys[c.label] in steps)
    scale = earlier.train_s / piloted if piloted else 1.0
    rates = ("step_s", "pack_step_s", "evals_s", "evals_most_s", "most_step_s", "most_pack_step_s")
    return [dataclasses.replace(c, **{r: getattr(c, r) and getattr(c, r) * scale for r in rates}) for c in cells]
