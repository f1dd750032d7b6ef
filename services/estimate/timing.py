"""What a step of a cell costs here, timed before a sweep runs (`vitsweep plan`): a pack's step is
a + b·k with k models in it (``probe``), a one-pass evaluation apart, the step costs the bound
counts at the smallest batch a cell may reach (``most_probe``), trials side by side on one GPU
(``sharing``), and the slots a machine gives a spec."""

import dataclasses
import functools
import json
import math
import multiprocessing
import os
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import numpy as np

if TYPE_CHECKING:
    from services.results import Cell
    from services.spec import Sweep

# Ray Tune's own cost per trial (suggest, start on a reused actor, report), from trials that train
# nothing through services.execution.ray_tune.run_sweep on 2 slots
TRIAL_S = 0.05
TIMING_S = 0.5  # a step time is measured once the last try took this much longer than the first
FIRST_TRY = 10  # steps of the first try that times a step
EVAL_MODELS = 4  # models of the tries that time an evaluation (``_evaluation_s``, ``_scoring_s``)
UNMOVED = 1e-6  # the step size's scale in the try that times a multi-pass evaluation: no model settles
SCORED = 8  # multi-pass evaluations timed between that try's ends, one every other step
# Multi-pass steps are timed on training sets of at most TIMED_N samples: a batch is drawn from its
# set at the same cost whatever the set's size (TrainSets.batch), and making linear_fails' sets of
# 20,000 samples took 6 s of each of its tries (a plan of 43 s). A pack's own cost, which grows
# with its sets, is then timed at the grid's largest N (``_slope``).
TIMED_N = 2048
T = TypeVar("T")
SIDE_BY_SIDE_S = 300.0  # the longest ``sharing``'s processes wait for each other to start (spawned, each imports torch)


def timed_configs(sweep: "Sweep", cell: "Cell") -> tuple:
    """The cell's configs as its steps are timed: its first pilot's (a tuned cell at its grid's
    smallest batch size and middle step size, over its sample budget)."""
    data, model, _ = sweep.resolved_cell(cell).configs
    return data, model, sweep.strategy.pilots(sweep, cell, 1)[0].training


def local_slots(sweep: "Sweep") -> int:
    """Trials this machine runs at once: its CPUs (GPUs, where a trial asks for one) over a trial's."""
    import torch  # noqa: PLC0415  (torch loads on use)

    return slots_of(sweep, os.cpu_count() or 1, torch.cuda.device_count())


def slots_of(sweep: "Sweep", cpus: float, gpus: float) -> int:
    """Trials that ``cpus`` CPUs and ``gpus`` GPUs run at once under the spec's per-trial resources."""
    r = sweep.resources
    by_gpu = math.floor(gpus / r.gpus_per_trial + 1e-9) if r.gpus_per_trial else math.inf
    return max(1, min(math.floor(cpus / r.cpus_per_trial + 1e-9), by_gpu))


def timing_key(sweep: "Sweep", cell: "Cell", size: int) -> tuple[str, int]:
    """(what a model-step's time depends on but the batch, the batch): the model's kind and shape
    (its fields but the floats, which set values: initial scales, a fixed diagonal, a step size's
    scale; association_sensitivity's 40 cells were timed one by one, its plan 171 s), the data's
    shape, the training's evaluation and test set (not the step size, nor alpha*), and the pack's
    size. One shape's steps at several batches lie on a line (``step_costs_of``)."""
    data, model, training = timed_configs(sweep, cell)
    shape = {name: value for name, value in dataclasses.asdict(model).items() if not isinstance(value, float)}
    kept = dataclasses.asdict(training) | {"lr": None, "max_steps": None, "batch_size": None}
    return json.dumps([cell.model, sweep.sample_cost(cell), shape, kept, size], default=str), training.batch_size


