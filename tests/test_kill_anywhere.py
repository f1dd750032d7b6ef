"""`vitsweep run` killed with SIGKILL (the driver's whole process group) at moments spread over a
sweep, the same command run again after each kill: the sweep ends as an uninterrupted run ends
(the same N* and per-model records), no model is trained again once cached, MLflow holds one
parent run and one child per cell, and running the command once more shows the record without
logging it again. Grid and adaptive (sample_complexity) sweeps; `make chaos` kills at every phase of tests/kill_at.py
(before Ray starts and before any trial too) and at random moments (docs/resume.md)."""

import pytest
from chaos import ADAPTIVE, GRID, KilledSweep, check
from conftest import run_spec

GRID_KILLS = [
    ("trial_start", 2),  # trials are being created, none reported
    ("trial_complete", 2),  # mid-way
    ("saved", 1),  # every trial done, nothing in MLflow
    ("record_cell", 2),  # during the MLflow recording
    ("recorded", 1),
]  # the record is whole, the process has not exited
ADAPTIVE_KILLS = [("trial_complete", 3)]  # past the first round: the searcher's saved brackets matter


@pytest.mark.parametrize("text, kills", [(GRID, GRID_KILLS), (ADAPTIVE, ADAPTIVE_KILLS)], ids=["grid", "adaptive"])
def test_a_sweep_killed_anywhere_resumes_to_the_uninterrupted_result(local_ray, tmp_path, text, kills):
    reference, _ = run_spec(text, tmp_path / "reference")  # uninterrupted, in this process, in another home
    sweep = KilledSweep(text, tmp_path / "killed")
    for kill in kills:
        done = sweep.run(kill)
        assert done.returncode == -9, f"the kill at {kill} should land: {done.stderr[-2000:]}"
    counts = check(sweep, reference)
    assert counts["kills"] == len(kills)
