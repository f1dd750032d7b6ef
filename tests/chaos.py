"""Kill `vitsweep run` at any moment, run the same command again, and check that nothing computed
was lost, trained twice or recorded twice. tests/test_kill_anywhere.py kills at a few chosen
moments; `make chaos` runs the longer loop (every phase of tests/kill_at.py, then kills at random
times) and prints its counts as one JSON line:

    .venv/bin/python tests/chaos.py [--random-kills 6] [--seed 0]
    .venv/bin/python tests/chaos.py --loops 10     # the adaptive sweep killed at 15/45/80/97% of its time,
                                                   # then run again; in a fresh home each loop, 10 in a row
"""

import argparse
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
from mlflow.tracking import MlflowClient

from services.store.tracking import load_sweep

ROOT = Path(__file__).parents[1]
BIN = Path(sys.executable).parent

GRID = """name: chaos-grid
models: [vit, cnn]
data: {n_tokens: 20, dim: 10, n_patterns: 8, alpha_star: 0.2}
model: {width: 8}
training: {n_test: 100, max_steps: 300}
n_train: [4, 16]
seeds: 2
resources: {models_per_pack: 1}
"""
ADAPTIVE = """name: chaos-adaptive
models: [vit]
axes: {alpha_star: [0.1, 0.3]}
data: {n_tokens: 30, dim: 12, n_patterns: 12}
model: {width: 16}
training: {n_test: 300, max_steps: 3000}
n_train: [2, 8]
seeds: 4
search: {mode: sample_complexity, precision: 0.5}
resources: {models_per_pack: 4}
"""
# (phase, K) of tests/kill_at.py, in the order of a sweep: one kill each, the same command run again after it
EVERY_PHASE = [
    ("start_ray", 1),
    ("fit", 1),
    ("trial_start", 2),
    ("trial_result", 1),
    ("trial_complete", 2),
    ("trial_complete", 3),
    ("saved", 1),
    ("record_cell", 2),
    ("recorded", 1),
    ("marked", 1),
]


@dataclass
class Tally:
    """What the loop did and found."""

    kills: int = 0
    phases_hit: list[str] = field(default_factory=list)  # phases where a kill landed (the run reached them)
    retrained: list[str] = field(default_factory=list)  # cache entries written again after they existed
    runs: int = 0


class KilledSweep:
    """One spec's sweep under one home: the same `vitsweep run` command again and again."""

    def __init__(self, spec_text: str, folder: Path):
        folder.mkdir(parents=True, exist_ok=True)
        self.spec = folder / "spec.yaml"
        self.spec.write_text(spec_text)
        self.home = folder / "home"
        self.tally = Tally()
        self.entries: dict[str, tuple[int, int]] = {}  # cache entry -> (inode, mtime) when first seen

    def run(
        self,
        kill: tuple[str, int] | None = None,
        after_s: float | None = None,
        action: str = "kill",
        extra: tuple[str, ...] = (),
        on_stop=None,
    ) -> subprocess.CompletedProcess:
        """The command, to its end, or until ``action`` (tests/kill_at.py) at ``kill`` = (phase, K)
        from inside, or a SIGKILL after ``after_s`` seconds from outside; then wait until every
        process it started is gone (its session: the run starts one). Action ``stop``:
        ``on_stop(process)`` is called once the driver is frozen, and must end it."""
        args = ["run", str(self.spec), "--home", str(self.home), "--json", *extra]
        if kill:
            argv = [sys.executable, str(ROOT / "tests" / "kill_at.py"), action, kill[0], str(kill[1]), *args]
        else:
            argv = [str(BIN / "vitsweep"), *args]
        proc = subprocess.Popen(
            argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
        )
        if action == "stop":
            while proc.poll() is None and psutil.Process(proc.pid).status() != psutil.STATUS_STOPPED:
                time.sleep(0.1)
            on_stop(proc)
        try:
            out, err = proc.communicate(timeout=after_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        if proc.returncode == 0:
            left_over(proc.pid)
        wait_gone(proc.pid)
        self.tally.runs += 1
        if proc.returncode == -signal.SIGKILL:
            self.tally.kills += 1
            self.tally.phases_hit.append(f"{kill[0]}:{kill[1]}" if kill else f"after {after_s:.1f} s")
        self._check_cache()
        return subprocess.CompletedProcess(argv, proc.returncode, out, err)

    def _check_cache(self) -> None:
        """Note each cache entry the first time it is seen; one written again since was trained twice."""
        for path in sorted((self.home / "cache").glob("*/*.json")):
            stat = path.stat()
            seen = self.entries.setdefault(path.name, (stat.st_ino, stat.st_mtime_ns))
            if seen != (stat.st_ino, stat.st_mtime_ns) and path.name not in self.tally.retrained:
                self.tally.retrained.append(path.name)


def session(sid: int) -> list[psutil.Process]:
    """The processes of session ``sid``: what a command started in its own session started, Ray's
    daemons and workers included (they keep the session; their titles and environments change)."""
    found = []
    for proc in psutil.process_iter():
        with contextlib.suppress(OSError, psutil.Error):
            if os.getsid(proc.pid) == sid and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
    return found


def left_over(sid: int) -> None:
    """Fails where a process of session ``sid`` outlives its driver's normal exit by 5 s: a sweep
    stops its Ray before it exits, the raylet's agents too (services.execution.ray_start.stop_ray),
    which, killed without them, stayed on for up to a minute here."""
    _, alive = psutil.wait_procs(session(sid), timeout=5)
    assert not alive, f"left running by a finished run: {[(p.pid, p.name()) for p in alive]}"


def wait_gone(sid: int) -> None:
    """Until session ``sid`` has no process left: Ray's workers and agents outlive a killed driver
    for a moment. Those still there after a minute are killed (they missed their raylet's death)."""
    deadline = time.monotonic() + 60
    while session(sid):
        if time.monotonic() > deadline:
            kill_session(sid)
        time.sleep(0.2)


def kill_session(sid: int) -> None:
    """SIGKILL to every process of session ``sid``, and wait for them to end."""
    procs = session(sid)
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(procs)


def summary_of(done: subprocess.CompletedProcess) -> dict:
    """The JSON summary a `vitsweep run --json` ended with."""
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def logged_records(summary: dict) -> dict[str, list[dict]]:
    """Cell -> its per-model records as MLflow holds them (read by services.store.tracking), sorted by
    (N, seed); NaN as None, so that equal records compare equal."""
    _, _, cells = load_sweep(summary["tracking_uri"], summary["sweep_id"])
    return {
        c.cell.label: [_nan_free(r.as_dict()) for r in sorted(c.records, key=lambda r: (r.n_train, r.seed))]
        for c in cells
    }


def _nan_free(row: dict) -> dict:
    return {k: None if isinstance(v, float) and v != v else v for k, v in row.items()}


def duplicate_runs(summary: dict) -> int:
    """Runs of the experiment beyond one parent for the sweep and one child per cell, live or left
    RUNNING by a killed recording (deleted ones do not count: MLflow hides them)."""
    client = MlflowClient(summary["tracking_uri"])
    experiment = client.get_run(summary["mlflow_parent_run_id"]).info.experiment_id
    runs = client.search_runs([experiment])
    parents = [r for r in runs if r.data.tags.get("vitsweep.sweep_id") == summary["sweep_id"]]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == summary["mlflow_parent_run_id"]]
    cells = len(summary["n_star"])
    running = [r for r in runs if r.info.status == "RUNNING"]
    return len(parents) - 1 + len(children) - cells + len(running)


