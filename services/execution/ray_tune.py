"""Run a sweep spec as Ray Tune trials, one pack of models per trial, and collect per-cell results.

Each cell's (N, seed) models are cut into packs (services.search.packs), and each pack is one
trial, suggested by the round planner of the sweep's search mode (services.search.planners: the
grid, Optuna's ask and tell, the adaptive N* search, tuning) through one Ray Tune Searcher,
PlanSearcher. Ray does the scheduling, resource accounting, retries (FailureConfig) and trial
state; this module starts the trials (what one runs: services.execution.trial) and reads their
results back. The sweep, resolved into plain configs (Sweep.for_trials), reaches the trials
once, through the object store (tune.with_parameters); a trial's config holds its pack (and an
Optuna sample, with its cell resolved in the driver).
"""

import json
import logging
import math
import os
import pickle
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import ray
from ray import tune
from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback
from ray.tune.search import Searcher

from services import legacy
from services.results import SELECTION, CellResult, ModelRecord, SweepResult, in_spec_order
from services.search.packs import Pack, TrialConfig
from services.search.rounds import RoundPlanner
from services.store import state
from services.store.files import CorruptFile

if TYPE_CHECKING:
    from services.spec import Sweep


def trial_slots(sweep: "Sweep") -> int:
    """How many trials the Ray cluster (already started) can run at once."""
    total = ray.cluster_resources()
    if sweep.resources.gpus_per_trial:
        return max(1, int(total.get("GPU", 0) / sweep.resources.gpus_per_trial))
    return max(1, int(total.get("CPU", 1) / sweep.resources.cpus_per_trial))


def run_sweep(
    sweep: "Sweep",
    sweep_id: str,
    home: Path,
    trainable,
    on_trial_done=None,
    resume: bool = False,
    cache: Path | None = None,
    live=None,
) -> SweepResult:
    """Run every pack of the spec through Ray Tune; Ray must already be started.

    ``on_trial_done(trials_done, trials_failed, models_trained)`` follows progress. A trial that
    raises is retried ``resources.max_failures`` times, then recorded as its cell's failure while
    the other trials go on. ``resume``: continue the sweep's saved Tune state (Tuner.restore):
    finished trials keep their results, unfinished ones run again. ``cache``: the result cache's
    folder (services.store.cache), None for none. ``trainable(config, sweep, cache)``: what a trial
    runs, ``sweep`` its cells as plain configs (services.spec.TrialSweep). ``live``: told as each trial
    starts and ends (``started(cell)``, ``ended(cell, records or None, curve parts)``: services.store.live).
    """
    start, began = time.perf_counter(), time.time()
    storage = (home / "ray").resolve()
    trainable = tune.with_resources(
        tune.with_parameters(trainable, sweep=sweep.for_trials(), cache=str(cache.resolve()) if cache else None),
        {"cpu": sweep.resources.cpus_per_trial, "gpu": sweep.resources.gpus_per_trial},
    )
    path = storage / sweep_id
    run = _RUNS[sweep_id] = _Run(on_trial_done, live, sweep)
    try:
        follow = [_TrialDone(sweep_id)] if on_trial_done or live else []
        restored = resume and _restorable(path)
        if restored:
            with _quiet("ray.tune.analysis.experiment_analysis"):
                tuner = tune.Tuner.restore(str(path), trainable=trainable, resume_unfinished=True, resume_errored=True)
        else:
            tuner = _new_tuner(sweep, trainable, sweep_id, storage, follow)
        with _loggers_as_given(not restored), _without_restore_advice():
            grid = tuner.fit()
    finally:
        _RUNS.pop(sweep_id, None)
    result = _collect(sweep, grid)
    result.search_stopped = not run.ran_to_end
    result.sweep_id, result.wall_s, result.storage = sweep_id, time.perf_counter() - start, str(path)
    result.slots = trial_slots(sweep)
    # a resumed sweep started when its earliest trial did, in an earlier run of the command
    result.started_at = min([began, *(c.started_at for c in result.cells if c.started_at is not None)])
    result.ended_at = time.time()
    return result


