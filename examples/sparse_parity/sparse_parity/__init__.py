"""Sparse parity as a vitsweep family (Barak, Edelman, Goel, Kakade, Malach, Zhang, NeurIPS 2022:
"Hidden progress in deep learning: SGD learns parities near the computational limit").

An input is n bits x in {-1, +1}^n drawn uniformly; its label is the product of the bits of a
hidden set of k of them (the same set for every sample and model). A two-layer ReLU network
trained by one-pass SGD on the hinge loss learns it after a number of samples that grows with n
(their bound: n^O(k) steps; no algorithm of the statistical-query kind does better than n^Omega(k)).
This family measures N*, the samples a share p of seeds needs to classify every test input
right and keep doing so, against n: the N* ~ n^k fit, with its bootstrap CI, is what the sweep
reports. No exponent is claimed here (``theory`` stays empty): measure it.

This module loads without torch, as a family's must (vitsweep validates specs without it); the
sampler and the network are in ``sparse_parity.model``, imported where a trial needs them.
"""

from dataclasses import dataclass
from typing import Literal

from vit_core.api import ConfigError, Family, Scaling, param


@dataclass(frozen=True)
class ParityData:
    """The (n, k)-sparse parity: n uniform bits, labelled by the product of a hidden set of k."""

    n_bits: int = param(10, "n, the input size in bits")
    degree: int = param(2, "k, the size of the hidden set (the parity's degree)")
    support_seed: int = param(0, "seed of the hidden set, shared by every model")

    def __post_init__(self) -> None:
        if self.n_bits < 1:
            raise ConfigError("n_bits", self.n_bits, "must be a positive integer")
        if not 1 <= self.degree <= self.n_bits:
            raise ConfigError("degree", self.degree, f"must lie in [1, n_bits={self.n_bits}]")


@dataclass(frozen=True)
class MLPConfig:
    """A two-layer ReLU network F(x) = sum_j a_j ReLU(<w_j, x> + b_j), every layer trained."""

    kind: Literal["mlp"] = param("mlp", "mlp: the two-layer ReLU network")
    width: int = param(64, "m, hidden ReLU units")

    def __post_init__(self) -> None:
        if self.width < 1:
            raise ConfigError("width", self.width, "must be a positive integer")


class SparseParity(Family):
    name = "sparse_parity"
    description = "sparse_parity: (n, k)-sparse parity by a two-layer ReLU network (Barak et al. 2022)"
    data = ParityData
    model = MLPConfig
    scaling = Scaling("n_bits", "n", axis="n (input bits)")

    def sample(self, data, n, seed, stream, start):
        from sparse_parity.model import sample_parity  # noqa: PLC0415  (torch loads on use)

        return sample_parity(data, n, seed, stream, start)

    def build(self, model, data, seeds, device):
        from sparse_parity.model import PackedMLP  # noqa: PLC0415  (torch loads on use)

        return PackedMLP.build(model, data, seeds, device)

    def sample_cost(self, data: ParityData, model: MLPConfig) -> float:
        return data.n_bits * model.width
