"""What a one-pass SGD step costs on the workloads the science needs (issue 68), against a baseline commit.

W2: the main job, sweeps/sample_complexity.yaml (the theorem's regime since issue 64); W3: a cell where every
premise holds, sweeps/sample_complexity_premises.yaml (its one width, m = 1,024, and batch, B = 32). For each and
each model kind: the kind's longest pack as the sweep cuts it for --slots trials at once (the main job's K = 8
at B = 8 on 2 cores), trained --steps one-pass steps by vit_core.train_pack on one thread (as a trial has),
evaluated only at its start and end on 32 test samples. Per pack:
  model_steps_per_s   K x steps / the run's seconds (one timed run, after a warm-up);
  matmul_share        its matmul FLOPs a step (torch's FlopCounterMode: a 2-step run's less a 1-step run's)
                      against one core's float32 matmul rate (bench/fig1.py), measured in the same run;
  outside_matmul      the share of a profiled run (torch.profiler) not in the self CPU time of aten::bmm, mm,
                      addmm and matmul, and those milliseconds a step (on a GPU: kernels a step, busy share).
--baseline REV measures a git worktree of REV the same way in a subprocess (this file's harness, REV's vit_core,
services and bench helpers) and prints new / baseline ratios of model-steps per second per workload (its packs
one after another) and per pack. Each tree cuts its packs from its own copy of the workloads' specs (a baseline
from before a spec's schema changed still reads it); a pack whose shape (K, B, L, d, m) differs between the two
trees is named under "shapes_differ" and left out of the ratios. The last stdout line is one JSON object (also
written to --out).

    make bench-steps BASELINE=REV        # or: .venv/bin/python bench/steps.py [--baseline REV]
    .venv/bin/python bench/steps.py --device cuda     # a GPU: kernels launched a step instead of the CPU split
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

import torch
from torch.profiler import ProfilerActivity, profile
from torch.utils.flop_counter import FlopCounterMode

ROOT = Path(__file__).resolve().parents[1]
TREE = Path(os.environ.get("BENCH_TREE", ROOT))  # the code measured: a --baseline worktree in its subprocess
sys.path[:0] = list(dict.fromkeys([str(TREE), str(ROOT)]))
from bench.baseline import worktree  # noqa: E402
from bench.fig1 import _timed, fraction, matmul_flops  # noqa: E402
from services.search.packs import packs  # noqa: E402
from services.spec import load_spec  # noqa: E402
from vit_core import train_pack  # noqa: E402

WORKLOADS = {"W2": "sweeps/sample_complexity.yaml", "W3": "sweeps/sample_complexity_premises.yaml"}
STEPS = {"W2": 64, "W3": 32}  # two and one of FreshBatches' 32-step sample chunks: ~3 minutes for both trees
MATMULS = ("aten::bmm", "aten::mm", "aten::addmm", "aten::matmul")
TEST_SAMPLES = 32  # the start's and end's evaluations: a small share of the run


@dataclasses.dataclass(frozen=True)
class Workload:
    """One pack of a workload: its name, model kind, configs (data, model, training), seeds and step size."""

    name: str
    model: str
    configs: tuple
    seeds: tuple[int, ...]
    lr: float

    def run(self, steps: int, device: str):
        """A closure that trains the pack ``steps`` one-pass steps (evaluated at the start and end only)."""
        data, model, training = self.configs
        once = dataclasses.replace(
            training,
            max_steps=steps,
            eval_every=steps,
            eval_ratio=100.0,
            stability_window=0.0,
            n_test=TEST_SAMPLES,
            eval_subset=TEST_SAMPLES,
        )
        K, B = len(self.seeds), training.batch_size
        return lambda: train_pack(data, model, once, [B * steps] * K, list(self.seeds), [self.lr] * K, device)


def workloads(names: list[str], slots: int, models: tuple[str, ...] = ("vit", "cnn")) -> list[Workload]:
    """Each model kind's longest pack of each named workload, as the sweep cuts its packs for ``slots`` trials."""
    made = []
    for name in names:
        spec = load_spec(TREE / WORKLOADS[name])
        longest = {}
        for pack in packs(spec, slots):  # longest first
            longest.setdefault(spec.cells[pack.cell].model, pack)
        for model, pack in longest.items():
            if model not in models:
                continue
            data, net, training = spec.resolved_cell(spec.cells[pack.cell]).configs
            training = pack.training(training)
            made.append(Workload(name, model, (data, net, training), pack.seeds, training.lr))
    return made


def step_flops(work: Workload) -> int:
    """Matmul FLOPs of one step of the pack: a 2-step run's less a 1-step run's (the same evaluations)."""
    counts = []
    for steps in (1, 2):
        with FlopCounterMode(display=False) as counter:
            work.run(steps, "cpu")()
        counts.append(counter.get_total_flops())
    return counts[1] - counts[0]


def split(train, steps: int, device: str) -> dict:
    """From one profiled run of ``train``: on a CPU the share outside matmuls and its ms a step; on a GPU
    kernels launched a step and the device's busy share."""
    gpu = torch.device(device).type == "cuda"
    start = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if gpu else [])]) as prof:
        train()
    wall = time.perf_counter() - start
    events = prof.key_averages()
    if gpu:
        kernels = [e for e in events if e.device_type.name == "CUDA"]
        busy = sum(e.device_time_total for e in kernels) / 1e6 / wall
        return {"kernels_per_step": sum(e.count for e in kernels) / steps, "device_busy": fraction(busy)}
    outside = 1 - sum(e.self_cpu_time_total for e in events if e.key in MATMULS) / 1e6 / wall
    return {"outside_matmul": fraction(outside), "outside_matmul_ms": round(1000 * wall * outside / steps, 2)}


