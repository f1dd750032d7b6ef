"""The readers of what an older vitsweep wrote that the bottom layers use (results, spec), each
with the date its format changed: plain functions on the saved dicts that return them as today's
code reads them (no imports). Drop one when no store of its age is left to read."""


def record_row(row: dict) -> dict:
    """A model record (a table row, or vit_core's dict): before 2026-11-23 its seed was ``seeds``."""
    row = dict(row)
    if "seeds" in row:
        row["seed"] = row.pop("seeds")
    return row


def cell_result(saved: dict) -> dict:
    """A cell of a saved SweepResult: before 2026-11-23 it had no ``started_at`` and ``ended_at``."""
    return {"started_at": None, "ended_at": None} | saved


def sweep_result(saved: dict) -> dict:
    """A saved SweepResult: before 2026-11-24 it had no ``slots`` (0: not known)."""
    return {"slots": 0} | saved


def search_section(raw: dict, fields) -> dict:
    """A recorded spec's search section with only its own mode's ``fields``: sweeps recorded before
    the modes were classes of their own (2026-11-22) hold every mode's."""
    return {k: v for k, v in raw.items() if k in fields}


def trial_config(config: dict) -> dict:
    """A Ray Tune trial's config (services.search.packs.TrialConfig): before 2026-12-06 its pack and
    a searcher's sampled values and resolved cell were keys of the config itself, not of ``trial``."""
    return config.get("trial", config)
