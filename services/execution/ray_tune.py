"""Run a sweep as Ray Tune trials, one pack of models per trial.

Each cell's (N, seed) models are cut into packs (services.search.packs), and each pack is one
trial, suggested by the round planner of the sweep's strategy (the grid, Optuna's ask and tell,
the adaptive N* search, tuning) through one Ray Tune Searcher, PlanSearcher. Ray does the
scheduling, resource accounting, retries (FailureConfig) and trial state; one Tune callback tells
the sweep's run (services.sweep_run.SweepRun) each trial as it starts and ends, and the run
decodes, learns, follows and gathers. What one trial runs: services.execution.trial. The sweep,
resolved into plain configs (Sweep.for_trials), reaches the trials once, through the object store
(tune.with_parameters); a trial's config holds its pack (and an Optuna sample, with its cell
resolved in the driver).
"""

import logging
import pickle
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import ray
from ray import tune
from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback
from ray.tune.search import Searcher

from services.results import SweepResult
from services.search.packs import TrialConfig
from services.search.rounds import RoundPlanner
from services.store import state
from services.store.files import CorruptFile
from services.sweep_run import SweepRun

if TYPE_CHECKING:
    from services.spec import Sweep


def trial_slots(sweep: "Sweep") -> int:
    """How many trials the Ray cluster (already started) can run at once."""
    total = ray.cluster_resources()
    if sweep.resources.gpus_per_trial:
        return max(1, int(total.get("GPU", 0) / sweep.resources.gpus_per_trial))
    return max(1, int(total.get("CPU", 1) / sweep.resources.cpus_per_trial))


def run_sweep(run: SweepRun, trainable, resume: bool = False, cache: Path | None = None) -> SweepResult:
    """Run every pack of ``run``'s sweep through Ray Tune; Ray must already be started.

    ``run`` (services.sweep_run.SweepRun) follows the trials as they start and end, each decoded
    once, and gathers the result. A trial that raises is retried ``resources.max_failures`` times,
    then recorded as its cell's failure while the other trials go on. ``resume``: continue the
    sweep's saved Tune state (Tuner.restore): finished trials keep their results, unfinished ones
    run again. ``cache``: the result cache's folder (services.store.cache), None for none.
    ``trainable(config, sweep, cache)``: what a trial runs, ``sweep`` its cells as plain configs
    (services.spec.TrialSweep).
    """
    sweep = run.sweep
    storage = (run.home / "ray").resolve()
    trainable = tune.with_resources(
        tune.with_parameters(trainable, sweep=sweep.for_trials(), cache=str(cache.resolve()) if cache else None),
        {"cpu": sweep.resources.cpus_per_trial, "gpu": sweep.resources.gpus_per_trial},
    )
    path, slots = storage / run.sweep_id, trial_slots(sweep)
    run.planner = sweep.strategy.make_planner(sweep, slots)
    searcher, follow = PlanSearcher(run.planner, path), _TrialDone(run)
    if resume and _restorable(path):
        tuner = _restored(path, trainable, searcher, follow)
        run.restored(_finished_trials(path))
    else:
        tuner = _new_tuner(sweep, trainable, run.sweep_id, storage, slots, searcher, follow)
    began = time.time()
    with _without_restore_advice():
        grid = tuner.fit()
    unfinished = sum(1 for trial in grid if trial.error is None and "records" not in (trial.metrics or {}))
    return run.result(unfinished, searcher.finished, slots, path, began)


def _new_tuner(
    sweep: "Sweep", trainable, sweep_id: str, storage: Path, slots: int, searcher: "PlanSearcher", follow
) -> tune.Tuner:
    """A Tuner whose trials ``searcher`` suggests, as many at once as the cluster has trial slots."""
    return tune.Tuner(
        trainable,
        param_space={},
        tune_config=tune.TuneConfig(
            search_alg=searcher,
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
            callbacks=_callbacks(follow),
        ),
    )


def _callbacks(follow: "_TrialDone") -> list[tune.Callback]:
    """The run's follower and Tune's own loggers but its TensorBoard one (tensorboardX imports
    torch into the driver; MLflow is the tracker): services.process tells Tune they are named here."""
    return [follow, JsonLoggerCallback(), CSVLoggerCallback()]


