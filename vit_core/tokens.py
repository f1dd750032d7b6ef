"""What every family's samples are made of, shared by the families, images and the trainer: a batch
of tokens (TokenBatch, made in blocks of BLOCK from per-block streams), each token's role with
respect to its sample's label (TokenKind) and the vote margins the test errors are counted by.
No torch is imported here: the tensors are the families' (a spec is validated without torch)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


class TokenKind(IntEnum):
    """Role of a token with respect to its sample's label."""

    IRRELEVANT = 0
    RELEVANT = 1  # carries the pattern of the sample's own label
    CONFUSION = 2  # carries the other discriminative pattern


MARGIN_BINS = ("1", "2", "3", "4", "5plus")  # vote margins (relevant - confusion tokens), 5 and more together
MARGIN_ERRORS = tuple(f"test_errors_margin_{m}" for m in MARGIN_BINS)  # a model's test errors at each margin
BLOCK = (
    64  # samples are made in blocks of this many, each from its own stream: a seed's first N are the same for every N
)


@dataclass
class TokenBatch:
    """n samples: tokens (n, L, d), labels (n,) in {-1, +1}, and per-token facts (n, L)."""

    tokens: torch.Tensor
    labels: torch.Tensor
    kinds: torch.Tensor  # TokenKind values, int8
    noise_norm: torch.Tensor
    keep: torch.Tensor  # bool: the token set S^n each sample keeps after sparsification

    def __len__(self) -> int:
        return self.labels.shape[0]

    def to(self, device: torch.device | str) -> TokenBatch:
        return TokenBatch(*(t.to(device) for t in (self.tokens, self.labels, self.kinds, self.noise_norm, self.keep)))


def blocks_of(n: int, start: int) -> tuple[range, slice]:
    """The blocks that hold samples [start, start + n) of a stream, and where those samples lie
    in the blocks' concatenation."""
    first = start // BLOCK
    return range(first, -(-(start + n) // BLOCK)), slice(start - first * BLOCK, start - first * BLOCK + n)
