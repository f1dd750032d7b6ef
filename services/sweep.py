"""Run a sweep spec as Ray Tune trials, one pack of models per trial, and collect per-cell results.

Each cell (model x axis values) trains every (N, seed) pair; these are cut into packs of at most
``resources.models_per_pack`` models, and each pack is one trial of a Ray Tune grid search. Ray
does the scheduling, resource accounting, retries (FailureConfig) and trial state; this module
only says what a trial is and reads the results back.
"""

import dataclasses
import json
import math
import logging
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")  # Tune's console tables; vitsweep shows its own progress
import ray  # noqa: E402
import torch  # noqa: E402
from ray import tune  # noqa: E402

from services.analysis import Outcomes  # noqa: E402
from services.cache import CURVES_KEPT, ResultCache, curve_sums, model_entries, model_keys  # noqa: E402
from services.spec import Cell, SweepSpec, spec_from_dict  # noqa: E402
from vit_core import train_pack  # noqa: E402
from vit_core.train import summarize_by_n  # noqa: E402




def packs(spec: SweepSpec, slots: int | None = None) -> list[dict]:
    """The trials of a sweep: for each cell, its (N, seed) pairs cut into packs of at most
    ``resources.models_per_pack`` models and, given the ``slots`` (trials the cluster runs at
    once), small enough that there are at least two packs per slot, so that no CPU idles through
    a long tail; a cell's packs are of equal size."""
    pairs = [[(n, seed) for n in spec.n_values(cell) for seed in range(spec.seeds)] for cell in spec.cells]
    size = spec.resources.models_per_pack
    if slots:
        size = min(size, max(1, math.ceil(sum(map(len, pairs)) / (2 * slots))))
    return [pack for index, cell_pairs in enumerate(pairs) for pack in cut(index, cell_pairs, size)]


