"""A sweep in MLflow, written and read back with one schema: one parent run per sweep, one child
run per cell (found again by its ``vitsweep.cell`` tag), the names below.

Everything is written through ``MlflowClient`` in batches (``log_batch``, one table and one figure
per run): each call to a tracking server costs tens of milliseconds, so per-model or per-step calls
would dominate a sweep. The embedded default is a SQLite store under the sweep home.
"""

import hashlib
import json
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import yaml
from mlflow.entities import Dataset, DatasetInput, InputTag, Metric, Param, Run, RunTag
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import RESOURCE_ALREADY_EXISTS, ErrorCode
from mlflow.tracking import MlflowClient

from services import legacy
from services.plotting import SAVE
from services.results import Cell, CellResult, ModelRecord, SweepResult
from services.spec import Sweep, spec_from_dict
from services.store import provenance, run_values
from services.store.client import client_of
from services.store.logged import CellLog, SummaryLog, SweepLog
from services.store.uris import redact

if TYPE_CHECKING:
    from matplotlib.figure import Figure

PARAMS_PER_BATCH, METRICS_PER_BATCH = 100, 1000  # MLflow's limits per log_batch request

# The schema: what vitsweep writes, and reads back
SWEEP_TAG, CELL_TAG, MODEL_TAG, FAILURES_TAG = (
    "vitsweep.sweep_id",
    "vitsweep.cell",
    "vitsweep.model",
    "vitsweep.failures",
)
STORAGE_TAG, PARENT_TAG = "vitsweep.ray_storage", "mlflow.parentRunId"
DATASET_CONTEXT_TAG = "mlflow.data.context"  # a run input's role, as mlflow.log_input tags it
# A run's record: "live" while the sweep runs (or after it stopped), "whole" once its end is logged
RECORD_TAG, LIVE, WHOLE = "vitsweep.record", "live", "whole"
SPEC_FILE, RESOLVED_SPEC_FILE, MODELS_FILE, CURVES_FILE = (
    "spec.yaml",
    "resolved_spec.yaml",
    "models.json",
    "curves.json",
)
SUMMARY_MD, SUMMARY_JSON, TUNING_FILE = "summary.md", "summary.json", "tuning.json"
REPORT_VIEW = "report_view.json"  # the report as text (services.report.text.ReportView), logged at a sweep's end
PREMISES_FILE = "premises.json"  # a cell's theory premises, each met or not, with their numbers
COMPARE_TAG, COMPARE_FIGURE, COMPARE_JSON = "vitsweep.compare", "compare_n_star.png", "compare.json"
GRID_TAG, GRID_FIGURE, GRID_JSON = "vitsweep.paper_grid", "paper_grid.png", "paper_grid.json"
# What kind of experiment MLflow's UI shows (3.17: genai_development or custom_model_development)
EXPERIMENT_KIND_TAG, TRAINING_KIND = "mlflow.experimentKind", "custom_model_development"


def _experiment_id(client: MlflowClient, name: str, home: Path, embedded: bool) -> str:
    """The experiment's id, created as a model-training experiment where it is new; one made
    before vitsweep tagged its kind gets the tag (a kind someone chose is left alone)."""
    found = client.get_experiment_by_name(name)
    if found is not None:
        if EXPERIMENT_KIND_TAG not in found.tags:
            client.set_experiment_tag(found.experiment_id, EXPERIMENT_KIND_TAG, TRAINING_KIND)
        return found.experiment_id
    location = (home / "mlartifacts").resolve().as_uri() if embedded else None
    try:
        return client.create_experiment(name, artifact_location=location, tags={EXPERIMENT_KIND_TAG: TRAINING_KIND})
    except MlflowException as error:  # another sweep made it since: it is this one's too
        if error.error_code != ErrorCode.Name(RESOURCE_ALREADY_EXISTS):
            raise
        return client.get_experiment_by_name(name).experiment_id


