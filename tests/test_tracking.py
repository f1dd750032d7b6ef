"""The MLflow module writes and reads one schema: a sweep logged and read back is the same sweep."""

import numpy as np
import pytest
from conftest import record_synthetic_sweep
from mlflow.tracking import MlflowClient

from services import tracking
from services.summary import summarize


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """One synthetic sweep logged for the module (a test that renames runs leaves the cells' tags)."""
    return record_synthetic_sweep(tmp_path_factory.mktemp("store"))


def test_a_sweep_read_back_from_mlflow_is_the_sweep_that_was_logged(recorded):
    spec, result, uri, _ = recorded
    read_spec, sweep_id, cells = tracking.load_sweep(uri, None)
    assert read_spec == spec and sweep_id == result.sweep_id
    assert [c.cell for c in cells] == [c.cell for c in result.cells]  # spec order, every cell
    for read, logged in zip(cells, result.cells, strict=True):
        np.testing.assert_equal([r.as_dict() for r in read.records], [r.as_dict() for r in logged.records])
        assert read.failures == logged.failures and read.curve_parts == logged.curve_parts
    assert summarize(read_spec, sweep_id, cells) == summarize(spec, result.sweep_id, result.cells)


def test_cells_are_found_by_their_tag_not_by_their_run_name(recorded):
    """A run renamed in the UI (or a label that prints a value differently) still reads back."""
    spec, result, uri, parent = recorded
    client = MlflowClient(uri)
    experiment = client.get_run(parent).info.experiment_id
    for child in client.search_runs([experiment], f"tags.{tracking.PARENT_TAG} = '{parent}'"):
        client.set_tag(child.info.run_id, "mlflow.runName", f"renamed {child.info.run_id}")
    _, _, cells = tracking.load_sweep(uri, result.sweep_id)
    assert [c.cell for c in cells] == spec.cells
    assert [len(c.records) for c in cells] == [len(c.records) for c in result.cells]


def test_recording_the_same_sweep_again_finds_the_first_record(recorded, tmp_path):
    from services import figures, report

    spec, result, uri, parent = recorded
    summary = summarize(spec, result.sweep_id, result.cells)
    again = tracking.record_sweep(
        spec, result, uri, tmp_path, "", summary, figures.figures(spec, summary, result.cells), report.markdown(summary)
    )
    assert again == tracking.Record(parent, True)
    client = MlflowClient(uri)
    assert len(client.search_runs([client.get_run(parent).info.experiment_id])) == 1 + len(spec.cells)


def test_an_unknown_sweep_is_a_lookup_error(recorded):
    with pytest.raises(LookupError, match="no sweep nope"):
        tracking.load_sweep(recorded[2], "nope")
