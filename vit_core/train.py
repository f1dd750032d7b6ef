"""Mini-batch SGD on the hinge loss for a pack of K independent models (Li et al., Section 3).

Model k trains on samples of its own seed with its own step size; all K take one step together
in a single forward/backward. Two protocols decide what "N samples" means:

- ``multi_pass``: model k has a fixed training set of N_k samples and draws its mini-batches from
  it with replacement. Every ``eval_every`` steps it is evaluated on a shared held-out test set
  (_TestScores) and on its training set (_Pack.train_metrics). It *settles* once its training
  hinge loss is exactly 0 (every sample has margin >= 1, so every later gradient is 0 and it can
  never change again) and leaves the pack.
- ``one_pass``: every step draws a fresh mini-batch of B samples from the seed's stream, never
  reused (FreshBatches), so by step t a model has seen N = B·t samples: one run gives its test
  error at every N of the evaluation grid (geometric, ``eval_ratio``). Model k trains for
  N_k / B steps (at most ``max_steps``); its record at each evaluated N says whether it had zero
  test error there and at every later evaluation (the *stable* success the sample complexity
  counts). With a stability window W (``stability_window``), each model is followed until its test
  error has been 0 at every evaluation from the start s of its current zero run up to W·s, and
  then leaves the pack: every model's stability is checked over the same relative window, and
  ``max_steps`` is only a cap (a model that reaches it unconfirmed is *censored*).

A model *diverges* once its loss or parameters stop being finite, and leaves the pack; the pack
stops when no model is left.
"""

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor

from vit_core.configs import PositionalConfig, SpatialDataConfig, TrainConfig
from vit_core.data import BLOCK, TokenBatch
from vit_core.family import family_of
from vit_core.layout import TokenKind
from vit_core.outcomes import Outcome, outcome, summarize_by_n
from vit_core.packed import PackedModels, attention_mass, missing_members
from vit_core.positional import ATTENTION, PRETRAIN_SEEDS
from vit_core.seeding import Stream, numpy_rng

CURVES = ("test_error", "test_loss", "train_error", "train_loss", "attention_mass")
METRICS = ("error", "loss", "attention_mass")  # what an evaluation measures on a set of samples