def step_costs_of(sweep: "Sweep", jobs: dict[tuple[str, int], tuple], slots: int) -> dict[tuple, tuple]:
    """Each ``timing_key``'s (``probe``, ``most_probe``) from its job (``step_costs``): a shape timed
    at three batches or more is timed at its smallest and largest alone, the others on the line
    between (a step costs a + b·B; batch_scaling's ten probes, one for each alpha*'s batch, took
    46.9 s, its whole plan, where its sweep took 424 s)."""
    batches: dict[str, list[int]] = {}
    for shape, batch in jobs:
        batches.setdefault(shape, []).append(batch)
    lines = {shape: (min(b), max(b)) for shape, b in batches.items() if len(b) >= 3}
    ends = [k for k in jobs if k[0] not in lines or k[1] in lines[k[0]]]
    timed = dict(zip(ends, side_by_side(step_costs, [jobs[k] for k in ends], sweep, slots)))
    return {k: timed[k] if k in timed else _on_line(timed, k, *lines[k[0]]) for k in jobs}


def _on_line(timed: dict[tuple, tuple], key: tuple[str, int], low: int, high: int) -> tuple:
    """The step costs at ``key``'s batch on the line through those timed at ``low`` and ``high``."""
    shape, batch = key
    t = (batch - low) / (high - low)
    return tuple(
        Probe(*(x + t * (y - x) for x, y in zip(dataclasses.astuple(a), dataclasses.astuple(b))))
        for a, b in zip(timed[shape, low], timed[shape, high])
    )


@dataclass(frozen=True)
class Probe:
    """A pack's step's cost here, ``pack_step_s`` + ``step_s`` x the models still in it (on a
    GPU the first dominates: its steps are launched, not computed), a model's evaluation's, and a
    trial's cost besides its steps, ``pack_s`` + ``model_s`` x its models."""

    step_s: float
    pack_s: float
    pack_step_s: float = 0.0
    eval_s: float = 0.0  # a model's evaluation apart from its steps (multi-pass: one between a run's ends)
    model_s: float = 0.0  # a model's share of a trial's cost besides steps: its data, its first and last scoring


def probe(sweep: "Sweep", cell: "Cell", size: int) -> Probe:
    """A model-step's time in a pack of ``size`` of ``cell`` and in a pack of one (``_slope``):
    a pack's step costs a + b·k with k models in it, and a pack's cost stays a·(its longest
    model's steps) where its models stop early, which a cost per model-step alone misses. Steps
    are timed without evaluations and an evaluation apart: one pass evaluates every step at first
    and ever more rarely after (a geometric grid), and timed together in short tries,
    stability_checks' steps came out 2.5x their cost in a whole run (``_evaluation_s``); multi-pass
    models settle inside the tries, and the scoring of their whole sets as they stop came out as
    steps (fig1_grid_multi_pass_tuned's ViT: 2.9-3.4 ms a model-step, where its sweep's runs,
    their scoring apart, took 1.9 ms; ``_scoring_s``)."""
    data, model, training = timed_configs(sweep, cell)
    quiet = _quiet(training)
    full, pack_s = _slope(sweep, cell, (data, model, quiet), size)
    rate = _split(sweep, cell, (data, model, quiet), size, full, Probe(0.0, pack_s))
    if training.protocol == "one_pass":
        return dataclasses.replace(rate, eval_s=_evaluation_s(sweep, cell, (data, model, training), size))
    return dataclasses.replace(rate, eval_s=_scoring_s(sweep, cell, (data, model, training), rate))


def step_costs(job: tuple) -> tuple[Probe, Probe]:
    """(``probe``, ``most_probe``) of a job (sweep, cell, pack size): a cell's step costs."""
    sweep, cell, size = job
    rate = probe(sweep, cell, size)
    return rate, most_probe(sweep, cell, size, rate)


def side_by_side(work: Callable[[tuple], T], jobs: list[tuple], sweep: "Sweep", slots: int) -> list[T]:
    """Each job's ``work`` on up to ``slots`` processes at once, as a sweep's trials run beside each
    other (forked, one core each: the main job's probes and pilots one after the other took 72 s of
    its 79 s plan), or one after the other in this process where a GPU runs them (CUDA is not
    forked) or Ray was loaded here (a fork copies its gRPC channels: a sweep run after a forked
    plan in one process lost its trials' records)."""
    wide = width(sweep, slots, len(jobs))
    if wide < 2:
        return [work(job) for job in jobs]
    with ProcessPoolExecutor(wide, mp_context=multiprocessing.get_context("fork")) as pool:
        return list(pool.map(work, jobs))  # in order: job i starts once jobs before it have


