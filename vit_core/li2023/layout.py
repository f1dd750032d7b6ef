"""Where Paper A's tokens go, before any noise direction is drawn (numpy only, no torch): the
patterns, each sample's label, the kind and pattern of each token and its noise norm. data.py
draws the noise directions on top of this (with torch); oracle.py reads it without torch.

Choices the paper leaves open (docs/science-choices.md): counts ``fixed`` put round(alpha*·L)
and round(alpha#·L) tokens in every sample; ``binomial`` draws them per sample and redraws a
draw where the confusion tokens are not fewer, so the label (the majority vote) always holds;
``premised`` redraws, besides, every draw that fails Theorem 1's premises read per sample
(configs.kept_counts);
positions are shuffled uniformly; irrelevant tokens pick a pattern from 2..M-1 uniformly; noise
norms are uniform on [0, tau], or tau_big for the noisy tokens.
"""

from dataclasses import dataclass

import numpy as np

from vit_core.li2023.configs import TokenDataConfig, kept_counts
from vit_core.seeding import Stream, numpy_rng
from vit_core.sparsify import top_k
from vit_core.tokens import TokenKind


@dataclass
class Layout:
    """n samples without their noise directions: labels (n,) in {-1, +1}; per token (n, L) its
    TokenKind, its pattern's index and its noise norm."""

    labels: np.ndarray
    kinds: np.ndarray
    pattern_index: np.ndarray
    noise_norm: np.ndarray


def make_patterns(cfg: TokenDataConfig) -> np.ndarray:
    """The M patterns as rows of an (M, d) array: orthonormal, or random unit vectors."""
    rng = numpy_rng(cfg.pattern_seed, Stream.PATTERNS)
    g = rng.standard_normal((cfg.dim, cfg.n_patterns))
    if cfg.patterns == "orthonormal":
        q, r = np.linalg.qr(g)
        return (q * np.sign(np.diag(r))).T
    return (g / np.linalg.norm(g, axis=0)).T


def _counts(cfg: TokenDataConfig, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Per-sample (label-relevant, confusion) token counts."""
    if cfg.counts == "fixed":
        n_rel, n_conf = cfg.fixed_counts
        return np.full(n, n_rel), np.full(n, n_conf)
    n_rel = np.empty(n, dtype=np.int64)
    n_conf = np.empty(n, dtype=np.int64)
    todo = np.arange(n)
    p_conf = cfg.confusion / (1 - cfg.alpha_star)
    while todo.size:  # keep the draws the reading keeps (binomial: the label wins the vote), redraw the rest
        rel = rng.binomial(cfg.n_tokens, cfg.alpha_star, todo.size)
        conf = rng.binomial(cfg.n_tokens - rel, p_conf)
        ok = kept_counts(cfg.counts, rel, conf)
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


def draw_votes(cfg: TokenDataConfig, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The first draws of ``draw_layout``: n samples' labels and (label-relevant, confusion) token counts."""
    labels = rng.choice(np.array([-1, 1]), n)
    return (labels, *_counts(cfg, n, rng))


def draw_layout(cfg: TokenDataConfig, n: int, rng: np.random.Generator) -> Layout:
    """n samples' labels, token kinds, patterns and noise norms from ``rng`` (n·L numbers)."""
    L = cfg.n_tokens
    labels, n_rel, n_conf = draw_votes(cfg, n, rng)
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
    return Layout(labels, kinds, pattern_index, noise_norm)