@dataclass
class PackResult:
    """Per-model outcomes (arrays of length K) and curves (eval_steps x K)."""

    n_train: np.ndarray
    seeds: np.ndarray
    lr: np.ndarray
    success: np.ndarray  # final test error exactly 0
    diverged: np.ndarray
    settled: np.ndarray  # training hinge loss reached exactly 0
    steps: np.ndarray  # SGD steps the model took
    iterations_to_zero: np.ndarray  # first evaluated step with zero test error; -1 if never
    final: dict[str, np.ndarray]  # the CURVES' values when the model stopped
    eval_steps: np.ndarray
    curves: dict[str, np.ndarray]  # NaN once diverged; a settled model keeps its last values
    wall_s: float
    snapshots: dict[str, np.ndarray] = field(
        default_factory=dict
    )  # a pack's snapshot() arrays, (K, ...), when it stopped
    protocol: str = "multi_pass"
    batch_size: int = 16
    stability_window: float = 0.0  # one_pass: W of TrainConfig.stability_window (0: stable up to the budget)

    def by_n(self) -> list[dict]:
        """Per training-set size N: see summarize_by_n."""
        return summarize_by_n(self.records())

    def outcomes(self) -> list[str]:
        """Each model's outcome class (see OUTCOMES) when it stopped."""
        return [
            outcome(bool(d), float(train_error), bool(s))
            for d, train_error, s in zip(self.diverged, self.final["train_error"], self.success)
        ]

    def records(self) -> list[dict]:
        """Every record of every model (see model_records), model after model."""
        return [r for k in range(len(self.seeds)) for r in self.model_records(k)]

    def model_records(self, k: int) -> list[dict]:
        """Model k's records as plain dicts (JSON-ready): its setting, outcome class and values.
        multi_pass: one, with its final values. one_pass: one per evaluated N = B·t > 0, with the
        values at that step, ``success`` meaning zero test error there and at every later
        evaluation, and the model's first and stable N (``n_first_zero``, ``n_stable``; -1: never).
        With a stability window W, a stable N counts only where the model was followed to W times
        it; a model stopped at its cap before that is ``censored``: no N is a success."""
        if self.protocol == "one_pass":
            return self._one_pass_records(k)
        columns = {
            "n_train": "n_train",
            "seed": "seeds",
            "lr": "lr",
            "success": "success",
            "diverged": "diverged",
            "settled": "settled",
            "steps": "steps",
            "iterations_to_zero": "iterations_to_zero",
        }  # record key -> array
        return [
            {key: getattr(self, array)[k].item() for key, array in columns.items()}
            | {"outcome": outcome(bool(self.diverged[k]), float(self.final["train_error"][k]), bool(self.success[k]))}
            | {name: float(v[k]) for name, v in self.final.items()}
        ]

    def _one_pass_records(self, k: int) -> list[dict]:
        """Model k's record at every evaluated step t > 0 of its run (N = B·t)."""
        rows = np.nonzero((self.eval_steps > 0) & (self.eval_steps <= self.steps[k]))[0]
        zero = self.curves["test_error"][rows, k] == 0
        stable = len(zero) - int(np.argmin(zero[::-1])) if not zero.all() else 0  # the rows from here on are all zero
        stable_step = int(self.eval_steps[rows[stable]]) if stable < len(rows) else -1
        first, B, diverged = int(self.iterations_to_zero[k]), self.batch_size, bool(self.diverged[k])
        W = self.stability_window
        censored = bool(W) and not diverged and bool(stable_step < 0 or self.steps[k] < W * stable_step)
        if censored:
            stable, stable_step = len(rows), -1
        common = {
            "seed": int(self.seeds[k]),
            "lr": float(self.lr[k]),
            "diverged": diverged,
            "settled": False,
            "batch_size": B,
            "n_first_zero": B * first if first >= 0 else -1,
            "n_stable": B * stable_step if stable_step >= 0 and not diverged else -1,
        } | ({"censored": censored} if W else {})
        records = []
        for i, row in enumerate(rows):
            step, success = int(self.eval_steps[row]), not diverged and i >= stable
            records.append(
                {
                    "n_train": B * step,
                    **common,
                    "success": success,
                    "steps": step,
                    "iterations_to_zero": first if 0 <= first <= step else -1,
                    "outcome": Outcome.DIVERGED if diverged else (Outcome.SUCCEEDED if success else Outcome.FAILED),
                }
                | {name: float(v[row, k]) for name, v in self.curves.items()}
            )
        return records


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
        """Samples made at once per model: at least CHUNK steps' worth, and a whole number of batches
        and of the data's blocks (BLOCK samples), so that no block is ever made twice (at B = 1,
        32 steps were half a block: every block was made for two chunks)."""
        unit = math.lcm(BLOCK, self.B)
        return unit * math.ceil(self.CHUNK * self.B / unit)

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


def hinge_loss(F: Tensor, y: Tensor) -> Tensor:
    """Per-sample hinge loss max(0, 1 - y F)."""
    return torch.relu(1 - y * F)


def logistic_loss(F: Tensor, y: Tensor) -> Tensor:
    """Per-sample logistic loss log(1 + exp(-y F)), computed stably."""
    return torch.nn.functional.softplus(-y * F)


LOSSES = {"hinge": hinge_loss, "logistic": logistic_loss}


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


def build(model_cfg: Any, data: DataConfig, seeds: list[int], device: str | torch.device = "cpu") -> PackedModels:
    """A pack of len(seeds) models for ``data``, model k initialised from seeds[k], built by its
    family; a TypeError in one line where the pack breaks the contract (vit_core.packed)."""
    family = family_of(data)
    pack = family.build(model_cfg, data, seeds, device)
    if missing := missing_members(pack):
        raise TypeError(f"{family.name}'s build returned a {type(pack).__name__}, which lacks {', '.join(missing)}")
    return pack


