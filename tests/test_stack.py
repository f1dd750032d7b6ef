"""The workstation stack of docker/, without a Docker engine: static checks of its files, and the
same services started on loopback with the commands the compose file runs: PostgreSQL, an
MLflow server on it with served artifacts, a Ray head and a second Ray node; a small sweep goes
in through the Jobs API, and the MLflow UI is read back in headless Chromium."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml
from conftest import chromium_page, mlflow_server_at, start_ray_nodes, stop_ray_nodes
from mlflow.tracking import MlflowClient

ROOT = Path(__file__).parents[1]
DOCKER = ROOT / "docker"
BIN = Path(sys.executable).parent
PG_BIN = (
    next(iter(sorted(Path("/usr/lib/postgresql").glob("*/bin"))), None)
    if Path("/usr/lib/postgresql").is_dir()
    else None
)


def _compose() -> dict:
    return yaml.safe_load((DOCKER / "docker-compose.yml").read_text())


@pytest.mark.skipif(
    shutil.which("docker-compose") is None, reason="needs Debian's docker-compose (make test installs it as root)"
)
def test_compose_file_validates_with_the_example_env(tmp_path):
    env = tmp_path / ".env"
    shutil.copy(DOCKER / ".env.example", env)
    result = subprocess.run(
        ["docker-compose", "--env-file", str(env), "-f", str(DOCKER / "docker-compose.yml"), "config", "-q"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    (tmp_path / "empty.env").write_text("")
    missing = subprocess.run(
        [
            "docker-compose",
            "--env-file",
            str(tmp_path / "empty.env"),
            "-f",
            str(DOCKER / "docker-compose.yml"),
            "config",
            "-q",
        ],
        capture_output=True,
        text=True,
    )
    assert (
        missing.returncode != 0 and "set POSTGRES_USER in docker/.env" in missing.stderr
    )  # secrets come from .env only


def test_every_service_is_healthchecked_gated_and_published_on_loopback_only():
    compose = _compose()
    services = compose["services"]
    assert set(services) == {"postgres", "mlflow", "ray-head", "ray-worker"}
    for name, service in services.items():
        assert service["healthcheck"]["test"], name
        for port in service.get("ports", []):
            assert port.startswith("127.0.0.1:"), (name, port)
        for dependency in service.get("depends_on", {}).values():
            assert dependency == {"condition": "service_healthy"}, name
        for volume in service.get("volumes", []):
            assert volume.split(":")[0] in compose["volumes"], (name, volume)  # named volumes, nothing lost on restart
    for node in ("ray-head", "ray-worker"):
        assert re.fullmatch(r"\d+gb", services[node]["shm_size"])
        assert (
            services[node]["environment"]["RAY_AUTH_MODE"] == "token"
            and "RAY_AUTH_TOKEN" in services[node]["environment"]
        )
    assert "postgresql+psycopg2://" in services["mlflow"]["command"]  # SQLAlchemy 2.1 would pick psycopg 3
    assert re.search(r'--allowed-hosts "[^"]*mlflow:5000', services["mlflow"]["command"])
    assert (
        ".env"
        in subprocess.run(["git", "check-ignore", "docker/.env"], capture_output=True, text=True, cwd=ROOT).stdout
    )


def test_the_commands_the_images_run_exist():
    services = _compose()["services"]
    for name in ("mlflow", "ray-head", "ray-worker"):
        program = re.search(r"exec (\S+)", services[name]["command"]).group(1)
        assert (BIN / program).exists(), (name, program)  # installed with the project, as in the image
    dockerfile = (DOCKER / "Dockerfile").read_text()
    assert "curl" in re.search(r"apt-get install[^\n]*\n?[^\n]*", dockerfile).group(0)  # the healthchecks' curl
    assert "psycopg2-binary" in dockerfile and "ARG TORCH_VARIANT=cpu" in dockerfile
    for source in re.findall(r"^COPY (\S+)", dockerfile, re.M):
        assert (ROOT / source).exists(), source


def test_cluster_launcher_config_matches_rays_schema():
    import jsonschema
    import ray

    schema = json.loads((Path(ray.__file__).parent / "autoscaler" / "ray-schema.json").read_text())
    config = yaml.safe_load((DOCKER / "cluster.yaml").read_text())
    jsonschema.validate(config, schema)
    assert config["docker"]["image"] == "vitsweep:latest" and (DOCKER / "submit_sweep.py").is_file()


@pytest.fixture
def postgres(free_port):
    """A PostgreSQL server from Debian's packages on 127.0.0.1 with a database `mlflow`."""
    if PG_BIN is None or shutil.which("runuser") is None or os.geteuid() != 0:
        pytest.skip("needs Debian's postgresql and root (initdb runs as the postgres user)")
    data = Path(tempfile.mkdtemp(prefix="pg"))
    shutil.chown(data, "postgres", "postgres")
    as_postgres = ["runuser", "-u", "postgres", "--"]
    port = free_port()
    subprocess.run(
        [*as_postgres, str(PG_BIN / "initdb"), "-D", str(data / "db"), "--auth=trust", "-U", "postgres"],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [
            *as_postgres,
            str(PG_BIN / "pg_ctl"),
            "-D",
            str(data / "db"),
            "-l",
            str(data / "log"),
            "-w",
            "start",
            "-o",
            f"-h 127.0.0.1 -p {port} -k {data}",
        ],
        check=True,
        capture_output=True,
    )
    try:
        subprocess.run(
            [*as_postgres, str(PG_BIN / "createdb"), "-h", "127.0.0.1", "-p", str(port), "mlflow"],
            check=True,
            capture_output=True,
        )
        yield f"postgresql+psycopg2://postgres@127.0.0.1:{port}/mlflow"
    finally:
        subprocess.run(
            [*as_postgres, str(PG_BIN / "pg_ctl"), "-D", str(data / "db"), "-m", "fast", "stop"], capture_output=True
        )
        shutil.rmtree(data, ignore_errors=True)


