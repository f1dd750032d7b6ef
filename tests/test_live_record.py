"""A sweep is in MLflow while it runs: the parent run RUNNING from the start with its provenance,
a child per cell with per-N metrics as packs report, system metrics, all of it in MLflow's UI
(headless Chromium); stopped by Ctrl-C its runs end KILLED, and running the command again goes on
in the same runs to one FINISHED record. On a cluster, every node's system metrics."""

import json
import os
import re
import shutil
import subprocess
import sys

import pytest
from chaos import BIN, GRID, ROOT, KilledSweep, wait_gone
from conftest import CHROMIUM, answers, chromium_page, mlflow_server_at, run_spec, wait_until
from mlflow.tracking import MlflowClient
from ray.cluster_utils import Cluster

from services.app.runs import so_far
from services.spec import parse_spec
from services.store import live
from services.store.live import LiveRecord
from services.store.tracking import CELL_TAG, PARENT_TAG, RECORD_TAG, SWEEP_TAG
from services.store.uris import embedded_uri
from services.sweep_run import SweepRun

pytestmark = pytest.mark.system  # Ray, servers, Docker, Slurm or benchmarks: make test-fast leaves this file out

# chaos's grid sweep, its packs two models each (one N, both seeds): a cell's first pack completes its row
SPEC = "# live: the chaos grid in packs of one N\n" + GRID.replace("chaos-grid", "live").replace(
    "models_per_pack: 1", "models_per_pack: 2"
)


def runs(client: MlflowClient) -> tuple[list, list]:
    """(the sweep's parent runs, their children), as MLflow holds them now."""
    found = client.search_runs([e.experiment_id for e in client.search_experiments()])
    parents = [r for r in found if SWEEP_TAG in r.data.tags]
    return parents, [r for r in found if PARENT_TAG in r.data.tags]


def seen_in_the_ui(home, parent, child, port: int) -> None:
    """`vitsweep ui` points at the running sweep; headless Chromium shows its parent run Running
    with the child, and the child's page its per-N metrics (skipped where Chromium is missing)."""
    ui = subprocess.Popen(
        [str(BIN / "vitsweep"), "ui", "--home", str(home), "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        line = ui.stdout.readline()
        assert line.startswith(f"latest sweep, {parent.data.tags[SWEEP_TAG]}: "), line  # the live one
        url = line.split(": ", 1)[1].strip()
        wait_until(lambda: answers(f"http://127.0.0.1:{port}/health"), "vitsweep ui", ui)
        if CHROMIUM is None:
            pytest.skip("the live record is there; the page check needs Debian's chromium (make test installs it)")
        page = rendered(url, "Child runs", ui)
        children = page[page.index("Child runs") : page.index("Source")]  # the run's list of its child runs
        assert "Status Running" in page and child.info.run_name in children.split(), page[:3000]
        page = rendered(url.replace(parent.info.run_id, child.info.run_id), "success_rate", ui)
        assert "Status Running" in page and f"Parent run {parent.info.run_name}" in page, page[:3000]
        assert re.search(r"Metric Value .*success_rate \d", page), page[:3000]  # its metrics table, with values
        assert re.search(r"Datasets li2023 TokenDataConfig \([0-9a-f]{10}\) train", page), page[:3000]  # its data
    finally:
        ui.terminate()
        ui.wait()


def rendered(url: str, shown: str, ui: subprocess.Popen) -> str:
    """The text of MLflow's page at ``url`` once it shows ``shown``: a run's details arrive after
    the page's first requests, later than Chromium's virtual time waits on a busy machine."""
    page = {}

    def loaded() -> bool:
        page["text"] = chromium_page(url)
        return shown in page["text"]

    wait_until(loaded, f"MLflow's page {url}", ui)
    return page["text"]


def test_a_running_sweep_is_in_mlflow_and_a_killed_one_resumes_in_the_same_runs(tmp_path, free_port):
    sweep = KilledSweep(SPEC, tmp_path)
    client = MlflowClient(embedded_uri(sweep.home))

    stopped = sweep.run(("trial_complete", 1), action="int")  # Ctrl-C once the first pack reported
    assert stopped.returncode == 130, stopped.stderr[-2000:]
    (parent,), children = runs(client)
    assert parent.info.status == "KILLED" and parent.data.tags[RECORD_TAG] == "live"
    assert children and {c.info.status for c in children} == {"KILLED"}
    assert "mlflow.source.git.commit" in parent.data.tags and parent.data.tags["mlflow.note.content"].startswith(
        "live:"
    )

    # Again, held in the driver after its first pack: the record is live, in the same runs
    gate = tmp_path / "go"
    env = {**os.environ, "KILL_AT_GATE": str(gate), "MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL": "1"}
    argv = ["trial_complete", "1", "run", str(sweep.spec), "--home", str(sweep.home), "--json"]
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "kill_at.py"), "hold", *argv],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )

    def live() -> bool:
        (now,), kids = runs(client)
        metrics = client.get_run(now.info.run_id).data.metrics
        return (
            now.info.status == "RUNNING"
            and any(k.info.status == "RUNNING" and "success_rate" in k.data.metrics for k in kids)
            and any(name.startswith("system/") for name in metrics)
        )

    try:
        wait_until(live, "the live record", proc)
        (held,), kids = runs(client)
        assert held.info.run_id == parent.info.run_id  # attached, not a second parent
        if shutil.which("nvidia-smi"):  # an NVIDIA driver here: MLflow charts each GPU beside the CPU, in one batch
            assert "system/gpu_0_utilization_percentage" in client.get_run(held.info.run_id).data.metrics
        seen_in_the_ui(sweep.home, held, next(k for k in kids if "success_rate" in k.data.metrics), free_port())
        sweep_id = held.data.tags[SWEEP_TAG]
        report = subprocess.run(
            [str(BIN / "vitsweep"), "report", sweep_id, "--home", str(sweep.home)], capture_output=True, text=True
        )
        assert report.returncode == 2 and f"sweep {sweep_id} is RUNNING" in report.stderr  # a live record is no report
    finally:
        gate.touch()
        out, err = proc.communicate()
        wait_gone(proc.pid)
    assert proc.returncode == 0, err[-2000:]

    (final,), children = runs(client)
    assert final.info.run_id == parent.info.run_id
    assert final.info.status == "FINISHED" and final.data.tags[RECORD_TAG] == "whole"
    assert len({c.data.tags[CELL_TAG] for c in children}) == len(children) == 2  # one child per cell
    assert {c.info.status for c in children} == {"FINISHED"}
    for child in children:
        steps = [m.step for m in client.get_metric_history(child.info.run_id, "success_rate")]
        assert sorted(steps) == [4, 16]  # each N once: the final record logs only what the live one lacked
        (data,) = client.get_run(child.info.run_id).inputs.dataset_inputs  # once, though opened three times
        assert data.dataset.name == "li2023 TokenDataConfig" and json.loads(data.dataset.profile)["alpha_star"] == 0.2
        assert [(t.key, t.value) for t in data.tags] == [("mlflow.data.context", "train")]
    done = subprocess.run([str(BIN / "vitsweep"), "report", "--home", str(sweep.home), "--json"], capture_output=True)
    assert done.returncode == 0, done.stderr[-2000:]


