"""What a sweep's MLflow record logs of its summary, built here from the statistics and the report
and handed to the store as its plain values (services.store.logged): the store knows neither."""

import math
from dataclasses import asdict

from services.report import figures
from services.report import text as report
from services.results import CellResult
from services.spec import Sweep
from services.stats import statistics
from services.stats.rows import CellRow, Summary
from services.store.logged import CellLog, SummaryLog, SweepLog


def fitted(summary: Summary) -> dict[str, float]:
    """Each fitted N* exponent of a summary, its forms' fits and the registered statistics' own metrics."""
    values = {
        f"{key}.{group}": fit.value
        for key in ("exponent", "exponent_difference")
        for group, fit in getattr(summary, key).items()
        if fit.value is not None
    }
    values |= {
        f"{criterion}.{key}.{group}": fit.value
        for criterion, fits in summary.criteria.items()
        for key in ("exponent", "exponent_difference")
        for group, fit in getattr(fits, key).items()
        if fit.value is not None
    }
    values |= {
        f"forms.{group}.{fit.key}.{name}": value
        for group, forms in summary.forms.items()
        for fit in forms.fits
        for name, value in (("k", fit.k.value), ("c", fit.c.value), ("held_out", fit.held_out))
        if value is not None and math.isfinite(value)
    }
    return values | {name: value for unit in statistics() for name, value in unit.metrics(summary).items()}


def summary_log(sweep: Sweep, summary: Summary, cells: list[CellResult]) -> SummaryLog:
    """What the parent run logs of a summary of ``cells`` (the sweep so far, or whole): fits, JSON, figures."""
    return SummaryLog(fitted(summary), summary.to_dict(), figures.figures(sweep, summary, cells))


def cell_log(row: CellRow) -> CellLog:
    """What a cell's child run logs of its summary row; a tuned cell's selection with its window as JSON."""
    window = asdict(row.window) if row.window else None
    tuning = asdict(row.tuning) | {"window": window} if row.tuning else None
    by_criterion = {name: c.n_star for name, c in row.criteria.items() if c.n_star is not None}
    return CellLog(by_criterion, row.difficulty, row.premises, tuning)


def sweep_log(sweep: Sweep, summary: Summary, cells: list[CellResult]) -> SweepLog:
    """What a sweep's final record logs of its report: the parent's, its Markdown table, each cell's."""
    parent = summary_log(sweep, summary, cells)
    view = report.view(summary, list(parent.figures))
    cell_logs = [cell_log(r) for r in summary.cells]
    return SweepLog(parent, report.markdown(view), cell_logs, view.to_dict())