def width(sweep: "Sweep", slots: int, jobs: int) -> int:
    """The processes ``side_by_side`` runs ``jobs`` on: 1 where they run one after the other."""
    if slots < 2 or jobs < 2 or "ray" in sys.modules or sweep.resources.gpus_per_trial:
        return 1
    return min(slots, jobs)


def _split(sweep: "Sweep", cell: "Cell", configs: tuple, size: int, full: float, rest: Probe) -> Probe:
    """``rest`` with the costs of a pack of ``size`` whose step took ``full`` a model: a pack of
    one timed too, a step's a + b·k and a trial's own cost split into a pack's and a model's share
    (a multi-pass model scores its training and test sets when it starts and stops: timed in
    fig1_grid_multi_pass_tuned's ViT pack of 32, 4.2 s a trial, where its sweep's trials of 4
    took 0.7 s in all)."""
    if size == 1:
        return dataclasses.replace(rest, step_s=full)
    alone, alone_s = _slope(sweep, cell, configs, 1)
    per_model = max(0.0, (size * full - alone) / (size - 1))
    model_s = min(max(0.0, (rest.pack_s - alone_s) / (size - 1)), max(0.0, rest.pack_s - TRIAL_S) / size)
    return dataclasses.replace(
        rest,
        step_s=per_model,
        pack_step_s=max(0.0, size * (full - per_model)),
        pack_s=max(TRIAL_S, rest.pack_s - size * model_s),  # at least TRIAL_S, which rounding can undercut
        model_s=model_s,
    )


def most_probe(sweep: "Sweep", cell: "Cell", size: int, rate: Probe) -> Probe:
    """The step costs the bound counts a cell's steps at: ``rate``'s, or a tuned one-pass cell's at
    the smallest batch its extensions may reach below its grid's (``TuningStrategy.most_steps`` counts its
    runs in those steps: timed at the grid's smallest, 8x the steps of sample_complexity_arms' B = 8
    at B = 1 made its bound 18x, where a step at B = 1 took a seventh of one at B = 8). A run's cost,
    budget / B steps of a + b·B each, is the largest at the smallest B."""
    data, model, training = timed_configs(sweep, cell)
    smallest = sweep.strategy.smallest_batch(sweep, cell)
    if smallest >= training.batch_size:
        return rate
    quiet = _quiet(training.at_batch(smallest))
    full, pack_s = _slope(sweep, cell, (data, model, quiet), size)
    timed = _split(sweep, cell, (data, model, quiet), size, full, Probe(0.0, pack_s))
    least = smallest / training.batch_size  # a + b·B: never below the grid's cost a sample
    return Probe(
        max(timed.step_s, rate.step_s * least),
        timed.pack_s,
        max(timed.pack_step_s, rate.pack_step_s * least),
        rate.eval_s,
        timed.model_s,
    )


def _quiet(training):
    """The training's steps alone: no evaluation between the ends; one pass with a test set of
    one (scoring a test set in full once a model is error-free on its subset made
    stability_checks' 160 steps 6.0 s where 80 took 1.1 s), multi-pass with its own, which each
    of its models scores as it starts and stops (``Probe.model_s``)."""
    if training.protocol != "one_pass":
        return dataclasses.replace(training, eval_every=10**9)
    return dataclasses.replace(training, eval_every=10**9, stability_window=0.0, n_test=1, eval_subset=1)


def gpu_share(sweep: "Sweep", slots: int) -> int:
    """Trials that train on one GPU at once here: 1 where each has a GPU of its own, or none is used."""
    import torch  # noqa: PLC0415  (torch loads on use)

    r = sweep.resources
    if not 0 < r.gpus_per_trial < 1 or not torch.cuda.is_available():
        return 1
    return max(1, min(slots, math.floor(1 / r.gpus_per_trial + 1e-9)))


