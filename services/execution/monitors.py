"""MLflow's system metrics of every node of the Ray cluster: the driver's machine logs its own
(services.store.live); each other node gets an actor that runs MLflow's SystemMetricsMonitor
there, logging to the sweep's parent run as ``system/NODE/...`` (NODE: its host name). Only
with a tracking server: a SQLite or file store lies on the driver's disk, out of other nodes' reach.
"""

import os
from collections.abc import Callable

import ray
from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from services.store.live import FAIL_FAST

LOCAL_STORES = ("sqlite:", "file:", "/")  # tracking URIs other nodes cannot write to


@ray.remote(num_cpus=0)
class NodeMonitor:
    """MLflow's SystemMetricsMonitor on one node, for one run: it stops by itself once the run
    leaves RUNNING, or when told to."""

    def __init__(self, run_id: str, uri: str, node: str, interval_s: float):
        self.monitor = SystemMetricsMonitor(
            run_id, sampling_interval=interval_s, resume_logging=True, node_id=node, tracking_uri=uri
        )
        self.monitor.start()

    def finish(self) -> None:
        self.monitor.finish()


def monitor_nodes(run_id: str, uri: str, interval_s: float) -> Callable[[], None]:
    """Start a NodeMonitor on every live node but the driver's (none for a local store): the
    function that stops them. Nodes that join later are not followed."""
    if uri.startswith(LOCAL_STORES):
        return lambda: None
    mine = ray.get_runtime_context().get_node_id()
    others = [n for n in ray.nodes() if n["Alive"] and n["NodeID"] != mine]
    hosts = [n["NodeManagerHostname"] for n in others]
    # MLflow's requests fail fast there as the driver's live record's do (its values, or the user's own):
    # with MLflow's default retries, each node's monitor would hold the end of a sweep whose server had
    # gone down until `stop` gives up on it, 60 s
    env = {name: os.environ.get(name, value) for name, value in FAIL_FAST.items()}
    actors = [
        NodeMonitor.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False),
            runtime_env={"env_vars": env},
        ).remote(run_id, uri, host if hosts.count(host) == 1 else f"{host}-{n['NodeID'][:8]}", interval_s)
        for n, host in zip(others, hosts)
    ]

    def stop() -> None:
        """Flush each monitor (one on a node that died has nothing to flush), then end its actor."""
        if actors:
            ray.wait([actor.finish.remote() for actor in actors], num_returns=len(actors), timeout=60)
        for actor in actors:
            ray.kill(actor)

    return stop
