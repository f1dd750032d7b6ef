"""W1's trainings through vit_core alone on one device: a pack per cell against one at a time.

What a vitsweep trial does on a GPU, without Ray or MLflow around it (issue 8): every cell of W1
(one model kind and alpha*, its N values x seeds: 200 models with the defaults) trains as one
pack on the device, the cells one after another in this process; then every --loop-every-th of
the same trainings trains alone (K = 1) on the same device. Both sides run vit_core.train_pack;
the loop's models must reach the same outcomes as in their packs. It prints trainings per second
of each, their ratio, and the packs' FLOP rate against the device's float32 matmul rate (the
best of ten 8192^2 products on a GPU, 2048^2 on a CPU), and ends stdout with one JSON object
(also written to --out). On the 2-core CPU all of W1 takes about 8 minutes through vitsweep
(bench/fig1.py --full); this is for a machine with a GPU.

    make bench-device                  # or: .venv/bin/python bench/device.py [--device cuda:0]
"""

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.fig1 import (  # noqa: E402
    SEEDS,
    add_cores,
    flops_per_training,
    fraction,
    matmul_flops,
    train_one,
    trainings,
    w1,
)
from vit_core import ModelConfig, TokenDataConfig, TrainConfig, train_pack  # noqa: E402


def packed(work: list[dict], device: str) -> tuple[float, dict]:
    """Seconds to train ``work`` as one pack per (model, alpha*), and each training's success."""
    cells: dict[tuple, list[dict]] = {}
    for t in work:
        cells.setdefault((t["model"], t["alpha_star"]), []).append(t)
    success = {}
    start = time.perf_counter()
    for (model, alpha), mine in cells.items():
        result = train_pack(
            TokenDataConfig(alpha_star=alpha),
            ModelConfig(kind=model),
            TrainConfig(),
            [t["n"] for t in mine],
            [t["seed"] for t in mine],
            device=device,
        )
        success |= {_key(t): bool(s) for t, s in zip(mine, result.success)}
    return time.perf_counter() - start, success


def one_at_a_time(work: list[dict], device: str) -> tuple[float, dict]:
    """Seconds to train every model of ``work`` alone (K = 1), and each one's success."""
    success = {}
    start = time.perf_counter()
    for t in work:
        success[_key(t)] = bool(train_one(t, device).success[0])
    return time.perf_counter() - start, success


def _key(t: dict) -> tuple:
    return t["model"], t["alpha_star"], t["n"], t["seed"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--alpha-every", type=int, default=1, help="every k-th alpha* of Fig 1 (default: all of W1)")
    parser.add_argument("--n-every", type=int, default=1, help="every k-th N of Fig 1")
    parser.add_argument("--seeds", type=int, default=SEEDS, help="seeds per (alpha*, N)")
    parser.add_argument("--loop-every", type=int, default=40, help="the loop trains every k-th training")
    parser.add_argument("--flop-every", type=int, default=100, help="count the FLOPs of every k-th training")
    add_cores(parser)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "device.json")
    args = parser.parse_args()
    torch.set_num_threads(args.cores)
    work = trainings(w1(args.alpha_every, args.n_every), args.seeds)
    gpu = torch.device(args.device).type == "cuda"
    name = torch.cuda.get_device_name(args.device) if gpu else "cpu"
    result: dict = {"device": name, "torch": torch.__version__, "trainings": len(work)}
    pack_s, pack_success = packed(work, args.device)
    print(f"packed: {len(work)} trainings in {pack_s:.1f} s on {name}", flush=True)
    sample = work[:: args.loop_every]
    loop_s, loop_success = one_at_a_time(sample, args.device)
    print(f"one at a time: {len(sample)} trainings in {loop_s:.1f} s", flush=True)
    pack_rate, loop_rate = len(work) / pack_s, len(sample) / loop_s
    flops = flops_per_training(work, args.flop_every, args.device)
    peak = matmul_flops(None, 8192 if gpu else 2048, device=args.device)  # a CPU: on --cores threads
    achieved = sum(flops[t["model"]] for t in work) / pack_s
    result |= {
        "packed_wall_s": round(pack_s, 2),
        "packed_trainings_per_s": round(pack_rate, 3),
        "loop_trainings": len(sample),
        "loop_wall_s": round(loop_s, 2),
        "loop_trainings_per_s": round(loop_rate, 3),
        "ratio_packed_vs_loop": round(pack_rate / loop_rate, 2),
        "loop_outcomes_equal_packed": float(np.mean([loop_success[k] == pack_success[k] for k in loop_success])),
        "success_rate": float(np.mean(list(pack_success.values()))),
        "matmul_flop_per_s": round(peak),
        "flops_per_training": {m: round(f) for m, f in flops.items()},
        "packed_flop_per_s": round(achieved),
        "flop_fraction": fraction(achieved / peak),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
