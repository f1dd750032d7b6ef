import pytest
import torch


@pytest.fixture(autouse=True, scope="session")
def _threads():
    """Two cores on CI: one intra-op thread keeps small tests fast and deterministic."""
    torch.set_num_threads(1)