def test_every_node_of_a_cluster_logs_its_system_metrics_to_the_tracking_server(tmp_path, free_port, monkeypatch):
    """With a tracking server, a node other than the driver's runs MLflow's system metrics monitor
    too (an actor), logging under its own prefix to the sweep's parent run."""
    monkeypatch.setenv("MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL", "1")  # nodes and driver read it at start
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()
    (tmp_path / "spec.yaml").write_text(SPEC)
    try:
        with mlflow_server_at(free_port(), tmp_path / "mlflow") as url:
            args = ["run", str(tmp_path / "spec.yaml"), "--home", str(tmp_path / "home"), "--json"]
            args += ["--ray-address", cluster.address, "--tracking-uri", url]
            done = subprocess.run([str(BIN / "vitsweep"), *args], capture_output=True, text=True)
            assert done.returncode == 0, done.stderr[-3000:]
            (parent,), _ = runs(MlflowClient(url))
    finally:
        cluster.shutdown()
    names = set(parent.data.metrics)
    assert "system/cpu_utilization_percentage" in names  # the driver's machine
    assert [n for n in names if re.fullmatch(r"system/[^/]+/cpu_utilization_percentage", n)]  # the other node


def test_the_sweep_so_far_is_summarized_after_every_trial_of_a_tuned_sweep(tmp_path, monkeypatch):
    """Refreshed after every trial (no 30 s between), the live record summarizes cells still
    selecting their setting, measured ones and a mix, and never stops with a warning."""
    monkeypatch.setattr(live, "REFRESH_S", 0.0)
    summary, output = run_spec((ROOT / "tests" / "tiny_tuned.yaml").read_text(), tmp_path)
    assert "live MLflow record" not in output, output[-3000:]
    client = MlflowClient(summary["tracking_uri"])
    parent = client.get_run(summary["mlflow_parent_run_id"])
    refreshed = client.get_metric_history(parent.info.run_id, "trainings")
    assert len(refreshed) >= 2  # the sweep so far, then its end


def test_a_live_record_whose_server_is_gone_stops_after_quick_retries_and_leaves_mlflows_own(
    tmp_path, free_port, monkeypatch
):
    """The live record is a view: it gives up after two quick retries where a user set no retries
    of their own (MLflow's ~4 minutes of them held a sweep's end that long after the compose
    stack's MLflow went down), and the final record then retries as MLflow does."""
    monkeypatch.delenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", raising=False)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "7")  # the user's own
    said, spec, uri = [], parse_spec(SPEC), f"http://127.0.0.1:{free_port()}"
    live = LiveRecord(SweepRun(spec, "live-gone", tmp_path, uri, SPEC, said.append), so_far(spec, "live-gone"))
    live.open()
    assert os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == "2" and os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "7"
    assert live.parent_run() is None and "live MLflow record" in said[0] and "sweep goes on" in said[0]
    live.close(None)
    assert "MLFLOW_HTTP_REQUEST_MAX_RETRIES" not in os.environ and os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "7"