def sharing(sweep: "Sweep", cell: "Cell", size: int, share: int) -> float:
    """How much longer a pack of ``size`` of ``cell`` takes its steps when ``share`` trials train
    on one GPU at once, each in its own process as Ray's are, than alone (its set-up apart: a
    pack of one step). Their kernels take turns: on an H100, eight of the main job's packs of 16
    took 17.2 ms a step each, one alone 3.7 ms (4.6x), and the plan, timing one alone, had
    expected the main job 3.0x under its sweep there."""
    data, model, training = timed_configs(sweep, cell)
    configs = (data, model, _quiet(training))
    _, first = _steps_s(sweep, cell, configs, 20, size)  # the kernels' first launch, then a short run
    limit = min(training.max_steps, max(20, round(20 * 2 * TIMING_S / max(first, 1e-6))))  # ~1 s alone
    spawn = multiprocessing.get_context("spawn")  # CUDA is not forked
    with spawn.Manager() as manager, ProcessPoolExecutor(share, mp_context=spawn) as pool:
        ready = manager.Barrier(share)
        started = [pool.submit(_beside, sweep, cell, configs, limit, size, ready) for _ in range(share)]
        beside = [each.result() for each in started]
    alone = _steps_s(sweep, cell, configs, limit, size)[1]
    return max(1.0, float(np.mean(beside)) / alone) if alone > 0 else 1.0


def _steps_s(sweep: "Sweep", cell: "Cell", configs: tuple, limit: int, size: int, ready=None) -> tuple[float, float]:
    """(a pack's set-up: its seconds for one step, its steps' seconds under ``limit``), the
    latter once the others are ``ready`` where it trains beside them."""
    set_up = train(sweep, cell, configs, 1, size)[0]
    if ready is not None:
        ready.wait(timeout=SIDE_BY_SIDE_S)  # a process that died breaks the barrier, not the plan's wait
    return set_up, max(0.0, train(sweep, cell, configs, limit, size)[0] - set_up)


def _beside(sweep: "Sweep", cell: "Cell", configs: tuple, limit: int, size: int, ready) -> float:
    """One of ``sharing``'s processes: warm, then its steps timed beside the others'."""
    train(sweep, cell, configs, 10, size)
    return _steps_s(sweep, cell, configs, limit, size, ready)[1]


def _scoring_s(sweep: "Sweep", cell: "Cell", configs: tuple, rate: Probe) -> float:
    """Seconds one multi-pass evaluation of a model takes between a run's ends: EVAL_MODELS models
    at a step size UNMOVED times their own (none settles, each scores its test subset at every
    evaluation, as a run that has not settled does) through SCORED evaluations every other step
    (an evaluation costs the same however many steps lie between: at fashion's 500, timing three
    took 24 s), or cut at the first after which they took 2 TIMING_S (fashion_sparsification's,
    0.18 s a model with its nine sparsified test sets, took 7.4 s of its 16 s probe), the time
    from the first to the last of them less their steps at ``rate``, over them. One try, its set-up
    and its end (which scores whole sets) left out: two tries' difference measured transfer's
    pre-training noise (its evaluations every 100 steps: 2,613 s expected where its sweep took
    95), and linear_fails' tries cost 6 s of set-up each."""
    data, model, training = configs
    size, every, marks = EVAL_MODELS, 2, []
    limit = min(training.max_steps, every * (SCORED + 1))
    lr, often = [training.lr * UNMOVED] * size, dataclasses.replace(training, eval_every=every)

    def mark(*_) -> bool:
        marks.append(time.perf_counter())
        return marks[-1] - marks[0] >= 2 * TIMING_S

    n = _timed_n(sweep, cell)
    _, result = train(sweep, cell, (data, model, often), limit, size, progress=mark, lr=lr, n=n and [n] * size)
    ended = int(result.steps.max()) >= limit  # its last evaluation scored whole sets: left out
    scored = len(marks) - 1 - ended
    if scored < 1:
        return 0.0
    steps_s = scored * every * (rate.pack_step_s + size * rate.step_s)
    return max(0.0, marks[scored] - marks[0] - steps_s) / (size * scored)


def evaluations(training, last: int) -> int:
    """The evaluations a run of ``last`` steps pays apart from its steps: one pass, all of them;
    multi-pass, those between its ends (it scores its whole sets at its ends: ``Probe.model_s``)."""
    ends = 0 if training.protocol == "one_pass" else min(2, last + 1)
    return len(training.evaluation_steps(last)) - ends


