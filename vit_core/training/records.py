"""What a pack's training leaves: each model's curves at the evaluation steps, its final values and
outcome per N (PackResult), collected from a shrinking pack (_Recorder)."""

from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor

from vit_core.outcomes import Outcome, outcome, summarize_by_n
from vit_core.train_config import TrainConfig

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
    streak_start: np.ndarray  # first evaluated step > 0 of its last run of zero test error; -1 if none
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

    def at_zero(self, ids: Tensor) -> np.ndarray:
        """(len(ids),) bool: which of the models ``ids`` are in a run of zero test error (begun after step 0)."""
        return self.streak_start[ids.numpy()] > 0

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
            streak_start=self.streak_start,
            final=final,
            eval_steps=np.asarray(self.steps),
            curves={name: np.stack(rows) for name, rows in self.rows.items()},
            wall_s=wall_s,
            snapshots=self.snapshots,
            protocol=train.protocol,
            batch_size=train.batch_size,
            stability_window=train.stability_window if train.protocol == "one_pass" else 0.0,
        )