def _restored(path: Path, trainable, searcher: "PlanSearcher", follow: "_TrialDone") -> tune.Tuner:
    """The sweep's saved tuner, with this run's searcher and callbacks: Tune unpickles the ones it
    saved, which hold no run (a progress function or a live record does not pickle), and has no
    public way to give a restored tuner others, so its TunerInternal's are set (Ray 2.60). The
    searcher reads its saved state as the sweep goes on (PlanSearcher.restore)."""
    with _quiet("ray.tune.analysis.experiment_analysis"):
        tuner = tune.Tuner.restore(str(path), trainable=trainable, resume_unfinished=True, resume_errored=True)
    inner = tuner._local_tuner
    inner._tune_config.search_alg = searcher
    inner._run_config.callbacks = _callbacks(follow)
    return tuner


def _finished_trials(path: Path) -> list[tuple[str, dict, dict]]:
    """The trials an earlier run of the sweep at ``path`` finished, as (id, config, result)."""
    with _quiet("ray.tune.analysis.experiment_analysis"):
        trials = tune.ExperimentAnalysis(str(path)).trials
    return [
        (t.trial_id, t.config, t.last_result)
        for t in trials
        if t.status == "TERMINATED" and "records" in (t.last_result or {})
    ]


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


class PlanSearcher(Searcher):
    """A strategy's round planner (services.search.rounds.RoundPlanner) as a Ray Tune searcher:
    each suggestion is the trial config of a pack; the planner's state is saved with Tune's
    experiment. The planner learns of each ended trial from its run (SweepRun.ended), which Tune's
    callback tells after this searcher's on_trial_complete, with the trial's config and its result
    unflattened: decoded once. It names no metric: nothing in Tune ranks the trials, and a trial's
    reports of its step while it trains (services.execution.trial) carry none."""

    def __init__(self, planner: RoundPlanner, folder: Path | None = None):
        super().__init__()
        self.planner, self.folder, self.finished = planner, folder, False

    def __getstate__(self) -> dict:
        return {"finished": self.finished}  # Tune pickles it; a run restores it anew (_restored)

    def suggest(self, trial_id: str) -> dict | str | None:
        pack = self.planner.suggest(trial_id)
        if pack == self.planner.FINISHED:
            self.finished = True
            return Searcher.FINISHED
        return None if pack is None else self.planner.trial_config(trial_id, pack).as_config()

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        """Nothing: the run tells the planner (see the class's docstring)."""

    def save(self, checkpoint_path: str) -> None:
        Path(checkpoint_path).write_text(state.searcher_checkpoint(self.planner.get_state(), self.finished))

    def restore(self, checkpoint_path: str) -> None:
        """The planner's saved state; a damaged one names the sweep's file (Tune reads a staging copy)."""
        path = Path(checkpoint_path)
        self.finished = state.restore_searcher(path, self.planner, self.folder / path.name if self.folder else None)


class _TrialDone(tune.Callback):
    """Tells its run (SweepRun) each trial of the sweep as it starts, steps and ends. Tune pickles it with
    the experiment's run config; a run restores it anew (_restored)."""

    def __init__(self, run: SweepRun):
        self.run = run

    def __getstate__(self) -> dict:
        return {}

    def on_trial_start(self, iteration, trials, trial, **info):
        self.run.started(trial.trial_id, TrialConfig.of(trial.config))

    def on_trial_result(self, iteration, trials, trial, result, **info):
        if "pack_step" in result:  # services.execution.trial's report of a pack still training
            self.run.stepped(trial.trial_id, int(result["pack_step"]), int(result["pack_steps"]))

    def on_trial_complete(self, iteration, trials, trial, **info):
        self.run.ended(trial.trial_id, TrialConfig.of(trial.config), trial.last_result or {})

    def on_trial_error(self, iteration, trials, trial, **info):
        self.run.failed(trial.trial_id, TrialConfig.of(trial.config), f"{_cause(trial)} (trial log: {trial.path})")


def _cause(trial) -> str:
    """The last line of a failed trial's error (its exception, as Tune wrote it in the trial's folder)."""
    written = Path(trial.error_file) if trial.error_file else None
    lines = written.read_text().strip().splitlines() if written and written.exists() else []
    return lines[-1] if lines else "it failed"