@pytest.fixture
def mlflow_on_postgres(postgres, free_port, tmp_path):
    """`mlflow server` as the compose file runs it, on that database, artifacts served from a folder."""
    port = free_port()
    hosts = f"localhost,localhost:{port},127.0.0.1,127.0.0.1:{port}"
    with mlflow_server_at(port, tmp_path, postgres, "--allowed-hosts", hosts) as url:
        yield url


@pytest.fixture
def two_nodes(free_port):
    dashboard, _, temp = start_ray_nodes(free_port, workers=1, cpus=1)
    try:
        yield dashboard
    finally:
        stop_ray_nodes(temp)


def test_the_stack_on_loopback_runs_a_submitted_sweep_on_two_nodes(mlflow_on_postgres, two_nodes, tmp_path):
    home = tmp_path / "home"  # one path both nodes see, as the compose file's shared volume
    result = subprocess.run(
        [
            str(BIN / "vitsweep"),
            "submit",
            "sweeps/attention.yaml",
            "--address",
            two_nodes,
            "--tracking-uri",
            mlflow_on_postgres,
            "--home",
            str(home),
            "--follow",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["failed_trials"] == [] and summary["trainings"] == 64  # 4 trials of 16 models, ~9 s each
    nodes = {
        json.loads(line)["node_id"]
        for f in (home / "ray" / summary["sweep_id"]).glob("*/result.json")
        for line in f.read_text().splitlines()
        if line.strip()
    }
    assert len(nodes) == 2  # the trials ran on both nodes
    client = MlflowClient(mlflow_on_postgres)
    parent = client.get_run(summary["mlflow_parent_run_id"])
    assert parent.info.status == "FINISHED" and parent.data.tags["vitsweep.sweep_id"] == summary["sweep_id"]
    assert "attention_mass.png" in {a.path for a in client.list_artifacts(parent.info.run_id)}
    run_page = f"{mlflow_on_postgres}/#/experiments/{parent.info.experiment_id}/runs/{parent.info.run_id}"
    page = chromium_page(run_page)
    if page is None:
        pytest.skip("the sweep ran; the UI check needs Debian's chromium (make test installs it as root)")
    assert summary["sweep_id"] in page
    assert "attention_mass.png" in chromium_page(f"{run_page}/artifacts")