def pretrained_attention(cfg: PositionalConfig, data: SpatialDataConfig, seeds: list[int], device) -> dict[str, Tensor]:
    """Transfer (Paper B, Thm 5.1): the attention's parameters after pre-training each model from
    scratch on the same sets with the feature of ``pretrain_feature_seed``, on samples of its own
    (seed + PRETRAIN_SEEDS)."""
    source = dataclasses.replace(data, feature_seed=cfg.pretrain_feature_seed)
    pretrain = TrainConfig(
        lr=cfg.pretrain_lr,
        batch_size=64,
        max_steps=cfg.pretrain_steps,
        eval_every=cfg.pretrain_steps,
        n_test=100,
        eval_subset=100,
        loss="logistic",
    )
    result = train_pack(
        source,
        dataclasses.replace(cfg, transfer=False),
        pretrain,
        [cfg.pretrain_n] * len(seeds),
        [s + PRETRAIN_SEEDS for s in seeds],
        device=device,
    )
    return {name: torch.from_numpy(value).float() for name, value in result.snapshots.items() if name in ATTENTION}


def errors(F: Tensor, y: Tensor) -> Tensor:
    """1 where a prediction is wrong. Written as not(yF > 0) so a NaN output counts as wrong."""
    return (~(y * F > 0)).to(F.dtype)


def evaluate(
    model: PackedModels,
    tokens: Tensor,
    labels: Tensor,
    keep: Tensor | None,
    chunk: int,
    kinds: Tensor | None = None,
    loss: Callable[[Tensor, Tensor], Tensor] = hinge_loss,
) -> dict[str, Tensor]:
    """Per-model error rate, hinge loss and (given ``kinds``, ViT only) attention mass.

    ``tokens`` is (n, L, d) shared by all models, or (K, n, L, d), model k's own. The attention
    mass is Prop. 2's quantity: the attention a label-relevant query puts on label-relevant keys,
    summed over keys, averaged over queries.
    """
    return {
        name: total / tokens.shape[-3] for name, total in _sums(model, tokens, labels, keep, chunk, kinds, loss).items()
    }


@torch.no_grad()
def _sums(
    model: PackedModels,
    tokens: Tensor,
    labels: Tensor,
    keep: Tensor | None,
    chunk: int,
    kinds: Tensor | None,
    loss: Callable[[Tensor, Tensor], Tensor],
) -> dict[str, Tensor]:
    """evaluate's metrics summed over the samples instead of averaged (sums of parts add up)."""
    K, n = model.K, tokens.shape[-3]
    totals = {name: torch.zeros(K, device=tokens.device) for name in METRICS}
    measured = False  # attention mass: only a model with attention (Paper A's ViT) on data with token kinds
    for s in range(0, n, chunk):
        part = slice(s, min(s + chunk, n))
        X, y = tokens[..., part, :, :], labels[..., part]
        kp = None if keep is None else keep[..., part, :]
        rel = None if kinds is None else (kinds[part] == TokenKind.RELEVANT).to(X.dtype) * (1 if kp is None else kp)
        F, mass = _scored(model, X, kp, rel)
        totals["error"] += errors(F, y).sum(-1)
        totals["loss"] += loss(F, y).sum(-1)
        if mass is not None:
            measured = True
            totals["attention_mass"] += mass.sum(-1)
    if not measured:
        totals["attention_mass"] = torch.full((K,), float("nan"), device=tokens.device)
    return totals


def _scored(
    model: PackedModels, X: Tensor, keep: Tensor | None, relevant: Tensor | None
) -> tuple[Tensor, Tensor | None]:
    """Outputs F and per-sample attention mass (or None) of samples X: shared test samples through
    the pack's test path (test_outputs), each model's own samples through its forward."""
    if X.dim() == 3:
        return model.test_outputs(X, keep, relevant)
    F, attn = model(X, keep)
    return F, None if attn is None or relevant is None else attention_mass(attn, relevant)


