"""W1, the Fig 1 workload of Li et al., three ways in one run: trainings per second and ratios.

W1 is the paper's Fig 1 grid with the bundled defaults: the ViT at 11 alpha* x 10 N and the CNN
at 9 x 10, 20 seeds each (4,000 trainings). By default a subset of it (every --alpha-every-th
alpha*, every --n-every-th N, --seeds seeds) runs three ways, in this order:
  (c) vitsweep: one `vitsweep run --no-cache` of a spec with each model on its own grid
      (per_model; Ray Tune, packed trials, MLflow into a fresh SQLite store), timed end to end as
      a user runs it: start-up, Ray's start and the MLflow record included;
  (b) loop: one model at a time in this process (vit_core.train_pack with K = 1, torch's default
      threads), every --b-every-th training (default: all of the subset);
  (a) ray_per_trial: one model per Ray Tune trial, with Tune's defaults as a new user leaves them
      (Tuner(trainable, param_space=grid_search(...)), one CPU per trial), Ray's start included.
      It trains every --a-every-th training of the subset (seeds vary fastest, so every alpha*
      and N is in it): its rate per trial is steady and the whole subset would take ~4x longer.
The ratios compare trainings per second. It also measures the machine's matmul throughput (the
best of ten 2048^2 float32 matmuls on one core, and on every core, taken as at least cores x one
core's rate, since the all-core rate varies from run to run) and the FLOPs of a training (torch's
FlopCounterMode over every --flop-every-th training of the workload: SGD steps and
evaluations, matmul FLOPs only), so that
  flop_fraction = (c)'s FLOPs / (c)'s time in the sweep (Ray Tune's fit) / the all-core matmul rate;
  flop_fraction_in_packs = the same FLOPs / the seconds trials spent in train_pack / the one-core rate.
It also times, on one core, the batched (60 x 20)(20 x 60) and (60 x 60)(60 x 20) products a ViT
step is made of: attention_matmul_fraction, their rate against the large matmul's, bounds what
flop_fraction can reach with these shapes on this machine.
--full runs all of W1 through (c) (sweeps/fig1.yaml; target: under 15 minutes), then (b) on every
10th training of it (seeds 0 and 10 of every model, alpha* and N, so that its rate is W1's) and the
FLOPs on every 20th, for (c)/(b) and the FLOP fraction on the whole workload; (a) is left out, to
keep the run near 15 minutes. vitsweep's own output (its table of every cell) is kept beside the
JSON (.run.txt).

    make bench                         # or: .venv/bin/python bench/fig1.py [--full] [--out FILE]

The last line of stdout is one JSON object (also written to --out).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import ray
import torch
from ray import tune
from torch.utils.flop_counter import FlopCounterMode

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from services.execution.ray_start import start_local_ray  # noqa: E402
from services.stats.paper import success_table  # noqa: E402  (the paper's Fig 1 grid)
from vit_core import ModelConfig, TokenDataConfig, TrainConfig, train_pack  # noqa: E402
from vit_core.family import families  # noqa: E402

SEEDS = 20
VITSWEEP = Path(sys.executable).parent / "vitsweep"
FIG1 = ROOT / "sweeps" / "fig1.yaml"  # all of W1, as users run it


def w1(alpha_every: int = 1, n_every: int = 1) -> dict[str, tuple[list[float], list[int]]]:
    """Model -> (alpha* values, N values) of Fig 1, every k-th of each."""
    grid = {}
    for model in ("vit", "cnn"):
        alphas, ns, _ = success_table(families()["li2023"], model)
        grid[model] = ([round(float(a), 4) for a in alphas[::alpha_every]], [int(n) for n in ns[::n_every]])
    return grid


def trainings(grid: dict, seeds: int) -> list[dict]:
    """Every (model, alpha*, N, seed) of the grid."""
    return [
        {"model": m, "alpha_star": a, "n": n, "seed": s}
        for m, (alphas, ns) in grid.items()
        for a in alphas
        for n in ns
        for s in range(seeds)
    ]


def train_one(t: dict, device: str = "cpu"):
    """One training with the bundled defaults: what (a) and (b) run per model."""
    return train_pack(
        TokenDataConfig(alpha_star=t["alpha_star"]),
        ModelConfig(kind=t["model"]),
        TrainConfig(),
        [t["n"]],
        [t["seed"]],
        device=device,
    )


def loop(work: list[dict]) -> float:
    """(b): seconds to train every model one at a time in this process."""
    start = time.perf_counter()
    for t in work:
        train_one(t)
    return time.perf_counter() - start


def ray_per_trial(work: list[dict], storage: Path) -> float:
    """(a): seconds for Ray Tune to run one trial per model, Ray's start included."""

    def trainable(config: dict) -> None:
        result = train_one(config)
        tune.report({"success": float(result.success[0]), "steps": int(result.steps[0])})

    return tune_grid_seconds(trainable, tune.grid_search(work), storage)


