"""What one Ray Tune trial runs: train a pack (reading and filling the result cache) and report its
records, and while it trains, its step now and then (the progress line's trial in flight). Runs on a
worker; the driver only names it (run_sweep's ``trainable``)."""

import time
from collections.abc import Callable

import ray
from ray import tune

from services.results import ModelRecord, trial_metrics
from services.search.packs import Pack, TrialConfig
from services.spec import TrialSweep
from services.store.cache import ResultCache, curve_sums, model_entries, model_keys
from services.sweep_run import reported


def train_pack_trial(config: dict, sweep: TrialSweep, cache: str | None) -> None:
    """Ray Tune function trainable: train one pack and report its per-model records.

    Models already in the result cache (``cache``, a folder; None: off) are read from it; the
    rest train as one pack and go into it as soon as they are done."""
    # the driver imports this module only to name this function: torch and vit_core load on the workers
    import torch  # noqa: PLC0415 torch stays out of the Ray driver's start-up

    from vit_core import train_pack  # noqa: PLC0415 it imports torch

    trial = TrialConfig.of(config)
    pack = trial.pack
    data, model, training = trial.resolved_cell(sweep).configs
    training = pack.training(training)  # a tuned setting's batch size at the cell's sample budget; a retry's budget
    lrs = list(pack.lr or [training.lr] * len(pack.seeds))
    torch.set_num_threads(max(1, int(sweep.cpus_per_trial)))
    device = "cuda" if ray.get_gpu_ids() else "cpu"
    results = ResultCache(cache)
    keys = model_keys(data, model, training, pack.n_train, pack.seeds, device, lrs)
    entries = [results.get(key) for key in keys]
    todo = [k for k, entry in enumerate(entries) if entry is None]
    wall_s = 0.0
    if todo:
        result = train_pack(
            data,
            model,
            training,
            [pack.n_train[k] for k in todo],
            [pack.seeds[k] for k in todo],
            lr=[lrs[k] for k in todo],
            device=device,
            progress=_stepping(training.steps_for(max(pack.n_train[k] for k in todo))),
        )
        for k, entry in zip(todo, model_entries(result)):
            results.put(keys[k], entry)
            entries[k] = entry
        wall_s = result.wall_s
    records = [
        record | {"max_steps": training.steps_for(n)} | _tuned(pack)
        for entry, n in zip(entries, pack.n_train)
        for record in entry["records"]
    ]
    tune.report(
        {
            "trainings": len(todo),  # trained now
            "cache_hits": len(keys) - len(todo),
            "node_id": ray.get_runtime_context().get_node_id(),  # which node trained it (multi-node checks)
            **trial_metrics([ModelRecord.from_dict(r) for r in records], training.max_steps),
            "pack_wall_s": wall_s,
            "ended_at": time.time(),  # Tune's own timestamp is in whole seconds
            **reported(records, curve_sums(entries)),
        }
    )


STEP_EVERY_S = 5.0  # at most one step report a trial this often: each waits for the driver to take it


def _stepping(cap: int) -> Callable[[int, int, int], None]:
    """train_pack's ``progress``: the pack's step against its ``cap`` (the most steps a model of it
    takes), reported to Tune as an intermediate result (``pack_step`` of ``pack_steps``) at most every STEP_EVERY_S
    seconds; the trial's last report, its records, is the result its run reads."""
    last = time.monotonic()

    def report(step: int, training: int, at_zero: int) -> None:
        nonlocal last
        if time.monotonic() - last >= STEP_EVERY_S:
            tune.report({"pack_step": step, "pack_steps": cap, "models_training": training, "models_at_zero": at_zero})
            last = time.monotonic()

    return report


def _tuned(pack: Pack) -> dict:
    """What a tuned pack's records add: its phase, and its batch size (one pass records theirs)."""
    return {"phase": pack.phase, "batch_size": pack.batch_size} if pack.phase else {}
