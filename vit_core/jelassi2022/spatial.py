"""Paper B's spatially structured data (Jelassi, Sander, Li, NeurIPS 2022, Assumption 1), and its
negative control.

A sample is D patches in R^d, partitioned into L sets of C patches (the same sets for every
sample). One set, the *signal set*, is chosen uniformly; its patches are y w* + xi. Every other
patch is delta w* + xi with delta = +1 or -1 with probability q/2 each, else 0. The noise xi is
N(0, sigma^2 (I - w* w*^T)), orthogonal to the unit feature w*, so <w*, X_i> is y or delta exactly.
The label rule f*(X) = sum_l Threshold_{0.9C}(sum_{i in S_l} <w*, X_i>) counts a set only when all
of its C patches share a nonzero sign. The label is always y, the signal set's sign. A sample in
which some non-signal set is such a set (a *spurious set*) is redrawn by default, so that f* and y
agree (our choice: labels without noise); ``spurious_sets="keep"`` keeps it, so f* and y can
disagree, which is what the paper's Fig 4 rule does.

``labels="cnn"`` is the negative control (the paper's Fig 2): i.i.d. Gaussian patches N(0, I/d),
labelled by the sign of a random one-hidden-layer CNN with cubic activation: ``teacher`` says
whether its filters read each set's concatenated patches (summed over sets) or each patch alone
with one filter shared by all (summed over patches). Only the shared one lies in model T's class:
with attention near the identity, T computes sum_i (D <v, X_i>)^3, a shared cubic filter.

Samples come in blocks from per-block streams as Paper A's do: a seed's first N samples are the
same for every N. Batches are ``TokenBatch``es (kinds: 1 on the signal set), so the trainer,
evaluation and sparsification masks work on them unchanged.
"""

import math

import numpy as np
import torch

from vit_core.jelassi2022.configs import SpatialDataConfig, patch_sets
from vit_core.seeding import Stream, numpy_rng
from vit_core.tokens import BLOCK, TokenBatch, TokenKind, blocks_of


def feature(cfg: SpatialDataConfig) -> np.ndarray:
    """The unit feature w* in R^d."""
    w = numpy_rng(cfg.feature_seed, Stream.PATTERNS, 1).standard_normal(cfg.dim)
    return w / np.linalg.norm(w)


def _threshold_block(cfg: SpatialDataConfig, sets: np.ndarray, w: np.ndarray, n: int, rng: np.random.Generator):
    """Assumption 1's samples: (patches, labels, signal-set mask)."""
    D, C = cfg.n_patches, cfg.set_size
    labels = rng.choice(np.array([-1.0, 1.0]), n)
    signal = rng.integers(0, cfg.n_sets, n)
    on_signal = np.zeros((n, D), dtype=bool)
    on_signal[np.arange(n)[:, None], sets[signal]] = True
    delta = np.zeros((n, D))
    todo = np.arange(n)
    while todo.size:  # redraw samples in which a non-signal set would count in f* (spurious_sets="redraw")
        u = rng.random((todo.size, D))
        delta[todo] = np.where(u < cfg.q / 2, 1.0, np.where(u < cfg.q, -1.0, 0.0))
        per_set = delta[todo][:, sets]  # (todo, L, C)
        full = (np.abs(per_set.sum(-1)) == C) & (np.arange(cfg.n_sets) != signal[todo, None])
        todo = todo[full.any(-1)] if cfg.spurious_sets == "redraw" else todo[:0]
    coefficient = np.where(on_signal, labels[:, None], delta)
    xi = rng.standard_normal((n, D, cfg.dim)) * math.sqrt(cfg.noise_variance)
    xi -= (xi @ w)[..., None] * w  # project out w*
    return coefficient[..., None] * w + xi, labels, on_signal


def teacher(cfg: SpatialDataConfig) -> tuple[np.ndarray, np.ndarray]:
    """The labelling CNN of the negative control: unit-variance filters (m, C d) over a set's
    concatenated patches, or (m, d) shared by every patch; and output signs (m,)."""
    rng = numpy_rng(cfg.structure_seed, Stream.PATTERNS, 2)
    fan_in = cfg.dim * (cfg.set_size if cfg.teacher == "concatenated" else 1)
    filters = rng.standard_normal((cfg.teacher_width, fan_in)) / math.sqrt(fan_in)
    return filters, rng.choice(np.array([-1.0, 1.0]), cfg.teacher_width)


def _cnn_block(cfg: SpatialDataConfig, sets: np.ndarray, n: int, rng: np.random.Generator):
    """Gaussian patches labelled by sign(sum_u sum_j a_j <w_j, u>^3), u running over the sets'
    concatenated patches (``teacher="concatenated"``) or over the patches (``"shared"``)."""
    X = rng.standard_normal((n, cfg.n_patches, cfg.dim)) / math.sqrt(cfg.dim)
    filters, signs = teacher(cfg)
    units = X[:, sets].reshape(n, cfg.n_sets, -1) if cfg.teacher == "concatenated" else X  # (n, L, C d) or (n, D, d)
    score = ((units @ filters.T) ** 3 @ signs).sum(-1)
    return X, np.where(score > 0, 1.0, -1.0), np.zeros((n, cfg.n_patches), dtype=bool)


def sample_patches(
    cfg: SpatialDataConfig, n: int, seed: int, stream: Stream = Stream.TRAIN_DATA, start: int = 0
) -> TokenBatch:
    """Samples [start, start + n) of (seed, stream): the same samples whatever n and start."""
    sets, w = patch_sets(cfg), feature(cfg)
    parts = []
    numbers, within = blocks_of(n, start)
    for b in numbers:
        rng = numpy_rng(seed, stream, b)
        parts.append(
            _threshold_block(cfg, sets, w, BLOCK, rng)
            if cfg.labels == "threshold"
            else _cnn_block(cfg, sets, BLOCK, rng)
        )
    X, y, signal = (np.concatenate(p)[within] for p in zip(*parts))
    kinds = np.where(signal, TokenKind.RELEVANT, TokenKind.IRRELEVANT).astype(np.int8)
    noise = X - (X @ w)[..., None] * w
    return TokenBatch(
        tokens=torch.from_numpy(X.astype(np.float32)),
        labels=torch.from_numpy(y.astype(np.float32)),
        kinds=torch.from_numpy(kinds),
        noise_norm=torch.from_numpy(np.linalg.norm(noise, axis=-1).astype(np.float32)),
        keep=torch.ones(kinds.shape, dtype=torch.bool),
    )
