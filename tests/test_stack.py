"""The workstation stack of docker/, statically: its compose file validates, every service is
healthchecked and published on loopback only, the images' commands exist, the cluster launcher's
config matches Ray's schema. tests/test_compose_stack.py runs the stack under a real engine."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import ray
import yaml

ROOT = Path(__file__).parents[1]
DOCKER = ROOT / "docker"
BIN = Path(sys.executable).parent


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


@pytest.mark.skipif(
    shutil.which("docker-compose") is None, reason="needs Debian's docker-compose (make test installs it as root)"
)
def test_the_gpu_variant_reserves_gpus_for_workers_that_offer_them_to_ray(tmp_path):
    env = tmp_path / ".env"
    env.write_text((DOCKER / ".env.example").read_text() + "RAY_WORKER_GPUS=2\n")
    files = [arg for name in ("docker-compose.yml", "docker-compose.gpu.yml") for arg in ("-f", str(DOCKER / name))]
    command = ["docker-compose", "--env-file", str(env), *files, "config"]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    services = yaml.safe_load(result.stdout)["services"]
    worker = services["ray-worker"]
    (device,) = worker["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia" and "gpu" in device["capabilities"] and int(device["count"]) == 2
    assert "--num-gpus=2" in worker["command"] and "--address=ray-head:6379" in worker["command"]
    for node in ("ray-head", "ray-worker"):  # one image, a CUDA build of torch, the rest as the CPU file has it
        assert services[node]["build"]["args"]["TORCH_VARIANT"].startswith("cu")
        assert services[node]["healthcheck"] == _compose()["services"][node]["healthcheck"]
    assert "deploy" not in services["ray-head"] and "deploy" not in services["mlflow"]


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
    schema = json.loads((Path(ray.__file__).parent / "autoscaler" / "ray-schema.json").read_text())
    config = yaml.safe_load((DOCKER / "cluster.yaml").read_text())
    jsonschema.validate(config, schema)
    assert config["docker"]["image"] == "vitsweep:latest" and (DOCKER / "submit_sweep.py").is_file()
