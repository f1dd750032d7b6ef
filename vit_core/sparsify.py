"""Token sparsification: which tokens S^n of a sample the model sees (Li et al., Section 4.3).

Removed tokens leave the sample entirely: they are neither queries in the average over S^n nor
keys in any softmax. The same rule is applied to training and test samples.
"""

from typing import Literal

import numpy as np

SparsifyStrategy = Literal["all", "random", "label_irrelevant", "noisiest"]

_IRRELEVANT = 0  # TokenKind.IRRELEVANT; kept as a literal so this module needs nothing from data


def keep_mask(
    kinds: np.ndarray, noise_norm: np.ndarray, strategy: SparsifyStrategy, k: int, rng: np.random.Generator
) -> np.ndarray:
    """A bool (n, L) mask of the tokens each sample keeps after removing k by ``strategy``.

    ``random`` removes k tokens uniformly; ``label_irrelevant`` removes k label-irrelevant tokens
    chosen uniformly (all of them when a sample has fewer than k); ``noisiest`` removes the k
    tokens of largest noise norm.
    """
    n, L = kinds.shape
    keep = np.ones((n, L), dtype=bool)
    if strategy == "all" or k == 0:
        return keep
    if strategy == "noisiest":
        score = noise_norm
    elif strategy == "random":
        score = rng.random((n, L))
    elif strategy == "label_irrelevant":
        score = np.where(kinds == _IRRELEVANT, rng.random((n, L)), -1.0)  # only irrelevant ones score >= 0
    else:
        raise ValueError(f"sparsify={strategy!r}: must be one of {', '.join(SparsifyStrategy.__args__)}")
    removed = np.argsort(-score, axis=1, kind="stable")[:, :k]
    rows = np.arange(n)[:, None]
    keep[rows, removed] = score[rows, removed] < 0  # a non-irrelevant token is never removed
    return keep
