"""What one one-pass SGD step costs, by pack size K and batch size B: milliseconds a step (and, with
--profile, kernels launched a step and the share of the step the device is busy, by torch.profiler).
The main job's alpha* = 0.15 cells (ViT and CNN) at their chosen step sizes; each pack trains 400 steps
(100 on a CPU) with evaluations only at the start and the end, after one warm-up run.

    .venv/bin/python bench/steps.py                  # this machine's CPU, one thread (as a trial has)
    python3 bench/steps.py --device cuda --profile   # a GPU (docs/performance.md, issue 45)

One JSON line a (model, K, B), then the bench's data_share (bench/onepass.py) per model.
"""

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.fig1 import _timed, fraction  # noqa: E402
from bench.onepass import MAIN, data_share  # noqa: E402
from services.spec import load_spec  # noqa: E402
from vit_core import train_pack  # noqa: E402

CHOSEN_LR = {"vit": 0.5, "cnn": 8.0}  # the main job's chosen step sizes at alpha* = 0.15 (its header)


def step_costs(device: str, with_profile: bool) -> None:
    """Print a JSON line of a step's cost for each model, K in (16, 64) and B in (1, 32)."""
    spec = load_spec(MAIN)
    steps = 400 if device != "cpu" else 100
    for cell in (c for c in spec.cells if c.values["alpha_star"] == 0.15):
        data, model, training = spec.resolved_cell(cell).configs
        for models in (16, 64):
            for batch in (1, 32):
                once = dataclasses.replace(
                    training, batch_size=batch, max_steps=steps, eval_every=steps, eval_ratio=100.0, stability_window=0
                )
                args = (data, model, once, [batch * steps] * models, list(range(models)))

                def train(args=args, lrs=[CHOSEN_LR[cell.model]] * models):
                    return train_pack(*args, lr=lrs, device=device)

                train()  # warm-up: allocations, kernels' first launches
                row = {
                    "model": cell.model,
                    "K": models,
                    "B": batch,
                    "ms_per_step": 1000 * _timed(train, device) / steps,
                }
                if with_profile:
                    row |= launches(train, steps, device)
                print(json.dumps(row), flush=True)
        run = {"configs": (data, model, training), "lr": CHOSEN_LR[cell.model]}
        shares = {f"B={b}": fraction(data_share(run, b, device)) for b in (1, 16)}
        print(json.dumps({"model": cell.model, "data_share": shares}), flush=True)


def launches(train, steps: int, device: str) -> dict:
    """Kernels launched a step and the device's busy share, from one profiled run of ``train``."""
    activities = [ProfilerActivity.CPU, *([ProfilerActivity.CUDA] if device != "cpu" else [])]
    start = time.perf_counter()
    with profile(activities=activities) as prof:
        train()
    wall = time.perf_counter() - start
    kernels = [e for e in prof.key_averages() if e.device_type.name == "CUDA"]
    busy_us = sum(e.device_time_total for e in kernels)
    return {"kernels_per_step": sum(e.count for e in kernels) / steps, "device_busy": busy_us / 1e6 / wall}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--profile", action="store_true", help="also count kernels (slow: the profiler's own cost)")
    args = parser.parse_args()
    if args.device == "cpu":
        torch.set_num_threads(1)
    step_costs(args.device, args.profile)


if __name__ == "__main__":
    main()