def _ms(epoch_s: float | None) -> int | None:
    """MLflow's run times are epoch milliseconds; None lets MLflow use the present."""
    return None if epoch_s is None else int(epoch_s * 1000)


def log_batch(
    client: MlflowClient,
    run_id: str,
    params: dict | None = None,
    metrics: list[Metric] | None = None,
    tags: dict | None = None,
) -> None:
    """log_batch in chunks that respect MLflow's per-request limits."""
    params = [Param(k, str(v)) for k, v in (params or {}).items()]
    tags = [RunTag(k, str(v)) for k, v in (tags or {}).items()]
    for i in range(0, max(len(params), len(tags)), PARAMS_PER_BATCH):
        client.log_batch(run_id, params=params[i : i + PARAMS_PER_BATCH], tags=tags[i : i + PARAMS_PER_BATCH])
    metrics = metrics or []
    for i in range(0, len(metrics), METRICS_PER_BATCH):
        client.log_batch(run_id, metrics=metrics[i : i + METRICS_PER_BATCH])


class Record(NamedTuple):
    """A sweep's record in MLflow: its parent run, and whether an earlier run of the command made it."""

    run_id: str
    earlier: bool


def experiment_of(client: MlflowClient, sweep: Sweep, tracking_uri: str, home: Path) -> str:
    """The id of the experiment a spec's sweeps are logged in (created where new)."""
    return _experiment_id(client, sweep.tracking.experiment, home, tracking_uri.startswith("sqlite:"))


def open_parent(
    client: MlflowClient,
    experiment: str,
    sweep: Sweep,
    sweep_id: str,
    spec_text: str,
    storage: str,
    started_at: float,
) -> tuple[str, bool]:
    """The sweep's parent run, RUNNING, with its params, spec and provenance: the live record an
    earlier run of the command left (a resume attaches to it), else a new one. (run id, whether
    the record is whole already: then nothing is changed)."""
    whole, live = _parents(client, experiment, sweep_id)
    if whole is not None:
        return whole, True
    if live is None:
        live = client.create_run(
            experiment, start_time=_ms(started_at), run_name=sweep_id, tags={SWEEP_TAG: sweep_id, RECORD_TAG: LIVE}
        ).info.run_id
    else:
        client.update_run(live, status="RUNNING")
    tags = provenance.run_tags(spec_text) | {STORAGE_TAG: storage}
    # on a resume, the same values again: MLflow allows that
    log_batch(client, live, params=run_values.sweep_params(sweep), tags=tags)
    _log_spec(client, live, sweep, spec_text)
    return live, False


def open_child(
    client: MlflowClient, experiment: str, parent_id: str, sweep: Sweep, cell: Cell, started_at: float | None
) -> str:
    """A cell's child run, RUNNING: the one already under the parent (a resume, or the final
    record of a live sweep), else a new one."""
    found = child_runs(client, experiment, parent_id, cell.key)
    if found:
        client.update_run(found[0].info.run_id, status="RUNNING")
        return found[0].info.run_id
    return _new_child(client, experiment, parent_id, sweep, cell, started_at)


def _new_child(
    client: MlflowClient, experiment: str, parent_id: str, sweep: Sweep, cell: Cell, started_at: float | None
) -> str:
    """A new child run of ``cell`` under the parent, with the cell's values as params and its data
    config as the run's training dataset."""
    tags = {PARENT_TAG: parent_id, CELL_TAG: cell.key, MODEL_TAG: cell.model}
    run_id = client.create_run(experiment, start_time=_ms(started_at), run_name=cell.run_name, tags=tags).info.run_id
    log_batch(client, run_id, params={"model": cell.model, **cell.values})
    client.log_inputs(run_id, datasets=[data_input(sweep, cell)])
    return run_id


