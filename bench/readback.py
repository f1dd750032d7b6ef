"""Reading a recorded sweep back (issue 85): `vitsweep report` and `vitsweep export --table cells` of one
recorded sweep, with this tree's code and with a git worktree of a baseline commit, in one run.

Each command runs --repeat times per tree, one after another, in a subprocess with that tree first on
PYTHONPATH (its services and vit_core over the installed ones), each into a folder of its own; the
median seconds are reported with baseline / new ratios. The outputs are compared: the report's stdout
(less the line naming its folder), the report folder's files and the cells CSV, byte for byte. The
sweep must have been recorded by code that records its report (00b4c9e's successor on): the baseline
recomputes what the new code reads back.

    make bench-readback HOME_DIR=runs BASELINE=REV   # or: .venv/bin/python bench/readback.py --home runs --baseline REV

The last stdout line is one JSON object (also written to --out).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.baseline import worktree  # noqa: E402

COMMANDS = {
    "report": lambda home, sweep, out: ["report", *sweep, "--home", str(home), "--out", str(out)],
    "export_cells": lambda home, sweep, out: [
        *["export", *sweep, "--home", str(home), "--table", "cells", "--out", str(out / "cells.csv")]
    ],
}


def timed(tree: Path, args: list[str]) -> tuple[float, str]:
    """(seconds, stdout) of one `vitsweep ARGS` with ``tree``'s code."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")])}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", "from services.app.cli import entry; entry()", *args],
        capture_output=True,
        text=True,
        cwd=tree,
        env=env,
    )
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"vitsweep {' '.join(args)} failed in {tree}:\n{done.stderr[-3000:]}")
    return seconds, done.stdout


def measure(tree: Path, home: Path, sweep: list[str], scratch: Path, repeat: int) -> dict:
    """Per command: the median seconds over ``repeat`` runs, and the last run's folder and stdout."""
    out = {}
    for name, args_of in COMMANDS.items():
        runs = []
        for i in range(repeat):
            folder = scratch / f"{name}-{i}"
            runs.append((*timed(tree, args_of(home, sweep, folder)), folder))
        out[name] = {"median_s": statistics.median(s for s, _, _ in runs), "stdout": runs[-1][1], "folder": runs[-1][2]}
    return out


def same_output(new: dict, base: dict) -> dict[str, bool]:
    """Whether each command's output is the same under both trees (the report's folder line aside)."""

    def lines(run: dict) -> list[str]:
        text = run["stdout"].replace(str(run["folder"]), "FOLDER")  # export names the file it wrote
        return [line for line in text.splitlines() if not line.startswith("report written to")]

    def files(folder: Path) -> dict[str, bytes]:
        return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}

    return {
        name: lines(new[name]) == lines(base[name]) and files(new[name]["folder"]) == files(base[name]["folder"])
        for name in COMMANDS
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--home", type=Path, default=Path("runs"), help="the home whose embedded store holds the sweep")
    parser.add_argument("--sweep", help="the sweep id (default: the latest in the store)")
    parser.add_argument("--baseline", default="HEAD~1", help="the git revision to compare against")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "readback.json")
    args = parser.parse_args()
    home, sweep = args.home.resolve(), [args.sweep] if args.sweep else []
    with (
        tempfile.TemporaryDirectory(prefix="vitsweep-readback-") as tmp,
        worktree(args.baseline, Path(tmp) / "baseline") as tree,
    ):
        new = measure(ROOT, home, sweep, Path(tmp) / "new", args.repeat)
        base = measure(tree, home, sweep, Path(tmp) / "base", args.repeat)
        same = same_output(new, base)
    result = {"baseline": args.baseline, "home": str(home), "sweep": args.sweep, "repeat": args.repeat}
    for name in COMMANDS:
        n, b = new[name]["median_s"], base[name]["median_s"]
        print(f"{name}: {n:.2f} s (baseline {b:.2f} s, {b / n:.1f}x), output the same: {same[name]}", flush=True)
        result[name] = {"new_s": round(n, 3), "baseline_s": round(b, 3), "ratio": round(b / n, 2), "same": same[name]}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
