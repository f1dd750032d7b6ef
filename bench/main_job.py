"""The main job at a baseline revision and at this tree, side by side in one run: the time ratio of their
sweeps, and whether they give the same answer (the contract a change that moves bits is judged by:
`vitsweep compare`'s, docs/performance.md). Each side is one `vitsweep run --no-cache --json` of
sweeps/sample_complexity.yaml as its own tree has it (a change of the spec is part of the change), both
recorded in one home, compared by this tree's `vitsweep compare`.

    make bench-main-job BASELINE=REV      # or: .venv/bin/python bench/main_job.py --baseline REV [--out FILE]

The last line of stdout is one JSON object (also written to --out): each side's seconds in the sweep and end
to end, their ratios (baseline / this tree), and the contract (holds, and its three counts).
"""

import argparse
import json
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.baseline import worktree  # noqa: E402
from bench.onepass import vitsweep  # noqa: E402  (one way to run a tree's vitsweep)
from services.app import recorded  # noqa: E402
from services.store.uris import embedded_uri  # noqa: E402

MAIN = ROOT / "sweeps" / "sample_complexity.yaml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="the git revision to measure against (the issue's start)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "main_job.json")
    args = parser.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-main-job-") as folder:
        home = Path(folder) / "home"
        with worktree(args.baseline, Path(folder) / "baseline") as tree:
            base = vitsweep(tree, MAIN, home, args.out.with_suffix(".baseline.txt"))
        print(f"baseline {args.baseline}: {base['wall_s']:.1f} s in the sweep", flush=True)
        new = vitsweep(ROOT, MAIN, home, args.out.with_suffix(".new.txt"))
        print(f"this tree: {new['wall_s']:.1f} s in the sweep", flush=True)
        comparison, _, _ = recorded.compare(embedded_uri(home), base["sweep_id"], new["sweep_id"], None, home)
    contract = comparison.contract
    result = {
        "baseline": args.baseline,
        "baseline_wall_s": base["wall_s"],
        "wall_s": new["wall_s"],
        "ratio_in_sweep": round(base["wall_s"] / new["wall_s"], 3),
        "baseline_end_to_end_s": round(base["end_to_end_s"], 1),
        "end_to_end_s": round(new["end_to_end_s"], 1),
        "ratio_end_to_end": round(base["end_to_end_s"] / new["end_to_end_s"], 3),
        "contract": None if contract is None else asdict(contract),
    }
    if contract is not None:
        print(
            f"the same answer: {'HOLDS' if contract.holds else 'FAILS'}; primary N* inside the other's CI "
            f"{contract.inside[0]}/{contract.inside[1]}, statements decided otherwise {contract.statements or 'none'}, "
            f"(cell, criterion) N* within one grid step {contract.within_step[0]}/{contract.within_step[1]}",
            flush=True,
        )
    args.out.write_text(json.dumps(result, indent=1))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
