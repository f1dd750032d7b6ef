"""The progress line's ETA against the truth on a recorded sweep: the trials' starts and ends, as Ray
Tune saved them, replayed through the ETA (services.estimate.eta) and, beside it, through the share of
trials extrapolated that the line used before; at the start and at 20, 50 and 80% of the sweep's time,
each estimate of the time left, the time in fact left and their ratio. --expected S gives the ETA the
wall time it starts from (what a saved plan or the spec's published result said: `vitsweep plan`, or
results/<spec>.json's wall_s); "line_s" is then the packs played out at the fitted pace alone, before
the weighing (Eta.played).

    .venv/bin/python bench/eta.py HOME SWEEP_ID [--slots 2] [--expected S] [--out FILE]

The last line of stdout is one JSON object (also written to --out).
"""

import argparse
import json
import sys
from pathlib import Path

from ray import tune

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from services.app.progress import _eta  # noqa: E402
from services.estimate.eta import Eta  # noqa: E402
from services.search.packs import TrialConfig, pack_cost  # noqa: E402
from services.spec import parse_spec  # noqa: E402
from services.store import state  # noqa: E402
from services.sweep_run import Ended, Running, Trials  # noqa: E402

SHARES = (0.0, 0.2, 0.5, 0.8)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("home", type=Path)
    parser.add_argument("sweep_id")
    parser.add_argument("--slots", type=int, default=2)
    parser.add_argument("--expected", type=float, help="the expected wall time the ETA starts from (s)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    sweep = parse_spec(state.spec_text(args.home, args.sweep_id))
    cost = pack_cost(sweep)
    spans = []  # (start, end, pack cost, model kind) of each trial, epoch seconds
    for trial in tune.ExperimentAnalysis(str(state.folder(args.home, args.sweep_id).resolve())).trials:
        result = trial.last_result
        end = result.get("ended_at", result["timestamp"])
        own = TrialConfig.of(trial.config)
        spans.append((end - result["time_total_s"], end, cost(own.pack), own.cell(sweep).model))
    began, ended = min(s for s, *_ in spans), max(e for _, e, *_ in spans)
    eta = Eta.of(sweep, args.slots, args.expected, began)
    rows = []
    for share in SHARES:
        now = began + share * (ended - began)
        done = [Ended(c, e - s, k) for s, e, c, k in spans if e <= now]
        running = tuple(Running("", c, s, kind=k) for s, e, c, k in spans if s <= now < e)
        trials = Trials(len(done), 0, 0, 0.0, tuple(done), running)
        left, line = eta.left(trials, now), eta.played(trials, now)
        before = _eta(now - began, len(done) / len(spans), args.expected)
        truth = ended - now
        rows.append(
            {
                "share": share,
                "truth_s": round(truth, 1),
                "eta_s": None if left is None else round(left, 1),
                "ratio": None if left is None else round(left / truth, 2),
                "line_s": None if line is None else round(line, 1),
                "before_s": None if before is None else round(before, 1),
                "before_ratio": None if before is None else round(before / truth, 2),
            }
        )
        print(f"{share:.0%} of the sweep: left {truth:.0f} s; ETA {left} s; the share extrapolated {before} s")
    line = json.dumps({"sweep_id": args.sweep_id, "trials": len(spans), "sweep_s": round(ended - began, 1), "at": rows})
    if args.out:
        args.out.write_text(line + "\n")
    print(line)


if __name__ == "__main__":
    main()
