import dataclasses
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import ray
import typer.main
from conftest import answers, chromium_page, run_spec, wait_until
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

from services.app.cli import app
from services.app.printing import show, show_table
from services.app.train_command import CONFIGS
from services.execution import ray_start
from services.execution.ray_start import unreachable_cluster
from services.spec import load_spec
from services.store import state

runner = CliRunner()
SMALL = ["--dim", "12", "--n-patterns", "8", "--n-tokens", "24", "--n-test", "200", "--max-steps", "200"]


def test_train_json_summary_matches_the_table_and_the_flags():
    result = runner.invoke(
        app, ["train", *SMALL, "--model", "cnn", "--alpha-star", "0.25", "--n", "8,16", "--seeds", "3", "--json"]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["model"] == "cnn" and summary["trainings"] == 6
    assert [row["n"] for row in summary["per_n"]] == [8, 16]
    assert all(row["models"] == 3 for row in summary["per_n"])
    assert summary["config"]["data"]["alpha_star"] == 0.25 and summary["config"]["training"]["max_steps"] == 200
    assert all(row["mean_attention_mass"] is None for row in summary["per_n"])  # a CNN has no attention
    models = summary["models"]
    assert sorted((m["n_train"], m["seed"]) for m in models) == [(8, 0), (8, 1), (8, 2), (16, 0), (16, 1), (16, 2)]
    for row in summary["per_n"]:
        mine = [m for m in models if m["n_train"] == row["n"]]
        counted = [
            m for m in mine if m["outcome"] in ("succeeded", "failed_converged")
        ]  # 200 steps leave some CNNs unconverged
        assert row["success_rate"] == (sum(m["success"] for m in counted) / len(counted) if counted else None)
        assert sum(row[o] for o in ("succeeded", "failed_converged", "not_converged", "diverged")) == row["models"]


def test_every_config_field_is_a_flag_with_the_fields_default_and_help():
    params = {p.name: p for p in typer.main.get_command(app).commands["train"].params}
    for cls in CONFIGS.values():
        for field in dataclasses.fields(cls):
            flag = "--model" if field.name == "kind" else "--" + field.name.replace("_", "-")
            assert flag in params[field.name].opts, flag
            assert (params[field.name].help, params[field.name].default) == (field.metadata["help"], field.default)


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--alpha-star", "1.5"], "--alpha-star"),
        (["--alpha-star", "0.3", "--alpha-confusion", "0.4"], "--alpha-confusion"),
        (["--dim", "5"], "--dim"),
        (["--lr", "-1"], "--lr"),
        (["--n", "0,5"], "--n"),
        (["--model", "mlp"], "--model"),
        (["--device", "cuda:7"], "--device"),
        (["--dim", "40", "--n-patterns", "40"], "--width"),
        (["--attn-dim", "10"], "--attn-dim"),
    ],
)
def test_bad_values_exit_2_naming_the_flag(args, flag):
    result = runner.invoke(app, ["train", *args])
    assert result.exit_code == 2
    assert flag in result.output


def test_ui_refuses_a_home_without_a_store(tmp_path):
    result = runner.invoke(app, ["ui", "--home", str(tmp_path)])
    assert result.exit_code == 2 and "no MLflow store yet" in result.stderr


@pytest.mark.system
def test_ui_serves_the_store_and_prints_the_latest_sweep_in_the_training_view(two_sweeps, free_port):
    """`vitsweep ui` prints the latest sweep's parent run page; in headless Chromium that page
    shows the run in MLflow's model-training view (runs, model metrics), not the GenAI one."""
    port = free_port()
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "vitsweep"), "ui", "--home", str(two_sweeps), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith("latest sweep, sweep-b: ") and "workflowType=machine_learning" in line
        url = line.split(": ", 1)[1].strip()
        assert url.startswith(f"http://127.0.0.1:{port}/#/experiments/")
        wait_until(lambda: answers(f"http://127.0.0.1:{port}/health"), "vitsweep ui", proc)
        page = chromium_page(url)
        if page is None:
            pytest.skip("the UI served the sweep; the page check needs Debian's chromium (make test installs it)")
        assert "sweep-b" in page and "Model metrics" in page  # the parent run's page, training tabs
        assert "Evaluation runs" not in page and "Token Usage" not in page  # no GenAI navigation or overview
    finally:
        proc.terminate()
        proc.wait()


