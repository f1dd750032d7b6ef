"""Ray for a sweep: a cluster joined where an address is given, else a Ray of this machine's own
on loopback, its processes spared a SIGTERM to the whole process group, and stopped when done."""

import contextlib
import gc
import logging
import os
import signal
import socket
from collections.abc import Callable, Iterator
from urllib.parse import urlsplit

import psutil
import ray
from ray._private import ray_constants

from services.process import WORKER_ENVIRONMENT, not_set


def worker_runtime_env() -> dict:
    """The sweep's runtime env: services.process.WORKER_ENVIRONMENT, but the variables this process
    has already (the user's; a submitted job's env vars reach its driver, and Ray refuses a
    driver's env var that the job's runtime env sets too)."""
    return {"env_vars": not_set(WORKER_ENVIRONMENT)}


def cluster_address(address: str | None) -> str | None:
    """The cluster a sweep joins: ``address``, else RAY_ADDRESS, else None (a local Ray of its own)."""
    return address or os.environ.get("RAY_ADDRESS") or None


def unreachable_cluster(address: str | None, timeout_s: float = 5.0) -> str | None:
    """Why nothing answers at the cluster address (``cluster_address``; host:port or ray://host:port),
    or None when it does, or when there is none, Ray resolves it itself ("auto") or is up already
    (``start_ray`` joins no cluster then). ray.init retries an address that refuses for minutes
    (13 min 45 s here, 20 tries of its GCS client) before it says so."""
    address = cluster_address(address)
    if ray.is_initialized() or not address:
        return None
    parts = urlsplit(address if "://" in address else f"//{address}")
    try:
        host, port = parts.hostname, parts.port
    except ValueError:  # a port that is not a number: ray.init says what it expects
        return None
    if host is None or port is None:
        return None
    try:
        socket.create_connection((host, port), timeout=timeout_s).close()
    except OSError as error:  # refused, timed out, no such host
        return str(error)
    return None


def start_ray(address: str | None) -> Callable[[], None] | None:
    """Connect to the cluster at ``address`` (or RAY_ADDRESS: ``cluster_address``), else start a
    local Ray that only listens on loopback (start_local_ray), its workers under
    ``worker_runtime_env``: ray.shutdown, which the caller runs when done, or None when Ray was
    already up (its owner stops it)."""
    if ray.is_initialized():
        return None
    address = cluster_address(address)
    logging.getLogger("ray.tune").setLevel(logging.WARNING)
    init = {"runtime_env": worker_runtime_env(), "log_to_driver": False, "logging_level": logging.WARNING}
    if address:
        ray.init(address=address, **init)
    else:
        start_local_ray(include_dashboard=False, **init)
    return stop_ray


def stop_ray() -> None:
    """ray.shutdown, after collecting the garbage that still holds Ray objects (a sweep's Tuner
    and results hold ObjectRefs in cycles): freed later, by a collection in another thread after
    the shutdown, such a ref makes Ray end the whole process ("The core worker has already been
    shutdown ... The process will exit"). The processes of a Ray started here are killed at once
    (``_kill_started``), not by ray.shutdown, whose SIGTERM they block (``_spared``)."""
    gc.collect()
    worker = ray._private.worker  # Ray 2.60's own handle on what ray.init started here: none where it joined a cluster
    node, worker._global_node = worker._global_node, None
    try:
        ray.shutdown()
    finally:
        if node is not None:
            _kill_started(node)


def _kill_started(node) -> None:
    """SIGKILL to the processes ray.init started (``node``'s) and those they started (the raylet's
    agents and workers), then Ray's own reaping of the first. ray.shutdown gave each of its five a
    second to take its SIGTERM, which they block, then killed them: 5.4 s to stop a local Ray (1.5 s
    where they take it), time in which the raylet's agents saw it gone and left; killed at once,
    the agents outlived it."""
    started = [info.process.pid for infos in node.all_processes.values() for info in infos]
    family = []
    for pid in started:
        with contextlib.suppress(psutil.Error):
            family += psutil.Process(pid).children(recursive=True)
    for proc in family:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    if node.is_head():
        node.destroy_external_storage()
    node.kill_all_processes(check_alive=False, allow_graceful=False)


logger = logging.getLogger(__name__)
# What Ray 2.60 raises when its raylet has not registered 30 s after it started (hard-coded in
# ray/_private/node.py): on a busy machine its dashboard agent, a Python process, can take longer
# than the 15 s the raylet waits for its port (ray-project/ray#65983); it is no fault of the spec.
STARTUP_TIMED_OUT = "The current node timed out during startup"


def start_local_ray(**init) -> None:
    """ray.init of a new one-machine Ray whose every process (GCS, raylet, agents, workers)
    listens on 127.0.0.1 only, tried once more where Ray timed out starting (STARTUP_TIMED_OUT:
    a suite's CI run failed on it at a busy moment). A new one (address "local"): without an address ray.init joins any
    Ray already running on the machine (another user's sweep, a `ray start` head), on its
    machine-wide address. Ray 2.60 binds its servers to the node address but swaps a loopback one
    for the machine's own, except in its single-machine mode (RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0,
    read once at import into ray_constants.ENABLE_RAY_CLUSTER): that mode, for this call."""
    clusters = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    # Ray's default for a new local Ray, token authentication on, kept; its warning saying so left a user nothing to do
    logging.getLogger("ray._private.authentication.authentication_token_setup").setLevel(logging.ERROR)
    try:
        with _spared(signal.SIGTERM):
            _init_local(init)
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = clusters


def _init_local(init: dict) -> None:
    """``ray.init`` of a new local Ray, once more where it timed out starting."""
    try:
        ray.init(address="local", _node_ip_address="127.0.0.1", **init)
    except Exception as error:
        if STARTUP_TIMED_OUT not in str(error):
            raise
        logger.warning("warning: Ray did not start in time (%s); starting it once more", error)
        ray.init(address="local", _node_ip_address="127.0.0.1", **init)


@contextlib.contextmanager
def _spared(signum: int) -> Iterator[None]:
    """``signum`` blocked in this thread while it starts processes, which keep the mask (a fork
    and exec keep it; Ray's GCS, raylet, agents and, through the raylet, its workers): a SIGTERM to
    the whole process group (`scancel`, `timeout`, a Slurm time limit) then reaches the driver
    alone, which stops the sweep and its Ray as a SIGTERM to it alone does (services.app.runs).
    Ray blocks SIGINT in them for Ctrl-C the same way. Where the group's SIGTERM killed the GCS,
    the driver waited 60 s for it and ended on Ray's "Failed to connect to GCS"."""
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signum})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)
