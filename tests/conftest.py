import contextlib
import json
import os
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

BIN = Path(sys.executable).parent


@pytest.fixture(autouse=True, scope="session")
def _threads():
    """Two cores on CI: one intra-op thread keeps small tests fast and deterministic."""
    torch.set_num_threads(1)


@pytest.fixture
def free_port():
    """A function returning a TCP port free on 127.0.0.1 right now."""

    def pick() -> int:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    return pick


@pytest.fixture(scope="module")
def local_ray():
    """A local Ray of 2 CPUs on 127.0.0.1 for the tests of one module."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1")
    yield
    ray.shutdown()


def run_spec(text: str, tmp_path: Path) -> tuple[dict, str]:
    """`vitsweep run --json` of the spec ``text`` with its home at tmp_path/home: the last line's
    JSON summary and the whole output. Fails the test on a non-zero exit."""
    from typer.testing import CliRunner

    from services.cli import app

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
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # Ray's socket paths must stay under 108 bytes
    common = ["--node-ip-address", "127.0.0.1", f"--num-cpus={cpus}"]
    subprocess.run([str(BIN / "ray"), "start", "--head", f"--port={port}", "--dashboard-host=127.0.0.1",
                    f"--dashboard-port={dashboard}", "--include-dashboard=true", "--temp-dir", temp, *common],
                   env=env, check=True, capture_output=True, timeout=180)
    for index in range(workers):  # the head wrote its token to ~/.ray/auth_token; a joining node must use it
        own = Path(temp) / f"w{index}"  # its own runtime-env folder: one node's cleanup must not delete another's
        subprocess.run([str(BIN / "ray"), "start", f"--address=127.0.0.1:{port}", "--temp-dir", str(own), *common],
                       env={**env, "RAY_AUTH_MODE": "token"}, check=True, capture_output=True, timeout=180)
    _wait_for_nodes(f"127.0.0.1:{port}", 1 + workers, env)
    return f"http://127.0.0.1:{dashboard}", f"127.0.0.1:{port}", temp


def _wait_for_nodes(address: str, count: int, env: dict, seconds: float = 90) -> None:
    """Until `ray status` lists ``count`` active nodes: a node that has not registered yet gets no trials."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        status = subprocess.run([str(BIN / "ray"), "status", f"--address={address}"], env={**env, "RAY_AUTH_MODE": "token"},
                                capture_output=True, text=True, timeout=60).stdout
        active = status.split("Active:")[-1].split("Pending:")[0] if "Active:" in status else ""
        if active.count("node_") >= count:
            return
        time.sleep(1)
    raise TimeoutError(f"{count} Ray nodes did not become active within {seconds} s")


def stop_ray_nodes(temp: str) -> None:
    subprocess.run([str(BIN / "ray"), "stop", "--force"], capture_output=True, timeout=120)
    shutil.rmtree(temp, ignore_errors=True)


@contextlib.contextmanager
def mlflow_server_at(port: int, folder: Path):
    """`mlflow server` on 127.0.0.1:port with its store and artifacts in ``folder``; yields its URL."""
    proc = subprocess.Popen(
        [str(BIN / "mlflow"), "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
         "--backend-store-uri", f"sqlite:///{folder / 'server.db'}", "--artifacts-destination", str(folder / "artifacts")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(f"{url}/health", timeout=1)
                break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("mlflow server did not start within 60 s")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)
