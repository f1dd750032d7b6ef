"""`vitsweep run` killed with SIGKILL (the driver's whole process group) at moments spread over a
sweep, the same command run again after each kill: the sweep ends as an uninterrupted run ends
(the same N* and per-model records), no model is trained again once cached, MLflow holds one
parent run and one child per cell, and running the command once more shows the record without
logging it again. Grid and adaptive (sample_complexity) sweeps; `make chaos` kills at every phase of tests/kill_at.py
(before Ray starts and before any trial too) and at random moments (docs/resume.md)."""

import pytest
from chaos import ADAPTIVE, GRID, KilledSweep, check
from conftest import run_spec

pytestmark = pytest.mark.system  # Ray, servers, Docker, Slurm or benchmarks: make test-fast leaves this file out

# One kill in each stretch whose loss a resume must make good: trials half done, every trial done and
# nothing in MLflow, the MLflow record half made (each kill more costs the suite a resume: the rest are left
# to `make chaos`); `make chaos` also kills as trials are created, once the record is whole, and at random.
GRID_KILLS = [("trial_complete", 2), ("saved", 1), ("record_cell", 2)]
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