def check(sweep: KilledSweep, reference: dict) -> dict:
    """Run the command once more to its end and compare with an uninterrupted run: the same N*
    and per-model records, one parent run and one child per cell, nothing trained twice; then
    once more: it shows the record and logs nothing. Returns the counts."""
    final = summary_of(sweep.run())
    assert final["n_star"] == reference["n_star"]
    assert logged_records(final) == logged_records(reference)
    again = summary_of(sweep.run())
    assert again["recorded_earlier"] and again["mlflow_parent_run_id"] == final["mlflow_parent_run_id"]
    counts = {
        "kills": sweep.tally.kills,
        "phases_hit": sweep.tally.phases_hit,
        "runs": sweep.tally.runs,
        "trainings_redone": len(sweep.tally.retrained),
        "duplicate_mlflow_runs": duplicate_runs(again),
    }
    assert counts["trainings_redone"] == 0 and counts["duplicate_mlflow_runs"] == 0, counts
    return counts


SHARES = (0.15, 0.45, 0.8, 0.97)  # of an uninterrupted run's time: where the loop's kills land


def loops(count: int) -> dict:
    """The adaptive sweep killed (SIGKILL of its process group) at each of SHARES of an uninterrupted
    run's time, the same command run again after each, then checked against the uninterrupted run;
    ``count`` times, each in a fresh home. Stops at the first loop that fails (an AssertionError)."""
    with tempfile.TemporaryDirectory(prefix="chaos") as tmp:
        start = time.monotonic()
        reference = summary_of(KilledSweep(ADAPTIVE, Path(tmp) / "reference").run(extra=("--no-cache",)))
        took = time.monotonic() - start
        for k in range(count):
            sweep = KilledSweep(ADAPTIVE, Path(tmp) / f"loop-{k}")
            for share in SHARES:
                sweep.run(after_s=share * took)
            counts = check(sweep, reference)
            print(f"loop {k + 1}/{count}: {json.dumps(counts)}", file=sys.stderr, flush=True)
    return {"loops_passed": count, "uninterrupted_s": round(took, 1), "kills_at": SHARES}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--random-kills", type=int, default=6, help="kills at random moments after the kill at every phase"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--loops", type=int, default=0, help="only the kill-anywhere loop: the adaptive sweep killed at SHARES, N times"
    )
    args = parser.parse_args()
    if args.loops:
        print(json.dumps(loops(args.loops)))
        return
    rng = random.Random(args.seed)
    results = {}
    with tempfile.TemporaryDirectory(prefix="chaos") as tmp:
        for name, text in (("grid", GRID), ("adaptive", ADAPTIVE)):
            start = time.monotonic()
            reference = summary_of(KilledSweep(text, Path(tmp) / name / "reference").run(extra=("--no-cache",)))
            took = time.monotonic() - start
            at_phases, at_random = (
                KilledSweep(text, Path(tmp) / name / "phases"),
                KilledSweep(text, Path(tmp) / name / "random"),
            )
            for phase in EVERY_PHASE:
                at_phases.run(phase)
            for _ in range(args.random_kills):  # each lands somewhere in what is left of the sweep, or after it
                at_random.run(after_s=rng.uniform(0, took))
            results[name] = {
                "at_every_phase": check(at_phases, reference),
                "at_random_moments": check(at_random, reference),
                "uninterrupted_s": round(took, 1),
            }
            print(f"{name}: {json.dumps(results[name])}", file=sys.stderr)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