def data_input(sweep: Sweep, cell: Cell) -> DatasetInput:
    """A cell's data as MLflow's Datasets panel shows a run's inputs: the family's generator
    (source, of type code: the samples are drawn from the config and each model's seed, never
    stored) and the config's fields as its profile, named by the family and hashed as its digest."""
    data = sweep.resolved_cell(cell).data
    profile = json.dumps(asdict(data), sort_keys=True, default=str)
    dataset = Dataset(
        name=f"{sweep.family.name} {type(data).__name__}",
        digest=hashlib.sha256(profile.encode()).hexdigest()[:10],
        source_type="code",
        source=json.dumps({"generator": f"{type(data).__module__}.{type(data).__name__}"}),
        profile=profile,
    )
    return DatasetInput(dataset, tags=[InputTag(DATASET_CONTEXT_TAG, "train")])


def end_live(client: MlflowClient, experiment: str, parent_id: str, status: str) -> None:
    """A sweep that stopped before its end was logged: its parent and every child still RUNNING
    end ``status`` (KILLED, FAILED); its record stays live, for a resume to attach to."""
    for child in child_runs(client, experiment, parent_id):
        if child.info.status == "RUNNING":
            client.set_terminated(child.info.run_id, status)
    client.set_terminated(parent_id, status)


def record_sweep(
    sweep: Sweep,
    result: SweepResult,
    tracking_uri: str,
    home: Path,
    spec_text: str,
    log: SweepLog,
) -> Record:
    """Log the sweep's end to MLflow with its report as ``log`` holds it (the summary's fitted
    metrics, JSON and figures, its Markdown table, each cell's row), into the runs its live record
    opened (or new ones), once: a sweep already recorded whole is not logged again."""
    client = client_of(tracking_uri)
    experiment = experiment_of(client, sweep, tracking_uri, home)
    pid, whole = open_parent(client, experiment, sweep, result.sweep_id, spec_text, result.storage, result.started_at)
    if whole:
        return Record(pid, True)
    metrics = run_values.sweep_metrics(result, log.parent.metrics)
    if result.best:
        log_batch(client, pid, params={f"best.{k}": v for k, v in result.best["values"].items()})
        metric, _ = sweep.strategy.objective()  # a best trial: one scored by its strategy's objective
        metrics.append(Metric(f"best_{metric}", result.best[metric], run_values.now_ms(), 0))
    log_batch(client, pid, metrics=metrics)
    children = child_runs(client, experiment, pid)
    by_cell: dict[str, Run] = {}
    for child in children:  # oldest first: a later one of the same cell is a duplicate
        by_cell.setdefault(child.data.tags.get(CELL_TAG), child)
    mine = set()
    for cell, cell_log in zip(result.cells, log.cells):
        found = by_cell.get(cell.cell.key)
        run_id = found.info.run_id if found else _new_child(client, experiment, pid, sweep, cell.cell, cell.started_at)
        if found is None or found.data.tags.get(RECORD_TAG) != WHOLE:  # whole: logged by a run that was stopped
            _record_cell(client, run_id, sweep, cell, cell_log)
        mine.add(run_id)
    for child in children:
        if child.info.run_id not in mine:  # a cell that started and has no result: a duplicate, or a sampled
            client.delete_run(child.info.run_id)  # cell of a trial that ran again with another sample
    log_report(client, pid, log.parent)
    client.log_text(pid, log.markdown, SUMMARY_MD)
    client.log_dict(pid, log.view, REPORT_VIEW)
    failed = any(c.failures for c in result.cells)
    client.set_terminated(pid, "FAILED" if failed else "FINISHED", _ms(result.ended_at))
    client.set_tag(pid, RECORD_TAG, WHOLE)  # last: the record is whole
    return Record(pid, False)


def log_report(client: MlflowClient, parent_id: str, summary: SummaryLog) -> None:
    """The sweep's figures and summary JSON on its parent run (mid-sweep: the sweep so far)."""
    for name, fig in summary.figures.items():
        client.log_figure(parent_id, fig, name, save_kwargs=SAVE)
    client.log_dict(parent_id, summary.summary, SUMMARY_JSON)


