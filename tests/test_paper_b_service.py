"""Paper B through the sweep service: a tiny Fig 4 sweep into MLflow, read back by the report."""

import json

import pytest
from conftest import run_spec
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

from services.cli import app

runner = CliRunner()
TINY = """name: tiny_b
family: jelassi2022
models: [positional, vanilla]
data: {n_patches: 6, set_size: 2, dim: 12}
training: {loss: logistic, lr: 0.01, batch_size: 32, max_steps: 600, eval_every: 100, n_test: 200}
n_train: [400]
seeds: 3
resources: {models_per_pack: 3}
"""


def test_a_paper_b_sweep_reports_patch_association_and_the_learned_scores(local_ray, tmp_path):
    summary, _ = run_spec(TINY, tmp_path)
    assert set(summary["patch_association"]) == {"positional", "vanilla"}
    assert all(0 <= v <= 1 for v in summary["patch_association"].values())
    assert summary["patch_association"]["positional"] == 1.0  # 600 steps suffice for 3 pairs
    assert summary["cos_v_wstar"]["positional"] > 0.9
    client = MlflowClient(summary["tracking_uri"])
    logged = {a.path for a in client.list_artifacts(summary["mlflow_parent_run_id"])}
    assert {"structure.png", "learned_attention.png", "summary.json"} <= logged
    reported = runner.invoke(
        app, ["report", "--home", str(tmp_path / "home"), "--out", str(tmp_path / "report"), "--json"]
    )
    assert reported.exit_code == 0, reported.output
    rebuilt = json.loads(reported.stdout.strip().splitlines()[-1])
    assert rebuilt["patch_association"] == summary["patch_association"]
    assert rebuilt["cos_v_wstar"] == pytest.approx(summary["cos_v_wstar"], rel=1e-8)  # MLflow's table keeps 10 digits
    assert (tmp_path / "report" / "learned_attention.png").is_file()