def tune_grid_seconds(trainable, param_space: dict, storage: Path) -> float:
    """Seconds for a local Ray (started here) and Ray Tune's defaults to run ``trainable`` over
    ``param_space``, one trial per point: the per-trial baselines' common part. A new Ray of its
    own, as vitsweep's embedded default starts it: a bare ray.init joins the newest Ray started
    on the machine (a test's cluster that later kills its nodes: "Owner's node has crashed")."""
    start = time.perf_counter()
    start_local_ray(include_dashboard=False, log_to_driver=False)
    run_config = tune.RunConfig(storage_path=str(storage), verbose=0)
    grid = tune.Tuner(trainable, param_space=param_space, run_config=run_config).fit()
    seconds = time.perf_counter() - start
    ray.shutdown()
    if grid.num_errors:
        raise RuntimeError(f"{grid.num_errors} trials of the per-trial baseline failed")
    return seconds


def spec_text(grid: dict, seeds: int) -> str:
    """The vitsweep spec of the grid: each model on its own alpha* and N values (per_model),
    bundled defaults otherwise."""
    per_model = "".join(
        f"  {m}: {{n_train: {ns}, axes: {{alpha_star: {alphas}}}}}\n" for m, (alphas, ns) in grid.items()
    )
    return (
        f"name: w1\nmodels: {list(grid)}\nn_train: {grid['vit'][1]}\nseeds: {seeds}\nper_model:\n{per_model}"
        f"max_trainings: 1000000\nresources: {{cpus_per_trial: 1}}\n"
    ).replace("'", "")


