"""One home, several sweeps: two specs run at once on one home each get what they get alone (state,
cache, MLflow store), and a spec started while its sweep runs is refused in one line, nothing
started."""

import dataclasses
import json
import os
import signal
import subprocess
import sys

import psutil
import pytest
from chaos import BIN, GRID, ROOT, KilledSweep, wait_gone
from conftest import wait_until

from services.store import state
from services.store.tracking import load_sweep

pytestmark = pytest.mark.system  # Ray, servers, Docker, Slurm or benchmarks: make test-fast leaves this file out

# the chaos grid's ViT alone, two models a pack: two trials
TINY = (
    GRID.replace("chaos-grid", "shared-a")
    .replace("models: [vit, cnn]", "models: [vit]")
    .replace("models_per_pack: 1", "models_per_pack: 2")
)


def _records(home, name: str) -> dict[str, list[tuple]]:
    """Per cell, every record of the spec's one finished sweep under ``home`` but its wall-clock times."""
    (sweep_id,) = [s for s, _ in state.markers(home) if s.startswith(name)]
    result = state.load_result(home, sweep_id)
    return {
        c.cell.label: sorted(json.dumps(dataclasses.asdict(r), sort_keys=True) for r in c.records) for c in result.cells
    }


def _run(spec, home) -> subprocess.Popen:
    return subprocess.Popen(
        [str(BIN / "vitsweep"), "run", str(spec), "--home", str(home), "--json"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def test_two_specs_at_once_on_one_home_each_get_what_they_get_alone(tmp_path):
    """Two specs that differ in their names alone, run at once on one home with its result cache,
    record what one of them records alone with no cache (the same trainings, written to one cache
    by two sweeps at once)."""
    alone = KilledSweep(TINY, tmp_path / "alone")
    assert alone.run(extra=("--no-cache",)).returncode == 0
    a, b = KilledSweep(TINY, tmp_path / "a"), KilledSweep(TINY.replace("shared-a", "shared-b"), tmp_path / "b")
    home = tmp_path / "shared"
    both = [_run(a.spec, home), _run(b.spec, home)]
    ended = [proc.communicate() for proc in both]
    assert [proc.returncode for proc in both] == [0, 0], [err[-2000:] for _, err in ended]
    for proc in both:
        wait_gone(proc.pid)
    expected = _records(alone.home, "shared-a")
    assert _records(home, "shared-a") == expected and _records(home, "shared-b") == expected

    uri = f"sqlite:///{home / 'mlflow.db'}"
    for name in ("shared-a", "shared-b"):  # both recorded whole in the one store
        (sweep_id,) = [s for s, _ in state.markers(home) if s.startswith(name)]
        _, found, cells = load_sweep(uri, sweep_id)
        assert found == sweep_id and sum(len(c.records) for c in cells) == sum(map(len, expected.values()))


def test_a_spec_started_while_its_sweep_runs_is_refused_in_one_line_and_nothing_starts(tmp_path):
    """The first run frozen mid-sweep holds the spec's lock; killed, it lets it go (the same command
    then resumes it: tests/test_kill_anywhere.py kills and reruns at every phase)."""
    sweep = KilledSweep(GRID, tmp_path)
    argv = [sys.executable, str(ROOT / "tests" / "kill_at.py"), "stop", "trial_complete", "1"]
    argv += ["run", str(sweep.spec), "--home", str(sweep.home), "--json"]
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    first = subprocess.Popen(argv, cwd=ROOT, start_new_session=True, **quiet)
    try:
        wait_until(lambda: psutil.Process(first.pid).status() == psutil.STATUS_STOPPED, "the first run frozen", first)
        began = state.sweep_ids(sweep.home)
        second = _run(sweep.spec, sweep.home)
        out, err = second.communicate()
        assert second.returncode == 2, err[-2000:]
        assert f"is being run by process {first.pid} on " in err and "nothing was started" in err
        assert state.sweep_ids(sweep.home) == began and out == ""  # no sweep, no Ray, no record of its own
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
        wait_gone(first.pid)