def _new_tuner(sweep: "Sweep", trainable, sweep_id: str, storage: Path, callbacks: list) -> tune.Tuner:
    """A Tuner whose trials the round planner of the spec's search mode suggests, as many at once
    as the cluster has trial slots."""
    slots = trial_slots(sweep)
    return tune.Tuner(
        trainable,
        param_space={},
        tune_config=tune.TuneConfig(
            search_alg=PlanSearcher(sweep.mode.make_planner(sweep, slots), sweep_id),
            num_samples=-1,
            # Tune starts a searcher's trials one at a time unless told how many may run at once
            # (a concurrency limit): all the cluster's slots, so a round's packs spread over its nodes
            max_concurrent_trials=slots,
            reuse_actors=True,
            trial_name_creator=_trial_name,
            trial_dirname_creator=_trial_name,
        ),
        run_config=tune.RunConfig(
            name=sweep_id,
            storage_path=str(storage),
            failure_config=tune.FailureConfig(max_failures=sweep.resources.max_failures),
            verbose=0,
            # Tune's own loggers but its TensorBoard one (tensorboardX imports torch into the driver,
            # 4.5 s of a smoke run's 35 here; MLflow is the tracker): see _loggers_as_given
            callbacks=[*callbacks, JsonLoggerCallback(), CSVLoggerCallback()],
        ),
    )


@contextmanager
def _loggers_as_given(given: bool):
    """Tune adds its default loggers (JSON, CSV, TensorBoard) to a tuner's callbacks at fit unless
    told not to; a new tuner names the ones it wants, so it is told. A restored one keeps what its
    saved run config named (an older sweep's none: the defaults then)."""
    name = "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS"
    before = os.environ.get(name)
    if given:
        os.environ[name] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def _collect(sweep: "Sweep", grid: tune.ResultGrid) -> SweepResult:
    """The trials' results by cell (a grid cell, or one Optuna trial's sampled cell), in_spec_order."""
    cells: dict[str, CellResult] = {}
    result = SweepResult("", [], trainings=0, wall_s=0.0, storage="")
    for trial in grid:
        if trial.error is None and "records" not in (trial.metrics or {}):
            result.unfinished += 1  # stopped before it reported (Ctrl-C)
            continue
        own = TrialConfig.of(trial.config)
        pack, cell = own.pack, own.cell(sweep)
        target = cells.setdefault(cell.key, CellResult(cell))
        if trial.error is not None:
            cause = str(trial.error).strip().splitlines()[-1]
            target.failures.append(
                f"{cell.label} n_train={list(pack.n_train)} seeds={list(pack.seeds)}: {cause} (trial log: {trial.path})"
            )
            continue
        target.add(
            [ModelRecord.from_dict(r) for r in json.loads(trial.metrics["records"])], _curve_parts(pack, trial.metrics)
        )
        _note_times(target, trial.metrics)
        result.trainings += trial.metrics["trainings"]
        result.cache_hits += trial.metrics.get("cache_hits", 0)
        result.train_s += trial.metrics.get("pack_wall_s", 0.0)
    if (objective := sweep.mode.objective()) is not None:
        result.best = _best_sample(sweep, grid, *objective)
    result.cells = in_spec_order(cells.values(), sweep.cells)
    return result


def _curve_parts(pack: Pack, metrics: dict) -> list[dict]:
    """The curves a finished trial adds to its cell: none from a retry (its models would count
    twice) or a tuning selection run (not the cell's measured models)."""
    return json.loads(metrics["curves"]) if pack.max_steps is None and pack.phase != SELECTION else []


def _best_sample(sweep: "Sweep", grid: tune.ResultGrid, metric: str, direction: str) -> dict | None:
    """The best trial of a search with an objective: its sampled values and the objective (the
    first of equals in trial order, trials without a finite value left out, as Tune's get_best_result)."""
    sign = 1 if direction == "max" else -1
    done = [t for t in grid if t.error is None and math.isfinite((t.metrics or {}).get(metric, math.nan))]
    if not done:
        return None
    top = max(done, key=lambda trial: sign * trial.metrics[metric])  # max keeps the first of equals
    return {"values": TrialConfig.of(top.config).cell(sweep).values, metric: top.metrics[metric]}


