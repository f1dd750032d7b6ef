"""Independent random streams derived from one integer seed.

A model's training set, initialisation and mini-batch order each come from their own stream of
its seed, so a model trains identically whether it runs alone or inside a pack of any size.
numpy only: torch generators are seeded with ``stream_seed``.
"""

from enum import IntEnum

import numpy as np


class Stream(IntEnum):
    """What a random stream is used for; part of the key that derives it."""

    PATTERNS = 0
    TRAIN_DATA = 1
    TEST_DATA = 2
    INIT = 3
    BATCHES = 4
    DIFFICULTY = 5  # the samples a family's difficulty diagnostic reads
    SPARSIFY = 6  # the patches random test-time sparsification removes (vit_core.sparsify.image_keep)


def numpy_rng(seed: int, stream: Stream, *extra: int) -> np.random.Generator:
    """A numpy generator for (seed, stream, *extra), independent of every other key."""
    return np.random.default_rng([seed, int(stream), *extra])


def stream_seed(seed: int, stream: Stream, *extra: int) -> int:
    """A 63-bit seed for (seed, stream, *extra), independent of every other key: a CPU torch
    generator's, as ``torch.Generator().manual_seed(stream_seed(...))``."""
    state = np.random.SeedSequence([seed, int(stream), *extra]).generate_state(1, np.uint64)[0]
    return int(state) & 0x7FFF_FFFF_FFFF_FFFF
