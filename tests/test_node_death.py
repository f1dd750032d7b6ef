"""A worker node killed mid-sweep costs only its in-flight trials: Ray Tune retries them on the
nodes left (FailureConfig) and the sweep ends with the results an undisturbed run gives."""

import os
import threading
import time

import pytest
import ray
from ray import tune
from ray.cluster_utils import Cluster

from services.execution.ray_tune import run_sweep
from services.execution.trial import train_pack_trial
from services.results import ModelRecord
from services.search.packs import packs
from services.spec import parse_spec
from services.sweep_run import SweepRun
from vit_core import train_pack

pytestmark = pytest.mark.system  # Ray, servers, Docker, Slurm or benchmarks: make test-fast leaves this file out

SPEC = """name: node-death
models: [vit]
data: {n_tokens: 30, dim: 12, n_patterns: 12, alpha_star: 0.2}
model: {width: 16, output_matrix: false}  # the model this test was timed with: slow enough to kill mid-sweep
training: {n_test: 300, max_steps: 3000, eval_every: 1}
n_train: [5, 20]
seeds: 4
resources: {models_per_pack: 1, max_failures: 3}
"""


@pytest.fixture
def cluster():
    """A head that runs no trials and two worker nodes of one CPU each, on 127.0.0.1."""
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    workers = [cluster.add_node(num_cpus=1) for _ in range(2)]
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    yield cluster, workers
    ray.shutdown()
    cluster.shutdown()


def test_a_sweep_survives_a_worker_node_killed_mid_sweep(cluster, tmp_path):
    cluster, (_, doomed) = cluster
    spec = parse_spec(SPEC, "spec")
    in_flight = tmp_path / "in_flight"  # one file per trial while it trains, named by its node
    in_flight.mkdir()

    def announcing_trial(config: dict, sweep, cache) -> None:
        mark = in_flight / f"{ray.get_runtime_context().get_node_id()}-{os.getpid()}"
        mark.touch()
        try:
            train_pack_trial(config, sweep, cache)
        finally:
            mark.unlink()

    out: dict = {}
    run = threading.Thread(
        target=lambda: out.update(result=run_sweep(SweepRun(spec, "death", tmp_path), announcing_trial))
    )
    run.start()
    while not list(in_flight.glob(f"{doomed.node_id}-*")) and run.is_alive():  # until the doomed node trains a trial
        time.sleep(0.02)
    assert run.is_alive(), "the sweep should still be running when the node dies"
    cluster.remove_node(doomed)  # SIGKILL of its raylet and workers: its trial in flight dies with it
    run.join()
    result = out["result"]
    assert not any(c.failures for c in result.cells) and result.unfinished == 0
    trials = tune.ExperimentAnalysis(str(tmp_path / "ray" / "death")).trials
    assert sum(t.num_failures for t in trials) >= 1, "a trial should have been lost with the node and retried"
    assert all(t.status == "TERMINATED" for t in trials) and len(trials) == len(packs(spec))
    (cell,) = result.cells
    got = sorted(cell.records, key=lambda r: (r.n_train, r.seed))
    expected = [
        ModelRecord.from_dict(
            train_pack(*spec.resolved_cell(cell.cell).configs, [p.n_train[0]], p.seeds).records()[0]
            | {"max_steps": 3000}
        )
        for p in packs(spec)
    ]
    assert got == sorted(expected, key=lambda r: (r.n_train, r.seed))
