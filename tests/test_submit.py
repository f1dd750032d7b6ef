"""`vitsweep submit` against a real Ray head (dashboard and Jobs API) on 127.0.0.1."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

import pytest
from conftest import pick_free_port, start_ray_nodes, stop_ray_nodes
from mlflow.tracking import MlflowClient
from ray.job_submission import JobStatus
from typer.testing import CliRunner

from services import process
from services.app.cli import app

pytestmark = pytest.mark.system  # Ray, servers, Docker, Slurm or benchmarks: make test-fast leaves this file out

BIN = Path(sys.executable).parent
runner = CliRunner()


@pytest.fixture(autouse=True)
def client_environment_undone():
    """Each test leaves this process's environment as it found it: importing services.execution.jobs
    sets CLIENT_ENVIRONMENT (RAY_AUTH_MODE=token) for good, as a `vitsweep submit` process wants, and
    a Ray that a later file starts in the same pytest worker then asks its driver for a token it does
    not have (ray.init: "InvalidAuthToken", seen with test_node_death run after this file)."""
    before = {name: os.environ.get(name) for name in process.CLIENT_ENVIRONMENT}
    yield
    for name, value in before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture
def jobs():
    """services.execution.jobs, imported by the test that uses it: its import sets CLIENT_ENVIRONMENT for
    the process (above), so at the top of this file it set RAY_AUTH_MODE=token as pytest collected it, for
    every later test of the worker (their local Rays failed to start: "InvalidAuthToken")."""
    from services.execution import jobs  # noqa: PLC0415  (its import sets the process's RAY_AUTH_MODE)

    return jobs


@pytest.fixture(scope="module")
def ray_cluster():
    """A one-node Ray cluster started the way a user starts a head: (dashboard URL, GCS address)."""
    dashboard, gcs, temp = start_ray_nodes(pick_free_port)
    try:
        yield dashboard, gcs
    finally:
        stop_ray_nodes(temp)


@pytest.fixture
def ray_head(ray_cluster):
    """The cluster's dashboard URL, where jobs are submitted."""
    return ray_cluster[0]


def test_the_embedded_default_starts_a_ray_of_its_own_beside_a_running_cluster(ray_cluster):
    """`ray start` writes its cluster's address where ray.init without an address looks first (a
    user's head, a Slurm job's on a shared node); the embedded default must not join it."""
    # Ray's default folder, as a `ray start` there left it; short, as the new Ray's socket paths under it must be
    temp = Path(tempfile.mkdtemp(prefix="rt", dir="/tmp"))
    (temp / "ray").mkdir()
    (temp / "ray" / "ray_current_cluster").write_text(ray_cluster[1])
    started = subprocess.run(
        [
            sys.executable,
            "-c",
            "import ray; from services.execution.ray_start import start_ray; start_ray(None); "
            "print(ray.get_runtime_context().gcs_address); ray.shutdown()",
        ],
        capture_output=True,
        text=True,
        env={**{k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}, "RAY_TMPDIR": str(temp)},
    )
    shutil.rmtree(temp, ignore_errors=True)
    assert started.returncode == 0, started.stderr[-3000:]
    gcs = started.stdout.strip().splitlines()[-1]
    assert gcs != ray_cluster[1] and gcs.startswith("127.0.0.1:"), (gcs, ray_cluster[1])


def test_submit_runs_the_sweep_as_a_ray_job_and_follows_its_log_as_it_runs(ray_head, tmp_path):
    home = tmp_path / "home"
    with open(tmp_path / "stderr", "w+") as stderr:
        submit = subprocess.Popen(
            [str(BIN / "vitsweep"), "submit", "sweeps/smoke.yaml", "--address", ray_head, "--home", str(home)]
            + ["--follow"],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            cwd=Path(__file__).parents[1],
        )
        job_id = submit.stdout.readline().strip()
        first = submit.stdout.readline()  # the job's first line of log
        status = job_status(ray_head, job_id)
        out = first + submit.stdout.read()
        assert submit.wait() == 0, out[-3000:] + stderr.read()[-3000:]
    assert job_id.startswith("raysubmit_") and status in ("PENDING", "RUNNING")  # printed as it came, not at the end
    summary = json.loads(out.strip().splitlines()[-1])  # the job's own `vitsweep run --json` summary
    assert summary["trainings"] == 32 and summary["failed_trials"] == []
    assert summary["tracking_uri"] == f"sqlite:///{home / 'mlflow.db'}"
    parent = MlflowClient(summary["tracking_uri"]).get_run(summary["mlflow_parent_run_id"])
    assert parent.info.status == "FINISHED" and parent.data.params["name"] == "smoke"


