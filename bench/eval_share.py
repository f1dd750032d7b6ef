"""Where a spec's training time goes: every pack of it as the sweep cuts them for --slots trials, trained
by vit_core.train_pack one after another on one thread (as a trial has), each timed whole, in its SGD
steps and in its test scoring (the trainer's `_Training.step` and `_TestScores`). By default the main
job, sweeps/sample_complexity.yaml. Run it on two trees, one after the other, to compare them:

    .venv/bin/python bench/eval_share.py [--spec SPEC] [--model vit] [--alpha-star 0.05 0.4] [--eval-subset 100]
    PYTHONPATH=WORKTREE .venv/bin/python bench/eval_share.py    # another revision's vit_core and services

The last line of stdout is one JSON object (also written to --out): per pack, its seconds whole, in steps
and in test scoring; and their sums.
"""

import argparse
import dataclasses
import json
import time
from pathlib import Path

import torch

import vit_core
from services.process import keep_freed_memory
from services.search.packs import packs
from services.spec import load_spec
from vit_core.training import loop, scoring

ROOT = Path(__file__).resolve().parents[1]
MAIN, RESULTS = ROOT / "sweeps" / "sample_complexity.yaml", ROOT / "bench" / "results"


class Timed:
    """Seconds spent in ``owner.name`` while this is entered (the method wrapped, then put back)."""

    def __init__(self, owner: type, name: str):
        self.owner, self.name, self.seconds = owner, name, 0.0

    def __enter__(self) -> "Timed":
        self.method = method = getattr(self.owner, self.name)

        def timed(*args, **kw):
            start = time.perf_counter()
            try:
                return method(*args, **kw)
            finally:
                self.seconds += time.perf_counter() - start

        setattr(self.owner, self.name, timed)
        return self

    def __exit__(self, *exc) -> None:
        setattr(self.owner, self.name, self.method)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", type=Path, default=MAIN)
    parser.add_argument("--slots", type=int, default=2, help="trial slots the packs are cut for (2 cores)")
    parser.add_argument("--model", nargs="*", help="only these model kinds")
    parser.add_argument("--alpha-star", type=float, nargs="*", help="only cells at these alpha*")
    parser.add_argument("--eval-subset", type=int, help="the test screen's size instead of the spec's")
    parser.add_argument("--seeds", type=int, help="only each pack's first SEEDS models (a quick look)")
    parser.add_argument("--out", type=Path, default=RESULTS / "eval_share.json", help="where the JSON goes too")
    args = parser.parse_args()
    keep_freed_memory()
    torch.set_num_threads(1)
    spec = load_spec(args.spec)
    rows = []
    for pack in packs(spec, args.slots):
        cell = spec.cells[pack.cell]
        if (args.model and cell.model not in args.model) or (
            args.alpha_star and cell.values.get("alpha_star") not in args.alpha_star
        ):
            continue
        data, model, training = spec.resolved_cell(cell).configs
        training = pack.training(training)
        if args.eval_subset:
            training = dataclasses.replace(training, eval_subset=args.eval_subset)
        keep = slice(args.seeds)
        lrs = list(pack.lr or [training.lr] * len(pack.seeds))[keep]
        n_train, seeds = list(pack.n_train)[keep], list(pack.seeds)[keep]
        with Timed(loop._Training, "step") as steps, Timed(scoring._TestScores, "__call__") as scored:
            start = time.perf_counter()
            loop.train_pack(data, model, training, n_train, seeds, lrs)
            wall = time.perf_counter() - start
        row = {"cell": cell.run_name, "models": len(seeds), "wall_s": round(wall, 2)}
        rows.append(row | {"steps_s": round(steps.seconds, 2), "test_scoring_s": round(scored.seconds, 2)})
        print(
            f"{cell.run_name}: {wall:.1f} s, steps {steps.seconds:.1f} s, test scoring {scored.seconds:.1f} s",
            flush=True,
        )
    sums = {key: round(sum(r[key] for r in rows), 1) for key in ("wall_s", "steps_s", "test_scoring_s")}
    print(
        f"all {len(rows)} packs: {sums['wall_s']} s, steps {sums['steps_s']} s, test scoring {sums['test_scoring_s']} s"
    )
    result = json.dumps(
        {"vit_core": str(Path(vit_core.__file__).parent), "spec": str(args.spec), "eval_subset": args.eval_subset}
        | sums
        | {"packs": rows}
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(result + "\n")
    print(result)


if __name__ == "__main__":
    main()