def _note_times(cell: CellResult, metrics: dict) -> None:
    """Widen the cell's [started_at, ended_at] to a trial's: its end (as the trial reported it,
    else Tune's timestamp, in whole seconds) less the trial's running time."""
    if "timestamp" not in metrics or "time_total_s" not in metrics:
        return
    end = float(metrics.get("ended_at", metrics["timestamp"]))
    start = end - float(metrics["time_total_s"])
    cell.started_at = start if cell.started_at is None else min(cell.started_at, start)
    cell.ended_at = end if cell.ended_at is None else max(cell.ended_at, end)


@contextmanager
def _quiet(logger: str):
    """Only errors from ``logger`` while this runs. Tuner.restore reads the result files of every
    restored trial, which Ray copies to storage after the experiment state and in the background:
    a driver killed in between leaves a state whose trials have results (run_sweep reads them
    from it) and no files yet, and Ray warns "Failed to fetch metrics ... FileNotFoundError" for
    each, though nothing is missing."""
    log = logging.getLogger(logger)
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


@contextmanager
def _without_restore_advice():
    """Ray Tune's advice on an interrupted sweep ("Resume experiment with: Tuner.restore(...)")
    left out while this runs: a vitsweep user runs the same command again, as vitsweep's own
    message says (services.app.runs.Interrupted)."""
    log = logging.getLogger("ray.tune.tune")
    advice = lambda record: "Tuner.restore" not in record.getMessage()  # noqa: E731
    log.addFilter(advice)
    try:
        yield
    finally:
        log.removeFilter(advice)


def _restorable(path: Path) -> bool:
    """Whether Tune saved enough of the sweep at ``path`` to restore it: its tuner.pkl, written as
    fit starts, and an experiment state, written once trials run (a driver killed in between
    leaves the first alone, which Tune cannot restore from)."""
    return tune.Tuner.can_restore(str(path)) and state.has_tune_state(path)


def _trial_name(trial) -> str:
    return f"{TrialConfig.of(trial.config).pack.name}_{trial.trial_id}"


def trial_status(path: Path) -> tuple[dict[str, int], int]:
    """A sweep's trials by status in Tune's saved state at ``path``, and the models its finished
    trials trained or read from the cache."""
    try:
        trials = tune.ExperimentAnalysis(str(path.resolve())).trials
    except (ValueError, EOFError, pickle.UnpicklingError) as error:  # JSONDecodeError is a ValueError
        states = sorted(path.glob("experiment_state-*.json")) or [path]
        raise CorruptFile(states[-1], f"Ray Tune's saved state does not read back ({type(error).__name__})") from None
    counts: dict[str, int] = {}
    for trial in trials:
        counts[trial.status] = counts.get(trial.status, 0) + 1
    models = sum(
        (t.last_result or {}).get(key, 0)
        for t in trials
        if t.status == "TERMINATED"
        for key in ("trainings", "cache_hits")
    )
    return counts, models


@dataclass
class _Run:
    """One run of run_sweep, as the searcher and the callback that follow its sweep find it: Tune
    pickles both with the sweep's state, and a restored sweep's are Tune's unpickled copies, which
    look their run up by the sweep's id (_RUNS): a progress function or a live record does not
    pickle. ``ran_to_end``: the search ran to its end (its planner answered FINISHED, in this run
    or, saved with its state, an earlier one); Tune also stops on Ctrl-C between two rounds with
    no trial left unfinished."""

    fn: Callable | None
    live: Any
    sweep: "Sweep | None"
    ran_to_end: bool = False


_RUNS: dict[str, _Run] = {}  # sweep id -> its run in this process, while run_sweep runs it


def _run_of(sweep_id: str | None) -> _Run:
    """The run of sweep ``sweep_id`` (None, a state saved before 2026-12-06: this process's one
    run); a run that follows nothing where this process runs no such sweep (a state only read)."""
    if sweep_id in _RUNS:
        return _RUNS[sweep_id]
    if sweep_id is None and len(_RUNS) == 1:
        return next(iter(_RUNS.values()))
    return _Run(None, None, None)


