"""A sweep as two pandas DataFrames, for notebooks and for `vitsweep export`: one row per model
record, one row per cell. Built from what the report computes, so a cell's N* here is the
report's. No I/O.
"""

from typing import NamedTuple

import pandas as pd

from services.results import CellResult

CELL_COLUMNS = (  # CellRow fields that are one value each (per-N rates, outcomes and per-seed lists stay out)
    "alpha_effective",
    "lr",
    "trainings",
    "failed",
    "n_star",
    "n_star_known",
    "bracket_lo",
    "monotone",
    "steps_to_zero",
    "t_star",
    "not_converged_share",
    "flagged",
    "protocol",
    "batch_size",
)


class SweepFrames(NamedTuple):
    """A recorded sweep: its id, a DataFrame of per-model records and one of per-cell results.

    ``models``: one row per record (one pass: per seed and evaluated N), columns ``sweep_id``,
    ``cell``, ``model``, the cell's axis values, then the record's fields (``n_train``, ``seed``,
    ``outcome``, ``success``, ``test_error``, ``iterations_to_zero``, ... and every metric).
    ``cells``: one row per cell, columns ``sweep_id``, ``cell``, ``model``, the axis values, then
    ``n_star`` with ``n_star_ci_lo``/``n_star_ci_hi`` (95% bootstrap CI), ``bracket_lo``,
    ``alpha_effective`` (what the exponent is fitted against), ``steps_to_zero``, ``t_star`` and
    the rest of the report's table."""

    sweep_id: str
    models: pd.DataFrame
    cells: pd.DataFrame


def models_frame(sweep_id: str, cells: list[CellResult]) -> pd.DataFrame:
    """One row per model record of the sweep's ``cells``."""
    records = [
        {"sweep_id": sweep_id, "cell": c.cell.label, "model": c.cell.model, **c.cell.values, **r.as_dict()}
        for c in cells
        for r in c.records
    ]
    return pd.DataFrame(records)


def cells_frame(sweep_id: str, rows: list[dict]) -> pd.DataFrame:
    """One row per cell, from the summary's cell rows as JSON holds them (Summary.to_dict()["cells"])."""
    out = []
    for row in rows:
        lo, hi = row["n_star_ci95"] or (None, None)
        out.append(
            {"sweep_id": sweep_id, "cell": row["label"], "model": row["model"], **row["values"]}
            | {name: row[name] for name in CELL_COLUMNS}
            | {"n_star_ci_lo": lo, "n_star_ci_hi": hi}
        )
    return pd.DataFrame(out).convert_dtypes()  # N*: Int64
