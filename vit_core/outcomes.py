"""A trained model's outcome class and the per-N summary of a pack's records (numpy only, no torch:
the services read results with it without loading torch)."""

from enum import StrEnum

import numpy as np


class Outcome(StrEnum):
    """A trained model's outcome class (``outcome`` says when each applies). A str: records keep
    the plain names ("succeeded", ...) in JSON, tables and MLflow."""

    SUCCEEDED = "succeeded"
    FAILED_CONVERGED = "failed_converged"
    FAILED = "failed"
    NOT_CONVERGED = "not_converged"
    DIVERGED = "diverged"


OUTCOMES = tuple(Outcome)
COUNTED = {Outcome.SUCCEEDED: 1.0, Outcome.FAILED_CONVERGED: 0.0, Outcome.FAILED: 0.0}  # what N* counts, as 1 or 0


def outcome(diverged: bool, train_error: float, success: bool) -> Outcome:
    """A multi-pass model's outcome class: succeeded (zero test error); failed_converged (zero
    training error, test error above zero: it fits its data and does not generalise);
    not_converged (training error above 0 when its step budget ran out: says nothing about N);
    diverged (its loss or parameters stopped being finite). A one-pass model at N is succeeded
    (zero test error from N on), failed (its N samples, which were also its steps, were not
    enough) or diverged. Succeeded and both failures measure sample complexity."""
    if diverged:
        return Outcome.DIVERGED
    if success:
        return Outcome.SUCCEEDED
    return Outcome.FAILED_CONVERGED if train_error == 0 else Outcome.NOT_CONVERGED


def summarize_by_n(records: list[dict]) -> list[dict]:
    """Per training-set size N, ascending: models; the success rate among the models that count
    (succeeded / (succeeded + failed_converged + failed); None when none does); the count of each
    outcome class; mean test error; median iterations to zero test error (over the models that
    reached it); settled and diverged counts; mean final attention mass. ``records`` as
    PackResult.records() makes them."""
    rows = []
    for n in sorted({r["n_train"] for r in records}):
        mine = [r for r in records if r["n_train"] == n]
        reached = [r["iterations_to_zero"] for r in mine if r["iterations_to_zero"] >= 0]
        counts = {name: sum(r["outcome"] == name for r in mine) for name in OUTCOMES}
        counted = sum(counts[name] for name in COUNTED)
        rows.append(
            {
                "n": n,
                "models": len(mine),
                "success_rate": counts[Outcome.SUCCEEDED] / counted if counted else None,
                **counts,
                "mean_test_error": _mean_or_none(np.array([r["test_error"] for r in mine])),
                "median_iterations_to_zero": float(np.median(reached)) if reached else None,
                "settled": int(sum(r["settled"] for r in mine)),
                "mean_attention_mass": _mean_or_none(np.array([r["attention_mass"] for r in mine])),
            }
        )
    return rows


def _mean_or_none(values: np.ndarray) -> float | None:
    """Mean of the finite values, or None when there are none."""
    finite = values[np.isfinite(values)]
    return float(finite.mean()) if len(finite) else None
