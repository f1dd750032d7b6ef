"""W2, the one-pass workload of the tuned main job (sweeps/sample_complexity_tuned.yaml, the main job until issue
64), three ways in one run: trainings per second and ratios.

W2 is what `vitsweep run sweeps/sample_complexity_tuned.yaml` trains: per (model, alpha*) cell, every
(B, eta) of its tuning space on the selection seeds under growing sample caps, then the chosen
setting on 16 seeds, each run one pass with a stability window. It runs, in this order:
  (c) vitsweep: one `vitsweep run --no-cache` of the main job's spec, end to end as a user runs
      it (start-up, Ray's start and the MLflow record included);
  (c0) with --baseline REV: the same command on a git worktree of REV (today's main, say), so that
      both are measured side by side in one run on the same machine;
  (b) loop: one model at a time in this process (vit_core.train_pack with K = 1, torch's default
      threads), every --b-every-th training of what (c) trained;
  (a) ray_per_trial: one model per Ray Tune trial with Tune's defaults (Tuner(trainable,
      param_space=grid_search(...)), one CPU per trial), every --a-every-th training, Ray's start
      included.
The ratios compare trainings per second. The limits, measured in the same run: W2's FLOPs (torch's
FlopCounterMode over every --flop-every-th training: SGD steps and evaluations) against the
machine's matmul rate (flop_fraction), and W2's random numbers (its samples' noise, L x d normals
a sample) at torch's generator rate (rng_fraction). data_share: per model kind, the share of a
one-pass step spent making samples (the main job's measurement pack at alpha* = 0.05, B = 1, and
the same at B = 16).

    make bench-onepass                 # or: .venv/bin/python bench/onepass.py [--baseline REV] [--out FILE]
    make bench-onepass DEVICE=cuda     # all on a GPU: (c) on a copy of the spec whose trials ask for
                                       # --gpus-per-trial of it, (a) likewise, (b) and data_share on it;
                                       # the FLOP and generator fractions against the GPU's

The last line of stdout is one JSON object (also written to --out).
"""

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import yaml
from ray import tune
from torch.utils.flop_counter import FlopCounterMode

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.baseline import worktree  # noqa: E402
from bench.fig1 import (  # noqa: E402  (one way to measure each)
    _timed,
    add_cores,
    fraction,
    matmul_flops,
    tune_grid_seconds,
)
from services.spec import load_spec  # noqa: E402
from services.store import state  # noqa: E402
from vit_core import train_pack  # noqa: E402
from vit_core.seeding import Stream  # noqa: E402
from vit_core.training import batches  # noqa: E402
from vit_core.training import loop as training_loop  # noqa: E402

MAIN = ROOT / "sweeps" / "sample_complexity_tuned.yaml"
SHARE_SAMPLES = 2048  # data_share: samples each model trains on


