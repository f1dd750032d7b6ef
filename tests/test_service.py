"""The smoke sweep through a real local Ray into a real MLflow store, read back and checked
against the trainer's own numbers."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import ray
from conftest import mlflow_server_at, pick_free_port, run_spec
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

from services.app.cli import app
from services.app.logs import sweep_log
from services.execution.ray_tune import run_sweep
from services.execution.trial import train_pack_trial
from services.search.packs import TrialConfig
from services.spec import Sweep, load_spec
from services.stats.summarize import summarize
from services.store import tracking
from services.store.tracking import record_sweep
from services.store.uris import redact
from services.sweep_run import SweepRun
from vit_core import train_pack

pytestmark = pytest.mark.system  # Ray, servers, Docker, Slurm or benchmarks: make test-fast leaves this file out

ROOT = Path(__file__).parents[1]
SMOKE = ROOT / "sweeps" / "smoke.yaml"
runner = CliRunner()


@pytest.fixture(scope="module")
def expected():
    """The smoke spec's cells trained directly, without Ray: per cell label, rows per N and the
    mean attention-mass curve per N."""
    spec = load_spec(SMOKE)
    out, curves = {}, {}
    for cell in spec.cells:
        seeds = list(range(spec.seeds))
        result = train_pack(
            *spec.resolved_cell(cell).configs,
            [n for n in spec.spec.n_train for _ in seeds],
            seeds * len(spec.spec.n_train),
        )
        out[cell.label] = result.by_n()
        mass = result.curves["attention_mass"]
        curves[cell.label] = {
            n: dict(zip(result.eval_steps.tolist(), mass[:, result.n_train == n].mean(1))) for n in spec.spec.n_train
        }
    return spec, out, curves


def _run(*args: str) -> dict:
    result = runner.invoke(app, ["run", str(SMOKE), "--json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.strip().splitlines()[-1])


def _check(summary: dict, expected) -> None:
    spec, rows, curves = expected
    client = MlflowClient(summary["tracking_uri"])
    parent = client.get_run(summary["mlflow_parent_run_id"])
    assert parent.info.status == "FINISHED"
    assert parent.data.params["name"] == "smoke" and parent.data.params["seeds"] == "4"
    assert parent.data.metrics["trainings"] == spec.trainings == summary["trainings"]
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {
        "spec.yaml",
        "resolved_spec.yaml",
        "success_rate_vs_n.png",
        "attention_mass.png",
        "summary.md",
        "summary.json",
    } <= artifacts
    children = client.search_runs([parent.info.experiment_id], f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    names = {cell.run_name: cell.label for cell in spec.cells}  # a run's name: the cell in a table's width
    assert sorted(names[c.info.run_name] for c in children) == sorted(rows)  # one child per cell, none per seed
    for child in children:
        mine = rows[names[child.info.run_name]]
        history = {m.step: m.value for m in client.get_metric_history(child.info.run_id, "success_rate")}
        assert history == {r["n"]: r["success_rate"] for r in mine}
        steps = {m.step: m.value for m in client.get_metric_history(child.info.run_id, "median_iterations_to_zero")}
        assert steps == {
            r["n"]: r["median_iterations_to_zero"] for r in mine if r["median_iterations_to_zero"] is not None
        }
        assert {a.path for a in client.list_artifacts(child.info.run_id)} == {
            "models.json",
            "curves.json",
            "premises.json",
        }
        assert child.data.params["premise.width"] == "violated"  # m = 16 against M^2 log N with M = 12
        assert "difficulty.mean_token_error" in child.data.metrics
        for n in spec.spec.n_train:
            logged = {m.step: m.value for m in client.get_metric_history(child.info.run_id, f"attention_mass_n{n}")}
            if child.data.params["model"] == "cnn":
                assert logged == {}
            else:  # one pack per cell in the smoke spec, so the steps are the pack's own
                assert logged.keys() == curves[names[child.info.run_name]][n].keys()
                np.testing.assert_allclose(
                    [logged[k] for k in sorted(logged)],
                    [curves[names[child.info.run_name]][n][k] for k in sorted(logged)],
                    rtol=1e-6,
                )
        table = json.loads(tracking.artifact_text(client, child.info.run_id, "models.json"))
        assert len(table["data"]) == len(spec.spec.n_train) * spec.seeds
        passing = [r["n"] for r in mine if r["success_rate"] >= spec.success_rate]
        stable = next(
            (r["n"] for i, r in enumerate(mine) if all(x["success_rate"] >= spec.success_rate for x in mine[i:])), None
        )
        assert summary["n_star"][names[child.info.run_name]] == stable
        assert (stable is None) == (not passing or passing[-1] != mine[-1]["n"])


def _plan(home: Path) -> dict:
    planned = runner.invoke(app, ["plan", str(SMOKE), "--home", str(home), "--json"])
    assert planned.exit_code == 0, planned.output
    return json.loads(planned.stdout)


def test_smoke_sweep_into_the_embedded_sqlite_store(local_ray, expected, tmp_path):
    """The sweep runs on the plan it printed, and a plan after it counts what it took. How close
    the plan's seconds come to the sweep's is measured by its commands alone on an idle machine
    (docs/performance.md's plan table), never here: a busy machine would fail a timed test."""
    before = _plan(tmp_path)  # calibrated here: a pilot per cell
    summary = _run("--home", str(tmp_path))
    assert summary["estimated_wall_s"] == before["wall_s"]  # this machine's 2 slots, as the local Ray's
    after = _plan(tmp_path)  # the sweep just run sets the steps and the rate
    assert {c["basis"] for c in after["cells"]} == {f"history {summary['sweep_id']}"}
    assert 0.5 <= before["model_steps"] / after["model_steps"] <= 2  # the pilots saw the steps the sweep took
    assert summary["tracking_uri"] == f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert summary["failed_trials"] == [] and summary["sweep_id"].startswith("smoke-")
    assert (tmp_path / "ray" / summary["sweep_id"]).is_dir()  # Ray Tune's own trial state
    assert ray.is_initialized()  # a Ray the command found up is left to its owner (here the fixture)
    _check(summary, expected)
    listed = runner.invoke(app, ["status", "--home", str(tmp_path), "--json"])
    assert json.loads(listed.stdout) == [
        {
            "sweep_id": summary["sweep_id"],
            "trials": 4,
            "by_status": {"TERMINATED": 4},
            "models_done": expected[0].trainings,
            "mlflow_parent_run_id": summary["mlflow_parent_run_id"],
        }
    ]
    # the ETA replayed on the sweep's trials as Tune saved them (bench/eta.py): at its start, the time expected
    replay = tmp_path / "eta.json"
    eta = [sys.executable, str(ROOT / "bench" / "eta.py"), str(tmp_path), summary["sweep_id"], "--expected", "9"]
    done = subprocess.run([*eta, "--out", str(replay)], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    at = json.loads(replay.read_text())["at"]
    assert [row["share"] for row in at] == [0.0, 0.2, 0.5, 0.8] and at[0]["eta_s"] == 9
    assert all(row["truth_s"] > 0 and row["eta_s"] >= 0 for row in at)


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory):
    """One MLflow server for the module's tests; each logs a sweep of its own."""
    with mlflow_server_at(pick_free_port(), tmp_path_factory.mktemp("mlflow")) as url:
        yield url


def test_smoke_sweep_against_a_real_mlflow_server(local_ray, expected, mlflow_server, tmp_path):
    summary = _run("--home", str(tmp_path / "home"), "--tracking-uri", mlflow_server)
    assert summary["tracking_uri"] == mlflow_server
    assert not (tmp_path / "home" / "mlflow.db").exists()
    _check(summary, expected)


TUNE = """name: tune
models: [vit]
data: {n_tokens: 24, dim: 12, n_patterns: 8, alpha_star: 0.2}
model: {width: 16}
training: {n_test: 200, max_steps: 400}
n_train: [8]
seeds: 3
search: {mode: optuna, metric: median_iterations_to_zero, direction: min, num_samples: 3, seed: 1,
         space: {lr: {low: 0.1, high: 1.0, log: true}}}
resources: {models_per_pack: 3}
"""


def test_optuna_search_tunes_a_field_through_ray_tune(local_ray, tmp_path):
    summary, _ = run_spec(TUNE, tmp_path)
    client = MlflowClient(summary["tracking_uri"])
    parent = client.get_run(summary["mlflow_parent_run_id"])
    children = client.search_runs([parent.info.experiment_id], f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    lrs = [float(c.data.params["lr"]) for c in children]
    assert len(children) == 3 and len(set(lrs)) == 3 and all(0.1 <= lr <= 1.0 for lr in lrs)
    objective = {}
    for child in children:
        table = json.loads(tracking.artifact_text(client, child.info.run_id, "models.json"))
        column = table["columns"].index("iterations_to_zero")
        steps = sorted(row[column] if row[column] >= 0 else 400 for row in table["data"])
        objective[float(child.data.params["lr"])] = steps[1]  # the median of 3
    assert summary["best"]["median_iterations_to_zero"] == min(objective.values())
    assert objective[summary["best"]["values"]["lr"]] == min(objective.values())
    assert float(parent.data.params["best.lr"]) == summary["best"]["values"]["lr"]


def _fails_on_cnn(config: dict, sweep, cache) -> None:
    """A trainable whose CNN packs raise, as a broken trial would."""
    if TrialConfig.of(config).resolved_cell(sweep).cell.model == "cnn":
        raise RuntimeError("injected failure")
    train_pack_trial(config, sweep, cache)


def test_a_failing_trial_is_reported_with_its_config_and_the_sweep_goes_on(local_ray, expected, tmp_path):
    spec, rows, _ = expected
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import tests/
    once = Sweep.of(spec.spec.model_copy(update={"resources": spec.resources.model_copy(update={"max_failures": 0})}))
    result = run_sweep(SweepRun(once, "failing", tmp_path), _fails_on_cnn)
    by_label = {c.cell.label: c for c in result.cells}
    assert set(by_label) == set(rows)
    for label, cell in by_label.items():
        if label.startswith("cnn"):
            assert cell.failures and not cell.records
            assert all("injected failure" in f and f.startswith(label) and "seeds=" in f for f in cell.failures)
        else:
            assert not cell.failures
            got = [(r["n"], r["success_rate"]) for r in cell.by_n()]
            assert got == [(r["n"], r["success_rate"]) for r in rows[label]]
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    log = sweep_log(spec, summarize(spec, "failing", result.cells), result.cells)
    parent_id = record_sweep(spec, result, uri, tmp_path, SMOKE.read_text(), log).run_id
    client = MlflowClient(uri)
    assert client.get_run(parent_id).info.status == "FAILED"
    children = client.search_runs(
        [client.get_run(parent_id).info.experiment_id], f"tags.mlflow.parentRunId = '{parent_id}'"
    )
    labels = {cell.run_name: cell.label for cell in spec.cells}
    status = {labels[c.info.run_name]: c.info.status for c in children}
    assert {k for k, v in status.items() if v == "FAILED"} == {k for k in rows if k.startswith("cnn")}
    assert {k for k, v in status.items() if v == "FINISHED"} == {k for k in rows if k.startswith("vit")}


def test_credentials_in_the_tracking_uri_are_never_printed_or_logged(local_ray, mlflow_server, tmp_path):
    assert redact("postgresql+psycopg2://u:s3cret@db:5432/mlflow") == "postgresql+psycopg2://***@db:5432/mlflow"
    assert redact("http://127.0.0.1:5000") == "http://127.0.0.1:5000"
    with_secret = mlflow_server.replace("http://", "http://alice:s3cret@")
    summary, output = run_spec(SMOKE.read_text() + f"tracking: {{tracking_uri: '{with_secret}'}}\n", tmp_path)
    assert "s3cret" not in output
    client = MlflowClient(mlflow_server)
    for artifact in ("spec.yaml", "resolved_spec.yaml"):
        text = tracking.artifact_text(client, summary["mlflow_parent_run_id"], artifact)
        assert "s3cret" not in text and "***@127.0.0.1" in text
    params = client.get_run(summary["mlflow_parent_run_id"]).data
    assert "s3cret" not in json.dumps({**params.params, **params.tags})
