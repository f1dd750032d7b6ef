"""What a sweep's MLflow record logs of its summary, built here from the statistics and the report
and handed to the store as its plain values (services.store.logged): the store knows neither."""

import math
from dataclasses import asdict

from services.report import figures
from services.report import text as report
from services.results import CellResult
from services.spec import Sweep
from services.stats import statistics
from services.stats.rows import CellRow, CriterionRow, Summary
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
    values |= _answer_metrics(summary)
    return values | {name: value for unit in statistics() for name, value in unit.metrics(summary).items()}


def _answer_metrics(summary: Summary) -> dict[str, float]:
    """The primary's statements as metrics: each model's exponent, their difference and the ratio of
    N* at each value of the scaling field, each with its CI's ends (answer.*)."""
    if summary.answer is None:
        return {}
    p, out = summary.answer.primary, {}
    field = summary.scaling.field
    estimates = {f"answer.k.{m}": e for m, e in p.exponents.items()}
    if p.difference is not None:
        estimates[f"answer.k.{p.models[1]}_minus_{p.models[0]}"] = p.difference
    estimates |= {f"answer.ratio.{field}_{point.value:g}": point.ratio for point in p.ratios}
    later = "_minus_".join(reversed(p.models))
    estimates |= {
        f"answer.regime.{regime.label.replace(' ', '.')}.k.{later}": regime.statements.difference
        for regime in summary.answer.regimes
        if regime.statements.difference is not None
    }
    for name, e in estimates.items():
        ends = dict(zip(("ci95_lo", "ci95_hi"), e.ci95 or []))
        out |= {name: e.value} | {f"{name}.{end}": value for end, value in ends.items() if value is not None}
    return {name: value for name, value in out.items() if value is not None}


def summary_log(sweep: Sweep, summary: Summary, cells: list[CellResult]) -> SummaryLog:
    """What the parent run logs of a summary of ``cells`` (the sweep so far, or whole): fits, JSON, figures."""
    return SummaryLog(fitted(summary), summary.to_dict(), figures.figures(sweep, summary, cells))


def cell_log(row: CellRow) -> CellLog:
    """What a cell's child run logs of its summary row; a tuned cell's selection with its window as JSON."""
    window = asdict(row.window) if row.window else None
    tuning = asdict(row.tuning) | {"window": window} if row.tuning else None
    headline = CriterionRow(row.n_star, row.n_star_known, row.n_star_ci95 or [None, None], row.bracket_lo)
    n_star = _n_star_metrics("n_star", headline)
    for name, c in row.criteria.items():
        n_star |= _n_star_metrics(f"n_star.{name}", c)
    return CellLog(n_star, row.difficulty, row.premises, tuning)


def _n_star_metrics(name: str, row: CriterionRow) -> dict[str, float]:
    """N* and its CI's ends as metrics, those known (an open end or a censored N* has none)."""
    lo, hi = row.ci95 or [None, None]
    values = {name: row.n_star, f"{name}.ci95_lo": lo, f"{name}.ci95_hi": hi}
    return {key: value for key, value in values.items() if value is not None}


def sweep_log(sweep: Sweep, summary: Summary, cells: list[CellResult]) -> SweepLog:
    """What a sweep's final record logs of its report: the parent's, its Markdown table, each cell's."""
    parent = summary_log(sweep, summary, cells)
    view = report.view(summary, list(parent.figures))
    cell_logs = [cell_log(r) for r in summary.cells]
    return SweepLog(parent, report.markdown(view), cell_logs, view.to_dict())