@pytest.mark.system
def test_run_stops_the_ray_it_started_once_the_sweep_is_recorded(tmp_path, monkeypatch, caplog):
    """`vitsweep run` with no Ray up starts one, and stops it (in the main thread, while MLflow
    records in another) before it returns; the record is whole. A start that fails (as Ray's does
    now and then on a busy machine) is one message and exit 1, and the same command then goes on in
    the same runs. A start that times out once is tried once more."""
    assert not ray.is_initialized()
    text = (
        "name: tiny\nmodels: [cnn]\nn_train: [8]\nseeds: 1\naxes: {alpha_star: [0.3]}\n"
        "data: {n_tokens: 12, dim: 8, n_patterns: 8}\ntraining: {n_test: 100, max_steps: 200}\n"
    )
    (tmp_path / "spec.yaml").write_text(text)
    with monkeypatch.context() as patch:
        patch.setattr(ray_start, "start_local_ray", _ray_timed_out)
        failed = runner.invoke(app, ["run", str(tmp_path / "spec.yaml"), "--home", str(tmp_path / "home")])
    assert failed.exit_code == 1, failed.output
    line = failed.stderr.strip().splitlines()[-1]
    assert "Ray did not start: The current node timed out during startup." in line and "same command" in line
    starts = []

    def once_too_slow(**init) -> None:  # the first start times out, as Ray's did in a busy CI run
        starts.append(init)
        if len(starts) == 1:
            _ray_timed_out(**init)
        real_init(**init)

    real_init = ray.init
    with monkeypatch.context() as patch:
        patch.setattr(ray, "init", once_too_slow)
        summary, _ = run_spec(text, tmp_path)  # the same command goes on, Ray started at its second try
    assert len(starts) == 2 and "warning: Ray did not start in time (The current node timed out" in caplog.text
    assert not ray.is_initialized()
    client = MlflowClient(summary["tracking_uri"])
    parent = client.get_run(summary["mlflow_parent_run_id"])
    assert parent.info.status == "FINISHED"
    (child,) = client.search_runs([parent.info.experiment_id], f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    # the runs span the sweep (the parent from before Ray started: it is live from then) and its cell,
    # not their recording (MLflow keeps milliseconds, Tune whole seconds)
    assert (parent.info.end_time - parent.info.start_time) / 1000 > summary["wall_s"] - 1
    assert parent.info.start_time - 1000 <= child.info.start_time < child.info.end_time <= parent.info.end_time + 1000
    assert client.get_experiment(parent.info.experiment_id).tags["mlflow.experimentKind"] == "custom_model_development"
    (only,) = client.search_runs([parent.info.experiment_id], "tags.`mlflow.parentRunId` IS NULL")  # no second parent
    assert only.info.run_id == parent.info.run_id


def _ray_timed_out(**init) -> None:
    raise Exception(  # Ray 2.60's own words (ray/_private/node.py) when its raylet does not register in 30 s
        "The current node timed out during startup. This could happen because some of the raylet failed to "
        "startup or the GCS has become overloaded."
    )


@pytest.mark.parametrize("given", ["--ray-address", "RAY_ADDRESS"])
def test_run_refuses_a_cluster_address_where_nothing_answers_before_anything_starts(
    tmp_path, free_port, monkeypatch, given
):
    """A cluster address nothing listens at (a typo, a head not started) exits 2 at once with a
    message naming it; ray.init would retry it for minutes. No sweep is marked, no MLflow
    store made."""
    address, home = f"127.0.0.1:{free_port()}", tmp_path / "home"
    args = ["run", "sweeps/smoke.yaml", "--home", str(home)]
    if given == "RAY_ADDRESS":
        monkeypatch.setenv("RAY_ADDRESS", address)
    else:
        args += ["--ray-address", address]
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert f"no Ray cluster answers at {address}" in result.stderr and "Nothing was started" in result.stderr
    assert state.latest_sweep(load_spec("sweeps/smoke.yaml"), home) is None
    assert not (home / "mlflow.db").exists()


def test_a_cluster_address_that_answers_or_that_ray_resolves_is_let_through():
    with socket.create_server(("127.0.0.1", 0)) as listening:
        port = listening.getsockname()[1]
        assert unreachable_cluster(f"127.0.0.1:{port}") is None
        assert unreachable_cluster(f"ray://127.0.0.1:{port}") is None
    assert unreachable_cluster(f"127.0.0.1:{port}")  # closed now
    assert unreachable_cluster("auto") is None and unreachable_cluster("local") is None


def test_tables_and_lines_are_printed_whole_when_stdout_is_not_a_terminal(capsys):
    """A log, a pipe or a Ray job's log gets Markdown rows and unwrapped lines: no cell cut to
    '…', no line broken at 80 columns, no colour codes."""
    long = "x" * 150
    show_table("a title", ["cell", "value"], [["vit alpha_star=0.05", "3,744 [3,408, 3,744]"], [long, "1"]])
    show(f"- a note {long}")
    out = capsys.readouterr().out
    assert out.splitlines()[:4] == ["a title", "", "| cell | value |", "| --- | --- |"]
    assert "| vit alpha_star=0.05 | 3,744 [3,408, 3,744] |" in out and f"| {long} | 1 |" in out
    assert f"- a note {long}\n" in out and "…" not in out and "\x1b[" not in out