class _TestScores:
    """Each model's test-set sums over the first ``eval_subset`` samples and over the rest, kept
    until its parameters change, and the test metrics read from them.

    Metrics are the subset's, extended to the whole test set where the subset is error-free and
    the model is ``decisive`` (it has not reached zero test error before, or this is its last
    evaluation). A model with zero error on the whole set has zero error on the subset, so the
    first step with zero test error and the final outcome are always decided on the whole set,
    while most evaluations cost a fifth of it or less; the subset is never scored twice.

    A model whose mini-batches since its last evaluation all had zero hinge loss got zero
    gradients: its parameters, outputs and sums are what they were, so it is not scored again
    (a one-pass ViT that keeps zero error reads most samples at margin >= 1: 35-54% of the
    samples a main-job pack scored).
    """

    def __init__(self, test: TokenBatch, keep: Tensor | None, train: TrainConfig, K: int):
        self.test, self.keep, self.train, self.loss = test, keep, train, LOSSES[train.loss]
        self.n, self.total = min(train.eval_subset, len(test)), len(test)
        device = test.tokens.device
        self.sums = {part: {name: torch.zeros(K, device=device) for name in METRICS} for part in ("subset", "rest")}
        self.valid = {part: torch.zeros(K, dtype=torch.bool, device=device) for part in ("subset", "rest")}

    def __call__(self, model: PackedModels, decisive: Tensor, moved: Tensor) -> dict[str, Tensor]:
        """Test metrics of every model; only those that ``moved`` since they were scored are scored."""
        for valid in self.valid.values():
            valid &= ~moved
        self._score(model, "subset", ~self.valid["subset"], slice(0, self.n))
        subset = self.sums["subset"]
        clean = (subset["error"] == 0) & decisive
        if self.n < self.total:
            self._score(model, "rest", clean & ~self.valid["rest"], slice(self.n, self.total))
        result = {name: value / self.n for name, value in subset.items()}
        for name, rest in self.sums["rest"].items():
            result[name][clean] = (subset[name][clean] + rest[clean]) / self.total
        return result

    def _score(self, model: PackedModels, part: str, which: Tensor, samples: slice) -> None:
        """Score the models marked ``which`` on test ``samples`` into the sums of ``part``."""
        index = torch.nonzero(which).squeeze(1)
        if not len(index):
            return
        kp = None if self.keep is None else self.keep[samples]
        t = self.test
        got = _sums(
            model if len(index) == model.K else model.select(index),
            t.tokens[samples],
            t.labels[samples],
            kp,
            self.train.eval_batch,
            t.kinds[samples],
            self.loss,
        )
        for name, value in got.items():
            self.sums[part][name][index] = value
        self.valid[part][index] = True

    def select(self, index: Tensor) -> None:
        """Keep only the models at ``index`` (positions in the current pack)."""
        for part in self.sums:
            self.sums[part] = {name: value[index] for name, value in self.sums[part].items()}
            self.valid[part] = self.valid[part][index]


def _finite_params(model: PackedModels) -> Tensor:
    """(K,) bool: every parameter of model k is finite."""
    return torch.stack([torch.isfinite(p).flatten(1).all(1) for p in model.parameters()]).all(0)