def _log_spec(client: MlflowClient, run_id: str, sweep: Sweep, spec_text: str) -> None:
    """The spec as written and as resolved (every default filled in), credentials redacted."""
    secret = sweep.tracking.tracking_uri
    resolved = sweep.spec.model_copy(
        update={"tracking": sweep.tracking.model_copy(update={"tracking_uri": redact(secret)})}
    )
    client.log_text(run_id, spec_text.replace(secret, redact(secret)) if secret else spec_text, SPEC_FILE)
    client.log_text(run_id, yaml.safe_dump(resolved.model_dump(mode="json"), sort_keys=False), RESOLVED_SPEC_FILE)


def _parents(client: MlflowClient, experiment: str, sweep_id: str) -> tuple[str | None, str | None]:
    """(the parent run of a whole record of this sweep, else None; else the parent of its live
    record, else None). Any other parent of the sweep (a duplicate a kill left) is deleted with its
    children, so that the sweep ends with exactly one parent run and one child per cell."""
    found = client.search_runs(
        [experiment], f"tags.`{SWEEP_TAG}` = '{sweep_id}'", order_by=["attributes.start_time ASC"]
    )
    whole = [p for p in found if legacy.whole_record(p.data.tags.get(RECORD_TAG), p.info.status)]
    keep = (whole or found or [None])[0]
    for parent in found:
        if parent is not keep:
            for child in child_runs(client, experiment, parent.info.run_id):
                client.delete_run(child.info.run_id)
            client.delete_run(parent.info.run_id)
    if keep is None:
        return None, None
    return (keep.info.run_id, None) if whole else (None, keep.info.run_id)


def logged_per_n(client: MlflowClient, run_id: str) -> dict[tuple[str, int], float]:
    """The per-N metrics a run holds: (name, N) -> the value logged last."""
    names = [name for name in client.get_run(run_id).data.metrics if name in run_values.PER_N]
    last: dict[tuple[str, int], tuple[int, float]] = {}
    for name in names:
        for m in client.get_metric_history(run_id, name):
            if (name, m.step) not in last or m.timestamp >= last[name, m.step][0]:
                last[name, m.step] = (m.timestamp, m.value)
    return {key: value for key, (_, value) in last.items()}


def _record_cell(client: MlflowClient, run_id: str, sweep: Sweep, cell: CellResult, log: CellLog) -> None:
    """A cell's child run, whole: its values as params, per-N metrics (step = N: the success-rate
    curve; only those its live record lacks), a per-model table, the models trained; one pass also
    each seed's first and stable N (per_seed.*, step = seed); what its summary row gives (``log``:
    N* and its CI under each criterion, difficulty, premises; tuned, the setting chosen as params
    and tuning.json), into ``run_id``."""
    now = run_values.now_ms()
    metrics = run_values.changed(run_values.per_n_metrics(cell.by_n()), logged_per_n(client, run_id))
    metrics += [
        Metric(f"{name}_n{n}", value, now, step)
        for name in cell.curve_names()
        for n, curve in cell.curves(name).items()
        for step, value in curve
    ]
    metrics += [Metric(name, value, now, 0) for name, value in log.n_star.items()]
    per_seed = cell.per_seed() or {"seeds": []}
    metrics += [
        Metric(f"per_seed.{name}", per_seed[name][i], now, seed)
        for i, seed in enumerate(per_seed["seeds"])
        for name in ("n_first_zero", "n_stable")
    ]
    metrics.append(Metric("trainings", cell.trainings, now, 0))
    tuned = {f"tuned.{k}": v for k, v in log.tuning["chosen"].items()} if log.tuning else {}
    premises = {f"premise.{p.name.replace(' ', '_')}": "met" if p.met else "violated" for p in log.premises}
    metrics += [Metric(f"difficulty.{name}", value, now, 0) for name, value in log.difficulty.items()]
    if log.premises:
        metrics.append(Metric("premises_violated", sum(not p.met for p in log.premises), now, 0))
    log_batch(
        client,
        run_id,
        params={"model": cell.cell.model, **cell.cell.values, **tuned, **premises},
        metrics=metrics,
        tags={FAILURES_TAG: "\n".join(cell.failures)[:4000]} if cell.failures else None,
    )
    if cell.records and MODELS_FILE not in {a.path for a in client.list_artifacts(run_id)}:  # log_table appends
        rows = [r.as_dict() for r in cell.records]
        client.log_table(
            run_id, data={key: [row.get(key) for row in rows] for key in rows[0]}, artifact_file=MODELS_FILE
        )
    if cell.curve_parts:
        client.log_dict(run_id, cell.curve_parts, CURVES_FILE)
    if log.tuning:
        client.log_dict(run_id, log.tuning, TUNING_FILE)
    if log.premises:
        client.log_dict(run_id, [asdict(p) for p in log.premises], PREMISES_FILE)
    client.set_terminated(run_id, "FAILED" if cell.failures else "FINISHED", _ms(cell.ended_at))
    client.set_tag(run_id, RECORD_TAG, WHOLE)  # last: a stopped recording goes on from the next cell


