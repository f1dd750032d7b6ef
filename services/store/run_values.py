"""The params and metrics of a sweep's MLflow runs: the parent's (the spec's values, and the fitted
metrics its caller hands it: store.logged) and a cell's per-N metrics (step = N), with the timestamp
MLflow orders them by. services.store.tracking logs them; services.store.live too, mid-sweep."""

import time

from mlflow.entities import Metric

from services.results import SweepResult
from services.spec import Sweep
from vit_core.outcomes import OUTCOMES

PER_N = ("success_rate", "mean_test_error", "median_iterations_to_zero", "settled", "mean_attention_mass", *OUTCOMES)


def now_ms() -> int:
    """A metric's timestamp: MLflow shows, per metric, the value logged last at its largest step
    (by timestamp), so a value logged again mid-sweep or at the end must carry the present."""
    return int(time.time() * 1000)


def _flat(prefix: str, values: dict) -> dict:
    return {f"{prefix}.{k}": v for k, v in values.items()}


def sweep_params(sweep: Sweep) -> dict:
    """The parent run's params: the spec's own values, each model's own grid, the first cell's
    configs (less what the axes sweep) and the search settings."""
    params = {
        "name": sweep.name,
        "family": sweep.family.name,
        "models": ",".join(sweep.models),
        "n_train": ",".join(map(str, sweep.spec.n_train or [])),
        "seeds": sweep.seeds,
        "seed_start": sweep.seed_start,
        "success_rate_p": sweep.success_rate,
        **_flat("axes", sweep.spec.axes.model_dump(exclude_none=True)),
    }
    for model, rule in sweep.spec.scaling_rules.items():
        params |= _flat(f"{sweep.family.scaling.rule}.{model}", rule.model_dump())
    for model, own in sweep.spec.per_model.items():
        params |= _flat(f"per_model.{model}.axes", own.model_dump(exclude_none=True).get("axes", {}))
        params |= {f"per_model.{model}.n_train": ",".join(map(str, own.n_train))} if own.n_train else {}
        params |= (
            _flat(f"per_model.{model}.training", own.training.model_dump(exclude_none=True)) if own.training else {}
        )
    for section, cfg in zip(("data", "model", "training"), sweep.resolved_cell(sweep.cells[0]).configs):
        params |= {k: v for k, v in _flat(section, vars(cfg)).items() if k.split(".", 1)[1] not in sweep.swept}
    params.pop("model.kind")
    return params | _flat("search", sweep.search.params())


def sweep_metrics(result: SweepResult, fitted: dict[str, float]) -> list[Metric]:
    """The parent run's metrics: trainings, wall time, failed cells and the summary's ``fitted``
    metrics (each N* exponent and the registered statistics' own, as SummaryLog holds them)."""
    failed, now = sum(bool(c.failures) for c in result.cells), now_ms()
    metrics = [
        Metric("trainings", result.trainings, now, 0),
        Metric("wall_s", result.wall_s, now, 0),
        *([Metric("busy_fraction", result.busy_fraction, now, 0)] if result.busy_fraction is not None else []),
        *([Metric("estimated_wall_s", result.estimated_s, now, 0)] if result.estimated_s is not None else []),
        Metric("failed_cells", failed, now, 0),
    ]
    return metrics + fitted_metrics(fitted)


def fitted_metrics(fitted: dict[str, float]) -> list[Metric]:
    """A summary's fitted metrics (name -> value) at step 0, named as MLflow accepts."""
    now = now_ms()
    return [Metric(metric_name(name), value, now, 0) for name, value in fitted.items()]


def metric_name(name: str) -> str:
    """A name MLflow accepts (no '='): "exponent_difference.cnn - vit" -> "exponent_difference.cnn_minus_vit"."""
    return name.replace(" - ", "_minus_").replace("=", "_")


def per_n_metrics(rows: list[dict]) -> list[Metric]:
    """A cell's per-N metrics (step = N: the success-rate curve) from its rows (CellResult.by_n)."""
    now = now_ms()
    return [Metric(name, float(row[name]), now, row["n"]) for row in rows for name in PER_N if row[name] is not None]


def changed(metrics: list[Metric], logged: dict[tuple[str, int], float]) -> list[Metric]:
    """The metrics whose value differs from what is logged at their step (to the 12th digit)."""
    return [
        m
        for m in metrics
        if (m.key, m.step) not in logged or abs(logged[m.key, m.step] - m.value) > 1e-12 * max(1.0, abs(m.value))
    ]