class _Pack:
    """The models still training: their networks, data, step sizes and original ids, the sums of
    their mini-batch losses and errors since the last evaluation, how many of their latest
    mini-batches in a row had zero loss (which samples last had a positive loss: TrainSets),
    which of them had a non-zero gradient since their last test scoring, and those scores."""

    SETTLE_STREAK = 3  # zero-loss mini-batches in a row before the whole training set is checked

    def __init__(
        self,
        model: PackedModels,
        sets: "TrainSets | FreshBatches",
        step_size: Tensor,
        loss: Callable[[Tensor, Tensor], Tensor],
        scores: _TestScores,
    ):
        self.model, self.sets, self.step_size, self.loss, self.scores = model, sets, step_size, loss, scores
        self.ids = torch.arange(model.K)
        self.moved = torch.ones(model.K, dtype=torch.bool, device=step_size.device)
        self.window = torch.zeros(2, model.K, device=step_size.device)
        self.window_steps = 0
        self.zero_streak = torch.zeros(model.K, dtype=torch.long, device=step_size.device)

    def select(self, index: Tensor) -> None:
        self.model, self.step_size, self.window = self.model.select(index), self.step_size[index], self.window[:, index]
        self.zero_streak, self.ids = self.zero_streak[index], self.ids[index.cpu()]
        self.moved = self.moved[index]
        self.sets.select(index)
        self.scores.select(index)

    def step(self) -> None:
        """One SGD step of every model on its own mini-batch."""
        X, y, keep = self.sets.batch()
        F, _ = self.model(X, keep)
        per_sample = self.loss(F, y)
        loss = per_sample.mean(-1)  # (K,): each model's own mean over its own batch
        self.model.zero_grad(set_to_none=True)
        loss.sum().backward()  # models share nothing, so each gets the gradient of its own loss
        scales = self.model.lr_scales
        with torch.no_grad():
            for name, p in self.model.named_parameters():
                if p.grad is None:  # frozen
                    continue
                p.sub_(scales.get(name, 1.0) * self.step_size.view(-1, *[1] * (p.dim() - 1)) * p.grad)
                self.moved |= p.grad.flatten(1).ne(0).any(1)
            self.window += torch.stack([loss, errors(F, y).mean(-1)])
            self.zero_streak = (self.zero_streak + 1) * (loss == 0)
            self.sets.note_losses(per_sample)
        self.window_steps += 1

    def test_metrics(self, decisive: Tensor) -> dict[str, Tensor]:
        """Test metrics of every model (_TestScores), scoring only those that moved since."""
        result = self.scores(self.model, decisive, self.moved)
        self.moved.zero_()
        return result

    def train_metrics(self, exact_for_all: bool, chunk: int) -> tuple[dict[str, Tensor], Tensor]:
        """Training loss and error per model, and which of them are exact.

        Between evaluations they are the running means over the window's mini-batches (taken
        before each update). A settled model has zero loss on every sample, so only models whose
        latest SETTLE_STREAK mini-batches had zero loss and whose samples that failed when last
        seen all pass now (or all models, when ``exact_for_all``) are scored on their whole
        training set; settling is always decided on the whole set.
        """
        loss, error = self.window / max(self.window_steps, 1)
        s = self.sets
        if not s.fixed:  # one_pass: the running means over fresh batches are all there is
            self.window.zero_()
            self.window_steps = 0
            return {"loss": loss, "error": error}, torch.zeros_like(loss, dtype=torch.bool)
        if exact_for_all:
            idx = torch.arange(self.model.K, device=loss.device)
        else:
            idx = self._clear_of_failures(torch.nonzero(self.zero_streak >= self.SETTLE_STREAK).squeeze(1), chunk)
        for n in s.n[idx].unique().tolist():  # models of one N at a time: no padding is scored
            group = idx[s.n[idx] == n]
            F = outputs(
                self.model.select(group), s.tokens[group, :n], None if s.keep is None else s.keep[group, :n], chunk
            )
            y = s.labels[group, :n]
            per_sample = self.loss(F, y)
            s.failing[group, :n] = per_sample > 0
            loss[group], error[group] = per_sample.mean(1), errors(F, y).mean(1)
        self.window.zero_()
        self.window_steps = 0
        exact = torch.zeros_like(loss, dtype=torch.bool)
        exact[idx] = True
        return {"loss": loss, "error": error}, exact

    def _clear_of_failures(self, idx: Tensor, chunk: int) -> Tensor:
        """The models at ``idx`` whose samples that had a positive loss when last seen all have
        zero loss now (those samples re-scored): a cheap filter before a whole-set check."""
        s = self.sets
        flagged = s.failing[idx]
        width = int(flagged.sum(1).max()) if len(idx) else 0
        if width == 0:
            return idx
        rows, pos = idx.unsqueeze(1), torch.topk(flagged.float(), width, dim=1).indices  # flagged samples first
        F = outputs(self.model.select(idx), s.tokens[rows, pos], None if s.keep is None else s.keep[rows, pos], chunk)
        still = (self.loss(F, s.labels[rows, pos]) > 0) & flagged.gather(1, pos)
        s.failing[rows, pos] = still
        return idx[~still.any(1)]