def measure(work: Workload, steps: int, device: str, peak: float) -> dict:
    """One pack's row: its shape, ms a step, model-steps per second, matmul share and time outside matmuls."""
    flops = step_flops(work)
    train = work.run(steps, device)
    work.run(2, device)()  # warm-up: allocations, first launches
    seconds = _timed(train, device)
    K, B = len(work.seeds), work.configs[2].batch_size
    data, model = work.configs[:2]
    shape = {"L": data.n_tokens, "d": data.dim, "m": model.width}
    row = {"workload": work.name, "model": work.model, "K": K, "B": B, **shape, "steps": steps}
    row |= {
        "ms_per_step": round(1000 * seconds / steps, 2),
        "model_steps_per_s": round(K * steps / seconds, 2),
        "flops_per_step": flops,
        "matmul_share": fraction(flops * steps / seconds / peak),
    }
    return row | split(train, steps, device)


def measure_tree(args) -> dict:
    """Every pack of the chosen workloads on this process's tree."""
    gpu = torch.device(args.device).type == "cuda"
    peak = matmul_flops(None, 8192, device=args.device) if gpu else matmul_flops(1)
    rows = []
    for work in workloads(args.workloads, args.slots, args.models):
        rows.append(measure(work, args.steps or STEPS[work.name], args.device, peak))
        print(json.dumps(rows[-1]), flush=True)
    return {"tree": str(TREE), "matmul_flop_per_s": round(peak), "rows": rows}


SHAPE = ("K", "B", "L", "d", "m")


def _key(row: dict) -> str:
    """A pack's name in the ratios: its workload and model kind."""
    return f"{row['workload']} {row['model']}"


def rates(rows: list[dict], chosen_keys: set[str] | None = None) -> dict[str, float]:
    """Model-steps per second per workload (its packs one after another) and per pack (of ``chosen_keys`` only)."""
    chosen = [r for r in rows if chosen_keys is None or _key(r) in chosen_keys]
    per = {_key(r): r["model_steps_per_s"] for r in chosen}
    for name in dict.fromkeys(r["workload"] for r in chosen):
        mine = [r for r in chosen if r["workload"] == name]
        seconds = sum(r["K"] * r["steps"] / r["model_steps_per_s"] for r in mine)
        per[name] = sum(r["K"] * r["steps"] for r in mine) / seconds
    return per


def ratios(result: dict) -> dict:
    """New / baseline model-steps per second per workload and pack, over the packs of one shape in both trees
    (a baseline row without a shape field is taken at its K and B)."""
    old = {_key(r): r for r in result["baseline_result"]["rows"]}
    same, differ = set(), []
    for row in result["rows"]:
        key = _key(row)
        if key in old:
            if all(row[f] == old[key][f] for f in SHAPE if f in old[key]):
                same.add(key)
            else:
                differ.append(key)
    new, base = rates(result["rows"], same), rates(result["baseline_result"]["rows"], same)
    found: dict = {"ratio_vs_baseline": {key: round(new[key] / base[key], 3) for key in new if key in base}}
    return found | ({"shapes_differ": differ} if differ else {})


def baseline(args, folder: Path) -> dict:
    """The same measurement of a git worktree of ``args.baseline``, in a subprocess of this file."""
    tree, out = folder / "baseline", folder / "baseline.json"
    command = [sys.executable, __file__, "--device", args.device, "--slots", str(args.slots), "--out", str(out)]
    command += ["--workloads", *args.workloads, "--models", *args.models]
    command += ["--steps", str(args.steps)] if args.steps else []
    with worktree(args.baseline, tree):
        subprocess.run(command, cwd=tree, env={**os.environ, "BENCH_TREE": str(tree)}, check=True)
    return json.loads(out.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="a git revision measured the same way, in a worktree of it")
    parser.add_argument("--workloads", nargs="+", choices=list(WORKLOADS), default=list(WORKLOADS))
    parser.add_argument("--models", nargs="+", choices=["vit", "cnn"], default=["vit", "cnn"])
    parser.add_argument("--steps", type=int, help=f"one-pass steps a pack trains (default: {STEPS})")
    parser.add_argument("--slots", type=int, default=2, help="trials at once, which set the packs' size")
    parser.add_argument("--device", default="cpu", help="cpu (one thread) or cuda")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "steps.json")
    args = parser.parse_args()
    if args.device == "cpu":
        torch.set_num_threads(1)
    result: dict = {"torch": torch.__version__, "device": args.device}
    if args.baseline:
        with tempfile.TemporaryDirectory(prefix="vitsweep-steps-") as tmp:
            result |= {"baseline": args.baseline, "baseline_result": baseline(args, Path(tmp))}
    result |= measure_tree(args)
    if args.baseline:
        result |= ratios(result)
        print(f"ratio_vs_baseline ({args.baseline}), model-steps per second: {result['ratio_vs_baseline']}")
        if "shapes_differ" in result:
            print(f"left out, a pack of another shape in {args.baseline}: {', '.join(result['shapes_differ'])}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
