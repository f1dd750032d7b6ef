"""kill -9 of a running `vitsweep run`, then the same command again: the sweep resumes from Ray
Tune's saved state, no model trained before the kill trains again (trials that finished after
Tune's last experiment snapshot run again but read their models from the result cache), and
MLflow ends with exactly one parent run and one child run per cell, with the results an
uninterrupted run gives."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from mlflow.tracking import MlflowClient

from services.spec import load_spec
from vit_core import train_pack

ROOT = Path(__file__).parents[1]
VITSWEEP = Path(sys.executable).parent / "vitsweep"


def _finished_trials(folder: Path) -> dict[str, str]:
    """Trial folder -> its result file's text, for trials that reported (Tune flushes each result)."""
    return {f.parent.name: f.read_text() for f in folder.glob("*/*/result.json") if f.read_text().strip()}


def _cache_entries(home: Path) -> dict[Path, int]:
    """Result-cache entry -> when it was written: one per model trained."""
    return {path: path.stat().st_mtime_ns for path in (home / "cache").glob("*/*.json")}


def _records(result_text: str) -> list:
    """The per-model records of a trial's last reported result."""
    return json.loads(json.loads(result_text.strip().splitlines()[-1])["records"])


def test_a_killed_sweep_resumes_without_redoing_finished_work(tmp_path):
    spec_path = tmp_path / "smoke.yaml"  # the smoke sweep cut into 32 one-model trials, each a second or two
    spec_path.write_text((ROOT / "sweeps" / "smoke.yaml").read_text().replace("models_per_pack: 8", "models_per_pack: 1")
                         .replace("max_steps: 3000", "max_steps: 3000\n  eval_every: 1"))
    home = tmp_path / "home"
    command = [str(VITSWEEP), "run", str(spec_path), "--home", str(home), "--json"]
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.time() + 240
        while len(_finished_trials(home / "ray")) < 3 and time.time() < deadline and proc.poll() is None:
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and what it started, at once
        proc.wait(timeout=60)
        before = _finished_trials(home / "ray")
        assert 3 <= len(before) < 32, "the sweep should be killed part-way"
        cached = _cache_entries(home)
        resumed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    finally:
        subprocess.run([str(VITSWEEP.parent / "ray"), "stop", "--force"], capture_output=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming" in resumed.stderr
    summary = json.loads(resumed.stdout.strip().splitlines()[-1])
    after = _finished_trials(home / "ray")
    assert len(after) == 32
    for name, text in before.items():  # a trial that finished before the kill has the same result after it
        assert _records(after[name]) == _records(text), name
    assert len(cached) >= len(before) and len(_cache_entries(home)) == 32
    for path, written in cached.items():  # no model trained before the kill was trained again (its entry would be rewritten)
        assert path.stat().st_mtime_ns == written, path
    assert summary["trainings"] + summary["cache_hits"] == 32

    spec = load_spec(spec_path)
    client = MlflowClient(summary["tracking_uri"])
    experiment = client.get_experiment_by_name(spec.tracking.experiment).experiment_id
    parents = client.search_runs([experiment], f"tags.`vitsweep.sweep_id` = '{summary['sweep_id']}'")
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    children = client.search_runs([experiment], f"tags.mlflow.parentRunId = '{parents[0].info.run_id}'")
    assert sorted(c.info.run_name for c in children) == sorted(c.label for c in spec.cells)
    assert all(c.info.status == "FINISHED" for c in children)
    by_label = {c.info.run_name: c.info.run_id for c in children}
    for cell in spec.cells:  # the same outcomes as training every model directly, uninterrupted
        seeds = list(range(spec.seeds))
        direct = train_pack(*spec.configs(cell), [n for n in spec.n_train for _ in seeds], seeds * len(spec.n_train)).by_n()
        logged = {m.step: m.value for m in client.get_metric_history(by_label[cell.label], "success_rate")}
        assert logged == {r["n"]: r["success_rate"] for r in direct}
