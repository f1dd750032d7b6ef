"""The sparse-parity family's sampler and network, packed over K models as vitsweep's trainer
expects: samples are ``TokenBatch``es of n one-dimensional tokens (the bits, the hidden set's
marked relevant), and a pack (vit_core.api.PackedModels: its own forward and select; K comes
from the parameters) maps them to outputs F (K, B)."""

import numpy as np
import torch
from torch import Tensor, nn

from sparse_parity import MLPConfig, ParityData
from vit_core.api import BLOCK, PackedModels, Stream, TokenBatch, TokenKind, blocks_of, numpy_rng, stream_seed


def support(data: ParityData) -> np.ndarray:
    """The hidden set: k of the n bit positions."""
    return np.sort(numpy_rng(data.support_seed, Stream.PATTERNS).choice(data.n_bits, data.degree, replace=False))


def sample_parity(data: ParityData, n: int, seed: int, stream: Stream, start: int) -> TokenBatch:
    """Samples [start, start + n) of (seed, stream), made in blocks: the same samples whatever n and start."""
    numbers, within = blocks_of(n, start)
    bits = np.concatenate([numpy_rng(seed, stream, b).choice([-1.0, 1.0], (BLOCK, data.n_bits)) for b in numbers])
    bits, hidden = bits[within].astype(np.float32), support(data)
    kinds = np.zeros(bits.shape, dtype=np.int8)
    kinds[:, hidden] = int(TokenKind.RELEVANT)
    return TokenBatch(
        tokens=torch.from_numpy(bits).unsqueeze(-1),  # (n, L = n_bits, d = 1)
        labels=torch.from_numpy(bits[:, hidden].prod(1)),
        kinds=torch.from_numpy(kinds),
        noise_norm=torch.zeros(bits.shape),
        keep=torch.ones(bits.shape, dtype=torch.bool),
    )


class PackedMLP(PackedModels):
    """K independent two-layer ReLU networks: W (K, m, n), b (K, m), a (K, m)."""

    def __init__(self, cfg: MLPConfig, params: dict[str, Tensor]):
        super().__init__()
        self.cfg = cfg
        self.W, self.b, self.a = (nn.Parameter(params[name]) for name in ("W", "b", "a"))

    @classmethod
    def build(cls, cfg: MLPConfig, data: ParityData, seeds: list[int], device) -> "PackedMLP":
        """Model k initialised from seeds[k] alone, as PyTorch's nn.Linear is (uniform, 1/sqrt(fan-in))."""
        params: dict[str, list[Tensor]] = {"W": [], "b": [], "a": []}
        for seed in seeds:
            gen = torch.Generator().manual_seed(stream_seed(seed, Stream.INIT))
            for name, shape, fan_in in (
                ("W", (cfg.width, data.n_bits), data.n_bits),
                ("b", (cfg.width,), data.n_bits),
                ("a", (cfg.width,), cfg.width),
            ):
                params[name].append((2 * torch.rand(shape, generator=gen) - 1) / fan_in**0.5)
        return cls(cfg, {name: torch.stack(values).to(device) for name, values in params.items()})

    def forward(self, X: Tensor, keep: Tensor | None = None) -> tuple[Tensor, None]:
        """F (K, B) of inputs X: (K, B, n, 1), each model's own, or (B, n, 1) shared; no attention."""
        x = X.squeeze(-1)
        hidden = torch.relu(x @ self.W.transpose(-1, -2) + self.b.unsqueeze(-2))  # (K, B, m)
        return (hidden * self.a.unsqueeze(-2)).sum(-1), None

    def select(self, index: Tensor) -> "PackedMLP":
        """A pack of the models at ``index`` (copies)."""
        return type(self)(self.cfg, {name: p.detach()[index].clone() for name, p in self.named_parameters()})