def vitsweep(tree: Path, spec: Path, home: Path, log: Path, timeout: float | None = None) -> dict:
    """(c): one `vitsweep run --no-cache` of ``spec`` (a path inside the repository) with the code
    of ``tree``: the run's JSON summary, with its end-to-end seconds (end_to_end_s); subprocess's
    TimeoutExpired after ``timeout`` seconds."""
    start = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")])}
    command = [sys.executable, "-c", "from services.app.cli import entry; entry()"]
    path = tree / spec.relative_to(ROOT) if spec.is_relative_to(ROOT) else spec  # a GPU variant lies outside
    out = subprocess.run(
        [*command, "run", str(path), "--home", str(home), "--no-cache", "--json"],
        capture_output=True,
        text=True,
        cwd=tree,
        env=env,
        timeout=timeout,
    )
    total = time.perf_counter() - start
    log.write_text(out.stdout + out.stderr)
    if out.returncode != 0:
        raise RuntimeError(f"vitsweep run failed in {tree}:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1]) | {"end_to_end_s": total}


def trainings(spec_path: Path, home: Path, sweep_id: str) -> list[dict]:
    """Every run (c) trained: its cell, setting, seed, sample cap and samples consumed."""
    spec, result = load_spec(spec_path), state.load_result(home, sweep_id)
    runs: dict[tuple, dict] = {}
    for cell in result.cells:
        for r in cell.records:
            key = (cell.cell.key, r.seed, r.lr, r.batch_size, r.phase, r.max_steps)
            run = runs.setdefault(
                key,
                {"cell": cell.cell, "seed": r.seed, "lr": r.lr, "batch_size": r.batch_size, "max_steps": r.max_steps},
            )
            run["consumed"] = max(run.get("consumed", 0), r.n_train)
    for run in runs.values():
        data, model, training = spec.resolved_cell(run["cell"]).configs
        run["configs"] = (
            data,
            model,
            dataclasses.replace(training, batch_size=run["batch_size"], max_steps=run["max_steps"]),
        )
    return sorted(runs.values(), key=lambda r: (r["cell"].key, r["batch_size"], r["lr"], r["seed"], r["max_steps"]))


def train_one(run: dict, device: str = "cpu"):
    """One run alone (K = 1): what (a) and (b) train per model."""
    data, model, training = run["configs"]
    cap = training.batch_size * training.max_steps
    return train_pack(data, model, training, [cap], [run["seed"]], lr=[run["lr"]], device=device)


def loop(work: list[dict], device: str) -> float:
    """(b): seconds to train every run one at a time in this process."""
    start = time.perf_counter()
    for run in work:
        train_one(run, device)
    return time.perf_counter() - start


def ray_per_trial(work: list[dict], storage: Path, device: str, gpus: float) -> float:
    """(a): seconds for Ray Tune to run one trial per run, Ray's start included (on a GPU, each
    trial asks for ``gpus`` of it)."""

    def trainable(config: dict) -> None:
        result = train_one(work[config["index"]], device)
        tune.report({"steps": int(result.steps[0])})

    if device != "cpu":
        trainable = tune.with_resources(trainable, {"cpu": 1, "gpu": gpus})
    return tune_grid_seconds(trainable, {"index": tune.grid_search(list(range(len(work))))}, storage)


def on_gpus(spec: Path, gpus: float, folder: Path) -> Path:
    """A copy of ``spec`` whose trials each ask for ``gpus`` GPUs (and so train on CUDA)."""
    text = yaml.safe_load(spec.read_text())
    text.setdefault("resources", {})["gpus_per_trial"] = gpus
    path = folder / spec.name
    path.write_text(yaml.safe_dump(text, sort_keys=False))
    return path


def flops(work: list[dict], every: int) -> float:
    """W2's FLOPs: every ``every``-th run counted (FlopCounterMode), scaled to all of them by
    each model kind's mean."""
    counts: dict[str, list[int]] = {}
    for run in work[::every]:
        with FlopCounterMode(display=False) as counter:
            train_one(run)
        counts.setdefault(run["cell"].model, []).append(counter.get_total_flops())
    return sum(np.mean(counts[r["cell"].model]) for r in work)


def normals_rate(device: str, n: int = 4_000_000) -> float:
    """Seconds a normal of torch's generator on ``device`` (on a CPU the fastest here; numpy's are
    2-4x slower)."""
    generator = torch.Generator(device=device).manual_seed(0)
    torch.randn(n, generator=generator, device=device)
    return min(_timed(lambda: torch.randn(n, generator=generator, device=device), device) for _ in range(5)) / n


def data_share(run: dict, batch_size: int, device: str, samples: int = SHARE_SAMPLES, models: int = 16) -> float:
    """The share of one-pass SGD steps spent making their samples: ``models`` seeds of ``run``'s
    setting at ``batch_size`` for ``samples`` samples each (64 steps at least), evaluated only at the
    start and the end on 100 test samples, every call of the trainer's sampler for the training stream timed."""
    data, model, training = run["configs"]
    steps = max(64, samples // batch_size)
    training = dataclasses.replace(
        training,
        batch_size=batch_size,
        max_steps=steps,
        eval_every=steps,
        n_test=100,
        eval_subset=100,
        stability_window=0.0,
    )
    spent, sample = [0.0], batches.sample

    def timed(*args, **kw):
        if device.startswith("cuda"):  # kernels are asynchronous: wait for the step's, then the sampler's
            torch.cuda.synchronize()
        start = time.perf_counter()
        out = sample(*args, **kw)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        if args[3:4] == (Stream.TRAIN_DATA,):
            spent[0] += time.perf_counter() - start
        return out

    batches.sample = training_loop.sample = timed  # the fresh batches' draws and the test set's
    try:
        start = time.perf_counter()
        train_pack(
            data,
            model,
            training,
            [batch_size * steps] * models,
            list(range(models)),
            lr=[run["lr"]] * models,
            device=device,
        )
        total = time.perf_counter() - start
    finally:
        batches.sample = training_loop.sample = sample
    return spent[0] / total


def baseline(args, tmp: Path, end_to_end_s: float) -> dict:
    """(c0): the same run on a git worktree of ``args.baseline``, side by side with (c)."""
    tree = tmp / "baseline"
    with worktree(args.baseline, tree):
        base = vitsweep(tree, args.spec, tmp / "c0", args.out.with_suffix(".baseline.txt"))
    print(f"(c0) {args.baseline}: {base['trainings']} trainings in {base['end_to_end_s']:.1f} s end to end", flush=True)
    return {
        "baseline": args.baseline,
        "c0_wall_s": round(base["end_to_end_s"], 2),
        "ratio_vs_baseline": round(base["end_to_end_s"] / end_to_end_s, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="a git revision to run (c) on as well, in a worktree of it (today's main)")
    parser.add_argument("--a-every", type=int, default=20, help="(a) trains every k-th run of W2")
    parser.add_argument("--b-every", type=int, default=20, help="(b) trains every k-th run of W2")
    parser.add_argument("--flop-every", type=int, default=40, help="count the FLOPs of every k-th run")
    parser.add_argument("--device", default="cpu", help="where (a), (b), (c) and data_share train: cpu or cuda")
    parser.add_argument(
        "--gpus-per-trial", type=float, default=0.125, help="with --device cuda: each trial's share of the GPU"
    )
    parser.add_argument(
        "--share-samples",
        type=int,
        default=SHARE_SAMPLES,
        help="data_share: samples a model trains on (fewer: sooner, noisier)",
    )
    parser.add_argument(
        "--spec", type=Path, default=MAIN, help="the workload's spec (default: the tuned main job before issue 64, W2)"
    )
    add_cores(parser)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "onepass.json")
    args = parser.parse_args()
    args.spec = args.spec.resolve()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    result: dict = {"workload": str(args.spec.relative_to(ROOT)), "cpus": args.cores, "torch": torch.__version__}
    if args.device == "cpu":  # every core's matmuls and generators, or the GPU's
        peak, generators = max(matmul_flops(args.cores), args.cores * matmul_flops(1)), args.cores
    else:
        peak, generators = matmul_flops(None, device=args.device), 1
        result["gpu"] = torch.cuda.get_device_name(args.device)
    per_normal = normals_rate(args.device)
    with tempfile.TemporaryDirectory(prefix="vitsweep-onepass-") as tmp:
        spec = args.spec if args.device == "cpu" else on_gpus(args.spec, args.gpus_per_trial, Path(tmp))
        c = vitsweep(ROOT, spec, Path(tmp) / "c", args.out.with_suffix(".run.txt"))
        work = trainings(spec, Path(tmp) / "c", c["sweep_id"])
        c_rate = len(work) / c["end_to_end_s"]
        print(f"(c) vitsweep: {len(work)} runs in {c['end_to_end_s']:.1f} s end to end", flush=True)
        result |= {
            "runs": len(work),
            "c_wall_s": round(c["end_to_end_s"], 2),
            "c_sweep_wall_s": c["wall_s"],
            "c_train_s": c["train_s"],
            "busy_fraction": c.get("busy_fraction"),
            "c_runs_per_s": round(c_rate, 4),
        }
        if args.baseline:
            result |= baseline(args, Path(tmp), c["end_to_end_s"])
        torch.set_num_threads(args.cores)
        b_work = work[:: args.b_every]
        b = loop(b_work, args.device)
        print(f"(b) loop: {len(b_work)} runs in {b:.1f} s", flush=True)
        result |= {"b_runs": len(b_work), "b_wall_s": round(b, 2), "ratio_vs_loop": round(c_rate * b / len(b_work), 2)}
        a_work = work[:: args.a_every]
        a = ray_per_trial(a_work, Path(tmp) / "per-trial", args.device, args.gpus_per_trial)
        print(f"(a) one model per Ray Tune trial: {len(a_work)} runs in {a:.1f} s", flush=True)
        result |= {
            "a_runs": len(a_work),
            "a_wall_s": round(a, 2),
            "ratio_vs_ray_per_trial": round(c_rate * a / len(a_work), 2),
        }
    total_flops = flops(work, args.flop_every)
    normals = sum(r["consumed"] * r["configs"][0].n_tokens * r["configs"][0].dim for r in work)
    hardest = min(r["configs"][0].alpha_star for r in work)
    kinds = {r["cell"].model: r for r in work if r["configs"][0].alpha_star == hardest}
    result |= {
        "matmul_flop_per_s": round(peak),
        "w2_flops": round(total_flops),
        "flop_fraction": fraction(total_flops / c["wall_s"] / peak),
        "normal_ns": round(per_normal * 1e9, 2),
        "w2_normals": int(normals),
        "rng_fraction": fraction(normals * per_normal / c["wall_s"] / generators),
        "data_share": {
            model: {f"B={b}": fraction(data_share(run, b, args.device, args.share_samples)) for b in (1, 16)}
            for model, run in kinds.items()
        },
    }
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
