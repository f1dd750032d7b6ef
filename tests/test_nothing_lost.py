"""Nothing computed is lost or done twice: the result cache across sweeps, and a tracking server
that is down during a sweep (results kept, logged once by the next run or `vitsweep sync`)."""

import json
from pathlib import Path

import numpy as np
import pytest
from chaos import GRID, logged_records
from conftest import mlflow_server_at
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

from services.app.cli import app
from services.results import SweepResult
from services.spec import parse_spec
from services.store import state
from services.store.cache import ResultCache, curve_sums, model_entries, model_keys, vit_core_hash
from vit_core import ModelConfig, TokenDataConfig, TrainConfig, train_pack

pytestmark = pytest.mark.system  # Ray, servers, Docker, Slurm or benchmarks: make test-fast leaves this file out

runner = CliRunner()
SPEC = (
    GRID.replace("name: chaos-grid", "name: cached")
    .replace("seeds: 2", "seeds: 3")
    .replace("models_per_pack: 1", "models_per_pack: 4")
)
SPEC_ = parse_spec(SPEC, "spec")


def _run(text: str, tmp_path: Path, *args: str, code: int = 0) -> tuple[dict, str]:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    result = runner.invoke(app, ["run", str(path), "--home", str(tmp_path / "home"), "--json", *args])
    assert result.exit_code == code, result.output
    return json.loads(result.stdout.strip().splitlines()[-1]), result.stderr


def test_keys_change_with_everything_that_determines_a_model():
    data, model, training = TokenDataConfig(), ModelConfig(), TrainConfig()
    base = model_keys(data, model, training, [4, 4, 8], [0, 1, 0], "cpu")
    assert len(set(base)) == 3 and base == model_keys(data, model, training, [4, 4, 8], [0, 1, 0], "cpu")
    changed = [
        model_keys(TokenDataConfig(alpha_star=0.2), model, training, [4], [0], "cpu"),
        model_keys(data, ModelConfig(kind="cnn"), training, [4], [0], "cpu"),
        model_keys(data, model, TrainConfig(lr=0.25), [4], [0], "cpu"),
        model_keys(data, model, training, [4], [0], "cuda"),
    ]
    assert all(k[0] != base[0] for k in changed)
    assert len(vit_core_hash()) == 16


def test_entries_round_trip_and_sum_to_the_packs_curves(tmp_path):
    data, model, training = (
        TokenDataConfig(n_tokens=20, dim=10, n_patterns=8),
        ModelConfig(width=8),
        TrainConfig(n_test=100, max_steps=200),
    )
    result = train_pack(data, model, training, [4, 4, 16], [0, 1, 0])
    cache = ResultCache(tmp_path)
    keys = model_keys(data, model, training, [4, 4, 16], [0, 1, 0], "cpu")
    for key, entry in zip(keys, model_entries(result)):
        cache.put(key, entry)
    assert len(cache) == 3 and not list(tmp_path.glob("*/*.partial"))
    entries = [cache.get(k) for k in keys]
    assert [r for e in entries for r in e["records"]] == json.loads(json.dumps(result.records()))
    assert [e["n_train"] for e in entries] == [4, 4, 16]
    (part,) = curve_sums(entries)  # one pack: one group of evaluation steps
    mass = result.curves["attention_mass"]
    np.testing.assert_allclose(np.array(part["attention_mass"]["4"]["sum"]), mass[:, :2].sum(1))
    assert part["attention_mass"]["16"]["count"] == [1] * len(result.eval_steps)
    assert ResultCache(None).get(keys[0]) is None and len(ResultCache(None)) == 0
    (tmp_path / keys[0][:2] / f"{keys[0]}.json").write_text("{trunc")  # a torn file from another tool reads as a miss
    assert cache.get(keys[0]) is None


def test_a_second_sweep_reuses_every_training_it_shares(local_ray, tmp_path):
    first, _ = _run(SPEC, tmp_path)
    spec = SPEC_
    assert (first["trainings"], first["cache_hits"]) == (spec.trainings, 0)
    shown, stderr = _run(SPEC, tmp_path)  # the same command: the recorded sweep is shown, not run again
    assert shown["recorded_earlier"] and shown["mlflow_parent_run_id"] == first["mlflow_parent_run_id"]
    assert "already recorded" in stderr and shown["n_star"] == first["n_star"]
    again, _ = _run(SPEC, tmp_path, "--new")  # a new sweep of the same spec: nothing trained
    assert (again["trainings"], again["cache_hits"]) == (0, spec.trainings)
    assert again["sweep_id"] != first["sweep_id"] and again["n_star"] == first["n_star"]
    assert logged_records(again) == logged_records(first)
    wider, _ = _run(
        SPEC.replace("n_train: [4, 16]", "n_train: [4, 8, 16]"), tmp_path
    )  # another sweep: only N = 8 is new
    assert (wider["trainings"], wider["cache_hits"]) == (2 * 3, spec.trainings)
    fresh, _ = _run(SPEC, tmp_path, "--no-cache", "--new")
    assert (fresh["trainings"], fresh["cache_hits"]) == (spec.trainings, 0)
    assert logged_records(fresh) == logged_records(first)


