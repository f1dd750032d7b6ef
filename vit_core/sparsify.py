"""Token sparsification: which tokens S^n of a sample the model sees (Li et al., Section 4.3).

Removed tokens leave the sample entirely: they are neither queries in the average over S^n nor
keys in any softmax. On Paper A's token data the same rule is applied to training and test
samples (``keep_mask``); on real images a trained model's test images lose k patches by an image
rule (``image_keep``), since one of them reads the trained attention.
"""

from typing import Literal

import numpy as np

from vit_core.tokens import TokenKind

SparsifyStrategy = Literal["all", "random", "label_irrelevant", "noisiest"]
ImageRule = Literal["least_attended", "background", "random"]  # test-time removal of image patches
TokenSetRule = Literal["all", "background", "random"]  # S^n of every image, training and test


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
        # only irrelevant ones score >= 0
        score = np.where(kinds == TokenKind.IRRELEVANT, rng.random(kinds.shape), -1.0)
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


def lowest_k(value: np.ndarray, k: int) -> np.ndarray:
    """A bool mask, like ``value`` (..., L), of the k lowest values along the last axis; ties go to
    the earlier position (top_k of each row's distance below its maximum)."""
    rows = value.reshape(-1, value.shape[-1])
    return top_k(rows.max(1, keepdims=True) - rows, k).reshape(value.shape)


def image_keep(
    rule: ImageRule, k: int, attention: np.ndarray | None, mass: np.ndarray, rngs: list[np.random.Generator]
) -> np.ndarray:
    """A bool (K, n, L) mask of the patches each of K models keeps of n test images after removing k
    by ``rule``: ``least_attended``, the k that receive the least of the model's own attention on
    the whole image (``attention`` (K, n, L), averaged over queries); ``background``, the k of least
    pixel mass (``mass`` (n, L), the sum of a patch's pixel values); ``random``, k distinct ones
    drawn uniformly, model k's from ``rngs[k]``."""
    K, shape = len(rngs), mass.shape
    if rule == "least_attended":
        if attention is None:
            raise ValueError("least_attended removal needs a model with attention")
        value = attention
    elif rule == "background":
        value = np.broadcast_to(mass, (K, *shape))
    elif rule == "random":
        value = np.stack([rng.random(shape) for rng in rngs])
    else:
        raise ValueError(f"rule={rule!r}: must be one of {', '.join(ImageRule.__args__)}")
    return ~lowest_k(np.asarray(value), k) if k else np.ones((K, *shape), dtype=bool)


def sparsified_name(rule: ImageRule, k: int, metric: str) -> str:
    """The record's name of a model's test ``metric`` (error, loss) after removing k patches by ``rule``."""
    return f"sparsified_{rule}_k{k}_test_{metric}"


def image_token_set(rule: TokenSetRule, k: int, tokens: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A bool (n, L) mask of the patches each of n images (tokens (n, L, d)) keeps of S^n after
    removing k >= 1 by ``rule`` (image_keep's background or random, one draw for the n images;
    ImageTokenConfig refuses k > 0 with ``all``, and a sample with k = 0 keeps sample_images' mask)."""
    return image_keep(rule, k, None, tokens.sum(-1), [rng])[0]
