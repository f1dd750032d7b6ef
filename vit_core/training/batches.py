"""A pack's training samples: a fixed set per model drawn from with replacement (multi_pass,
TrainSets) or a fresh mini-batch every step (one_pass, FreshBatches), made by the data's family."""

import dataclasses
import math
from typing import Any

import numpy as np
import torch
from torch import Tensor

from vit_core.family import family_of
from vit_core.seeding import Stream, numpy_rng
from vit_core.tokens import BLOCK, TokenBatch
from vit_core.train_config import TrainConfig

DataConfig = Any  # an installed family's data config (vit_core.family)


def sample(
    data: DataConfig,
    n: int,
    seed: int,
    stream: Stream = Stream.TRAIN_DATA,
    start: int = 0,
    device: str | torch.device = "cpu",
) -> TokenBatch:
    """Samples [start, start + n) of a seed's ``stream`` of ``data``, made by its family on ``device``
    (off the CPU, other draws of the same distribution where the family draws there: Family.sample_on)."""
    return family_of(data).sample_on(data, n, seed, stream, start, device)


def test_set(data: DataConfig, train: TrainConfig, seeds: list[int], device: str | torch.device = "cpu") -> TokenBatch:
    """The test set a pack of models of ``seeds`` is scored on: test_seed's n_test samples (n, L, d),
    shared (train.test_sets "shared"), or each model's own (TrainConfig.test_seeds), stacked (K, n, L, d)."""
    if train.test_sets == "shared":
        return sample(data, train.n_test, train.test_seed, Stream.TEST_DATA).to(device)
    test_seeds = train.test_seeds(seeds)
    own = {s: sample(data, train.n_test, s, Stream.TEST_DATA) for s in dict.fromkeys(test_seeds)}
    one = own[test_seeds[0]]
    stacked = (torch.stack([getattr(own[s], f.name) for s in test_seeds]) for f in dataclasses.fields(one))
    return type(one)(*stacked).to(device)


def test_margins(data: DataConfig, train: TrainConfig, seeds: list[int]) -> torch.Tensor | None:
    """Each test sample's vote margin (Family.vote_margins), shaped like test_set's labels: (n,),
    or (K, n) with a test set per seed; None where the data have no vote."""
    family, test_seeds = family_of(data), train.test_seeds(seeds)
    own = {s: family.vote_margins(data, train.n_test, s) for s in dict.fromkeys(test_seeds)}
    if own[test_seeds[0]] is None:
        return None
    if train.test_sets == "shared":
        return torch.from_numpy(own[test_seeds[0]])
    return torch.stack([torch.from_numpy(own[s]) for s in test_seeds])


class TrainSets:
    """multi_pass: each model's own training samples, padded to the largest N, and its batch
    stream (``fixed``: a training set to score and settle on)."""

    CHUNK = 64  # steps of batch indices drawn at once per model
    fixed = True

    def __init__(self, data: "DataConfig", n_train: list[int], seeds: list[int], batch_size: int, device):
        largest = {}
        for n, s in zip(n_train, seeds):
            largest[s] = max(n, largest.get(s, 0))
        n_max = max(n_train)
        per_seed = {s: _pad(sample(data, n, s), n_max) for s, n in largest.items()}
        self.tokens = torch.stack([per_seed[s].tokens for s in seeds]).to(device)
        self.labels = torch.stack([per_seed[s].labels for s in seeds]).to(device)
        keep = torch.stack([per_seed[s].keep for s in seeds]).to(device)
        self.keep = None if keep.all() else keep
        self.n = torch.tensor(n_train, device=device)
        self._rngs = [numpy_rng(s, Stream.BATCHES) for s in seeds]
        self._n_list = list(n_train)
        self._batch_size = batch_size
        self._buffer = np.empty((0, len(seeds), batch_size), dtype=np.int64)
        self._last: tuple[Tensor, Tensor] | None = None  # (rows, index) of the latest batch
        self.failing = torch.zeros(self.labels.shape, dtype=torch.bool, device=device)  # loss > 0 when last drawn

    def batch(self) -> tuple[Tensor, Tensor, Tensor | None]:
        """The next mini-batch of every model: tokens (K, B, L, d), labels (K, B), keep."""
        if not len(self._buffer):
            draws = [rng.integers(0, n, (self.CHUNK, self._batch_size)) for rng, n in zip(self._rngs, self._n_list)]
            self._buffer = np.stack(draws, axis=1)
        index = torch.from_numpy(self._buffer[0]).to(self.tokens.device)
        self._buffer = self._buffer[1:]
        rows = torch.arange(len(index), device=index.device).unsqueeze(1)
        self._last = rows, index
        flat = (rows * self.tokens.shape[1] + index).view(-1)  # positions in (K * N_max) samples

        def take(t: Tensor) -> Tensor:
            """t[rows, index] as an index_select over the K * N_max samples: ~6x faster on CPU."""
            return t.flatten(0, 1).index_select(0, flat).view(*index.shape, *t.shape[2:])

        return take(self.tokens), take(self.labels), None if self.keep is None else take(self.keep)

    def note_losses(self, per_sample: Tensor) -> None:
        """Mark which samples of the latest batch had a positive loss (``per_sample``: K x B)."""
        self.failing[self._last] = per_sample > 0

    def select(self, index: Tensor) -> None:
        """Keep only the models at ``index`` (positions in the current pack)."""
        self.tokens, self.labels, self.n = self.tokens[index], self.labels[index], self.n[index]
        self.failing = self.failing[index]
        self.keep = None if self.keep is None else self.keep[index]
        positions = index.tolist()
        self._rngs = [self._rngs[i] for i in positions]
        self._n_list = [self._n_list[i] for i in positions]
        self._buffer = self._buffer[:, positions]


