"""The workstation stack of docker-compose.yml, built and brought up on this machine.

    python docker/stack.py up [--workers 2] [--project vitsweep] [--env-file docker/.env] [--json]
    python docker/stack.py build    # the images only (what `up` builds first), engine stopped after
    python docker/stack.py down [--volumes]
    eval "$(python docker/stack.py env)"   # DOCKER_HOST and the image variables, for docker compose

`up` uses the Docker engine that answers (DOCKER_HOST, or the default socket). Where none does and
this is root, it starts a private `dockerd` (its data root under the cache folder, kept between runs
so that images are built once per machine) which `down` stops, by the pid it recorded. Where the
registry's images cannot be pulled (an air-gapped machine), it makes a Debian base image with
debootstrap and `docker import`, and a PostgreSQL image from Debian's packages
(docker/postgres/). The project image installs from a wheelhouse that `pip wheel` fills here, so its
build reads no index. Everything it builds is keyed by what it contains. A missing `--env-file` is
written from docker/.env.example with fresh secrets.

Exit status 77 with one line on stderr: this machine cannot run containers (not root and no engine).
Standard library only: it runs before anything else is installed.
"""

import argparse
import fcntl
import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
import tomllib
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCKER = ROOT / "docker"
COMPOSE_FILE = DOCKER / "docker-compose.yml"
GPU_FILE = DOCKER / "docker-compose.gpu.yml"  # the GPU variant, on top of COMPOSE_FILE (up --gpus N)
CACHE = Path(os.environ.get("VITSWEEP_STACK_CACHE", Path.home() / ".cache" / "vitsweep" / "stack"))
ENGINE_FILE = CACHE / "engine.json"  # the private dockerd this script started: its pid and socket
EXEC_ROOT = Path("/run/vitsweep-stack")  # short: containerd's sockets live under it
SKIP = 77

REGISTRY_BASE, REGISTRY_POSTGRES = "python:3.11-slim", "postgres:16"
SUITE = "bookworm"  # Debian's release with Python 3.11, the image's Python
BASE_PACKAGES = ["python3", "python3-venv", "curl", "ca-certificates"]
VENV = "/opt/python"  # the base image's Python environment, first on its PATH as in python:3.11-slim
PATH = f"{VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
HEALTHY_S = 600  # a first start initialises PostgreSQL and MLflow's schema: a minute or two on 2 cores


class CannotRun(Exception):
    """This machine cannot run the stack, for a reason that is not a defect (exit 77)."""


STARTED = time.monotonic()


def log(message: str) -> None:
    print(f"stack [{time.monotonic() - STARTED:5.0f} s]: {message}", file=sys.stderr, flush=True)


def run(cmd: list[str], env: dict | None = None, timeout: float | None = None, **kw) -> str:
    """Run a command; its stdout, or a RuntimeError with the tail of what it printed."""
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, **kw)
    if result.returncode != 0:
        raise RuntimeError(
            f"{' '.join(cmd[:4])} ... exited {result.returncode}:\n{(result.stdout + result.stderr)[-3000:]}"
        )
    return result.stdout


def key(*parts: str) -> str:
    """A short hash of what a built thing contains: its name changes exactly when its contents do."""
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:12]


def apt_install(packages: list[str]) -> None:
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise CannotRun(f"needs {', '.join(packages)}: install them, or run as root on Debian")
    log(f"installing {' '.join(packages)} (apt)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    run(["apt-get", "update", "-qq"], env=env)
    run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages], env=env)


def compose_command() -> list[str]:
    """`docker compose` (v2) where the CLI has it, else Debian's docker-compose (installed if missing)."""
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose") is None:
        apt_install(["docker-compose"])
    return ["docker-compose"]


# --- the engine -------------------------------------------------------------------------------


def answers(host: str | None) -> bool:
    env = {**os.environ, **({"DOCKER_HOST": host} if host else {})}
    return subprocess.run(["docker", "info"], capture_output=True, env=env, timeout=30).returncode == 0


def private_engine() -> dict | None:
    """The private dockerd recorded in ENGINE_FILE, if it still runs and answers."""
    if not ENGINE_FILE.exists():
        return None
    engine = json.loads(ENGINE_FILE.read_text())
    alive = running(engine["pid"]) and answers(engine["host"])
    return engine if alive else None


