"""Paper A's synthetic token data (Li, Wang, Liu, Chen, ICLR 2023, Section 3).

A sample is L tokens in R^d. Each token is one of M patterns plus noise of norm at most tau.
Patterns 0 and 1 are the discriminative ones (one per class); the rest are label-irrelevant.
The label is the majority vote of the discriminative tokens, so a sample's *label-relevant*
tokens (fraction alpha_star on average) carry its own class's pattern and its *confusion*
tokens (fraction alpha_confusion, the paper's alpha#) carry the other one.

Choices the paper leaves open, made here (see docs/science-choices.md):
- token noise: a uniformly random direction in R^d with a norm uniform on [0, tau]; with
  ``noisy_fraction`` > 0, round(noisy_fraction·L) tokens of each sample (of ``noisy_kind``,
  chosen uniformly) have norm ``tau_big`` instead: the *noisy tokens* that Section 4.3's
  sparsification removes;
- counts: ``fixed`` puts round(alpha*·L) and round(alpha#·L) tokens in every sample;
  ``binomial`` draws them per sample (mean alpha*·L and alpha#·L) and keeps draws with more
  label-relevant than confusion tokens, so the label rule always holds;
- positions are shuffled uniformly; irrelevant tokens pick a pattern from 2..M-1 uniformly;
- samples are made in blocks of ``BLOCK`` from per-block streams, so a seed's first N samples
  are the same for every N: a model's training set with N=40 is contained in its set with N=80,
  and the one-pass protocol reads samples [t·B, (t+1)·B) of the same stream at step t without
  making the ones before (``start``);
- the noise directions are drawn with torch (3.5x faster than numpy's normals, which were most of
  the cost of a sample: one-pass training makes B fresh samples per model per step).
"""

from dataclasses import dataclass
from enum import IntEnum
from functools import lru_cache

import numpy as np
import torch

from vit_core.configs import TokenDataConfig
from vit_core.seeding import Stream, numpy_rng, stream_seed
from vit_core.sparsify import keep_mask, top_k

BLOCK = 64


class TokenKind(IntEnum):
    """Role of a token with respect to its sample's label."""

    IRRELEVANT = 0
    RELEVANT = 1  # carries the pattern of the sample's own label
    CONFUSION = 2  # carries the other discriminative pattern


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

    def to(self, device: torch.device | str) -> "TokenBatch":
        return TokenBatch(*(t.to(device) for t in (self.tokens, self.labels, self.kinds, self.noise_norm, self.keep)))


def make_patterns(cfg: TokenDataConfig) -> np.ndarray:
    """The M patterns as rows of an (M, d) array: orthonormal, or random unit vectors."""
    rng = numpy_rng(cfg.pattern_seed, Stream.PATTERNS)
    g = rng.standard_normal((cfg.dim, cfg.n_patterns))
    if cfg.patterns == "orthonormal":
        q, r = np.linalg.qr(g)
        return (q * np.sign(np.diag(r))).T
    return (g / np.linalg.norm(g, axis=0)).T


@lru_cache(maxsize=16)
def _pattern_rows(cfg: TokenDataConfig, device: torch.device) -> torch.Tensor:
    """The patterns as a contiguous float32 tensor on ``device``, made once per data config: row
    gathers from the transposed array make_patterns returns ran 11x slower (0.43 of a 64-sample
    block's 2.2 ms on a CPU)."""
    return torch.from_numpy(np.ascontiguousarray(make_patterns(cfg), dtype=np.float32)).to(device)


