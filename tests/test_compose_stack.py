"""The workstation stack of docker/ under a real Docker engine, used as a user would and broken on
purpose: docker/stack.py (what `make stack` runs) builds the images and brings up PostgreSQL, the
MLflow server, a Ray head and two workers; a sweep goes in through the Jobs API; then a worker is
killed and MLflow stopped mid-sweep (MLflow down through its end), and the stack goes down and up again.
Skips with the reason where this machine cannot run containers (not root and no engine)."""

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import chromium_page, pick_free_port, stack_build
from mlflow.tracking import MlflowClient

pytestmark = pytest.mark.system  # Ray, servers, Docker, Slurm or benchmarks: make test-fast leaves this file out

ROOT = Path(__file__).parents[1]
STACK = ROOT / "docker" / "stack.py"
VITSWEEP = Path(sys.executable).parent / "vitsweep"
SPEC = "tests/stack_sweep.yaml"  # 4 trials of 4 models, each outlasting an actor's start: two at a time
INSIDE = "http://mlflow:5000"  # the tracking URI the cluster reaches


@dataclass
class Stack:
    """The running stack: what docker/stack.py up reported, and how to reach it."""

    up: dict
    env: Path
    token: str
    project: str

    @property
    def environ(self) -> dict:
        """The engine, the images the stack was built on (compose reads them) and Ray's token."""
        return {**os.environ, "DOCKER_HOST": self.up["docker_host"], **self.up["images"], "RAY_AUTH_TOKEN": self.token}

    def docker(self, *args: str) -> str:
        return subprocess.run(["docker", *args], env=self.environ, check=True, capture_output=True, text=True).stdout

    def compose(self, *args: str) -> str:
        command = [*self.up["compose"], *args]
        return subprocess.run(command, env=self.environ, check=True, capture_output=True, text=True).stdout

    @property
    def where(self) -> tuple[str, ...]:
        """docker/stack.py's arguments for this stack's compose project."""
        return ("--project", self.project, "--env-file", str(self.env))

    def container(self, service: str, index: int = 1) -> str:
        return f"{self.project}_{service}_{index}"

    def on_head(self, command: str) -> str:
        return self.docker("exec", self.container("ray-head"), "sh", "-c", command)

    def api(self, path: str) -> list[dict]:
        """The Ray dashboard's state API (its token in the header, as Ray's own clients send it)."""
        request = urllib.request.Request(
            f"{self.up['dashboard']}/api/v0/{path}", headers={"Authorization": f"Bearer {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.load(answer)["data"]["result"]["result"]

    def submit(self, home: str) -> subprocess.Popen:
        """`vitsweep submit SPEC --follow` from the host, as the README says, in the background."""
        command = [str(VITSWEEP), "submit", SPEC, "--address", self.up["dashboard"], "--tracking-uri", INSIDE]
        return subprocess.Popen(
            [*command, "--home", home, "--follow"], cwd=ROOT, env=self.environ, stdout=subprocess.PIPE, text=True
        )

    def sweep(self, home: str, during=None, recorded: bool = True) -> tuple[dict, str]:
        """Submit, call ``during()`` once a trial runs (if given), wait: (the job's `run --json`, its
        log). A sweep left unrecorded (MLflow down) ends its job, and `submit`, with exit status 1."""
        job = self.submit(home)
        if during is not None:
            during(self.wait_for_a_trial())
        log, _ = job.communicate()
        assert job.returncode == (0 if recorded else 1), log[-4000:]
        return json.loads(log.strip().splitlines()[-1]), log

    def wait_for_a_trial(self, deadline_s: float = 300) -> str:
        """The IP of a worker on which a trial's actor is alive, as soon as there is one."""
        nodes = {n["node_id"]: n["node_ip"] for n in self.api("nodes?limit=100")}
        deadline = time.monotonic() + deadline_s
        while time.monotonic() < deadline:
            workers = self.workers()
            for actor in self.api("actors?limit=1000&filter_keys=state&filter_predicates=%3D&filter_values=ALIVE"):
                if "JobSupervisor" not in actor["class_name"] and nodes.get(actor["node_id"]) in workers:
                    return nodes[actor["node_id"]]
            time.sleep(0.2)
        raise AssertionError("no trial started on a worker")

    def workers(self) -> dict[str, str]:
        """{IP: container name} of the running Ray workers."""
        ids = self.compose("ps", "-q", "ray-worker").split()
        lines = self.docker("inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}} {{.Name}}", *ids)
        return dict(line.split(" /") for line in lines.splitlines() if line.strip())

    def trial_hosts(self, home: str, sweep_id: str) -> list[str]:
        """The hostname (container id) each of the sweep's trials reported its models from, from Ray Tune's
        results (a trial's reports of its step while it trains are left out)."""
        text = self.on_head(f"cat {home}/ray/{sweep_id}/*/result.json")
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
        return [row["hostname"] for row in rows if "trainings" in row]


def stack_script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(STACK), *args], capture_output=True, text=True, cwd=ROOT)


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """The stack as `make stack` brings it up, a compose project of its own on free ports, one CPU per
    worker and none on the head (trials run on the workers); down with its volumes afterwards."""
    env = tmp_path_factory.mktemp("stack") / ".env"
    token = "test-token-0123456789"
    mlflow_port, dashboard_port = pick_free_port(), pick_free_port()
    env.write_text(
        "POSTGRES_USER=mlflow\nPOSTGRES_PASSWORD=test-password\nPOSTGRES_DB=mlflow\n"
        f"RAY_AUTH_TOKEN={token}\nRAY_HEAD_CPUS=0\nRAY_WORKER_CPUS=1\n"
        f"MLFLOW_PORT={mlflow_port}\nRAY_DASHBOARD_PORT={dashboard_port}\n"
    )
    built, said = stack_build()  # seconds once built; under `make test` beside the rest of the suite
    if built == 77:
        pytest.skip(said.strip().splitlines()[-1])
    assert built == 0, said[-5000:]  # where root can start dockerd, failing to is a failure
    stack = Stack({}, env, token, f"vitsweeptest{os.getpid()}")
    up = stack_script("up", *stack.where, "--workers", "2", "--json")
    try:
        assert up.returncode == 0, up.stderr[-5000:]
        stack.up = json.loads(up.stdout.strip().splitlines()[-1])
        print(f"stack up: {stack.up['timings']}")
        yield stack
    finally:
        down = stack_script("down", *stack.where, "--volumes")
        assert down.returncode == 0, down.stderr[-3000:]