def system_engine() -> dict:
    """The engine DOCKER_HOST (or the default socket) names, not ours to stop."""
    return {"host": os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock"), "pid": None}


def engine() -> dict:
    """{"host": DOCKER_HOST, "pid": the private dockerd's pid or None}: an engine that answers."""
    if shutil.which("docker") is None:
        apt_install(["docker.io"])
    if (mine := private_engine()) is not None:
        return mine
    if answers(None):
        return system_engine()
    if os.geteuid() != 0:
        raise CannotRun("no Docker engine answers and starting one needs root")
    if shutil.which("dockerd") is None:
        apt_install(["docker.io"])
    return start_dockerd()


def start_dockerd() -> dict:
    """A dockerd of our own: data root under CACHE (images kept between runs), its own socket."""
    for folder in (CACHE / "docker", EXEC_ROOT):
        folder.mkdir(parents=True, exist_ok=True)
    socket = CACHE / "docker.sock"
    host = f"unix://{socket}"
    with open(CACHE / "dockerd.log", "ab") as out:
        process = subprocess.Popen(
            [
                "dockerd",
                f"--data-root={CACHE / 'docker'}",
                f"--exec-root={EXEC_ROOT}",
                f"--host={host}",
                f"--pidfile={CACHE / 'dockerd.pid'}",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # outlives `up`; `down` stops it by this pid
        )
    engine = {"host": host, "pid": process.pid}
    ENGINE_FILE.write_text(json.dumps(engine))
    deadline = time.monotonic() + 120
    while not answers(host):
        if process.poll() is not None or time.monotonic() > deadline:
            tail = (CACHE / "dockerd.log").read_text(errors="replace")[-2000:]
            stop_dockerd(engine)
            raise RuntimeError(f"dockerd did not start (exit {process.poll()}):\n{tail}")
        time.sleep(0.5)
    log(f"started a private dockerd, pid {process.pid}, {host}")
    return engine


def stop_dockerd(engine: dict) -> None:
    """SIGTERM to the dockerd we started (it stops its containers and its containerd), SIGKILL
    if it is still there after a minute."""
    pid = engine["pid"]
    for sig, wait_s in ((signal.SIGTERM, 60), (signal.SIGKILL, 10)):
        if not running(pid):
            break
        os.kill(pid, sig)
        deadline = time.monotonic() + wait_s
        while running(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
    ENGINE_FILE.unlink(missing_ok=True)
    log(f"stopped the private dockerd, pid {pid}")


def running(pid: int) -> bool:
    """The process exists and is not a zombie (reaped here when it is our child)."""
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    except ChildProcessError:  # started by an earlier `up`: not ours to reap
        pass
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0] != "Z"
    except OSError:
        return False


# --- images -----------------------------------------------------------------------------------


def docker(eng: dict, *args: str, timeout: float | None = None, **kw) -> str:
    return run(["docker", *args], env={**os.environ, "DOCKER_HOST": eng["host"]}, timeout=timeout, **kw)


def has_image(eng: dict, image: str) -> bool:
    try:
        docker(eng, "image", "inspect", image)
        return True
    except RuntimeError:
        return False


def pullable(eng: dict, image: str) -> bool:
    """The image is here, or the registry gives it."""
    if has_image(eng, image):
        return True
    try:
        docker(eng, "pull", "-q", image, timeout=120)
        return True
    except (RuntimeError, subprocess.TimeoutExpired):
        log(f"cannot pull {image}: building it from Debian's packages")
        return False


def apt_mirror() -> str:
    """The Debian mirror this machine's apt uses (debootstrap's source)."""
    for sources in [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]:
        text = sources.read_text() if sources.is_file() else ""
        match = re.search(r"^URIs:\s*(\S+/debian)\s*$", text, re.M) or re.search(r"^deb\s+(\S+/debian)\s", text, re.M)
        if match:
            return match.group(1)
    return "http://deb.debian.org/debian"


def local_base(eng: dict) -> str:
    """python:3.11-slim's equivalent from Debian's packages: debootstrap, a venv first on PATH, docker import."""
    mirror = apt_mirror()
    image = f"vitsweep/base:{SUITE}-{key(SUITE, mirror, *BASE_PACKAGES, VENV, PATH)}"
    if has_image(eng, image):
        return image
    if shutil.which("debootstrap") is None:
        apt_install(["debootstrap"])
    rootfs = CACHE / "rootfs"
    shutil.rmtree(rootfs, ignore_errors=True)
    log(f"debootstrap {SUITE} from {mirror} (about a minute)")
    run(["debootstrap", "--variant=minbase", f"--include={','.join(BASE_PACKAGES)}", SUITE, str(rootfs), mirror])
    run(["chroot", str(rootfs), "python3", "-m", "venv", VENV])
    tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
    docker(eng, "import", "--change", f"ENV PATH={PATH}", "--change", 'CMD ["python3"]', "-", image, stdin=tar.stdout)
    tar.wait()
    shutil.rmtree(rootfs)
    return image


def local_postgres(eng: dict, base: str) -> str:
    """docker/postgres/Dockerfile on the local base."""
    folder = DOCKER / "postgres"
    image = f"vitsweep/postgres:15-{key(base, *(p.read_text() for p in sorted(folder.iterdir())))}"
    if not has_image(eng, image):
        log(f"building {image}: PostgreSQL from Debian's packages")
        docker(eng, "build", "-q", "-t", image, "--build-arg", f"BASE_IMAGE={base}", str(folder))
    return image


def images(eng: dict) -> dict[str, str]:
    """The compose file's image variables: the registry's images where they can be had, else local builds."""
    chosen = {"VITSWEEP_BASE_IMAGE": REGISTRY_BASE, "POSTGRES_IMAGE": REGISTRY_POSTGRES}
    chosen.update({name: os.environ[name] for name in chosen if os.environ.get(name)})
    if chosen["VITSWEEP_BASE_IMAGE"] == REGISTRY_BASE and not pullable(eng, REGISTRY_BASE):
        chosen["VITSWEEP_BASE_IMAGE"] = local_base(eng)
    if chosen["POSTGRES_IMAGE"] == REGISTRY_POSTGRES and not pullable(eng, REGISTRY_POSTGRES):
        base = chosen["VITSWEEP_BASE_IMAGE"]
        chosen["POSTGRES_IMAGE"] = local_postgres(eng, base if base.startswith("vitsweep/") else local_base(eng))
    return chosen


def wheelhouse() -> None:
    """docker/wheelhouse/ filled with wheels of the image's dependencies (CPU torch), made once per
    dependency list under CACHE and linked in, so that the image's build reads no index."""
    folder = DOCKER / "wheelhouse"
    unlink_wheels()
    if os.environ.get("TORCH_VARIANT", "cpu") != "cpu" or sys.version_info[:2] != (3, 11):
        log("no wheelhouse (a CUDA build, or not Python 3.11 here): the image's build reads the index")
        return
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    requirements = [*project["project"]["dependencies"], *project["build-system"]["requires"], "psycopg2-binary>=2.9"]
    made = CACHE / f"wheelhouse-{key(sys.platform, *requirements)}"
    if not made.is_dir():
        log(f"pip wheel of {len(requirements)} requirements (about 30 s)")
        partial = made.with_suffix(".partial")
        shutil.rmtree(partial, ignore_errors=True)
        run([sys.executable, "-m", "pip", "wheel", "--quiet", "--wheel-dir", str(partial), *requirements])
        partial.rename(made)
    for wheel in made.glob("*.whl"):
        try:
            os.link(wheel, folder / wheel.name)
        except OSError:  # another file system
            shutil.copy2(wheel, folder / wheel.name)


def unlink_wheels() -> None:
    for wheel in (DOCKER / "wheelhouse").glob("*.whl"):
        wheel.unlink()


# --- compose ----------------------------------------------------------------------------------


def env_file(path: Path) -> Path:
    """The compose .env; a missing one is written from .env.example with fresh secrets."""
    if not path.exists():
        text = (DOCKER / ".env.example").read_text()
        for name in ("POSTGRES_PASSWORD", "RAY_AUTH_TOKEN"):
            text = re.sub(rf"^{name}=.*$", f"{name}={secrets.token_hex(24)}", text, flags=re.M)
        path.write_text(text)
        path.chmod(0o600)
        log(f"wrote {path} with fresh secrets")
    return path


def settings(path: Path) -> dict[str, str]:
    lines = (line.split("=", 1) for line in path.read_text().splitlines() if "=" in line and not line.startswith("#"))
    return {name.strip(): value.strip() for name, value in lines}


class Stack:
    """The compose project on one engine."""

    def __init__(self, eng: dict, project: str, env: Path, image_vars: dict[str, str] | None = None, gpu=False):
        self.eng, self.project, self.env = eng, project, env
        files = [COMPOSE_FILE, *([GPU_FILE] if gpu else [])]
        self.command = [*compose_command(), "--project-name", project, "--env-file", str(env)]
        self.command += [arg for file in files for arg in ("-f", str(file))]
        self.environ = {**os.environ, "DOCKER_HOST": eng["host"], **(image_vars or {})}

    def __call__(self, *args: str, timeout: float | None = None) -> str:
        return run([*self.command, *args], env=self.environ, timeout=timeout)

    def containers(self) -> dict[str, str]:
        """{container name: health} of the project's running containers ("none" without a healthcheck)."""
        ids = self("ps", "-q").split()
        if not ids:
            return {}
        fmt = "{{.Name}} {{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}"
        lines = docker(self.eng, "inspect", "-f", fmt, *ids).split("\n")
        return dict(line.lstrip("/").split(" ", 1) for line in lines if line.strip())

    def wait_healthy(self, expected: int, deadline_s: float = HEALTHY_S) -> dict[str, str]:
        deadline = time.monotonic() + deadline_s
        while True:
            state = self.containers()
            if len(state) >= expected and all(h == "healthy" for h in state.values()):
                return state
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"not healthy after {deadline_s:.0f} s: {state}\n{self('logs', '--tail', '30')[-4000:]}"
                )
            time.sleep(1)

    def wait_for_ray_nodes(self, expected: int, dashboard: str, deadline_s: float = HEALTHY_S) -> None:
        """Until the Ray head counts ``expected`` live nodes: a worker's container is healthy once its
        raylet runs, which can be before the head has registered it (a sweep started then would see
        fewer slots)."""
        token = settings(self.env).get("RAY_AUTH_TOKEN", "")
        request = urllib.request.Request(
            f"{dashboard}/api/v0/nodes?limit=100&filter_keys=state&filter_predicates=%3D&filter_values=ALIVE",
            headers={"Authorization": f"Bearer {token}"},
        )
        deadline = time.monotonic() + deadline_s
        while True:
            try:
                with urllib.request.urlopen(request, timeout=30) as answer:
                    alive = len(json.load(answer)["data"]["result"]["result"])
            except OSError:
                alive = 0
            if alive >= expected:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Ray head counts {alive} live nodes of {expected} after {deadline_s:.0f} s")
            time.sleep(1)


class Laps:
    """Seconds spent in each step, for the timings `up --json` reports."""

    def __init__(self):
        self.start, self.steps = time.monotonic(), {}

    def __call__(self, name: str) -> None:
        self.steps[name] = round(time.monotonic() - self.start - sum(self.steps.values()), 1)

    def total(self) -> dict:
        return {**self.steps, "total_s": round(time.monotonic() - self.start, 1)}


def git_head() -> str:
    """The checkout's commit, for the image's runs to tag (empty outside a checkout)."""
    head = subprocess.run(["git", "rev-parse", "--verify", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    return head.stdout.strip() if head.returncode == 0 else ""


def build(laps: Laps) -> tuple[dict, dict[str, str]]:
    """An engine, the base images and the project's image (vitsweep:latest, as the compose file
    names it): (the engine, the compose file's image variables)."""
    eng = engine()
    laps("engine_s")
    image_vars = images(eng)
    laps("base_images_s")
    wheelhouse()
    laps("wheelhouse_s")
    log("building the project's image")
    try:
        docker(
            eng, "build", "-q", "-t", "vitsweep:latest", "-f", str(DOCKER / "Dockerfile"),
            "--build-arg", f"BASE_IMAGE={image_vars['VITSWEEP_BASE_IMAGE']}",
            "--build-arg", f"TORCH_VARIANT={os.environ.get('TORCH_VARIANT', 'cpu')}",
            "--build-arg", f"GIT_COMMIT={git_head()}",
            str(ROOT),
        )  # fmt: skip
    finally:
        unlink_wheels()  # only the build reads them (and a job's upload of the project must not)
    laps("build_s")
    exports = {"DOCKER_HOST": eng["host"], **image_vars}
    (CACHE / "exports.sh").write_text("".join(f"export {name}={value}\n" for name, value in exports.items()))
    return eng, image_vars


def up(args) -> dict:
    """Build what is missing, `compose up`, wait until every container is healthy and Ray counts every worker."""
    laps = Laps()
    if args.gpus:  # a CUDA build of PyTorch (TORCH_VARIANT, read by build) and the GPU file's reservations
        os.environ.setdefault("TORCH_VARIANT", "cu130")
        os.environ["RAY_WORKER_GPUS"] = str(args.gpus)
    eng, image_vars = build(laps)
    stack = Stack(eng, args.project, env_file(Path(args.env_file).resolve()), image_vars, gpu=bool(args.gpus))
    log(f"docker compose up: PostgreSQL, MLflow, a Ray head and {args.workers} workers")
    stack("up", "-d", "--no-build", "--scale", f"ray-worker={args.workers}")
    state = stack.wait_healthy(expected=3 + args.workers)
    ports = {"MLFLOW_PORT": "5000", "RAY_DASHBOARD_PORT": "8265", **settings(stack.env)}
    stack.wait_for_ray_nodes(1 + args.workers, f"http://127.0.0.1:{ports['RAY_DASHBOARD_PORT']}")
    laps("up_s")
    return {
        "mlflow": f"http://127.0.0.1:{ports['MLFLOW_PORT']}",
        "dashboard": f"http://127.0.0.1:{ports['RAY_DASHBOARD_PORT']}",
        "docker_host": eng["host"],
        "private_engine_pid": eng["pid"],
        "compose": stack.command,
        "images": image_vars,
        "containers": state,
        "timings": laps.total(),
    }


def usage(result: dict, token: str) -> str:
    """What to do with the stack that came up."""
    submit = (
        f"RAY_AUTH_TOKEN={token} .venv/bin/vitsweep submit sweeps/smoke.yaml --address {result['dashboard']} "
        "--tracking-uri http://mlflow:5000 --home /ray-storage/runs --follow"
    )
    return (
        f"stack up in {result['timings']['total_s']:.0f} s: {', '.join(result['containers'])} healthy\n"
        f"  MLflow {result['mlflow']}   Ray dashboard {result['dashboard']}\n"
        f'  eval "$(python docker/stack.py env)"   # then docker and docker compose commands reach it\n'
        f"  {submit}\n"
        "  down: make stack-down (keeps the data; make stack-down VOLUMES=1 deletes it)"
    )


def down(args) -> None:
    eng = private_engine()
    if eng is None and not answers(None):
        log("no engine answers: nothing to bring down")
        return
    eng = eng or system_engine()
    path = Path(args.env_file).resolve()
    if path.exists():
        Stack(eng, args.project, path)("down", *(["--volumes"] if args.volumes else []))
    if eng["pid"] is not None:
        stop_dockerd(eng)


def act(args) -> None:
    if args.action == "build":  # the images only; a private engine started for it is stopped again
        started = private_engine() is None
        laps = Laps()
        eng, _ = build(laps)
        if started and eng["pid"] is not None:
            stop_dockerd(eng)
        print(json.dumps({"timings": laps.total()}) if args.json else f"built in {laps.total()['total_s']:.0f} s")
    elif args.action == "up":
        result = up(args)
        print(json.dumps(result) if args.json else usage(result, settings(Path(args.env_file))["RAY_AUTH_TOKEN"]))
    elif args.action == "down":
        down(args)
    else:
        exports = CACHE / "exports.sh"
        print(exports.read_text() if exports.exists() else "# no stack was built here", end="")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=["up", "build", "down", "env"])
    parser.add_argument("--project", default="vitsweep", help="compose project name (volumes are named after it)")
    parser.add_argument("--env-file", default=str(DOCKER / ".env"), help="secrets and sizes (written if missing)")
    parser.add_argument("--workers", type=int, default=2, help="Ray worker containers")
    parser.add_argument(
        "--gpus", type=int, default=0, help="up: NVIDIA GPUs per worker (docker-compose.gpu.yml; CUDA PyTorch)"
    )
    parser.add_argument("--volumes", action="store_true", help="down: delete the named volumes too (the data!)")
    parser.add_argument("--json", action="store_true", help="up, build: one JSON line of the result and the timings")
    args = parser.parse_args()
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one at a time: a background build, then `up`, waits for it
        try:
            act(args)
        except CannotRun as reason:
            print(f"stack: cannot run here: {reason}", file=sys.stderr)
            return SKIP
    return 0


if __name__ == "__main__":
    sys.exit(main())