def record_comparison(
    tracking_uri: str, sweep_a: str, sweep_b: str, difference: dict[str, float | None], document: dict, figure: "Figure"
) -> str:
    """A run of its own for `vitsweep compare A B`, in sweep B's experiment: B's exponent minus A's
    per group (``difference``, metrics), the overlaid figure and the comparison's JSON
    (``document``). Returns the run's id."""
    client = client_of(tracking_uri)
    experiment = parent_run(client, tracking_uri, sweep_b).info.experiment_id
    pair = f"{sweep_a} vs {sweep_b}"
    run = client.create_run(experiment, run_name=f"compare {pair}", tags={COMPARE_TAG: pair})
    metrics = [
        Metric(f"exponent_difference.{group.replace('=', '_')}", value, 0, 0)
        for group, value in difference.items()
        if value is not None
    ]
    log_batch(client, run.info.run_id, params={"sweep_a": sweep_a, "sweep_b": sweep_b}, metrics=metrics)
    client.log_figure(run.info.run_id, figure, COMPARE_FIGURE, save_kwargs=SAVE)
    client.log_dict(run.info.run_id, document, COMPARE_JSON)
    client.set_terminated(run.info.run_id, "FINISHED")
    return run.info.run_id


def record_paper_grid(tracking_uri: str, sweeps: list[str], document: dict, figure: "Figure") -> str:
    """A run of its own for `vitsweep paper A [B ...]`, in the last sweep's experiment: the figure
    (the paper's boundary over every sweep's N*) and the grid's JSON (``document``). Returns the run's id."""
    client = client_of(tracking_uri)
    experiment = parent_run(client, tracking_uri, sweeps[-1]).info.experiment_id
    named = ", ".join(sweeps)
    run = client.create_run(experiment, run_name=f"paper grid {named}", tags={GRID_TAG: named})
    log_batch(client, run.info.run_id, params={f"sweep_{k}": s for k, s in enumerate(sweeps)}, metrics=[])
    client.log_figure(run.info.run_id, figure, GRID_FIGURE, save_kwargs=SAVE)
    client.log_dict(run.info.run_id, document, GRID_JSON)
    client.set_terminated(run.info.run_id, "FINISHED")
    return run.info.run_id


def child_runs(client: MlflowClient, experiment: str, parent_id: str, cell_key: str | None = None) -> list:
    """A parent run's children, oldest first (``cell_key``: that cell's only)."""
    where = f"tags.`{PARENT_TAG}` = '{parent_id}'"
    if cell_key is not None:
        where += f" AND tags.`{CELL_TAG}` = '{cell_key}'"
    return client.search_runs([experiment], where, order_by=["attributes.start_time ASC"])