def _counts(cfg: TokenDataConfig, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Per-sample (label-relevant, confusion) token counts."""
    if cfg.counts == "fixed":
        n_rel, n_conf = cfg.fixed_counts
        return np.full(n, n_rel), np.full(n, n_conf)
    n_rel = np.empty(n, dtype=np.int64)
    n_conf = np.empty(n, dtype=np.int64)
    todo = np.arange(n)
    p_conf = cfg.confusion / (1 - cfg.alpha_star)
    while todo.size:  # keep draws where the label-relevant tokens win the vote
        rel = rng.binomial(cfg.n_tokens, cfg.alpha_star, todo.size)
        conf = rng.binomial(cfg.n_tokens - rel, p_conf)
        ok = rel > conf
        n_rel[todo[ok]], n_conf[todo[ok]] = rel[ok], conf[ok]
        todo = todo[~ok]
    return n_rel, n_conf


def _noisy(cfg: TokenDataConfig, kinds: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A bool (n, L) mask of each sample's noisy tokens: round(noisy_fraction·L) chosen uniformly
    among its tokens of ``noisy_kind`` (all of them when it has fewer)."""
    score = rng.random(kinds.shape)
    if cfg.noisy_kind != "any":
        score[kinds != TokenKind[cfg.noisy_kind.upper()]] = -1.0
    return top_k(score, round(cfg.noisy_fraction * cfg.n_tokens))


def _sample_block(
    cfg: TokenDataConfig, patterns: torch.Tensor, n: int, rng: np.random.Generator, gen: torch.Generator
) -> TokenBatch:
    """n samples from one block's random streams: numpy for the discrete choices (n·L numbers), the
    torch generator ``gen`` for the noise (n·L·d), made on ``gen``'s device with the tokens."""
    L, device = cfg.n_tokens, gen.device
    labels = rng.choice(np.array([-1, 1]), n)
    n_rel, n_conf = _counts(cfg, n, rng)
    rank = rng.permuted(np.broadcast_to(np.arange(L), (n, L)), axis=1)  # a random order of positions
    kinds = np.where(
        rank < n_rel[:, None],
        TokenKind.RELEVANT,
        np.where(rank < (n_rel + n_conf)[:, None], TokenKind.CONFUSION, TokenKind.IRRELEVANT),
    ).astype(np.int8)
    own = np.where(labels > 0, 0, 1)[:, None]  # pattern 0 is class +1's, pattern 1 class -1's
    irrelevant_pattern = rng.integers(2, max(cfg.n_patterns, 3), (n, L))
    pattern_index = np.where(
        kinds == TokenKind.RELEVANT, own, np.where(kinds == TokenKind.CONFUSION, 1 - own, irrelevant_pattern)
    )
    noise_norm = cfg.tau * rng.random((n, L))
    if cfg.noisy_fraction > 0:  # no extra draws otherwise: the default data stay as they were
        noise_norm[_noisy(cfg, kinds, rng)] = cfg.tau_big
    norm = torch.from_numpy(noise_norm.astype(np.float32)).to(device)
    tokens = torch.randn((n, L, cfg.dim), generator=gen, device=device)  # a uniform direction, scaled, plus the pattern
    tokens *= (norm / torch.linalg.vector_norm(tokens, dim=-1)).unsqueeze(-1)
    tokens += patterns.index_select(0, torch.from_numpy(pattern_index).view(-1).to(device)).view(
        tokens.shape
    )  # 3.5x faster than patterns[index]
    keep = keep_mask(kinds, noise_norm, cfg.sparsify, cfg.sparsify_k, rng)
    return TokenBatch(
        tokens=tokens,
        labels=torch.from_numpy(labels.astype(np.float32)).to(device),
        kinds=torch.from_numpy(kinds).to(device),
        noise_norm=norm,
        keep=torch.from_numpy(keep).to(device),
    )


def blocks_of(n: int, start: int) -> tuple[range, slice]:
    """The blocks that hold samples [start, start + n) of a stream, and where those samples lie
    in the blocks' concatenation."""
    first = start // BLOCK
    return range(first, -(-(start + n) // BLOCK)), slice(start - first * BLOCK, start - first * BLOCK + n)


def sample_tokens(
    cfg: TokenDataConfig,
    n: int,
    seed: int,
    stream: Stream = Stream.TRAIN_DATA,
    start: int = 0,
    device: str | torch.device = "cpu",
) -> TokenBatch:
    """Samples [start, start + n) of (seed, stream): the same samples whatever n and start, made on
    ``device``. Off the CPU the noise comes from that device's generator (CUDA: Philox), so its
    samples are other draws of the same distribution: labels, kinds, patterns and noise norms
    are the host's, the noise directions are not, and the tokens never cross from the host.
    A single block is returned as a view, not copied (a one-pass chunk at B = 1 is one block:
    the copy was 18% of a CNN's one-pass step)."""
    device = torch.device(device)
    patterns = _pattern_rows(cfg, device)
    numbers, within = blocks_of(n, start)
    blocks = [
        _sample_block(
            cfg,
            patterns,
            BLOCK,
            numpy_rng(seed, stream, b),
            torch.Generator(device=device).manual_seed(stream_seed(seed, stream, b)),
        )
        for b in numbers
    ]
    fields = zip(*(vars(b).values() for b in blocks))
    return TokenBatch(*((torch.cat(parts) if len(parts) > 1 else parts[0])[within] for parts in fields))