class PlanSearcher(Searcher):
    """Any search mode's round planner (services.search.rounds.RoundPlanner) as a Ray Tune
    searcher for sweep ``sweep_id``: each suggestion is the trial config of a pack; its state is
    saved with Tune's experiment, and whether the search ran to its end is told to its run (_Run)."""

    def __init__(self, planner: RoundPlanner, sweep_id: str):
        super().__init__(metric="success_rate", mode="max")
        self.search, self.finished, self.sweep_id = planner, False, sweep_id

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(legacy.searcher_attributes(state))

    def suggest(self, trial_id: str) -> dict | str | None:
        pack = self.search.suggest(trial_id)
        if pack == self.search.FINISHED:
            self.finished = _run_of(self.sweep_id).ran_to_end = True
            return Searcher.FINISHED
        return None if pack is None else self.search.trial_config(trial_id, pack).as_config()

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        ok = not error and result and "records" in result
        records = [ModelRecord.from_dict(r) for r in json.loads(result["records"])] if ok else None
        self.search.complete(trial_id, records, result if ok else None)

    def save(self, checkpoint_path: str) -> None:
        Path(checkpoint_path).write_text(json.dumps(self.search.get_state() | {"search_finished": self.finished}))

    def restore(self, checkpoint_path: str) -> None:
        saved = legacy.searcher_state(json.loads(Path(checkpoint_path).read_text()))
        self.finished = _run_of(self.sweep_id).ran_to_end = saved.pop("search_finished")
        self.search.set_state(saved)


class _TrialDone(tune.Callback):
    """Follows the trials of sweep ``sweep_id`` as they start and end: calls its run's
    ``fn(trials_done, trials_failed, models_trained, train_s, running_since)`` (a progress bar or
    progress lines; train_s: the seconds finished trials spent training; running_since: when each
    running trial started, time.monotonic()), and tells its ``live`` (the sweep's live MLflow
    record) each trial's cell and records. Tune pickles its run config with the experiment state:
    its counts are saved, its run (_Run) is looked up again on a restore."""

    def __init__(self, sweep_id: str):
        self.sweep_id = sweep_id
        self.done, self.errored, self.models, self.train_s = 0, 0, 0, 0.0
        self._attach()

    def _attach(self) -> None:
        run = _run_of(self.sweep_id)
        self.fn, self.live, self.sweep, self.running = run.fn, run.live, run.sweep, {}

    def __getstate__(self) -> dict:
        return {name: getattr(self, name) for name in ("sweep_id", "done", "errored", "models", "train_s")}

    def __setstate__(self, saved: dict) -> None:
        self.__dict__.update(legacy.progress_state(saved))
        self._attach()  # trials running when a state was saved start again

    def on_trial_start(self, iteration, trials, trial, **info):
        self.running[trial.trial_id] = time.monotonic()
        if self.live is not None:
            self.live.started(TrialConfig.of(trial.config).cell(self.sweep))
        self._tell()

    def on_trial_complete(self, iteration, trials, trial, **info):
        result = trial.last_result or {}
        self.models += sum(result.get(key, 0) for key in ("trainings", "cache_hits"))
        self.train_s += result.get("pack_wall_s", 0.0)
        if self.live is not None and "records" in result:
            records = [ModelRecord.from_dict(r) for r in json.loads(result["records"])]
            own = TrialConfig.of(trial.config)
            self.live.ended(own.cell(self.sweep), records, _curve_parts(own.pack, result))
        self._count(trial, errored=False)

    def on_trial_error(self, iteration, trials, trial, **info):
        if self.live is not None:
            self.live.ended(TrialConfig.of(trial.config).cell(self.sweep), None)
        self._count(trial, errored=True)

    def _count(self, trial, errored: bool) -> None:
        self.running.pop(trial.trial_id, None)
        self.done += 1
        self.errored += errored
        self._tell()

    def _tell(self) -> None:
        if self.fn is not None:
            self.fn(self.done, self.errored, self.models, self.train_s, list(self.running.values()))
