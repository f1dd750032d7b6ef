"""Mini-batch SGD on the hinge loss for a pack of K independent models (Li et al., Section 3).

Model k trains on samples of its own seed with its own step size; all K take one step together
in a single forward/backward. Two protocols decide what "N samples" means:

- ``multi_pass``: model k has a fixed training set of N_k samples and draws its mini-batches from
  it with replacement. Every ``eval_every`` steps it is evaluated on a shared held-out test set
  (_TestScores) and on its training set (_Training.train_metrics). It *settles* once its training
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
stops when no model is left."""

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import Tensor

from vit_core.family import family_of
from vit_core.packed import PackedModels, missing_members
from vit_core.tokens import MARGIN_ERRORS
from vit_core.train_config import TrainConfig
from vit_core.training.batches import DataConfig, FreshBatches, TrainSets, test_margins, test_set
from vit_core.training.records import PackResult, _Recorder
from vit_core.training.scoring import LOSSES, _TestScores, errors, outputs


def build(model_cfg: Any, data: DataConfig, seeds: list[int], device: str | torch.device = "cpu") -> PackedModels:
    """A pack of len(seeds) models for ``data``, model k initialised from seeds[k], built by its
    family; a TypeError in one line where the pack breaks the contract (vit_core.packed)."""
    family = family_of(data)
    pack = family.build(model_cfg, data, seeds, device)
    if missing := missing_members(pack):
        raise TypeError(f"{family.name}'s build returned a {type(pack).__name__}, which lacks {', '.join(missing)}")
    return pack


def _finite_params(model: PackedModels) -> Tensor:
    """(K,) bool: every parameter of model k is finite."""
    return torch.stack([torch.isfinite(p).flatten(1).all(1) for p in model.parameters()]).all(0)


def forward_loss(
    model: PackedModels, X: Tensor, y: Tensor, keep: Tensor | None, loss: Callable[[Tensor, Tensor], Tensor]
) -> tuple[Tensor, Tensor]:
    """A training step's outputs F (K, B) and per-sample losses (K, B)."""
    F, _ = model(X, keep)
    return F, loss(F, y)


class _Training:
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
        F, per_sample = forward_loss(self.model, X, y, keep, self.loss)
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

    def test_metrics(self, decisive: Tensor, exact: Tensor) -> dict[str, Tensor]:
        """Test metrics of every model (_TestScores), scoring only those that moved since; those
        ``exact`` (at their last evaluation) on the whole test set."""
        result = self.scores(self.model, decisive, self.moved, exact)
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


def train_pack(
    data: DataConfig,
    model_cfg: Any,
    train: TrainConfig,
    n_train: list[int],
    seeds: list[int],
    lr: list[float] | None = None,
    device: str | torch.device = "cpu",
    progress: Callable[[int, int, int], bool | None] | None = None,
) -> PackResult:
    """Train K = len(seeds) models at once with seed seeds[k] and step size lr[k]. multi_pass:
    model k has a training set of n_train[k] samples and trains max_steps steps at most;
    one_pass: it reads n_train[k] fresh samples, n_train[k] / B steps (max_steps at most), or
    stops once its stability window is confirmed.

    ``progress(step, models_still_training, of_them_at_zero_test_error)`` is called after every
    evaluation; training ends there when it returns True (a caller's time limit: ``vitsweep
    plan``'s pilot, which goes on longer while none has stopped and some are not at zero error).
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
    family = family_of(data)
    if train.test_sets == "per_seed" and (shared := family.test_set_metric_names(data)):
        raise ValueError(f"test_sets=per_seed: {family.name} measures {', '.join(shared)} on one shared test set")
    test = test_set(data, train, seeds, device)
    test_keep = None if test.keep.all() else test.keep
    model = build(model_cfg, data, seeds, device)
    lr_tensor = torch.tensor(lrs, dtype=torch.float32, device=device)
    sets = (
        FreshBatches(data, seeds, train.batch_size, device)
        if one_pass
        else TrainSets(data, n_train, seeds, train.batch_size, device)
    )
    margins = test_margins(data, train, seeds)
    scores = _TestScores(test, test_keep, train, K, margins)
    pack = _Training(model, sets, lr_tensor, LOSSES[train.loss], scores)
    budget = torch.tensor([train.steps_for(n) for n in n_train])
    grid = set(train.evaluation_steps(int(budget.max())))
    by_margin = MARGIN_ERRORS if margins is not None else ()
    rec = _Recorder(K, model.metric_names + family.test_set_metric_names(data) + by_margin)
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
            at_zero = torch.from_numpy(rec.at_zero(pack.ids)).to(device) & one_pass
            on_test = pack.test_metrics(decisive, (settled | ending | at_zero) & ~diverged)  # last, or losing zero
            extra = pack.model.metrics() if rec.extra else {}
            extra |= {name: on_test[name] for name in by_margin}
            extra |= family.test_set_metrics(data, pack.model, test, [seeds[i] for i in pack.ids.tolist()], train)
            rec.add(step, pack.ids, on_test, on_train, extra, diverged.cpu(), settled.cpu())
            rec.snap(pack.ids, pack.model.snapshot())
            confirmed = rec.confirmed(step, pack.ids, train.stability_window if one_pass else 0.0).to(device)
            stay = torch.nonzero(~(diverged | settled | ending | confirmed)).squeeze(1)
            stop = progress is not None and progress(step, len(stay), int(rec.at_zero(pack.ids[stay.cpu()]).sum()))
            if len(stay) == 0 or stop:
                break
            if len(stay) < pack.model.K:  # drop finished models: the pack gets smaller and faster
                pack.select(stay)
        pack.step()
    return rec.result(np.asarray(n_train), np.asarray(seeds), lrs, time.perf_counter() - start, train)
