"""Packed training against one model at a time: trainings per second and their ratio.

Both sides run the same code (vit_core.train_pack) on the same models: model k has seed k and
N = n_values[k % len(n_values)]. The loop trains the first --loop-models of them one by one (a
rate, so a subset suffices) and checks that it reaches the same outcomes as the pack.
Target (issue 2): packed >= 3x the loop at K = 256 with the default sizes on a 2-core CPU.

    make bench-packing            # or: .venv/bin/python bench/packing.py --json
"""

import argparse
import json
import os
import time

import numpy as np
import torch

from vit_core import ModelConfig, TokenDataConfig, TrainConfig, train_pack
from vit_core.li2023.kinds import KINDS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=list(KINDS), default="vit")
    parser.add_argument("--K", type=int, default=256, help="models in the pack")
    parser.add_argument("--loop-models", type=int, default=24, help="models trained one at a time")
    parser.add_argument("--alpha-star", type=float, default=TokenDataConfig.alpha_star)
    parser.add_argument("--n-values", type=int, nargs="+", default=[20, 40, 80, 160])
    parser.add_argument("--max-steps", type=int, default=TrainConfig.max_steps)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    data = TokenDataConfig(alpha_star=args.alpha_star)
    model = ModelConfig(kind=args.model)
    train = TrainConfig(max_steps=args.max_steps)
    seeds = list(range(args.K))
    n_train = [args.n_values[k % len(args.n_values)] for k in seeds]

    packed = train_pack(data, model, train, n_train, seeds)
    loop_start = time.perf_counter()
    single = [train_pack(data, model, train, [n_train[k]], [k]) for k in range(args.loop_models)]
    loop_s = time.perf_counter() - loop_start

    packed_rate = args.K / packed.wall_s
    loop_rate = args.loop_models / loop_s
    same = np.mean([s.success[0] == packed.success[k] for k, s in enumerate(single)])
    summary = {
        "model": args.model,
        "K": args.K,
        "loop_models": args.loop_models,
        "threads": args.threads,
        "packed_trainings_per_s": round(packed_rate, 3),
        "loop_trainings_per_s": round(loop_rate, 3),
        "ratio_packed_vs_loop": round(packed_rate / loop_rate, 2),
        "packed_wall_s": round(packed.wall_s, 2),
        "loop_wall_s": round(loop_s, 2),
        "mean_steps": float(packed.steps.mean()),
        "success_rate": float(packed.success.mean()),
        "loop_outcomes_equal_packed": float(same),
    }
    print(
        f"packed: {packed_rate:.2f} trainings/s ({args.K} in {packed.wall_s:.1f} s); "
        f"loop: {loop_rate:.2f} trainings/s ({args.loop_models} in {loop_s:.1f} s); "
        f"ratio {packed_rate / loop_rate:.2f}x"
    )
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
