import contextlib
import gzip
import html
import json
import os
import random
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest
import ray
import torch
from chaos import kill_session
from typer.testing import CliRunner

from services.app.cli import app
from services.execution.ray_start import start_local_ray, stop_ray
from services.execution.ray_tune import PlanSearcher
from services.results import CellResult, ModelRecord, SweepResult
from services.search.packs import TrialConfig
from services.spec import parse_spec
from services.stats.summarize import summarize
from services.sweep_run import SweepRun, reported
from vit_core.image_config import FASHION_FILES, FASHION_MNIST

BIN = Path(sys.executable).parent


EXIT_STATUS = pytest.StashKey[int]()
STACK_TESTS = "test_compose_stack.py"
# Files whose tests start no Ray (no sweep, no cluster): in two workers they run beside the stack's
# start-ups. A Ray started on a machine that busy can fail: its raylet aborts when its dashboard
# agent, a Python process, takes over ~15 s to report its port ("Timed out waiting for file
# .../metrics_agent_port_..."). A file not named here runs after them.
NO_RAY = {
    "test_analysis.py",
    "test_data.py",
    "test_forms.py",
    "test_layers.py",
    "test_models.py",
    "test_nstar.py",
    "test_one_pass.py",
    "test_plan.py",
    "test_premises.py",
    "test_provenance.py",
    "test_results_api.py",
    "test_sparsify.py",
    "test_spatial.py",
    "test_spec.py",
    "test_stack.py",
    "test_statistic_plugin.py",
    "test_tracking.py",
    "test_train.py",
}


# The longest of the other files, longest first (their seconds in the suite on 2 cores):
# a worker given a long file last runs alone to the end while the other waits.
LONGEST = (
    "test_slurm.py",  # 371 s
    "test_bench.py",  # 362 s
    "test_kill_anywhere.py",  # 304 s
    "test_live_record.py",  # 244 s
    "test_interrupt.py",  # 229 s
    "test_service.py",  # 212 s
    "test_nothing_lost.py",  # 208 s
    "test_ui_address.py",  # 180 s
    "test_shared_home.py",  # 152 s
    "test_submit.py",  # 121 s
)


SYSTEM_FIXTURES = {"local_ray", "ray_cluster", "mlflow_server"}  # a test that asks for one is a system test


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests that ask for a Ray or a server are marked ``system`` (the others are marked in their
    files). The compose stack's tests run first, then the files that start no Ray, then the rest,
    the LONGEST first: `make test` runs the suite in two pytest-xdist workers (a file to a worker, in
    this order as workers free up), so one worker builds the stack's images and runs its sweeps
    (minutes on a fresh machine, seconds once built) while the other takes the rest of the suite,
    the files that start no Ray first."""
    for item in items:
        if SYSTEM_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.system)

    def order(item: pytest.Item) -> tuple:
        name = item.path.name
        long = LONGEST.index(name) if name in LONGEST else len(LONGEST)
        return name != STACK_TESTS, name not in NO_RAY, long

    items.sort(key=order)  # stable: each file's tests stay in their order


@pytest.fixture(autouse=True)
def _fast_unless_system(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test not marked ``system`` may not start Ray in its own process: `make test-fast` would
    run it, seconds of Ray's start-up unseen. Refused in every run, so a missing mark fails CI."""
    if request.node.get_closest_marker("system") is None:

        def refused(*args, **kwargs):
            pytest.fail(f"{request.node.nodeid} starts Ray: mark it @pytest.mark.system (tests/conftest.py)")

        monkeypatch.setattr(ray, "init", refused)


def stack_build() -> tuple[int, str]:
    """`docker/stack.py build`: (its exit status, what it printed)."""
    build = subprocess.run(
        [sys.executable, str(Path(__file__).parents[1] / "docker" / "stack.py"), "build"],
        capture_output=True,
        text=True,
    )
    return build.returncode, build.stdout + build.stderr


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    session.config.stash[EXIT_STATUS] = int(exitstatus)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """Once pytest has reported, end the process with its exit status, without the interpreter's
    own teardown: a native library's finalizer (torch's, Ray's or grpc's; no Python frame) can crash
    there ("Segmentation fault" after every test passed), which would turn a green run red. The
    tests' own servers and Ray clusters are stopped by then; a Ray this process still holds is shut
    down first. An xdist worker ends as xdist ends it: it has sent its results by now, and a crash
    after that is not counted."""
    if ray.is_initialized():
        stop_ray()
    if hasattr(config, "workerinput"):
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(config.stash.get(EXIT_STATUS, 1))


@pytest.fixture(autouse=True, scope="session")
def _threads():
    """Two cores on CI: one intra-op thread keeps small tests fast and deterministic."""
    torch.set_num_threads(1)


