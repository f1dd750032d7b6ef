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
    if strategy == "all" or k == 0:
        return np.ones(kinds.shape, dtype=bool)
    if strategy == "noisiest":
        score = noise_norm
    elif strategy == "random":
        score = rng.random(kinds.shape)
    elif strategy == "label_irrelevant":
        score = np.where(kinds == _IRRELEVANT, rng.random(kinds.shape), -1.0)  # only irrelevant ones score >= 0
    else:
        raise ValueError(f"sparsify={strategy!r}: must be one of {', '.join(SparsifyStrategy.__args__)}")
    return ~top_k(score, k)


def top_k(score: np.ndarray, k: int) -> np.ndarray:
    """A bool (n, L) mask of each row's k highest scores, leaving out negative ones (a row with
    fewer than k non-negative scores marks all of those); ties go to the earlier position."""
    chosen = np.zeros(score.shape, dtype=bool)
    top = np.argsort(-score, axis=1, kind="stable")[:, :k]
    rows = np.arange(score.shape[0])[:, None]
    chosen[rows, top] = score[rows, top] >= 0
    return chosen
