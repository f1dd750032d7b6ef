# The README's smallest family as of 50fb26e^, written against the public names
# of then, verbatim: tests/test_family_plugin.py installs and trains it through the aliases.
import numpy as np
import torch
from torch import Tensor, nn

from vit_core.data import BLOCK, TokenBatch, blocks_of
from vit_core.packed import PackedModels
from vit_core.seeding import Stream, numpy_rng, stream_seed


def sample_signs(data, n, seed, stream, start) -> TokenBatch:
    numbers, within = blocks_of(n, start)
    draws = [numpy_rng(seed, stream, b).standard_normal((BLOCK, data.n_tokens, data.dim)) for b in numbers]
    tokens = torch.from_numpy(np.concatenate(draws)[within].astype(np.float32))
    shape = tokens.shape[:2]
    return TokenBatch(
        tokens=tokens,
        labels=torch.where(tokens.mean(1)[:, 0] > 0, 1.0, -1.0),
        kinds=torch.zeros(shape, dtype=torch.int8),
        noise_norm=torch.zeros(shape),
        keep=torch.ones(shape, dtype=torch.bool),
    )


class LinearPack(PackedModels):
    def __init__(self, cfg, w: Tensor):
        super().__init__()
        self.cfg, self.w = cfg, nn.Parameter(w)  # w: (K, d)

    @classmethod
    def build(cls, cfg, data, seeds, device) -> "LinearPack":
        gens = [torch.Generator().manual_seed(stream_seed(s, Stream.INIT)) for s in seeds]
        return cls(cfg, torch.stack([torch.randn(data.dim, generator=g) for g in gens]).to(device))

    def forward(self, X: Tensor, keep: Tensor | None = None) -> tuple[Tensor, None]:
        return (X.mean(-2) * self.w.unsqueeze(-2)).sum(-1), None  # (K, B)

    def select(self, index: Tensor) -> "LinearPack":
        return LinearPack(self.cfg, self.w.detach()[index].clone())