PICKED_PORTS = range(20000, 32768)  # above Ray's worker ports (10002-19999), below the kernel's ephemeral range


def pick_free_port() -> int:
    """A TCP port free on 127.0.0.1 right now, outside the range the kernel hands to port 0: a port
    picked there could be handed to another process (a Ray started meanwhile by another test, whose
    gRPC server once answered an MLflow server's health check) before the service meant for it binds."""
    for port in random.sample(PICKED_PORTS, 200):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free TCP port among 200 tried in {PICKED_PORTS}")


@pytest.fixture
def free_port():
    """A function returning a TCP port free on 127.0.0.1 right now."""
    return pick_free_port


@pytest.fixture(scope="module")
def local_ray():
    """A local Ray of 2 CPUs on 127.0.0.1 for the tests of one module."""
    start_local_ray(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    stop_ray()


def run_spec(text: str, tmp_path: Path) -> tuple[dict, str]:
    """`vitsweep run --json` of the spec ``text`` with its home at tmp_path/home: the last line's
    JSON summary and the whole output. Fails the test on a non-zero exit."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    result = CliRunner().invoke(app, ["run", str(path), "--home", str(tmp_path / "home"), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.strip().splitlines()[-1]), result.output


def start_ray_nodes(free_port, workers: int = 0, cpus: int = 2) -> tuple[str, str, str]:
    """A Ray head (dashboard and Jobs API) and ``workers`` more nodes on 127.0.0.1, started with
    the commands docker/docker-compose.yml runs; returns (dashboard URL, GCS address). Its jobs
    find vitsweep on PATH. Stop them with stop_ray_nodes(temp dir)."""
    port, dashboard = free_port(), free_port()
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # Ray's socket paths must stay under 108 bytes
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}

    # Each node's agent gets its own HTTP port: on one machine they would all take Ray's default
    # (52365), and a head whose agent loses that race takes no jobs ("No available agent").
    def common() -> list[str]:
        return ["--node-ip-address", "127.0.0.1", f"--num-cpus={cpus}", f"--dashboard-agent-listen-port={free_port()}"]

    _ray_start(
        temp,
        env,
        "--head",
        f"--port={port}",
        "--dashboard-host=127.0.0.1",
        f"--dashboard-port={dashboard}",
        "--include-dashboard=true",
        "--temp-dir",
        temp,
        *common(),
    )
    for index in range(workers):  # the head wrote its token to ~/.ray/auth_token; a joining node must use it
        own = Path(temp) / f"w{index}"  # its own runtime-env folder: one node's cleanup must not delete another's
        _ray_start(
            temp, {**env, "RAY_AUTH_MODE": "token"}, f"--address=127.0.0.1:{port}", "--temp-dir", str(own), *common()
        )
    _wait_for_nodes(f"127.0.0.1:{port}", 1 + workers, env)
    _wait_for_job_agent(f"http://127.0.0.1:{dashboard}", env)
    return f"http://127.0.0.1:{dashboard}", f"127.0.0.1:{port}", temp


def _wait_for_job_agent(dashboard: str, env: dict) -> None:
    """Until the head accepts a job (a fresh head answers "No available agent" while its job agent
    starts, for over a minute on a busy machine): submits a job that does nothing."""

    def accepts() -> bool:
        done = subprocess.run(
            [str(BIN / "ray"), "job", "submit", "--no-wait", "--address", dashboard, "--", "true"],
            env={**env, "RAY_AUTH_MODE": "token"},
            capture_output=True,
            text=True,
        )
        if done.returncode and "No available agent" not in done.stdout + done.stderr:
            pytest.fail(f"the head at {dashboard} refused a job: {done.stderr[-2000:]}")
        return done.returncode == 0

    wait_until(accepts, f"the job agent of the head at {dashboard}")


def _wait_for_nodes(address: str, count: int, env: dict) -> None:
    """Until `ray status` lists ``count`` active nodes: a node that has not registered yet gets no trials."""

    def active() -> bool:
        status = subprocess.run(
            [str(BIN / "ray"), "status", f"--address={address}"],
            env={**env, "RAY_AUTH_MODE": "token"},
            capture_output=True,
            text=True,
        ).stdout
        return (status.split("Active:")[-1].split("Pending:")[0] if "Active:" in status else "").count("node_") >= count

    wait_until(active, f"{count} Ray nodes at {address}")


READY_S = 600  # a service not ready by then: the machine is too loaded for the test, which skips and says so


def wait_until(ready, what: str, proc: subprocess.Popen | None = None) -> None:
    """Until ``ready()`` is true: the test fails if ``proc`` (the service's process) exits first,
    and skips, saying why, if the service is not ready after READY_S seconds, so that a slow or
    busy machine never fails it by timing."""
    deadline = time.monotonic() + READY_S
    while not ready():
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"{what}: its process exited with {proc.returncode} before it was ready")
        if time.monotonic() > deadline:
            pytest.skip(f"{what} was not ready after {READY_S} s: this machine is too loaded to run the test")
        time.sleep(0.5)


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# Flags this machine's closed network needs (no background connections), and a new profile per page
# so that no choice a page stored (such as MLflow's GenAI / model-training switch) carries over
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--virtual-time-budget=8000",  # virtual time waits for the network; MLflow polls, so more only costs real time
)


def chromium_dom(url: str) -> str | None:
    """A page's DOM after its scripts ran, as headless Chromium serializes it, or None where
    Chromium is not installed."""
    if CHROMIUM is None:
        return None
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run(
            [CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom", url],
            capture_output=True,
            text=True,
            timeout=300,
        ).stdout


def chromium_page(url: str) -> str | None:
    """The text a person sees on a page after its scripts ran (headless Chromium's DOM, less
    scripts, styles and tags), or None where Chromium is not installed."""
    dom = chromium_dom(url)
    if dom is None:
        return None
    text = re.sub(r"<(script|style)\b.*?</\1>", " ", dom, flags=re.S)
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", text)))


def answers(url: str) -> bool:
    """Whether an HTTP GET of ``url`` gets a response now."""
    try:
        urllib.request.urlopen(url, timeout=5).close()
        return True
    except OSError:
        return False


NODE_SESSIONS: dict[str, list[int]] = {}  # start_ray_nodes' temp dir -> the sessions of its `ray start` commands


def _ray_start(temp: str, env: dict, *args: str) -> None:
    """`ray start ARGS` in a session of its own, which the daemons it leaves keep: stop_ray_nodes kills them by it."""
    proc = subprocess.Popen(
        [str(BIN / "ray"), "start", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    NODE_SESSIONS.setdefault(temp, []).append(proc.pid)
    out, _ = proc.communicate()
    if proc.returncode:
        pytest.fail(f"ray start {' '.join(args)} failed: {out[-2000:]}")


def stop_ray_nodes(temp: str) -> None:
    """Kill the processes of the nodes start_ray_nodes started (not `ray stop`: it stops every Ray on the machine)."""
    for sid in NODE_SESSIONS.pop(temp, []):
        kill_session(sid)
    shutil.rmtree(temp, ignore_errors=True)


# MLflow 3's server starts a job runner (eight huey consumers, ~240 MB each) for GenAI scorers and
# trace rollups, which vitsweep never uses; `vitsweep ui` turns it off too
NO_MLFLOW_JOBS = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}


@contextlib.contextmanager
def mlflow_server_at(port: int, folder: Path, backend: str | None = None, *extra: str):
    """`mlflow server` on 127.0.0.1:port with its artifacts in ``folder`` and its store at
    ``backend`` (default: SQLite in ``folder``), ``extra`` arguments after; yields its URL."""
    store = backend or f"sqlite:///{folder / 'server.db'}"
    command = [str(BIN / "mlflow"), "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    command += ["--backend-store-uri", store, "--artifacts-destination", str(folder / "artifacts"), *extra]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=NO_MLFLOW_JOBS)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: answers(f"{url}/health"), f"mlflow server at {url}", proc)
        yield url
    finally:
        proc.terminate()
        proc.wait()


def write_idx(path: Path, values) -> None:
    """An idx file of unsigned bytes (a numpy array), gzipped, as Fashion-MNIST ships them."""
    header = (0x0800 + values.ndim).to_bytes(4, "big") + b"".join(n.to_bytes(4, "big") for n in values.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + values.astype("uint8").tobytes())


def bundled_specs() -> list:
    """Every spec of sweeps/ as a pytest param (its stem the id); one that reads Debian's Fashion-MNIST
    skips, saying why, where `make system-tools` has not installed it."""
    present = all((FASHION_MNIST / f).is_file() for f in FASHION_FILES)
    why = "needs Debian's dataset-fashion-mnist (`make system-tools` installs it; `make test` runs that)"
    return [
        pytest.param(
            path,
            id=path.stem,
            marks=[pytest.mark.skipif("fashion_mnist" in path.read_text() and not present, reason=why)],
        )
        for path in sorted((Path(__file__).parents[1] / "sweeps").glob("*.yaml"))
    ]


def searching(spec) -> tuple[PlanSearcher, SweepRun]:
    """A sweep's searcher and the run its trials end in, as run_sweep makes them (no Ray running):
    a trial's end is told to the run (``ended``), whose planner the searcher asks."""
    run = SweepRun(spec, "s-1", Path("."))
    run.planner = spec.strategy.make_planner(spec)
    return PlanSearcher(run.planner), run


def ended(run: SweepRun, trial: str, config: dict, records: list[dict] | None) -> None:
    """Trial ``trial`` of ``config`` ended with ``records`` (None: it failed), as Ray Tune's callback tells its run."""
    own = TrialConfig.of(config)
    if records is None:
        run.failed(trial, own, "it failed")
    else:
        run.ended(trial, own, reported(records, []))


def model_record(n: int, seed: int, outcome: str, **values) -> dict:
    """One model's record as vit_core reports it (PackResult.model_records), with neutral values
    for what a test does not set: success follows the outcome."""
    succeeded = outcome == "succeeded"
    return {
        "n_train": n,
        "seed": seed,
        "outcome": outcome,
        "lr": 0.5,
        "success": succeeded,
        "diverged": outcome == "diverged",
        "settled": outcome != "not_converged",
        "steps": 10,
        "iterations_to_zero": 10 if succeeded else -1,
        "test_error": 0.0 if succeeded else 0.1,
        "test_loss": 0.0,
        "train_error": 0.0,
        "attention_mass": float("nan"),
    } | values


SYNTHETIC_SPEC = (
    "name: synthetic\nmodels: [vit, cnn]\nn_train: [5, 10, 20, 40]\nseeds: 4\naxes: {alpha_star: [0.1, 0.3]}\n"
    "data: {n_tokens: 30, dim: 12, n_patterns: 12}\nmodel: {width: 16}\n"
)


def synthetic_sweep(sweep_id: str = "synthetic-1", hard: int = 2, easy: int = 1, text: str = SYNTHETIC_SPEC):
    """A finished sweep of spec ``text`` made without training (spec, SweepResult): seed s of a cell
    succeeds from N = threshold (times ``hard`` at alpha* = 0.1, ``easy`` at 0.3), records carry every
    field vit_core writes, the last cell has a failed pack."""
    spec = parse_spec(text)
    cells = []
    for index, cell in enumerate(spec.cells):
        threshold = {"vit": 5, "cnn": 20}[cell.model] * (hard if cell.values["alpha_star"] == 0.1 else easy)
        records = [
            model_record(
                n,
                s,
                "succeeded" if n >= threshold + 5 * (s == 3) else "failed_converged",
                max_steps=3000,
                train_error=0.0,
                attention_mass=0.25 + 0.01 * s,
            )
            for n in spec.spec.n_train
            for s in range(spec.seeds)
        ]
        curves = [
            {
                "test_error": {
                    str(n): {"steps": [0, 20, 40], "sum": [2.0, 1.0, 0.0], "count": [4, 4, 4]}
                    for n in spec.spec.n_train
                }
            }
        ]
        failures = (
            ["cnn alpha_star=0.3 n_train=[40] seeds=[3]: RuntimeError: injected (trial log: x)"] if index == 3 else []
        )
        cells.append(CellResult(cell, [ModelRecord.from_dict(r) for r in records], failures, curves))
    ended = time.time()  # the sweep ran for the 12.5 s before it was made, its cells one after another
    for index, cell in enumerate(cells):
        cell.started_at, cell.ended_at = ended - 12.5 + 3 * index, ended - 12.5 + 3 * index + 2.5
    result = SweepResult(sweep_id, cells, trainings=64, wall_s=12.5, storage="/nowhere", cache_hits=0, train_s=10.0)
    result.started_at, result.ended_at = ended - 12.5, ended
    return spec, result


@pytest.fixture(scope="session")
def two_sweeps(tmp_path_factory) -> Path:
    """A home whose embedded store holds two synthetic sweeps, shared by the tests that only read
    it: the ViT's N* is 10 at alpha* = 0.3 in both, 20 in sweep-a and 40 in sweep-b (the latest)
    at 0.1."""
    home = tmp_path_factory.mktemp("two_sweeps")
    record_synthetic_sweep(home, "sweep-a", hard=4, easy=2)
    record_synthetic_sweep(home, "sweep-b", hard=8, easy=2)
    return home


def record_synthetic_sweep(
    home: Path, sweep_id: str = "synthetic-1", hard: int = 2, easy: int = 1, text: str = SYNTHETIC_SPEC
):
    """synthetic_sweep logged to a SQLite MLflow store under ``home``: (spec, result, tracking URI, parent run id)."""
    from services.app.logs import sweep_log  # noqa: PLC0415  (matplotlib loads on use)
    from services.store.tracking import record_sweep  # noqa: PLC0415  (MLflow loads on use)

    spec, result = synthetic_sweep(sweep_id, hard, easy, text)
    uri = f"sqlite:///{(home / 'mlflow.db').resolve()}"
    summary = summarize(spec, sweep_id, result.cells)
    made = record_sweep(spec, result, uri, home, text, sweep_log(spec, summary, result.cells))
    return spec, result, uri, made.run_id
