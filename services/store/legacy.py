"""The readers of MLflow records written by an older vitsweep, each with the date its format
changed: plain functions on what MLflow returns, as today's tracking module reads it. Drop one
when no record of its age is left to read."""


def cell_of_run(tags: dict, run_name: str, cell_tag: str, by_label: dict):
    """The cell of a child run: its ``cell_tag`` where it has one; a run recorded before that tag
    existed (2026-11-23) is matched by its name, the cell's label (``by_label``: label -> cell)."""
    return None if cell_tag in tags else by_label[run_name]


def whole_record(marker: str | None, status: str) -> bool:
    """Whether a sweep's parent run holds its whole record: its record tag says so; a parent
    logged before sweeps were recorded live (2026-11-25) has no such tag, and was whole once its
    status left RUNNING (set last)."""
    return marker == "whole" if marker is not None else status != "RUNNING"
