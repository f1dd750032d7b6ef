import socket

import pytest
import ray
import torch


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