def vitsweep(path: Path, folder: Path, log: Path) -> tuple[float, float, float, int]:
    """(c): (end-to-end seconds, seconds inside the sweep (Ray Tune's fit), seconds in train_pack
    summed over trials, trainings) of one `vitsweep run --no-cache` of the spec at ``path``; its
    output (the table of every cell) goes to ``log``."""
    start = time.perf_counter()
    out = subprocess.run(
        [str(VITSWEEP), "run", str(path), "--home", str(folder / "home"), "--no-cache", "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    total = time.perf_counter() - start
    log.write_text(out.stdout)
    if out.returncode != 0:
        raise RuntimeError(f"vitsweep run failed:\n{out.stderr[-3000:]}")
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    return total, summary["wall_s"], summary["train_s"], summary["trainings"]


def add_cores(parser: argparse.ArgumentParser) -> None:
    """--cores: the CPU cores a bench's own measurements use (the suite gives one; a sweep it runs
    through vitsweep uses what Ray finds)."""
    parser.add_argument(
        "--cores", type=int, default=os.cpu_count(), help="CPU cores its own measurements use (default: all)"
    )


def matmul_flops(threads: int | None, size: int = 2048, repeats: int = 10, device: str = "cpu") -> float:
    """FLOP/s of the best of ``repeats`` float32 size^2 matmuls on ``device`` (a CPU: on
    ``threads`` threads; None leaves torch's setting; a GPU: TF32 as torch leaves it, off)."""
    if threads is not None:
        torch.set_num_threads(threads)
    a, b = torch.randn(size, size, device=device), torch.randn(size, size, device=device)
    _timed(lambda: a @ b, device)
    best = min(_timed(lambda: a @ b, device) for _ in range(repeats))
    return 2 * size**3 / best


def attention_matmul_flops(
    models: int = 50, batch: int = 16, tokens: int = 60, dim: int = 20, repeats: int = 10
) -> float:
    """FLOP/s on one core of the batched products a ViT step is made of (scores X_A X^T and
    softmax(.) X for every sample of a K = 50 pack's mini-batches): the ceiling for the FLOP
    fraction of this model's training, whatever the code around them."""
    torch.set_num_threads(1)
    xa, x, p = (torch.randn(models * batch, tokens, n) for n in (dim, dim, tokens))
    products = (lambda: xa @ x.transpose(1, 2), lambda: p @ x)
    best = sum(min(_timed(f) for _ in range(repeats)) for f in products)
    return 2 * 2 * models * batch * tokens * tokens * dim / best


def fraction(value: float) -> float:
    """A measured fraction to 3 significant digits: a small share stays visible, not rounded to 0."""
    return float(f"{value:.3g}")


def _timed(fn, device: str = "cpu") -> float:
    """Seconds ``fn`` takes, its GPU work included."""
    start = time.perf_counter()
    fn()
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start


def flops_per_training(work: list[dict], every: int, device: str = "cpu") -> dict[str, float]:
    """Model -> mean FLOPs of one training (FlopCounterMode over every ``every``-th training of each model)."""
    counts: dict[str, list[int]] = {}
    for model in dict.fromkeys(t["model"] for t in work):
        for t in [t for t in work if t["model"] == model][::every]:
            with FlopCounterMode(display=False) as counter:
                train_one(t, device)
            counts.setdefault(model, []).append(counter.get_total_flops())
    return {model: float(np.mean(c)) for model, c in counts.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--alpha-every", type=int, default=2, help="subset: every k-th alpha* of Fig 1")
    parser.add_argument("--n-every", type=int, default=3, help="subset: every k-th N of Fig 1")
    parser.add_argument("--seeds", type=int, default=8, help="subset: seeds per (alpha*, N)")
    parser.add_argument("--a-every", type=int, default=4, help="(a) trains every k-th training of the subset")
    parser.add_argument(
        "--b-every", type=int, help="(b) trains every k-th training (default: all of the subset; with --full 10)"
    )
    parser.add_argument(
        "--flop-every", type=int, help="count the FLOPs of every k-th training (default 8; with --full 20)"
    )
    parser.add_argument(
        "--full",
        action="store_true",
        help="all of W1 (4,000 trainings): (c), then (b) and the FLOPs on samples of it; no (a)",
    )
    add_cores(parser)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "fig1.json")
    args = parser.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    grid, seeds = (w1(), SEEDS) if args.full else (w1(args.alpha_every, args.n_every), args.seeds)
    b_every, flop_every = args.b_every or (10 if args.full else 1), args.flop_every or (20 if args.full else 8)
    work = trainings(grid, seeds)
    result: dict = {
        "workload": "W1 (full)" if args.full else "W1 subset",
        "grid": grid,
        "seeds": seeds,
        "trainings": len(work),
        "cpus": args.cores,
        "torch": torch.__version__,
    }
    # first, while nothing else runs (Ray's processes take a while to go after (a))
    core = matmul_flops(1)
    peak = max(
        matmul_flops(args.cores), args.cores * core
    )  # all threads vary from 103 to 183 GFLOP/s here; never below one per core
    attention = attention_matmul_flops()
    with tempfile.TemporaryDirectory(prefix="vitsweep-bench-") as tmp:
        spec = FIG1 if args.full else Path(tmp) / "w1.yaml"
        if not args.full:
            spec.write_text(spec_text(grid, seeds))
        c_total, c_inside, c_packed, trained = vitsweep(spec, Path(tmp), args.out.with_suffix(".run.txt"))
        assert trained == len(work), (trained, len(work))
        c_rate = len(work) / c_total
        result |= {
            "c_wall_s": round(c_total, 2),
            "c_sweep_wall_s": round(c_inside, 2),
            "c_train_s": round(c_packed, 2),
            "c_trainings_per_s": round(c_rate, 3),
        }
        print(
            f"(c) vitsweep: {len(work)} trainings in {c_total:.1f} s end to end ({c_inside:.1f} s in the sweep)",
            flush=True,
        )
        torch.set_num_threads(args.cores)
        b_work = work[::b_every]
        b = loop(b_work)
        b_rate = len(b_work) / b
        print(f"(b) loop: {len(b_work)} trainings in {b:.1f} s", flush=True)
        result |= {
            "b_trainings": len(b_work),
            "b_wall_s": round(b, 2),
            "b_trainings_per_s": round(b_rate, 3),
            "ratio_vs_loop": round(c_rate / b_rate, 2),
        }
        if not args.full:
            sample = work[:: args.a_every]
            a = ray_per_trial(sample, Path(tmp) / "per-trial")
            print(f"(a) one model per Ray Tune trial: {len(sample)} trainings in {a:.1f} s", flush=True)
            a_rate = len(sample) / a
            result |= {
                "a_trainings": len(sample),
                "a_wall_s": round(a, 2),
                "a_trainings_per_s": round(a_rate, 3),
                "ratio_vs_ray_per_trial": round(c_rate / a_rate, 2),
            }
    per = flops_per_training(work, flop_every)
    flops = sum(per[t["model"]] for t in work)
    result |= {
        "matmul_flop_per_s": round(peak),
        "matmul_flop_per_s_one_core": round(core),
        "flops_per_training": {m: round(f) for m, f in per.items()},
        "c_flop_per_s": round(flops / c_inside),
        "flop_fraction": fraction(flops / c_inside / peak),
        "flop_fraction_in_packs": fraction(flops / c_packed / core),
        "flop_fraction_end_to_end": fraction(flops / c_total / peak),
        "attention_matmul_flop_per_s": round(attention),
        "attention_matmul_fraction": fraction(attention / core),
    }
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
