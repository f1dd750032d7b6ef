"""The plug-in rule's N on Paper A's data: how few samples one rule that knows the data's form needs
for zero test error, beside the N* of SGD (Theorem 1 bounds SGD's count; the data may allow far
fewer). It is that one rule's count: an upper bound on what the data need, not a floor under it
(at alpha* = 0.05 on binomial counts it lies above the ViT's first zero).

The rule is the nearest class centroid of the mean token (over the tokens each sample keeps),
fitted on a seed's first N training samples, the very samples one-pass SGD reads first, and
scored on the sweep's test set. Until both labels have been seen it predicts the one it has seen,
so a floor of 2 needs the first two samples to carry both labels (label balance, not learning).
"""

import numpy as np
import torch

from vit_core.family import FloorTable
from vit_core.li2023.configs import TokenDataConfig
from vit_core.li2023.data import sample_tokens
from vit_core.seeding import Stream


def mean_tokens(data: TokenDataConfig, n: int, seed: int, stream: Stream) -> tuple[np.ndarray, np.ndarray]:
    """Samples [0, n) of (seed, stream) as (mean kept token (n, d), label (n,))."""
    batch = sample_tokens(data, n, seed, stream)
    keep = batch.keep.to(torch.float64).unsqueeze(-1)
    means = (batch.tokens.double() * keep).sum(1) / keep.sum(1)
    return means.numpy(), batch.labels.double().numpy()


def nearest_centroid_zero_error(
    train: tuple[np.ndarray, np.ndarray], test: tuple[np.ndarray, np.ndarray]
) -> np.ndarray:
    """(n,) bool: whether the nearest-centroid rule fitted on the first N = 1..n training samples
    makes no error on the test samples; each given as (features (., d), labels in {-1, +1})."""
    X, y = train
    T, t = test
    counts = {sign: np.cumsum(y == sign) for sign in (1.0, -1.0)}
    centroid = {
        sign: np.cumsum(X * (y == sign)[:, None], 0) / np.maximum(counts[sign], 1)[:, None] for sign in (1.0, -1.0)
    }
    w = centroid[1.0] - centroid[-1.0]  # (n, d): score x -> <x, w> - b, positive for class +1
    b = ((centroid[1.0] ** 2).sum(1) - (centroid[-1.0] ** 2).sum(1)) / 2
    score = T @ w.T - b  # (n_test, n)
    score = np.where(counts[-1.0] == 0, 1.0, np.where(counts[1.0] == 0, -1.0, score))  # one label seen: predict it
    return np.all(t[:, None] * score > 0, axis=0)


def plug_in_floor(
    data: TokenDataConfig, seeds: list[int], n_max: int, n_test: int, test_seeds: list[int]
) -> FloorTable:
    """The plug-in rule on seed s's first N = 1..n_max training samples: whether it has zero error
    on its test set (n_test samples of the test stream of s's seed in ``test_seeds``), and from
    which N they hold both labels."""
    tests = {t: mean_tokens(data, n_test, t, Stream.TEST_DATA) for t in dict.fromkeys(test_seeds)}
    trains = [mean_tokens(data, n_max, s, Stream.TRAIN_DATA) for s in seeds]
    columns = [nearest_centroid_zero_error(train, tests[t]) for train, t in zip(trains, test_seeds)]
    return FloorTable(np.stack(columns, 1).astype(float), np.array([both_labels_from(y) for _, y in trains]))


def both_labels_from(labels: np.ndarray) -> int:
    """The smallest N whose first N labels hold both classes (0: never within them)."""
    differs = np.nonzero(labels != labels[0])[0]
    return int(differs[0]) + 1 if len(differs) else 0