def batch_steps(batch: int, smallest: int, rates: tuple[Probe, Probe]) -> Callable[[int], tuple[float, float]]:
    """(model-steps, pack-steps) at the cell's ``batch`` that a step at batch B costs as much as,
    from ``rates`` timed at ``batch`` and at ``smallest``: in between, on the line through the two
    (a + b·B); above ``batch``, or where a step there timed at no cost, by its samples (a busy
    machine's pack of one timed slower than a pack of eight a model: a plan then counted 0 steps)."""
    at, least = rates

    def steps(b: int) -> tuple[float, float]:
        t = (b - smallest) / (batch - smallest) if b < batch and smallest < batch else None
        return tuple(
            b / batch if t is None or a <= 0 else (low + t * (a - low)) / a
            for a, low in ((at.step_s, least.step_s), (at.pack_step_s, least.pack_step_s))
        )

    return steps


def evaluations_s(training, eval_s: float) -> Callable[[float], float]:
    """The seconds a run's evaluations take apart from its steps when it stops after s steps,
    ``eval_s`` each (``evaluations``)."""
    counted = functools.cache(lambda last: evaluations(training, last))  # a plan asks for each stop often
    return lambda steps: eval_s * counted(round(steps))


def _evaluation_s(sweep: "Sweep", cell: "Cell", configs: tuple, size: int) -> float:
    """Seconds one one-pass evaluation of a model takes: ``size`` models (EVAL_MODELS at most)
    trained with their evaluations (no window: every model to the limit) and without (``_quiet``),
    under limits doubling from 10 until the first took TIMING_S longer than the second or the tries
    4 TIMING_S in all (its evaluations are then a small part of a run: the example family's, every 10
    steps, doubled to 20,000 steps and 112 s of planning for a 4 s sweep; until one try took 4
    TIMING_S, stability_checks' cheap CNN evaluations took 14 s of a 17 s probe, batch_scaling's
    probes 54 s, its whole plan), that difference over all
    of its evaluations: the steps alone scored a test set of one at the two ends, so the difference
    holds those two too (over the others alone, an evaluation came out 11/9 of its cost at 10
    steps). A model's evaluation costs about as much in a pack of 4 as in the cell's
    (fig1_grid_one_pass' ViT: 0.071 s, 0.069 in its pack of 16, which took 13.9 s of its 31 s probe;
    premises' m = 1,024 ViT: 0.093-0.096 s, 0.074-0.092 in its pack of 8, 0.16-0.17 in a pack of 2);
    fewer steps would see only the cheap first ones (before any model is error-free on its test
    subset: 0.025 s)."""
    data, model, training = configs
    graded, limit = dataclasses.replace(training, stability_window=0.0), min(10, training.max_steps)
    size, spent = min(size, EVAL_MODELS), 0.0
    while True:
        took, _ = train(sweep, cell, (data, model, graded), limit, size)
        quiet_s = train(sweep, cell, (data, model, _quiet(training)), limit, size)[0]
        extra_s, spent = took - quiet_s, spent + took + quiet_s
        if extra_s >= TIMING_S or spent >= 4 * TIMING_S or limit >= training.max_steps:
            break
        limit = min(training.max_steps, 2 * limit)
    return max(0.0, extra_s) / (size * len(graded.evaluation_steps(limit)))


def _slope(sweep: "Sweep", cell: "Cell", configs: tuple, size: int) -> tuple[float, float]:
    """(seconds a model-step, a pack's own seconds) of ``size`` models of ``cell`` (its first seeds
    at its largest N, TIMED_N at most; a tuned cell at its smallest batch size and middle step size) trained under
    step limits growing from 10 (``_next_limit``) until the limit is the budget, its steps stopped
    growing, or the last try took TIMING_S longer than the first. The step's time is the
    slope through the first and the last try, at the cell's own step size (the test set is scored
    only for models that moved); the rest of the last try is the pack's own cost. A slope through
    one try alone counted a pack's set-up and its training-set scoring as steps (linear_fails'
    linear cells: 22-60 ms a model-step against ~0.2 ms in a run). Each try's set-up (its test set,
    its models: Paper B's transfer pre-trains attention there) is left out, up to its first
    evaluation: against its noise, transfer's second cell grew its tries to 253 s of planning."""
    budget, limit, tries = configs[2].max_steps, min(FIRST_TRY, configs[2].max_steps), []
    n = _timed_n(sweep, cell)
    while True:
        marks: list[float] = []
        mark = functools.partial(_mark, marks)
        took, result = train(sweep, cell, configs, limit, size, progress=mark, n=n and [n] * size)
        set_up = max(0.0, marks[0] - (time.perf_counter() - took)) if marks else 0.0
        tries.append((took, took - set_up, int(result.steps.sum())))
        grew = len(tries) == 1 or tries[-1][2] > tries[-2][2]
        gained = tries[-1][1] - tries[0][1]
        if limit >= budget or (len(tries) > 1 and (gained >= TIMING_S or not grew)):
            break
        limit = min(budget, _next_limit(configs[2], tries, limit, size))
    (_, first_s, first), (last_took, last_s, last) = tries[0], tries[-1]
    step_s = (last_s - first_s) / (last - first) if last > first and last_s > first_s else last_s / max(1, last)
    if n:  # its steps timed on smaller sets (TIMED_N): its own cost at the largest, in a try of one step
        last_took, last = train(sweep, cell, configs, 1, size)[0], size
    return step_s, max(0.0, last_took - step_s * last) + TRIAL_S