def cut(cell: int, pairs: list[tuple[int, int]], size: int, **extra) -> list[dict]:
    """A cell's (N, seed) pairs as the configs of packs of at most ``size`` models, of equal size
    (``extra``: more keys of each pack, e.g. a retry's max_steps)."""
    count = math.ceil(len(pairs) / size)
    chunks = (pairs[len(pairs) * i // count : len(pairs) * (i + 1) // count] for i in range(count))
    return [{"cell": cell, "n_train": [n for n, _ in chunk], "seeds": [s for _, s in chunk], **extra} for chunk in chunks]


def trial_slots(spec: SweepSpec) -> int:
    """How many trials the Ray cluster (already started) can run at once."""
    total = ray.cluster_resources()
    if spec.resources.gpus_per_trial:
        return max(1, int(total.get("GPU", 0) / spec.resources.gpus_per_trial))
    return max(1, int(total.get("CPU", 1) / spec.resources.cpus_per_trial))


def trial_count(spec: SweepSpec, slots: int | None = None) -> int | None:
    """How many Ray Tune trials the sweep runs: one per pack, or one per Optuna sample; None
    for the sample_complexity search, whose rounds depend on the results."""
    return {"grid": len(packs(spec, slots)), "optuna": spec.search.num_samples}.get(spec.search.mode)


def train_pack_trial(config: dict) -> None:
    """Ray Tune function trainable: train one pack and report its per-model records.

    Models already in the result cache (``config["cache"]``, a folder; None: off) are read from
    it; the rest train as one pack and go into it as soon as they are done."""
    spec = spec_from_dict(config["spec"])
    pack = config["pack"]
    data, model, training = spec.configs(trial_cell(spec, config))
    training = dataclasses.replace(training, max_steps=pack.get("max_steps", training.max_steps))  # a retry's larger budget
    torch.set_num_threads(max(1, int(spec.resources.cpus_per_trial)))
    device = "cuda" if ray.get_gpu_ids() else "cpu"
    cache = ResultCache(config.get("cache"))
    keys = model_keys(data, model, training, pack["n_train"], pack["seeds"], device)
    entries = [cache.get(key) for key in keys]
    todo = [k for k, entry in enumerate(entries) if entry is None]
    wall_s = 0.0
    if todo:
        result = train_pack(data, model, training, [pack["n_train"][k] for k in todo], [pack["seeds"][k] for k in todo], device=device)
        for k, entry in zip(todo, model_entries(result)):
            cache.put(keys[k], entry)
            entries[k] = entry
        wall_s = result.wall_s
    records = [record | {"max_steps": training.max_steps} for entry in entries for record in entry["records"]]
    tune.report({
        "trainings": len(todo),  # trained now
        "cache_hits": len(keys) - len(todo),
        "node_id": ray.get_runtime_context().get_node_id(),  # which node trained it (multi-node checks)
        "success_rate": float(np.mean([r["success"] for r in records])),
        "mean_test_error": float(np.nanmean([1.0 if r["diverged"] else r["test_error"] for r in records])),
        "median_iterations_to_zero": float(np.median([r["iterations_to_zero"] if r["iterations_to_zero"] >= 0 else training.max_steps for r in records])),
        "pack_wall_s": wall_s,
        "records": json.dumps(records),
        "curves": json.dumps(curve_sums(entries)),
    })


def latest_budget(records: list[dict]) -> list[dict]:
    """One record per (N, seed): where a model was trained again with a larger step budget, the
    retry's."""
    best: dict[tuple, dict] = {}
    for r in records:
        key = (r["n_train"], r["seeds"])
        if key not in best or r.get("max_steps", 0) > best[key].get("max_steps", 0):
            best[key] = r
    return list(best.values())


def trial_cell(spec: SweepSpec, config: dict) -> Cell:
    """The cell a trial trains: its pack's cell, with the values a searcher sampled for it."""
    cell = spec.cells[config["pack"]["cell"]]
    sampled = {k: (int(v) if spec.search.space[k].integer else v) for k, v in config.get("sampled", {}).items()}
    return Cell(cell.model, {**cell.values, **sampled})


def _search_space(spec: SweepSpec) -> dict:
    """Tune's search space for the spec's optuna ranges."""
    space = {}
    for name, r in spec.search.space.items():
        if r.integer:
            space[name] = (tune.lograndint if r.log else tune.randint)(int(r.low), int(r.high) + 1)
        else:
            space[name] = (tune.loguniform if r.log else tune.uniform)(r.low, r.high)
    return space


@dataclass
class CellResult:
    """Every trained model of one cell, and the packs of it that failed."""

    cell: Cell
    records: list[dict] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    curve_parts: list[dict] = field(default_factory=list)  # per pack: curve -> N -> steps, sums, counts

    def curve_names(self) -> list[str]:
        return [name for name in CURVES_KEPT if any(name in part for part in self.curve_parts)]

    def mean_scores(self) -> dict[int, np.ndarray]:
        """Paper B, per N: the positional attention scores (D, D) averaged over the cell's models."""
        parts = [part["scores"] for part in self.curve_parts if "scores" in part]
        out = {}
        for n in sorted({int(n) for part in parts for n in part}):
            mine = [part[str(n)] for part in parts if str(n) in part]
            out[n] = sum(np.array(p["sum"]) for p in mine) / sum(p["count"] for p in mine)
        return out

    def curves(self, name: str) -> dict[int, list[tuple[int, float]]]:
        """Per N: the mean of curve ``name`` over the cell's models at every evaluated step.

        A pack stops once its models settled, and a settled model no longer changes, so a pack
        that ended earlier counts with its last values at later steps."""
        curves = {}
        mine = [part[name] for part in self.curve_parts if name in part]
        for n in sorted({int(n) for part in mine for n in part}):
            parts = [part[str(n)] for part in mine if str(n) in part]
            steps = sorted({s for p in parts for s in p["steps"]})
            means = []
            for step in steps:
                total = count = 0.0
                for p in parts:
                    i = min(np.searchsorted(p["steps"], step), len(p["steps"]) - 1)
                    total, count = total + p["sum"][i], count + p["count"][i]
                if count:  # else every model had diverged by this step
                    means.append((step, total / count))
            curves[n] = means
        return curves

    def by_n(self) -> list[dict]:
        """Per N, ascending: vit_core.train.summarize_by_n over the cell's models."""
        return summarize_by_n(self.records)

    def outcomes(self) -> Outcomes:
        return Outcomes.from_records(self.records)

    def n_star(self, p: float) -> int | None:
        """The stable N*: the smallest N from which every larger N reaches success rate p;
        None when a pack of the cell failed (an N may be missing) or the largest N misses p."""
        return None if self.failures or not self.records else self.outcomes().n_star(p)


@dataclass
class SweepResult:
    sweep_id: str
    cells: list[CellResult]
    trainings: int
    wall_s: float
    storage: str
    best: dict | None = None  # optuna: the best trial's sampled values and objective
    unfinished: int = 0  # trials stopped before they finished (an interrupted sweep)
    cache_hits: int = 0  # models read from the result cache instead of trained
    train_s: float = 0.0  # seconds the trials spent in train_pack, summed over trials


def start_ray(address: str | None) -> bool:
    """Connect to the cluster at ``address`` (or RAY_ADDRESS), else start a local Ray that only
    listens on loopback (start_local_ray). False when Ray was already up (its owner stops it),
    True when this call started or joined it."""
    if ray.is_initialized():
        return False
    address = address or os.environ.get("RAY_ADDRESS")
    logging.getLogger("ray.tune").setLevel(logging.WARNING)
    if address:
        ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
    else:
        start_local_ray(include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
    return True


def start_local_ray(**init) -> None:
    """ray.init of a one-machine Ray whose every process (GCS, raylet, agents, workers) listens
    on 127.0.0.1 only. Ray 2.60 binds its servers to the node address but swaps a loopback one
    for the machine's own, except in its single-machine mode (RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0,
    read once at import into ray_constants.ENABLE_RAY_CLUSTER): that mode, for this call."""
    from ray._private import ray_constants

    clusters = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        ray.init(_node_ip_address="127.0.0.1", **init)
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = clusters


def run_sweep(spec: SweepSpec, sweep_id: str, home: Path, on_trial_done=None, trainable=train_pack_trial,
              resume: bool = False, cache: Path | None = None) -> SweepResult:
    """Run every pack of the spec through Ray Tune; Ray must already be started.

    ``on_trial_done(trials_done, trials_failed, models_trained)`` follows progress. A trial that
    raises is retried ``resources.max_failures`` times, then recorded as its cell's failure while
    the other trials go on. ``resume``: continue the sweep's saved Tune state (Tuner.restore):
    finished trials keep their results, unfinished ones run again. ``cache``: the result cache's
    folder (services.cache), None for none.
    """
    start = time.perf_counter()
    storage = str((home / "ray").resolve())
    trainable = tune.with_resources(trainable, {"cpu": spec.resources.cpus_per_trial, "gpu": spec.resources.gpus_per_trial})
    callbacks = [_TrialDone(on_trial_done)] if on_trial_done else []
    trials = packs(spec, trial_slots(spec) if spec.search.mode == "grid" else None)
    param_space = {"spec": spec.model_dump(mode="json"), "cache": str(cache.resolve()) if cache else None, "pack": tune.grid_search(trials)}
    search = {}
    if spec.search.mode == "optuna":
        from ray.tune.search.optuna import OptunaSearch

        param_space |= {"pack": trials[0], "sampled": _search_space(spec)}
        search = {"search_alg": OptunaSearch(seed=spec.search.seed), "num_samples": spec.search.num_samples,
                  "metric": spec.search.metric, "mode": spec.search.direction}
    elif spec.search.mode == "sample_complexity":
        from services.nstar import NStarSearcher

        del param_space["pack"]  # the searcher suggests every pack
        search = {"search_alg": NStarSearcher(spec), "num_samples": -1}
    path = Path(storage) / sweep_id
    if resume and _restorable(path):
        _TrialDone.current = on_trial_done
        with _quiet("ray.tune.analysis.experiment_analysis"):
            tuner = tune.Tuner.restore(str(path), trainable=trainable, resume_unfinished=True, resume_errored=True)
    else:
        tuner = _new_tuner(trainable, param_space, search, sweep_id, storage, spec, callbacks)
    grid = tuner.fit()
    cells: dict[str, CellResult] = {}  # by label: a grid cell, or one optuna trial's sampled cell
    trainings = cache_hits = unfinished = 0
    train_s = 0.0
    for result in grid:
        if result.error is None and "records" not in (result.metrics or {}):
            unfinished += 1  # stopped before it reported (Ctrl-C)
            continue
        pack, cell = result.config["pack"], trial_cell(spec, result.config)
        target = cells.setdefault(cell.label, CellResult(cell))
        if result.error is not None:
            cause = str(result.error).strip().splitlines()[-1]
            target.failures.append(f"{cell.label} n_train={pack['n_train']} seeds={pack['seeds']}: {cause} (trial log: {result.path})")
            continue
        target.records.extend(json.loads(result.metrics["records"]))
        if "max_steps" not in pack:  # a retry's curves would count its models twice
            target.curve_parts.extend(json.loads(result.metrics["curves"]))
        trainings += result.metrics["trainings"]
        cache_hits += result.metrics.get("cache_hits", 0)
        train_s += result.metrics.get("pack_wall_s", 0.0)
    for cell in cells.values():
        cell.records = latest_budget(cell.records)
    best = None
    if spec.search.mode == "optuna" and any(r.error is None for r in grid):
        top = grid.get_best_result()
        best = {"values": trial_cell(spec, top.config).values, spec.search.metric: top.metrics[spec.search.metric]}
    ordered = sorted(cells.values(), key=lambda c: spec.cells.index(c.cell) if c.cell in spec.cells else len(spec.cells))
    return SweepResult(sweep_id, ordered, trainings, time.perf_counter() - start, str(Path(storage) / sweep_id), best, unfinished, cache_hits, train_s)


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


def _restorable(path: Path) -> bool:
    """Whether Tune saved enough of the sweep at ``path`` to restore it: its tuner.pkl, written as
    fit starts, and an experiment state, written once trials run (a driver killed in between
    leaves the first alone, which Tune cannot restore from)."""
    return tune.Tuner.can_restore(str(path)) and any(path.glob("experiment_state-*.json"))


def _new_tuner(trainable, param_space: dict, search: dict, sweep_id: str, storage: str, spec: SweepSpec, callbacks: list) -> tune.Tuner:
    return tune.Tuner(
        trainable,
        param_space=param_space,
        tune_config=tune.TuneConfig(reuse_actors=True, trial_name_creator=_trial_name, trial_dirname_creator=_trial_name, **search),
        run_config=tune.RunConfig(
            name=sweep_id,
            storage_path=storage,
            failure_config=tune.FailureConfig(max_failures=spec.resources.max_failures),
            verbose=0,
            callbacks=callbacks,
        ),
    )


def _trial_name(trial) -> str:
    pack = trial.config["pack"]
    return f"cell{pack['cell']}-n{pack['n_train'][0]}-{pack['n_train'][-1]}-s{pack['seeds'][0]}_{trial.trial_id}"


class _TrialDone(tune.Callback):
    """Calls ``fn(trials_done, trials_failed, models_trained)`` as trials end (for a progress bar).

    Tune pickles its run config with the experiment state, and a function of the caller's (a
    progress bar) does not pickle: a restored sweep's callback calls ``_TrialDone.current``, the
    function that run_sweep was given this time."""

    current = None

    def __init__(self, fn):
        self.fn, self.done, self.errored, self.models = fn, 0, 0, 0

    def __getstate__(self) -> dict:
        return {"done": self.done, "errored": self.errored, "models": self.models}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, fn=_TrialDone.current)

    def on_trial_complete(self, iteration, trials, trial, **info):
        self.models += sum((trial.last_result or {}).get(key, 0) for key in ("trainings", "cache_hits"))
        self._count(errored=False)

    def on_trial_error(self, iteration, trials, trial, **info):
        self._count(errored=True)

    def _count(self, errored: bool) -> None:
        self.done += 1
        self.errored += errored
        if self.fn is not None:
            self.fn(self.done, self.errored, self.models)
