"""Scoring a pack: its losses, errors and attention mass on a set of samples (evaluate), on the
shared test set only for the models that moved since they were last scored (_TestScores), and on
test images that lost patches by Paper A's token sparsification (sparsified_scores)."""

from collections.abc import Callable

import torch
from torch import Tensor

from vit_core.packed import PackedModels, attention_mass
from vit_core.seeding import Stream, numpy_rng
from vit_core.sparsify import image_keep, sparsified_name
from vit_core.tokens import MARGIN_BINS, MARGIN_ERRORS, TokenBatch, TokenKind
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
    bins: Tensor | None = None,
) -> dict[str, Tensor]:
    """evaluate's metrics summed over the samples instead of averaged (sums of parts add up); given
    each sample's margin bin (``bins``: one-hot, shaped like ``labels`` plus MARGIN_BINS), also each
    model's errors per bin ("by_margin", (K, MARGIN_BINS))."""
    K, n = model.K, tokens.shape[-3]
    totals = {name: torch.zeros(K, device=tokens.device) for name in METRICS}
    if bins is not None:
        totals["by_margin"] = torch.zeros(K, len(MARGIN_BINS), device=tokens.device)
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
        wrong = errors(F, y)
        totals["error"] += wrong.sum(-1)
        totals["loss"] += loss(F, y).sum(-1)
        if bins is not None:
            totals["by_margin"] += (wrong.unsqueeze(-1) * bins[..., part, :]).sum(-2)
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
    """Each model's test-set sums over the first ``eval_subset`` samples (the screen) and over the
    rest, kept until its parameters change, and the test metrics read from them.

    Metrics are the screen's, extended to the whole test set where the screen is error-free and
    the model is ``decisive`` (it has not reached zero test error before, or one pass), and for
    every model at an ``exact`` evaluation (its last, or one where it was at zero test error the
    evaluation before: where it errs now, how it lost zero error is counted in full). A model with
    zero error on the whole set has zero error on the screen, so every zero test error is decided
    on the whole set, while most evaluations cost the screen alone; no sample is scored twice.

    The attention mass is always the screen's: over the rest only outputs are scored (measuring it there
    cost a ViT pack 8% of its time and told no more than the screen's mean).

    The rest is scored in chunks, the screen's size and doubling, its samples at the smallest vote
    margin first where the data have a vote (``margins``: the near ties, where a model errs first),
    and a model leaves the scoring at the chunk where it first errs, unless the evaluation is
    exact. Its test error is then the errors found over the whole set: a lower bound, exact in
    whether it is 0; its loss and attention mass the screen's. On 10,000 test samples a model with
    a few errors among the near ties costs one chunk, not the 9,800 past the screen.

    With margins, an evaluation that covers the whole set also counts each model's errors per vote
    margin (MARGIN_ERRORS: 1, 2, 3, 4, 5 and more; NaN where it did not cover it).

    A model whose mini-batches since its last evaluation all had zero hinge loss got zero
    gradients: its parameters, outputs and sums are what they were, so it is not scored again
    (a one-pass ViT that keeps zero error reads most samples at margin >= 1: 35-54% of the
    samples a main-job pack scored).

    A test set of one per model (K, n, L, d: TrainConfig.test_sets "per_seed") is followed by the
    rows of the models still in the pack (``rows``), each model scored on its own.
    """

    def __init__(
        self, test: TokenBatch, keep: Tensor | None, train: TrainConfig, K: int, margins: Tensor | None = None
    ):
        self.test, self.keep, self.train, self.loss = test, keep, train, LOSSES[train.loss]
        size = test.labels.shape[-1]
        self.n, self.total = min(train.eval_subset, size), size
        device = test.tokens.device
        self.rows = torch.arange(K, device=device) if test.labels.dim() == 2 else None
        self.order = self.bins = None  # the rest's positions, hardest first; each sample's margin bin, one-hot
        if margins is not None:
            margins = margins.to(device)
            self.order = torch.argsort(margins[..., self.n :], dim=-1, stable=True) + self.n
            bin_of = margins.clamp(1, len(MARGIN_BINS)).long() - 1
            self.bins = torch.nn.functional.one_hot(bin_of, len(MARGIN_BINS)).to(test.tokens.dtype)
        names = METRICS + (("by_margin",) if margins is not None else ())
        self.sums = {part: {name: self._zeros(K, name, device) for name in names} for part in ("subset", "rest")}
        self.valid = {part: torch.zeros(K, dtype=torch.bool, device=device) for part in ("subset", "rest")}
        self.complete = torch.full((K,), self.n == size, device=device)  # the rest's sums cover all of it

    @staticmethod
    def _zeros(K: int, name: str, device) -> Tensor:
        return torch.zeros((K, len(MARGIN_BINS)) if name == "by_margin" else K, device=device)

    def __call__(
        self, model: PackedModels, decisive: Tensor, moved: Tensor, exact: Tensor | None = None
    ) -> dict[str, Tensor]:
        """Test metrics of every model; only those that ``moved`` since they were scored are scored."""
        exact = torch.zeros_like(decisive) if exact is None else exact
        for valid in self.valid.values():
            valid &= ~moved
        self._score(model, "subset", ~self.valid["subset"], 0, self.n)
        subset, rest = self.sums["subset"], self.sums["rest"]
        extend = ((subset["error"] == 0) & decisive) | exact
        if self.n < self.total:
            self._score_rest(model, extend & ~(self.valid["rest"] & (self.complete | ~exact)), exact)
        whole = extend & self.complete
        result = {name: subset[name] / self.n for name in METRICS}
        for name in ("error", "loss"):  # the attention mass is the screen's: its mean over 200 samples tells as much
            result[name][whole] = (subset[name][whole] + rest[name][whole]) / self.total
        cut = extend & ~whole  # left the scoring at its first error: the errors found so far
        result["error"][cut] = (subset["error"][cut] + rest["error"][cut]) / self.total
        if self.bins is not None:
            counts = torch.where(whole.unsqueeze(1), subset["by_margin"] + rest["by_margin"], float("nan"))
            result |= {name: counts[:, i] for i, name in enumerate(MARGIN_ERRORS)}
        return result

    def _score_rest(self, model: PackedModels, which: Tensor, exact: Tensor) -> None:
        """Score the models marked ``which`` on the rest, chunk by chunk, each until its first error
        (to the end where ``exact``)."""
        if not which.any():
            return
        for value in self.sums["rest"].values():
            value[which] = 0
        active, reached, start, size = which.clone(), torch.zeros_like(which, dtype=torch.long), self.n, self.n
        while start < self.total and active.any():
            stop = min(start + size, self.total)
            self._score(model, "rest", active, start, stop, add=True)
            reached[active] = stop
            active &= (self.sums["rest"]["error"] == 0) | exact
            start, size = stop, 2 * size
        self.complete[which] = reached[which] == self.total

    def _score(self, model: PackedModels, part: str, which: Tensor, start: int, stop: int, add: bool = False) -> None:
        """Score the models marked ``which`` on test samples ``start`` to ``stop`` (of the rest: in
        its order) into the sums of ``part``, or added to them."""
        index = torch.nonzero(which).squeeze(1)
        if not len(index):
            return
        at = self._positions(index, start, stop)
        t = self.test
        got = _sums(
            model if len(index) == model.K else model.select(index),
            t.tokens[at],
            t.labels[at],
            None if self.keep is None else self.keep[at],
            self.train.eval_batch,
            t.kinds[at] if part == "subset" else None,  # the attention mass: the screen's (the rest: outputs only)
            self.loss,
            None if self.bins is None else self.bins[at],
        )
        for name, value in got.items():
            self.sums[part][name][index] = value + (self.sums[part][name][index] if add else 0)
        self.valid[part][index] = True

    def _positions(self, index: Tensor, start: int, stop: int) -> tuple | slice:
        """The index of test samples ``start`` to ``stop`` for the models at ``index``: the rest
        in its order; each model's own rows of a test set per model."""
        ordered = self.order is not None and start >= self.n
        if self.rows is None:
            return self.order[start - self.n : stop - self.n] if ordered else slice(start, stop)
        rows = self.rows[index]
        if ordered:
            return rows.unsqueeze(1), self.order[rows, start - self.n : stop - self.n]
        return rows, slice(start, stop)

    def select(self, index: Tensor) -> None:
        """Keep only the models at ``index`` (positions in the current pack)."""
        for part in self.sums:
            self.sums[part] = {name: value[index] for name, value in self.sums[part].items()}
            self.valid[part] = self.valid[part][index]
        self.complete = self.complete[index]
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