def job_status(dashboard: str, job_id: str) -> str:
    """The job's status from the Jobs API, with the token the head wrote (this process's Ray was
    imported without token auth)."""
    token = (Path.home() / ".ray" / "auth_token").read_text().strip()
    request = urllib.request.Request(f"{dashboard}/api/jobs/{job_id}", headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.load(answer)["status"]


def test_submit_refuses_a_sweep_whose_results_would_die_with_the_job():
    result = runner.invoke(app, ["submit", "sweeps/smoke.yaml", "--address", "http://127.0.0.1:1"])
    assert result.exit_code == 2 and "--tracking-uri" in result.stderr


def test_submit_to_an_address_where_nothing_answers_says_so_in_one_line(free_port):
    address = f"http://127.0.0.1:{free_port()}"
    result = runner.invoke(app, ["submit", "sweeps/smoke.yaml", "--address", address, "--tracking-uri", address])
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert address in line and "--address its dashboard" in line


def test_submit_asks_again_while_a_fresh_head_has_no_job_agent(monkeypatch, jobs):
    class Head:
        def __init__(
            self, busy: int, error: str = "Request failed with status code 500: No available agent to submit job"
        ):
            self.busy, self.error, self.calls = busy, error, 0

        def submit_job(self, **job):
            self.calls += 1
            if self.calls <= self.busy:
                raise RuntimeError(self.error)
            return "raysubmit_1"

    monkeypatch.setattr(jobs.time, "sleep", lambda s: None)
    head = Head(busy=2)
    assert jobs.submit_when_ready(head, entrypoint="x") == "raysubmit_1" and head.calls == 3
    with pytest.raises(RuntimeError, match="denied"):
        jobs.submit_when_ready(Head(busy=1, error="403: denied"), entrypoint="x")  # other errors at once
    monkeypatch.setattr(jobs, "AGENT_WAIT_S", -1)
    with pytest.raises(RuntimeError, match="No available agent"):
        jobs.submit_when_ready(Head(busy=5), entrypoint="x")  # and not forever


class Job:
    """A Jobs API client for one job whose log's connection breaks after ``sent`` (as Ray's tail
    raises then) or, with ``interrupt``, whose follower gets Ctrl-C."""

    def __init__(self, log: str, sent: str, interrupt: bool = False):
        self.log, self.sent, self.interrupt = log, sent, interrupt

    async def tail_job_logs(self, job_id: str):
        yield self.sent
        if self.interrupt:
            raise KeyboardInterrupt
        raise RuntimeError("WebSocket connection closed unexpectedly with close code 1006")

    def get_job_status(self, job_id: str):
        return JobStatus.SUCCEEDED

    def get_job_logs(self, job_id: str) -> str:
        return self.log


def test_a_follower_whose_log_connection_breaks_writes_the_rest_once_the_job_ends(jobs):
    written = []
    assert jobs.follow(Job("one\ntwo\nthree\n", "one\n"), "raysubmit_1", written.append) == "SUCCEEDED"
    assert "".join(written) == "one\ntwo\nthree\n"  # each line once


def test_ctrl_c_while_following_leaves_the_job_running_and_says_how_to_find_it(monkeypatch, jobs):
    monkeypatch.setattr(jobs, "submit", lambda *args: (Job("", "started\n", interrupt=True), "raysubmit_1"))
    result = runner.invoke(
        app, ["submit", "sweeps/smoke.yaml", "--address", "http://HEAD:8265", "--home", "/runs", "--follow"]
    )
    assert result.exit_code == 130 and "started\n" in result.stdout
    assert (
        "job raysubmit_1 goes on" in result.stderr
        and "ray job stop --address http://HEAD:8265 raysubmit_1" in result.stderr
    )