@torch.no_grad()
def outputs(model: PackedModels, tokens: Tensor, keep: Tensor | None, chunk: int) -> Tensor:
    """Each model's outputs F (K, n) on its own samples ``tokens`` (K, n, L, d), ``chunk`` at a time."""
    n = tokens.shape[1]
    return torch.cat(
        [
            model(tokens[:, i : i + chunk], None if keep is None else keep[:, i : i + chunk])[0]
            for i in range(0, n, chunk)
        ],
        1,
    )


def train_pack(
    data: DataConfig,
    model_cfg: Any,
    train: TrainConfig,
    n_train: list[int],
    seeds: list[int],
    lr: list[float] | None = None,
    device: str | torch.device = "cpu",
    progress: Callable[[int, int], None] | None = None,
) -> PackResult:
    """Train K = len(seeds) models at once with seed seeds[k] and step size lr[k]. multi_pass:
    model k has a training set of n_train[k] samples and trains max_steps steps at most;
    one_pass: it reads n_train[k] fresh samples, n_train[k] / B steps (max_steps at most), or
    stops once its stability window is confirmed.

    ``progress(step, models_still_training)`` is called after every evaluation.
    """
    if len(n_train) != len(seeds) or (lr is not None and len(lr) != len(seeds)):
        raise ValueError("n_train, seeds and lr must have one entry per model")
    one_pass = train.protocol == "one_pass"
    if min(n_train) < (train.batch_size if one_pass else 1):
        raise ValueError(
            f"n_train={min(n_train)}: every model needs at least {'one batch of' if one_pass else '1'} training sample"
        )
    start, K = time.perf_counter(), len(seeds)
    lrs = np.asarray(lr if lr is not None else [train.lr] * K, dtype=np.float64)
    if not (lrs > 0).all():
        raise ValueError(f"lr={lrs.min()}: every step size must be > 0")
    test = sample(data, train.n_test, train.test_seed, Stream.TEST_DATA).to(device)
    test_keep = None if test.keep.all() else test.keep
    model = build(model_cfg, data, seeds, device)
    lr_tensor = torch.tensor(lrs, dtype=torch.float32, device=device)
    sets = (
        FreshBatches(data, seeds, train.batch_size, device)
        if one_pass
        else TrainSets(data, n_train, seeds, train.batch_size, device)
    )
    pack = _Pack(model, sets, lr_tensor, LOSSES[train.loss], _TestScores(test, test_keep, train, K))
    budget = torch.tensor(
        [min(train.max_steps, n // train.batch_size) if one_pass else train.max_steps for n in n_train]
    )
    grid = set(train.evaluation_steps(int(budget.max())))
    rec = _Recorder(K, model.metric_names)
    for step in range(int(budget.max()) + 1):
        ends = budget[pack.ids] == step  # models whose budget ends here (on the host: no device sync a step)
        if step in grid or ends.any():
            last, ending = bool(ends.all()), ends.to(device)
            on_train, exact = pack.train_metrics(step == 0 or last, train.eval_batch)
            diverged = ~(torch.isfinite(on_train["loss"]) & _finite_params(pack.model))
            settled = exact & (on_train["loss"] == 0) & ~diverged
            first_zero_unknown = torch.from_numpy(rec.iterations_to_zero[pack.ids.numpy()] < 0).to(device)
            decisive = (
                first_zero_unknown | diverged | settled | ending | one_pass
            )  # one_pass: every zero counts for stability
            on_test = pack.test_metrics(decisive)
            extra = pack.model.metrics() if rec.extra else {}
            rec.add(step, pack.ids, on_test, on_train, extra, diverged.cpu(), settled.cpu())
            rec.snap(pack.ids, pack.model.snapshot())
            confirmed = rec.confirmed(step, pack.ids, train.stability_window if one_pass else 0.0).to(device)
            stay = torch.nonzero(~(diverged | settled | ending | confirmed)).squeeze(1)
            if progress is not None:
                progress(step, len(stay))
            if len(stay) == 0:
                break
            if len(stay) < pack.model.K:  # drop finished models: the pack gets smaller and faster
                pack.select(stay)
        pack.step()
    return rec.result(np.asarray(n_train), np.asarray(seeds), lrs, time.perf_counter() - start, train)


class _Recorder:
    """Collects evaluations of a shrinking pack into full-K curves and final values."""

    def __init__(self, K: int, extra: tuple[str, ...] = ()):
        self.K, self.extra = K, extra
        self.names = CURVES + tuple(extra)  # the test/train curves, then the model's own metrics
        self.steps: list[int] = []
        self.rows: dict[str, list[np.ndarray]] = {name: [] for name in self.names}
        self.last = {name: np.full(K, np.nan) for name in self.names}
        self.stopped_at = np.full(K, -1)
        self.diverged = np.zeros(K, dtype=bool)
        self.settled = np.zeros(K, dtype=bool)
        self.iterations_to_zero = np.full(K, -1)
        self.streak_start = np.full(K, -1)  # the first step > 0 of each model's current run of zero test error
        self.snapshots: dict[str, np.ndarray] = {}

    def add(
        self, step: int, ids: Tensor, on_test: dict, on_train: dict, extra: dict, diverged: Tensor, settled: Tensor
    ) -> None:
        ids = ids.numpy()
        values = {f"test_{k}": on_test[k] for k in ("error", "loss")} | {
            f"train_{k}": on_train[k] for k in ("error", "loss")
        }
        values |= {"attention_mass": on_test["attention_mass"], **extra}
        for name, v in values.items():
            self.last[name][ids] = v.double().cpu().numpy()
        dead = ids[diverged.numpy()]
        for name in self.names:
            self.last[name][dead] = np.nan
            self.rows[name].append(self.last[name].copy())
        self.steps.append(step)
        zero = ids[(on_test["error"] == 0).cpu().numpy()]
        first = zero[self.iterations_to_zero[zero] < 0]
        self.iterations_to_zero[first] = step
        self.streak_start[np.setdiff1d(ids, zero)] = -1
        self.streak_start[zero[self.streak_start[zero] < 0]] = step if step > 0 else -1
        self.diverged[dead] = True
        self.settled[ids[settled.numpy()]] = True
        self.stopped_at[ids] = step

    def confirmed(self, step: int, ids: Tensor, window: float) -> Tensor:
        """(len(ids),) bool: the models whose test error has been 0 at every evaluation from their
        streak's start s up to this step, and step >= window * s (none when window is 0)."""
        start = self.streak_start[ids.numpy()]
        return torch.from_numpy((window > 0) & (start > 0) & (step >= window * start))

    def snap(self, ids: Tensor, arrays: dict[str, Tensor]) -> None:
        """Keep each model's latest snapshot arrays (small: Paper B's A)."""
        for name, value in arrays.items():
            value = value.detach().double().cpu().numpy()
            store = self.snapshots.setdefault(name, np.full((self.K, *value.shape[1:]), np.nan))
            store[ids.numpy()] = value

    def result(self, n_train, seeds, lrs, wall_s: float, train: TrainConfig) -> PackResult:
        final = {name: self.last[name].copy() for name in self.names}
        return PackResult(
            n_train=n_train,
            seeds=seeds,
            lr=lrs,
            success=final["test_error"] == 0,
            diverged=self.diverged,
            settled=self.settled,
            steps=self.stopped_at,
            iterations_to_zero=self.iterations_to_zero,
            final=final,
            eval_steps=np.asarray(self.steps),
            curves={name: np.stack(rows) for name, rows in self.rows.items()},
            wall_s=wall_s,
            snapshots=self.snapshots,
            protocol=train.protocol,
            batch_size=train.batch_size,
            stability_window=train.stability_window if train.protocol == "one_pass" else 0.0,
        )
