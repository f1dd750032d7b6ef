"""Scoring a pack: its losses, errors and attention mass on a set of samples (evaluate), on the
shared test set only for the models that moved since they were last scored (_TestScores), and on
test images that lost patches by Paper A's token sparsification (sparsified_scores)."""

from collections.abc import Callable

import torch
from torch import Tensor

from vit_core.data import TokenBatch
from vit_core.layout import TokenKind
from vit_core.packed import PackedModels, attention_mass
from vit_core.seeding import Stream, numpy_rng
from vit_core.sparsify import image_keep, sparsified_name
from vit_core.train_config import TrainConfig
from vit_core.training.records import METRICS


def hinge_loss(F: Tensor, y: Tensor) -> Tensor:
    """Per-sample hinge loss max(0, 1 - y F)."""
    return torch.relu(1 - y * F)


def logistic_loss(F: Tensor, y: Tensor) -> Tensor:
    """Per-sample logistic loss log(1 + exp(-y F)), computed stably."""
    return torch.nn.functional.softplus(-y * F)


LOSSES = {"hinge": hinge_loss, "logistic": logistic_loss}


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
        rel = (
            None
            if kinds is None
            else (kinds[..., part, :] == TokenKind.RELEVANT).to(X.dtype) * (1 if kp is None else kp)
        )
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

    A test set of one per model (K, n, L, d: TrainConfig.test_sets "per_seed") is followed by the
    rows of the models still in the pack (``rows``), each model scored on its own.
    """

    def __init__(self, test: TokenBatch, keep: Tensor | None, train: TrainConfig, K: int):
        self.test, self.keep, self.train, self.loss = test, keep, train, LOSSES[train.loss]
        size = test.labels.shape[-1]
        self.n, self.total = min(train.eval_subset, size), size
        device = test.tokens.device
        self.rows = torch.arange(K, device=device) if test.labels.dim() == 2 else None
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
        t = self.test
        at = samples if self.rows is None else (self.rows[index], samples)  # per model: its own rows
        got = _sums(
            model if len(index) == model.K else model.select(index),
            t.tokens[at],
            t.labels[at],
            None if self.keep is None else self.keep[at],
            self.train.eval_batch,
            t.kinds[at],
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
        if self.rows is not None:
            self.rows = self.rows[index]


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


@torch.no_grad()
def received_attention(model: PackedModels, tokens: Tensor, chunk: int) -> Tensor | None:
    """(K, n, L): the attention each token of the shared samples ``tokens`` (n, L, d) receives from
    each model, averaged over its queries, every token kept; None for a model without attention."""
    parts = []
    for s in range(0, tokens.shape[0], chunk):
        _, attn = model(tokens[s : s + chunk], None)
        if attn is None:
            return None
        parts.append(attn.mean(-2))
    return torch.cat(parts, 1)


def sparsified_scores(
    rules: tuple[str, ...],
    ks: tuple[int, ...],
    model: PackedModels,
    test: TokenBatch,
    seeds: list[int],
    train: TrainConfig,
) -> dict[str, Tensor]:
    """Each model's test error and loss after removing k patches of every test image by each rule,
    for each k (vit_core.sparsify.image_keep; random: model k's draw from its seed). A patch's pixel
    mass is the sum of its token's values; a model without attention has NaN for least_attended."""
    attention = received_attention(model, test.tokens, train.eval_batch)
    attended = None if attention is None else attention.cpu().numpy()
    mass, device = test.tokens.sum(-1).cpu().numpy(), test.tokens.device
    out = {}
    for rule in rules:
        for k in ks:
            names = {metric: sparsified_name(rule, k, metric) for metric in ("error", "loss")}
            if rule == "least_attended" and attended is None:
                out |= {name: torch.full((model.K,), float("nan"), device=device) for name in names.values()}
                continue
            rngs = [numpy_rng(seed, Stream.SPARSIFY, k) for seed in seeds]
            keep = torch.from_numpy(image_keep(rule, k, attended, mass, rngs)).to(device)
            got = evaluate(model, test.tokens, test.labels, keep, train.eval_batch, loss=LOSSES[train.loss])
            out |= {name: got[metric] for metric, name in names.items()}
    return out