def steps_per_draw(batch_size: int) -> int:
    """One pass: the steps between two draws of a pack's samples, made at once per model: at least
    FreshBatches.CHUNK steps' worth, and a whole number of batches and of the data's blocks (BLOCK
    samples), so that no block is ever made twice (at B = 1, 32 steps were half a block: every
    block was made for two chunks). A step's time repeats with this period."""
    unit = math.lcm(BLOCK, batch_size)
    return unit * math.ceil(FreshBatches.CHUNK * batch_size / unit) // batch_size


class FreshBatches:
    """one_pass: every model's mini-batches straight from its seed's training stream, never
    reused. The pack steps together, so at step t every model reads samples [t·B, (t+1)·B) of
    its own stream (the stream multi_pass draws its training sets from), made CHUNK steps ahead
    on the pack's device, so a model's data do not depend on the pack it trains in.
    ``fixed = False``: there is no training set to score or settle on."""

    CHUNK = 32  # steps of samples made at once per model, at least (chunk)
    fixed = False

    def __init__(self, data: "DataConfig", seeds: list[int], batch_size: int, device):
        self.data, self.seeds, self.B, self.device = data, list(seeds), batch_size, device
        self.consumed = 0  # samples each model has read: the next batch starts here
        self.made = 0  # samples made so far per model (the buffer holds [made - len, made))
        self._buffer: TokenBatch | None = None
        self._all_kept = True

    def batch(self) -> tuple[Tensor, Tensor, Tensor | None]:
        """The next mini-batch of every model: tokens (K, B, L, d), labels (K, B), keep."""
        if self.consumed + self.B > self.made:
            n = self.chunk()
            start, device = self.made, self.device
            parts = [sample(self.data, n, seed, Stream.TRAIN_DATA, start=start, device=device) for seed in self.seeds]
            self._buffer = TokenBatch(*(torch.stack(t) for t in zip(*(vars(p).values() for p in parts))))
            self.made += n
            self._all_kept = bool(self._buffer.keep.all())  # tested once a chunk: on a GPU a test is a sync
        at = self.consumed - (self.made - self._buffer.labels.shape[1])
        self.consumed += self.B
        window = slice(at, at + self.B)
        keep = self._buffer.keep[:, window]
        return (
            self._buffer.tokens[:, window],
            self._buffer.labels[:, window],
            None if self._all_kept or keep.all() else keep,
        )

    def chunk(self) -> int:
        """Samples made at once per model (``steps_per_draw`` batches)."""
        return steps_per_draw(self.B) * self.B

    def note_losses(self, per_sample: Tensor) -> None:
        """Nothing to note: no sample comes back."""

    def select(self, index: Tensor) -> None:
        """Keep only the models at ``index`` (positions in the current pack)."""
        self.seeds = [self.seeds[i] for i in index.tolist()]
        if self._buffer is not None:
            self._buffer = TokenBatch(*(t[index.to(t.device)] for t in vars(self._buffer).values()))


def _pad(batch: TokenBatch, n: int) -> TokenBatch:
    """Pad a batch with copies of its first sample up to n samples (padding is never used)."""
    extra = n - len(batch)
    return TokenBatch(*(torch.cat([t, t[:1].expand(extra, *t.shape[1:])]) for t in vars(batch).values()))