def test_a_sweep_outlives_a_tracking_server_that_is_down(local_ray, tmp_path, free_port):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    down, stderr = _run(SPEC, tmp_path, "--tracking-uri", url, code=3)
    assert down["mlflow_parent_run_id"] is None and down["trainings"] == SPEC_.trainings
    assert "unreachable" in stderr and "vitsweep sync" in stderr
    listed = json.loads(runner.invoke(app, ["status", "--home", str(tmp_path / "home"), "--json"]).stdout)
    assert [r["mlflow_parent_run_id"] for r in listed] == [None]
    with mlflow_server_at(port, tmp_path) as url:
        logged, stderr = _run(SPEC, tmp_path, "--tracking-uri", url)  # the same command: logs, trains nothing
        assert "not logged to MLflow; logged now" in stderr and logged["sweep_id"] == down["sweep_id"]
        assert logged["n_star"] == down["n_star"]
        other = SPEC.replace("name: cached", "name: other")
    second, _ = _run(other, tmp_path, "--tracking-uri", url, code=3)  # down again
    with mlflow_server_at(port, tmp_path) as url:
        synced = runner.invoke(app, ["sync", "--home", str(tmp_path / "home"), "--tracking-uri", url])
        assert synced.exit_code == 0, synced.output
        assert second["sweep_id"] in synced.stdout
        again = runner.invoke(app, ["sync", "--home", str(tmp_path / "home"), "--tracking-uri", url])
        assert again.exit_code == 0 and "nothing to log" in again.stdout
        client = MlflowClient(url)
        experiment = client.get_experiment_by_name(SPEC_.tracking.experiment).experiment_id
        for sweep_id, name in ((down["sweep_id"], "cached"), (second["sweep_id"], "other")):  # each logged exactly once
            parents = client.search_runs([experiment], f"tags.`vitsweep.sweep_id` = '{sweep_id}'")
            assert len(parents) == 1 and parents[0].data.params["name"] == name
            children = client.search_runs([experiment], f"tags.mlflow.parentRunId = '{parents[0].info.run_id}'")
            assert len(children) == 2


def test_sync_says_what_it_cannot_log(tmp_path):
    """An unfinished sweep is left to `vitsweep run`; one that ran with --tracking-uri needs it again."""
    state.mark_sweep(SPEC_, "cached-1", tmp_path, SPEC)
    state.mark_sweep(SPEC_, "cached-2", tmp_path, SPEC, uri_given=True)
    state.save_result(SweepResult("cached-2", [], 0, 1.0, "nowhere"), tmp_path)
    out = runner.invoke(app, ["sync", "--home", str(tmp_path)])
    assert out.exit_code == 1
    assert "cached-1: not finished" in out.stderr and "cached-2: it ran with --tracking-uri" in out.stderr
    assert [m["recorded"] for _, m in state.markers(tmp_path)] == [None, None]


def test_a_diverging_cell_is_recorded_as_diverged_and_the_sweep_completes(local_ray, tmp_path):
    text = SPEC.replace("models: [vit, cnn]", "models: [vit]").replace(
        "resources:", "axes: {lr: [0.5, 1.0e+35]}\nresources:"
    )
    summary, _ = _run(text, tmp_path)
    assert summary["failed_trials"] == [] and summary["n_star"]["vit lr=1e+35"] is None
    client = MlflowClient(summary["tracking_uri"])
    parent = client.get_run(summary["mlflow_parent_run_id"])
    children = {
        c.data.params["lr"]: c
        for c in client.search_runs([parent.info.experiment_id], f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    }
    diverged = {m.step: m.value for m in client.get_metric_history(children["1e+35"].info.run_id, "diverged")}
    assert diverged == {4: 3, 16: 3}  # every seed at every N
    assert {m.value for m in client.get_metric_history(children["0.5"].info.run_id, "diverged")} == {0}
    again, _ = _run(text, tmp_path, "--new")  # diverged models are cached like any other
    assert again["cache_hits"] == 12 and again["n_star"] == summary["n_star"]


def test_the_same_command_finds_its_newest_sweep_and_changed_science_is_another(tmp_path, monkeypatch):
    ids = []
    for _ in range(3):  # within one second or not, each new sweep gets its own id
        ids.append(state.new_sweep_id(SPEC_, tmp_path))
        state.mark_sweep(SPEC_, ids[-1], tmp_path, SPEC)
    assert len(set(ids)) == 3 and state.latest_sweep(SPEC_, tmp_path) == ids[-1]
    assert state.latest_sweep(parse_spec(SPEC.replace("seeds: 3", "seeds: 4"), "spec"), tmp_path) is None
    monkeypatch.setattr(state, "vit_core_hash", lambda: "another vit_core")
    assert state.latest_sweep(SPEC_, tmp_path) is None