def load_sweep(tracking_uri: str, sweep_id: str | None) -> tuple[Sweep, str, list[CellResult]]:
    """A recorded sweep read back from MLflow (the latest when ``sweep_id`` is None): its
    resolved spec (Sweep) and every cell's per-model records, curves and failures (LookupError: none)."""
    client = client_of(tracking_uri)
    parent = parent_run(client, tracking_uri, sweep_id)
    sweep = Sweep.of(spec_from_dict(yaml.safe_load(artifact_text(client, parent.info.run_id, RESOLVED_SPEC_FILE))))
    cells = [
        _read_cell(client, child, sweep) for child in child_runs(client, parent.info.experiment_id, parent.info.run_id)
    ]
    order = {cell.key: i for i, cell in enumerate(sweep.cells)}
    cells.sort(key=lambda c: order.get(c.cell.key, len(order)))
    return sweep, parent.data.tags[SWEEP_TAG], cells


def parent_run(client: MlflowClient, tracking_uri: str, sweep_id: str | None, whole: bool = True):
    """A sweep's parent run: ``sweep_id``'s, else the latest sweep of the spec so named, or the
    latest sweep of all when None; with ``whole``, only a sweep whose end is logged (a sweep
    still running, or stopped before its end, is passed over when not named, and refused when
    named). LookupError: none."""
    experiments = [e.experiment_id for e in client.search_experiments()]
    wheres = (
        [f"tags.`{SWEEP_TAG}` = '{sweep_id}'", f"tags.`{SWEEP_TAG}` LIKE '{sweep_id}-%'"]
        if sweep_id
        else [f"tags.`{SWEEP_TAG}` LIKE '%'"]
    )
    for where in wheres if experiments else []:
        parents = client.search_runs(experiments, where, order_by=["attributes.start_time DESC"])
        done = [p for p in parents if legacy.whole_record(p.data.tags.get(RECORD_TAG), p.info.status)]
        if parents and whole and not done and sweep_id:
            found = parents[0]
            raise LookupError(
                f"sweep {found.data.tags[SWEEP_TAG]} is {found.info.status} in {redact(tracking_uri)}: its record is "
                "live, written whole when the sweep ends (run its spec again to resume it)"
            )
        if done if whole else parents:
            return (done if whole else parents)[0]
    raise LookupError(f"no sweep {sweep_id or ''} in {redact(tracking_uri)}".replace("  ", " "))


def artifact_text(client: MlflowClient, run_id: str, name: str) -> str:
    """An artifact's text, its download removed after (MLflow's default folder, a new temporary one
    per call, is never removed: reading sweeps back left thousands in /tmp)."""
    with tempfile.TemporaryDirectory(prefix="vitsweep-artifact-") as folder:
        return Path(client.download_artifacts(run_id, name, dst_path=folder)).read_text()


def _read_cell(client: MlflowClient, child, sweep: Sweep) -> CellResult:
    """A child run as its cell's results. Its cell is its CELL_TAG (older runs: legacy.cell_of_run)."""
    tags, run_id = child.data.tags, child.info.run_id
    by_label = {c.label: c for c in sweep.cells}
    cell = legacy.cell_of_run(tags, child.info.run_name, CELL_TAG, by_label) or Cell.from_key(tags[CELL_TAG])
    result = CellResult(cell, failures=[f for f in tags.get(FAILURES_TAG, "").split("\n") if f])
    artifacts = {a.path for a in client.list_artifacts(run_id)}
    if MODELS_FILE in artifacts:
        table = json.loads(artifact_text(client, run_id, MODELS_FILE))
        result.records = [
            ModelRecord.from_dict(dict(zip(table["columns"], row))) for row in table["data"]
        ]  # JSON null was NaN
    if CURVES_FILE in artifacts:
        result.curve_parts = json.loads(artifact_text(client, run_id, CURVES_FILE))
    return result
