"""vitsweep's Python API, for notebooks: a recorded sweep as pandas DataFrames.

    import vitsweep
    sweep = vitsweep.load_sweep()               # the latest sweep under ./runs
    sweep.cells[["cell", "n_star", "n_star_ci_lo", "n_star_ci_hi"]]

The command line (`vitsweep run`, `report`, `export`, `compare`, ...) is ``services.app.cli``.
"""

from pathlib import Path

from services.app import recorded
from services.report.frames import SweepFrames
from services.store.uris import embedded_uri

__all__ = ["SweepFrames", "load_sweep"]


def load_sweep(sweep_id: str | None = None, home: str | Path = "runs", tracking_uri: str | None = None) -> SweepFrames:
    """A recorded sweep read from MLflow alone: ``.models``, a DataFrame with one row per model
    record (its cell's values, N, seed, outcome, test error, steps to zero, ...), and ``.cells``,
    one row per cell (N* with its 95% CI and bracket, the effective alpha*, T, T*, ...), the
    numbers `vitsweep report` prints. ``sweep_id``: None for the latest sweep in the store;
    ``tracking_uri``: an MLflow store or server, else the embedded SQLite store under ``home``.
    Raises LookupError when the store has no such sweep."""
    return recorded.frames(tracking_uri or embedded_uri(Path(home)), sweep_id)