@pytest.fixture(scope="module")
def first_sweep(stack):
    """The stack's test sweep submitted to the healthy stack: (its `run --json`, its log)."""
    return stack.sweep("/ray-storage/runs")


def test_every_service_is_healthy_and_published_on_loopback_only(stack):
    assert sorted(stack.up["containers"]) == sorted(
        [stack.container(s) for s in ("postgres", "mlflow", "ray-head")]
        + [stack.container("ray-worker", i) for i in (1, 2)]
    )
    assert set(stack.up["containers"].values()) == {"healthy"}
    published = [
        line for name in stack.up["containers"] for line in stack.docker("port", name).splitlines() if line.strip()
    ]
    assert published and all(line.split(" -> ")[1].startswith("127.0.0.1:") for line in published), published
    listening = subprocess.run(["ss", "-ltnH"], capture_output=True, text=True, check=True).stdout
    for url in (stack.up["mlflow"], stack.up["dashboard"]):
        port = url.rsplit(":", 1)[1]
        local = [line.split()[3] for line in listening.splitlines() if line.split()[3].endswith(f":{port}")]
        assert local == [f"127.0.0.1:{port}"], (url, local)  # nothing on 0.0.0.0 or [::]


def test_a_submitted_sweep_runs_on_both_workers_into_mlflow_on_postgres(stack, first_sweep, tmp_path):
    summary, log = first_sweep
    assert "live MLflow record" not in log, log[-3000:]  # it never stopped (it did without psutil in the image)
    assert summary["failed_trials"] == [] and summary["trainings"] == 16 and summary["cache_hits"] == 0
    hosts = stack.trial_hosts("/ray-storage/runs", summary["sweep_id"])
    worker_hosts = {
        stack.docker("inspect", "-f", "{{.Config.Hostname}}", name).strip() for name in stack.workers().values()
    }
    assert len(hosts) == 4 and set(hosts) == worker_hosts  # every trial on a worker, both workers used
    client = MlflowClient(stack.up["mlflow"])  # from the host, through 127.0.0.1
    parent = client.get_run(summary["mlflow_parent_run_id"])
    assert parent.info.status == "FINISHED" and parent.data.tags["vitsweep.sweep_id"] == summary["sweep_id"]
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    assert parent.data.tags["mlflow.source.git.commit"] == head  # the upload has no .git: submit told the job
    metrics = set(parent.data.metrics)  # MLflow's system metrics, live, from the head (the driver's) and each worker
    assert {"system/cpu_utilization_percentage"} | {
        f"system/{h}/cpu_utilization_percentage" for h in worker_hosts
    } <= metrics
    assert "summary.json" in {a.path for a in client.list_artifacts(parent.info.run_id)}
    database = stack.docker(
        "exec",
        stack.container("postgres"),
        "psql",
        "-U",
        "mlflow",
        "-d",
        "mlflow",
        "-tAc",
        f"select count(*) from runs where run_uuid = '{parent.info.run_id}'",
    )
    assert database.strip() == "1"  # the run is in PostgreSQL, not in a file store
    report = subprocess.run(
        [
            str(VITSWEEP),
            "report",
            summary["sweep_id"],
            "--tracking-uri",
            stack.up["mlflow"],
            "--out",
            str(tmp_path),
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert report.returncode == 0, report.stderr[-3000:]
    cells = json.loads(report.stdout.strip().splitlines()[-1])["cells"]
    assert {c["label"]: c["n_star"] for c in cells} == summary["n_star"]  # read back from MLflow, the same N*
    run_page = f"{stack.up['mlflow']}/#/experiments/{parent.info.experiment_id}/runs/{parent.info.run_id}"
    page = chromium_page(run_page)
    if page is None:
        pytest.skip("the sweep ran; the UI check needs Debian's chromium (make test installs it as root)")
    assert summary["sweep_id"] in page


def test_a_worker_killed_and_mlflow_down_mid_sweep_cost_a_retry_and_the_results_wait_for_mlflow(stack, first_sweep):
    """Both at once, once a trial runs on a worker (one sweep for two failures, which had taken 100
    and 139 s of the suite apart; 175 s together): the killed worker's trial runs again and its models
    already in the (shared) result cache are read from it; the sweep ends with every model once,
    unrecorded ("unreachable"), and the same submission, once MLflow is back, logs what it kept."""
    home, killed = "/ray-storage/runs-worker-and-mlflow-lost", {}

    def lose_both(ip: str) -> None:
        killed["name"] = stack.workers()[ip]
        stack.docker("kill", killed["name"])
        stack.compose("stop", "mlflow")

    summary, log = stack.sweep(home, during=lose_both, recorded=False)
    assert summary["failed_trials"] == [] and summary["n_star"] == first_sweep[0]["n_star"]
    assert summary["trainings"] + summary["cache_hits"] == 16, summary  # every model trained to the end once
    assert summary["mlflow_parent_run_id"] is None and "unreachable" in log  # the outage path, said in the log
    hosts = stack.trial_hosts(home, summary["sweep_id"])
    print(f"killed {killed['name']}; trials reported from {hosts}; {summary['cache_hits']} models from the cache")
    stack.compose("start", "mlflow")  # the user brings both back
    stack.compose("up", "-d", "--no-build", "--scale", "ray-worker=2")
    for name in [stack.container("mlflow"), *stack.workers().values()]:
        wait_healthy(stack, name)
    again, _ = stack.sweep(home)  # the same submission: nothing trains, the kept results are logged
    assert again["sweep_id"] == summary["sweep_id"] and again["mlflow_parent_run_id"] and not again["recorded_earlier"]
    assert again["n_star"] == summary["n_star"]
    parent = MlflowClient(stack.up["mlflow"]).get_run(again["mlflow_parent_run_id"])
    assert parent.info.status == "FINISHED" and parent.data.tags["vitsweep.sweep_id"] == summary["sweep_id"]


def test_down_and_up_keeps_the_sweep_its_artifacts_ray_state_and_cache(stack, first_sweep):
    summary, _ = first_sweep
    stack.compose("down")  # no --volumes
    up = stack_script("up", *stack.where, "--workers", "2", "--json")
    assert up.returncode == 0, up.stderr[-5000:]
    print(f"up again: {json.loads(up.stdout.strip().splitlines()[-1])['timings']}")
    client = MlflowClient(stack.up["mlflow"])
    parent = client.get_run(summary["mlflow_parent_run_id"])
    assert parent.info.status == "FINISHED"
    assert "summary.json" in {a.path for a in client.list_artifacts(parent.info.run_id)}
    trials = stack.on_head(f"ls /ray-storage/runs/ray/{summary['sweep_id']}")
    assert len(re.findall(r"\S+", trials)) >= 4  # Ray Tune's experiment state and its trials
    assert stack.on_head("ls /ray-storage/runs/cache").split()  # the result cache
    again, log = stack.sweep("/ray-storage/runs")
    assert again["sweep_id"] == summary["sweep_id"] and again["recorded_earlier"]
    assert again["mlflow_parent_run_id"] == summary["mlflow_parent_run_id"] and again["n_star"] == summary["n_star"]
    assert stack.on_head(f"ls /ray-storage/runs/ray/{summary['sweep_id']}") == trials  # no trial ran


def wait_healthy(stack: Stack, name: str, deadline_s: float = 300) -> None:
    deadline = time.monotonic() + deadline_s
    while stack.docker("inspect", "-f", "{{.State.Health.Status}}", name).strip() != "healthy":
        assert time.monotonic() < deadline, f"{name} not healthy again"
        time.sleep(1)
