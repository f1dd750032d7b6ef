"""The share of a one-pass ViT run spent scoring the test set, on the main job's measurement packs.

Per alpha* cell: 16 seeds at the setting the main job chose there (B = 1, its eta: the spec's
header), one pass with its stability window, one thread; the pack timed whole and in test scoring
(the trainer's `_TestScores`, or `_evaluate_test` on a tree from before issue 29, so that a base
revision can be timed the same way). Run it on two trees, side by side, to compare them:

    .venv/bin/python bench/eval_share.py                        # this checkout
    PYTHONPATH=WORKTREE .venv/bin/python bench/eval_share.py    # another one (say, a base revision)

The last line of stdout is one JSON object (also written to --out): per cell, the pack's seconds,
its test scoring's seconds and their ratio.
"""

import argparse
import dataclasses
import json
import time
from pathlib import Path

import torch

import vit_core
from services.process import keep_freed_memory
from services.spec import load_spec

try:  # the trainer by concern (issue 41); a tree from before keeps it in one module
    from vit_core.training import loop as trainer
    from vit_core.training import scoring as scorer
except ImportError:
    from vit_core import train as trainer

    scorer = trainer

ROOT = Path(__file__).resolve().parents[1]
MAIN, RESULTS = ROOT / "sweeps" / "sample_complexity_tuned.yaml", ROOT / "bench" / "results"
CHOSEN_ETA = {0.05: 1.0, 0.1: 2.0, 0.25: 4.0}  # the ViT's eta the main job chose at B = 1 (its header)


def pack(alpha_star: float, eta: float, seeds: int = 16) -> tuple[float, float]:
    """(seconds of the pack, seconds of its test scoring) for the main job's ViT cell at alpha_star."""
    spec = load_spec(MAIN)
    (cell,) = [c for c in spec.cells if c.model == "vit" and c.values["alpha_star"] == alpha_star]
    data, model, train = (spec.resolved_cell if hasattr(spec, "resolved_cell") else spec.plan)(cell).configs
    train = dataclasses.replace(train, batch_size=1, lr=eta)
    steps = train.max_steps
    owner, name = (scorer._TestScores, "__call__") if hasattr(scorer, "_TestScores") else (trainer, "_evaluate_test")
    scoring, spent = getattr(owner, name), [0.0]

    def timed(*args, **kw):
        start = time.perf_counter()
        out = scoring(*args, **kw)
        spent[0] += time.perf_counter() - start
        return out

    setattr(owner, name, timed)
    try:
        start = time.perf_counter()
        trainer.train_pack(data, model, train, [steps] * seeds, list(range(seeds)), [eta] * seeds)
        return time.perf_counter() - start, spent[0]
    finally:
        setattr(owner, name, scoring)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--alpha-star", type=float, nargs="*", default=sorted(CHOSEN_ETA), help="cells to time")
    parser.add_argument("--seeds", type=int, default=16, help="models per pack (the main job measures 16)")
    parser.add_argument("--out", type=Path, default=RESULTS / "eval_share.json", help="where the JSON goes too")
    args = parser.parse_args()
    keep_freed_memory()
    torch.set_num_threads(1)
    cells = {}
    for alpha_star in args.alpha_star:
        wall, scoring = pack(alpha_star, CHOSEN_ETA[alpha_star], args.seeds)
        cells[str(alpha_star)] = {
            "wall_s": round(wall, 2),
            "test_scoring_s": round(scoring, 2),
            "share": round(scoring / wall, 3),
        }
        print(f"alpha*={alpha_star}: {wall:.1f} s, test scoring {scoring:.1f} s ({scoring / wall:.0%})", flush=True)
    result = json.dumps({"vit_core": str(Path(vit_core.__file__).parent), "seeds": args.seeds, "cells": cells})
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(result + "\n")
    print(result)


if __name__ == "__main__":
    main()