def _mark(marks: list[float], *_) -> None:
    """A try's ``progress``: the time of each of its evaluations."""
    marks.append(time.perf_counter())


def _timed_n(sweep: "Sweep", cell: "Cell") -> int | None:
    """The N a multi-pass cell's steps are timed at where its grid's largest is above TIMED_N: its
    largest at most TIMED_N, else its smallest (None: at its largest, or one pass)."""
    resolved = sweep.resolved_cell(cell)
    if resolved.one_pass or max(resolved.n_values) <= TIMED_N:
        return None
    return max((n for n in resolved.n_values if n <= TIMED_N), default=min(resolved.n_values))


def _next_limit(training, tries: list[tuple], limit: int, size: int) -> int:
    """The step limit of ``_slope``'s next try. After the first: 8x its limit (multi-pass), or as
    many steps past it as its pace says gain 2 TIMING_S, at most 8x (one pass). Later: the steps past
    the first try grown 2x-8x by what they gained so far, towards 2 TIMING_S (linear_fails' linear
    probes, 6 s of set-up a try, doubled four times in 35 s). One pass counts whole periods of its
    samples' draws (``steps_per_draw``): a step's time repeats with them, and tries 10 and 28 steps
    long, one draw each, made fig1_grid_one_pass' ViT step 0.12 s where runs took 0.18."""
    from vit_core import steps_per_draw  # noqa: PLC0415  (torch loads on use)

    one_pass, first = training.protocol == "one_pass", min(FIRST_TRY, training.max_steps)
    period = steps_per_draw(training.batch_size) if one_pass else 1
    if len(tries) > 1:
        gained = tries[-1][1] - tries[0][1]
        grow = min(8.0, max(2.0, 2 * TIMING_S / gained)) if gained > 0 else 8.0
        return first + period * math.ceil(grow * (limit - first) / period)
    if not one_pass:
        return 8 * limit
    pace = tries[0][1] / max(1, tries[0][2]) * size  # a pack-step's seconds, a draw and the warm-up in it
    periods = math.ceil(2 * TIMING_S / max(pace, 1e-9) / period)
    return first + period * max(1, min(periods, 7 * first // period))


def train(sweep: "Sweep", cell: "Cell", configs: tuple, limit: int, size: int, progress=None, lr=None, n=None):
    """(seconds, PackResult) of ``size`` models of the cell trained at most ``limit`` steps, with
    the threads and device a trial has; multi-pass, each at its ``n`` (default: the grid's largest
    N, the slowest step)."""
    import torch  # noqa: PLC0415  (torch loads on use)

    from vit_core import train_pack  # noqa: PLC0415  (torch loads on use)

    data, model, training = configs
    largest = (
        training.batch_size * limit if training.protocol == "one_pass" else max(sweep.resolved_cell(cell).n_values)
    )
    device = "cuda" if sweep.resources.gpus_per_trial and torch.cuda.is_available() else "cpu"
    threads = torch.get_num_threads()
    torch.set_num_threads(max(1, int(sweep.resources.cpus_per_trial)))
    try:
        began = time.perf_counter()
        tried = dataclasses.replace(training, max_steps=limit)
        seeds = list(range(size))
        result = train_pack(data, model, tried, n or [largest] * size, seeds, lr=lr, device=device, progress=progress)
        return time.perf_counter() - began, result
    finally:
        torch.set_num_threads(threads)
