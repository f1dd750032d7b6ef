"""What a sweep's MLflow runs log of its summary, as plain values the caller builds (services.app.logs):
the store knows no statistics or report, only what it is handed to log."""

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from vit_core.family import Premise

if TYPE_CHECKING:
    from matplotlib.figure import Figure


class SummaryLog(NamedTuple):
    """What the parent run logs of a summary (the sweep so far, or whole): its fitted metrics
    (name -> value, step 0), its JSON (Summary.to_dict) and its figures (artifact name -> figure)."""

    metrics: dict[str, float]
    summary: dict
    figures: dict[str, "Figure"]


@dataclass(frozen=True)
class CellLog:
    """What a cell's child run logs of its summary row: N* and its 95% CI's ends at the headline
    criterion and under each one it has (metric name -> value: n_star, n_star.ci95_lo, ...,
    n_star.stable, n_star.stable.ci95_hi), its oracle rules' difficulty, the theory's premises
    checked on it and, tuned, the selection with its stability window (tuning.json, as JSON; its
    ``chosen`` setting as params)."""

    n_star: dict[str, float] = field(default_factory=dict)
    difficulty: dict[str, float] = field(default_factory=dict)
    premises: list[Premise] = field(default_factory=list)
    tuning: dict | None = None


@dataclass(frozen=True)
class SweepLog:
    """What a sweep's final record logs of its report: the parent's summary, its Markdown table,
    each cell's log, in the order of the result's cells, and the report as text (what `report`
    prints back without recomputing)."""

    parent: SummaryLog
    markdown: str
    cells: list[CellLog]
    view: dict  # services.report.text.ReportView.to_dict()
