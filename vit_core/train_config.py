"""The training config shared by every family: SGD, evaluation and the budget rule (a model reads
at most batch_size · max_steps samples, its sample budget, which a tuned batch size keeps). Plain
dataclasses, no torch, like vit_core.li2023.configs: a spec is validated without loading torch."""

import dataclasses
from dataclasses import dataclass
from typing import Literal

from vit_core.fields import ConfigError, check_choices, param


@dataclass(frozen=True)
class TrainConfig:
    """SGD and evaluation settings shared by every model of a pack."""

    lr: float = param(0.5, "eta, the SGD step size (a pack may set one per model)")
    batch_size: int = param(16, "B, drawn with replacement from the model's own N samples")
    max_steps: int = param(6000, "SGD steps at most; a model stops earlier once its training hinge loss is 0")
    eval_every: int = param(20, "steps between evaluations")
    n_test: int = param(1000, "held-out test samples; success means zero error on all of them")
    eval_subset: int = param(200, "test samples scored at every evaluation; all n_test where it is error-free")
    test_seed: int = param(1_000_003, "seed of the test set (test_sets: per_seed, the first of one per seed)")
    test_sets: Literal["shared", "per_seed"] = param(
        "shared",
        "shared: one test set, test_seed's, for every model; per_seed: seed s's models are scored on test seed "
        "test_seed + s's, so that resampling seeds resamples the test set too and every CI over seeds carries it",
    )
    eval_batch: int = param(
        25,
        "samples per forward pass during evaluation (bounds memory; 25 scored a ViT at L = 120 1.7x faster than 100 "
        "on a CPU core)",
    )
    loss: Literal["hinge", "logistic"] = param(
        "hinge", "hinge max(0, 1 - yF) (Paper A), or logistic log(1 + exp(-yF)) (Paper B)"
    )
    protocol: Literal["multi_pass", "one_pass"] = param(
        "multi_pass",
        "multi_pass: N samples drawn once, mini-batches drawn from them until the training loss is 0; "
        "one_pass: a fresh mini-batch every step, never reused, so N = B·t by step t (one run gives every N)",
    )
    eval_ratio: float = param(
        1.1,
        "one_pass: evaluate every eval_every steps until that gap is below this ratio's share of the step, "
        "then on a geometric grid of this ratio (N* resolves to this precision)",
    )
    stability_window: float = param(
        0.0,
        "one_pass: follow each model until its test error has stayed 0 from its candidate stable N up to W times "
        "that N; max_steps is then a cap, and a model that reaches it unconfirmed is censored (0: up to the budget)",
    )

    def __post_init__(self) -> None:
        check_choices(self)
        for name in ("batch_size", "max_steps", "eval_every", "n_test", "eval_subset", "eval_batch"):
            if getattr(self, name) < 1:
                raise ConfigError(name, getattr(self, name), "must be a positive integer")
        if not self.lr > 0:
            raise ConfigError("lr", self.lr, "must be > 0")
        if not self.eval_ratio > 1:
            raise ConfigError("eval_ratio", self.eval_ratio, "must be > 1")
        if not (self.stability_window == 0 or self.stability_window > 1):
            raise ConfigError("stability_window", self.stability_window, "must be 0 (off) or > 1")

    def test_seeds(self, seeds: list[int]) -> list[int]:
        """The seed of the test set each of ``seeds``' models is scored on (test_sets)."""
        return [self.test_seed + (s if self.test_sets == "per_seed" else 0) for s in seeds]

    @property
    def sample_budget(self) -> int:
        """B · max_steps: the samples a model reads at most (one pass: the largest N it reaches),
        the budget a cell keeps at every batch size it is tuned at."""
        return self.batch_size * self.max_steps

    def at_batch(self, batch: int) -> "TrainConfig":
        """This config at batch size ``batch`` with the same sample budget: max_steps is
        sample_budget // batch (rounded down; ConfigError where that leaves no step)."""
        return dataclasses.replace(self, batch_size=batch, max_steps=self.sample_budget // batch)

    def steps_for(self, n: int) -> int:
        """The steps a model of N = n trains at most: max_steps; one pass reads n fresh samples,
        n // batch_size steps, where that is fewer."""
        return min(self.max_steps, n // self.batch_size) if self.protocol == "one_pass" else self.max_steps

    def evaluation_steps(self, last: int) -> list[int]:
        """The steps at which a model that trains ``last`` steps is evaluated, 0 and ``last``
        included: every eval_every (multi_pass); every eval_every, then a geometric grid of
        ratio eval_ratio once that is the wider gap (one_pass)."""
        steps, step = [0], self.eval_every
        while step < last:
            steps.append(step)
            wider = round(step * self.eval_ratio) if self.protocol == "one_pass" else 0
            step = max(step + self.eval_every, wider)
        return [*steps, last] if last > 0 else steps
