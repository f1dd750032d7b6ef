"""The MLflow module writes and reads one schema: a sweep logged and read back is the same sweep."""

import json
import tempfile

import numpy as np
import pandas as pd
import pytest
from conftest import record_synthetic_sweep, synthetic_sweep
from mlflow.tracking import MlflowClient

from services.app.logs import sweep_log
from services.results import SweepResult, as_logged
from services.stats.summarize import summarize
from services.store import tracking


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """One synthetic sweep logged for the module (a test that renames runs leaves the cells' tags)."""
    return record_synthetic_sweep(tmp_path_factory.mktemp("store"))


def test_a_sweep_read_back_from_mlflow_is_the_sweep_that_was_logged(recorded, tmp_path, monkeypatch):
    spec, result, uri, _ = recorded
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where MLflow downloads artifacts
    read_spec, sweep_id, cells = tracking.load_sweep(uri, None)
    assert list(tmp_path.iterdir()) == []  # every download removed once read
    assert read_spec.spec == spec.spec and sweep_id == result.sweep_id
    assert [c.cell for c in cells] == [c.cell for c in result.cells]  # spec order, every cell
    for read, logged in zip(cells, result.cells, strict=True):
        np.testing.assert_equal([r.as_dict() for r in read.records], [r.as_dict() for r in logged.records])
        assert read.failures == logged.failures and read.curve_parts == logged.curve_parts
    assert summarize(read_spec, sweep_id, cells) == summarize(spec, result.sweep_id, result.cells)


def test_runs_span_the_sweep_and_its_cells_and_the_experiment_is_a_training_one(recorded):
    """The parent run lasts as long as the sweep ran, each child as its cell's packs, not as long as
    recording them took; MLflow's UI files the experiment under model training."""
    _, result, uri, parent = recorded
    client = MlflowClient(uri)
    run = client.get_run(parent).info
    assert (run.start_time, run.end_time) == (int(result.started_at * 1000), int(result.ended_at * 1000))
    children = client.search_runs([run.experiment_id], f"tags.{tracking.PARENT_TAG} = '{parent}'")
    spans = {c.data.tags[tracking.CELL_TAG]: (c.info.start_time, c.info.end_time) for c in children}
    assert spans == {c.cell.key: (int(c.started_at * 1000), int(c.ended_at * 1000)) for c in result.cells}
    kind = client.get_experiment(run.experiment_id).tags[tracking.EXPERIMENT_KIND_TAG]
    assert kind == tracking.TRAINING_KIND == "custom_model_development"


def test_cells_are_found_by_their_tag_not_by_their_run_name(recorded):
    """A run renamed in the UI (or a label that prints a value differently) still reads back."""
    spec, result, uri, parent = recorded
    client = MlflowClient(uri)
    experiment = client.get_run(parent).info.experiment_id
    for child in client.search_runs([experiment], f"tags.{tracking.PARENT_TAG} = '{parent}'"):
        client.set_tag(child.info.run_id, "mlflow.runName", f"renamed {child.info.run_id}")
    _, _, cells = tracking.load_sweep(uri, result.sweep_id)
    assert [c.cell for c in cells] == list(spec.cells)
    assert [len(c.records) for c in cells] == [len(c.records) for c in result.cells]


def test_recording_the_same_sweep_again_finds_the_first_record(recorded, tmp_path):
    spec, result, uri, parent = recorded
    summary = summarize(spec, result.sweep_id, result.cells)
    again = tracking.record_sweep(spec, result, uri, tmp_path, "", sweep_log(spec, summary, result.cells))
    assert again == tracking.Record(parent, True)
    client = MlflowClient(uri)
    assert len(client.search_runs([client.get_run(parent).info.experiment_id])) == 1 + len(spec.cells)


def test_an_unknown_sweep_is_a_lookup_error(recorded):
    with pytest.raises(LookupError, match="no sweep nope"):
        tracking.load_sweep(recorded[2], "nope")


def test_an_experiment_made_before_the_kind_tag_gets_it_and_a_chosen_kind_stays(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    old = client.create_experiment("old")
    chosen = client.create_experiment("chosen", tags={tracking.EXPERIMENT_KIND_TAG: "genai_development"})
    assert tracking._experiment_id(client, "old", tmp_path, True) == old
    assert tracking._experiment_id(client, "chosen", tmp_path, True) == chosen
    assert client.get_experiment(old).tags[tracking.EXPERIMENT_KIND_TAG] == tracking.TRAINING_KIND
    assert client.get_experiment(chosen).tags[tracking.EXPERIMENT_KIND_TAG] == "genai_development"


def test_a_saved_sweep_result_reads_back_whole_with_its_times():
    _, result = synthetic_sweep()
    again = SweepResult.from_dict(json.loads(result.to_json()))
    assert again.to_json() == result.to_json()
    assert [(c.started_at, c.ended_at) for c in again.cells] == [(c.started_at, c.ended_at) for c in result.cells]
    assert again.started_at == result.started_at and again.ended_at is not None


def test_a_record_keeps_each_number_as_mlflow_s_table_stores_it():
    """ModelRecord.from_dict rounds as MLflow's log_table writes (pandas' to_json): 10 decimal
    places, but 10 significant digits for the tiny and the huge, which plain rounding would zero."""
    values = [2.4945877041234e-21, -3.3e-18, 0.474999994039535, 1.23456789012e-9, 123.456789012345, 1e17 + 12345, 0.0]
    spread = np.random.default_rng(0).uniform(-1, 1, 2000) * 10.0 ** np.random.default_rng(1).uniform(-25, 20, 2000)
    values += [float(v) for v in spread]  # Python floats, as from_dict reads them
    stored = [
        row[0] for row in json.loads(pd.DataFrame({"x": values}).to_json(orient="split", double_precision=10))["data"]
    ]
    assert [as_logged(v) for v in values] == stored
    assert as_logged(2.4945877041234e-21) == 2.494587704e-21  # not 0.0
