"""A whole sweep's report as its run recorded it at its end (services.store.tracking's names): read
back in about a second, where recomputing the summary and redrawing the figures takes tens."""

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from mlflow.tracking import MlflowClient

from services.store import provenance
from services.store.client import client_of
from services.store.tracking import (
    REPORT_VIEW,
    RESOLVED_SPEC_FILE,
    SUMMARY_JSON,
    SWEEP_TAG,
    artifact_text,
    parent_run,
)


class RecordedReport(NamedTuple):
    """What a sweep's run recorded of its report: the view (as the caller's reader read it: a
    services.report.text.ReportView), the summary (Summary.to_dict), and the folder the view's
    figures were downloaded into."""

    sweep_id: str
    view: Any
    summary: dict
    folder: Path


class _Recorded(NamedTuple):
    client: MlflowClient
    run_id: str
    sweep_id: str


def _recorded(tracking_uri: str, sweep_id: str | None) -> _Recorded | None:
    """A whole sweep's parent run, where it recorded its report's view at its end (then its summary
    JSON is the final one, in today's form); None else. LookupError: no such sweep."""
    client = client_of(tracking_uri)
    parent = parent_run(client, tracking_uri, sweep_id)
    names = {a.path for a in client.list_artifacts(parent.info.run_id) if not a.is_dir}
    if REPORT_VIEW not in names or SUMMARY_JSON not in names:
        return None
    return _Recorded(client, parent.info.run_id, parent.data.tags[SWEEP_TAG])


def recorded_report(
    tracking_uri: str, sweep_id: str | None, folder_of: Callable[[str], Path], read_view: Callable[[dict], Any]
) -> RecordedReport | None:
    """A whole sweep's report as recorded: its view as ``read_view`` reads the recorded dict, the
    summary read and the view's figures (``figures``) downloaded into ``folder_of(its sweep id)``;
    None, with nothing downloaded, where its run recorded no view or ``read_view`` gives None (a
    view of another format)."""
    found = _recorded(tracking_uri, sweep_id)
    if found is None:
        return None
    recorded = json.loads(artifact_text(found.client, found.run_id, REPORT_VIEW))
    view = read_view(recorded)
    if view is None:
        return None
    summary = json.loads(artifact_text(found.client, found.run_id, SUMMARY_JSON))
    folder = folder_of(found.sweep_id)
    folder.mkdir(parents=True, exist_ok=True)
    for name in recorded.get("figures", []):
        found.client.download_artifacts(found.run_id, name, dst_path=str(folder))
    return RecordedReport(found.sweep_id, view, summary, folder)


def recorded_summary(tracking_uri: str, sweep_id: str | None) -> tuple[str, dict] | None:
    """(sweep id, Summary.to_dict) as a whole sweep's run recorded it at its end; None where its run
    recorded no view."""
    found = _recorded(tracking_uri, sweep_id)
    if found is None:
        return None
    return found.sweep_id, json.loads(artifact_text(found.client, found.run_id, SUMMARY_JSON))


class RecordedRun(NamedTuple):
    """Where a whole sweep's results came from, as its parent run recorded it: the git commit and
    whether its checkout had uncommitted changes, the hash of vit_core, the machine its driver ran on
    (None: recorded before vitsweep recorded it, or not known there), its end (ms since the epoch),
    wall time (s) and trainings, and its spec as resolved (YAML)."""

    sweep_id: str
    commit: str | None
    dirty: bool | None
    vit_core_hash: str | None
    machine: str | None
    ended_ms: int | None
    wall_s: float | None
    trainings: int | None
    resolved_spec: str


def recorded_run(tracking_uri: str, sweep_id: str | None) -> RecordedRun:
    """A whole sweep's provenance and size as its parent run recorded them (the latest sweep when
    ``sweep_id`` is None, the latest of the spec so named); LookupError: no such sweep."""
    client = client_of(tracking_uri)
    parent = parent_run(client, tracking_uri, sweep_id)
    tags, metrics = parent.data.tags, parent.data.metrics
    return RecordedRun(
        tags[SWEEP_TAG],
        tags.get(provenance.COMMIT_TAG),
        {"true": True, "false": False}.get(tags.get(provenance.DIRTY_TAG, "")),
        tags.get(provenance.SCIENCE_TAG),
        tags.get(provenance.MACHINE_TAG),
        parent.info.end_time,
        metrics.get("wall_s"),
        int(metrics["trainings"]) if "trainings" in metrics else None,
        artifact_text(client, parent.info.run_id, RESOLVED_SPEC_FILE),
    )
