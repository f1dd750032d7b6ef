"""Where a sweep is in MLflow's UI (`run`, `report` and `ui` print it): its runs in the
model-training runs table, as a view saved in its experiment, and its parent run."""

import json
from typing import NamedTuple
from urllib.parse import urlencode

from mlflow.entities import Run

from services.results import Cell
from services.store.client import client_of
from services.store.tracking import CELL_TAG, SWEEP_TAG, child_runs, parent_run

# MLflow 3.17's UI opens an experiment in the GenAI view unless the URL (or the browser's last
# choice) asks for the model-training one; the experiment's kind tag alone does not switch it
TRAINING_VIEW = {"workflowType": "machine_learning"}
# A view of the runs table that a link opens, as the UI's Share button saves one: its state as JSON
# in an experiment tag of this prefix, the rest of the tag's name the link's viewStateShareKey
SHARED_VIEW_PREFIX, SHARE_KEY = "mlflow.sharedViewState.", "viewStateShareKey"


class Pages(NamedTuple):
    """Where a sweep is in MLflow's UI: its runs, in the model-training runs table, and its parent run."""

    sweep_id: str
    runs: str
    parent: str


def ui_pages(tracking_uri: str, ui_url: str, sweep_id: str | None = None) -> Pages:
    """The pages of a sweep (the latest when ``sweep_id`` is None, a running sweep's included) in
    the UI at ``ui_url``, in its model-training view; LookupError: none. The runs page is a view
    saved in the experiment under the parent's run id (its runs as they are now), as the UI's
    Share button saves one, for the link to open."""
    client = client_of(tracking_uri)
    parent = parent_run(client, tracking_uri, sweep_id, whole=False)
    experiment, run_id = parent.info.experiment_id, parent.info.run_id
    view = _runs_view(parent, child_runs(client, experiment, run_id))
    client.set_experiment_tag(experiment, SHARED_VIEW_PREFIX + run_id, json.dumps(view))
    runs = f"{ui_url.rstrip('/')}/#/experiments/{experiment}/runs"
    return Pages(
        parent.data.tags[SWEEP_TAG],
        f"{runs}?{urlencode({SHARE_KEY: run_id, **TRAINING_VIEW})}",
        f"{runs}/{run_id}?{urlencode(TRAINING_VIEW)}",
    )


def _runs_view(parent: Run, children: list[Run]) -> dict:
    """The runs table of one sweep as the UI's view state: its parent and children alone, one row
    each by N* (any sort but by start time lists children beside their parent, not folded under
    it), with each cell's model, axis values and N* as columns."""
    runs = ", ".join(f"'{run.info.run_id}'" for run in [parent, *children])
    cells = [Cell.from_key(child.data.tags[CELL_TAG]) for child in children if CELL_TAG in child.data.tags]
    axes = dict.fromkeys(axis for cell in cells for axis in cell.values)
    return {
        "searchFilter": f"attributes.run_id IN ({runs})",
        "orderByKey": "metrics.`n_star`",
        "orderByAsc": True,
        "selectedColumns": [f"params.`{name}`" for name in ("model", *axes)] + ["metrics.`n_star`"],
    }
