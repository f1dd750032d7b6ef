"""What `vitsweep report`, `compare`, `paper` and `status` do, without the command line: they read
what sweeps left, recorded sweeps from MLflow (writing their figures and JSON, and a run of
their own for a comparison or a paper grid) and every sweep's state under the home. MLflow and
matplotlib load in the functions that use them (``status`` of a home with no Tune state loads
neither, nor Ray).
"""

import json
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import yaml

from services.plotting import SAVE
from services.report.answer_text import screen
from services.report.compare import compare as compared
from services.report.compare import paper_grid as gridded
from services.report.text import ReportView, view, write
from services.spec import Sweep, spec_from_dict
from services.stats.answer import Answer, sweep_check
from services.stats.summarize import summarize
from services.store import provenance, registry, state
from services.store.files import CorruptFile
from vit_core.family import families

if TYPE_CHECKING:
    import pandas as pd

    from services.report.answer_text import Screen
    from services.report.compare import Comparison, PaperGrid
    from services.report.frames import SweepFrames
    from services.stats.answer import Check
    from services.store.registry import Entry


class Checks(NamedTuple):
    """The checks an answer names (answer.checks) as found in a store: each read from its latest
    recorded sweep, and (name, why) for each not read."""

    found: list["Check"]
    missing: list[tuple[str, str]]


class Report(NamedTuple):
    """A recorded sweep's report: its view (the text `report` prints), its summary as JSON
    (Summary.to_dict), the folder of its figures and files, whether it was read back as the
    sweep's run recorded it (False: recomputed from the records now), and its answer's screen with
    the checks found in the store (None: the sweep has no answer)."""

    sweep_id: str
    view: "ReportView"
    summary: dict
    folder: Path
    recorded: bool
    screen: "Screen | None" = None
    checks: Checks = Checks([], [])


def sweep_checks(uri: str, summary: dict) -> Checks:
    """The checks a sweep's answer names (its ``summary``: Summary.to_dict) read from their latest
    whole sweeps in the store at ``uri``, each against the sweep's primary."""
    from services.store.recorded import recorded_summary  # noqa: PLC0415  (MLflow loads on use)

    if summary.get("answer") is None:
        return Checks([], [])
    primary, found, missing = Answer.from_dict(summary["answer"]), [], []
    for name in primary.named_checks:
        try:
            recorded = recorded_summary(uri, name)
        except LookupError:
            missing.append((name, f"not run here: vitsweep run sweeps/{name}.yaml"))
            continue
        if recorded is None or recorded[1].get("answer") is None:
            missing.append((name, "its recorded sweep has no answer; vitsweep report --recompute " + name))
            continue
        found.append(sweep_check(primary, summary["cells"], recorded[1], recorded[0], name))
    return Checks(found, missing)


def screen_of(summary: dict, checks: Checks) -> "Screen | None":
    """A summary's answer as its screen, with ``checks``; None where the sweep has no answer."""
    if summary.get("answer") is None:
        return None
    answer, family = Answer.from_dict(summary["answer"]), families()[summary["family"]]
    if "first_seed" not in summary["answer"] and summary.get("seeds"):  # recorded before the answer named it
        answer.first_seed = summary["seeds"][0]
    return screen(answer, family, checks.found, checks.missing, summary["sweep_id"])


def report(uri: str, sweep_id: str | None, out: Path | None, home: Path, *, recompute: bool = False) -> Report:
    """A recorded sweep's figures and summary written to ``out`` (default HOME/reports/SWEEP_ID): as
    its run recorded them at its end, unless ``recompute`` (or its run recorded no report view):
    then the summary is recomputed from its records and the figures redrawn with the code as it is
    now. LookupError when the store has no such sweep."""

    def folder_of(found_id: str) -> Path:
        return out or home / "reports" / found_id

    if not recompute:
        from services.store.recorded import recorded_report  # noqa: PLC0415  (MLflow loads on use)

        found = recorded_report(uri, sweep_id, folder_of, ReportView.from_dict)
        if found:
            checks = sweep_checks(uri, found.summary)
            shown = screen_of(found.summary, checks)
            write(found.folder, found.view, found.summary, screen=shown)
            return Report(found.sweep_id, found.view, found.summary, found.folder, True, shown, checks)
    from services.report import figures  # noqa: PLC0415  (matplotlib loads on use)
    from services.store.tracking import load_sweep  # noqa: PLC0415  (MLflow loads on use)

    sweep, found_id, cells = load_sweep(uri, sweep_id)
    summary = summarize(sweep, found_id, cells)
    document, drawn = summary.to_dict(), figures.figures(sweep, summary, cells)
    checks = sweep_checks(uri, document)
    text, shown = view(summary, list(drawn)), screen_of(document, checks)
    folder = write(folder_of(found_id), text, document, drawn, shown)
    return Report(found_id, text, document, folder, False, shown, checks)


def publish(
    uri: str, sweep_id: str | None, folder: Path | None = None, machine: str | None = None
) -> tuple["Entry", tuple[Path, Path]]:
    """A recorded sweep's entry in the results registry (services.store.registry), written to
    ``folder`` (default: the project's results/) as JSON and Markdown: its provenance as its run
    recorded it (``machine``, where its record names none), its summary as recorded (else recomputed
    from its records), its answer's screen with the checks its store holds (a check it lacks
    pointing at the check's own entry where the registry has one). LookupError: no such sweep;
    nothing is written anywhere else."""
    from services.store.recorded import recorded_run, recorded_summary  # noqa: PLC0415  (MLflow loads on use)

    run = recorded_run(uri, sweep_id)
    folder = folder or registry.RESULTS
    if (found := recorded_summary(uri, run.sweep_id)) is not None:
        summary = found[1]
    else:
        from services.store.tracking import load_sweep  # noqa: PLC0415  (MLflow loads on use)

        summary = summarize(*load_sweep(uri, run.sweep_id)).to_dict()
    checks = sweep_checks(uri, summary)
    missing = [
        (name, f"its own entry: results/{name}.md" if (folder / f"{name}.json").exists() else why)
        for name, why in checks.missing
    ]
    shown = screen_of(summary, Checks(checks.found, missing))
    spec = Sweep.of(spec_from_dict(yaml.safe_load(run.resolved_spec))).spec

    def fits(values: dict) -> list:
        return [registry.Fit(group=g, value=f.get("value"), ci95=f.get("ci95")) for g, f in values.items()]

    def table(view) -> "registry.Table | None":
        return None if view is None else registry.Table(title=view.title, header=view.header, rows=view.rows)

    entry = registry.Entry(
        spec=spec.name,
        sweep_id=run.sweep_id,
        commit=run.commit,
        git_dirty=run.dirty,
        date=registry.date_of(run.ended_ms),
        machine=run.machine or machine,
        machine_recorded=run.machine is not None,
        wall_s=run.wall_s,
        trainings=run.trainings,
        spec_hash=provenance.spec_hash(spec),
        vit_core_hash=run.vit_core_hash,
        criterion=summary.get("criterion"),
        success_rate=summary.get("success_rate"),
        answer=None
        if shown is None
        else registry.Answer(
            lines=shown.lines,
            table=table(shown.table),
            statements=shown.statements,
            regimes=table(shown.regimes),
            checks=table(shown.checks),
            notes=shown.notes,
        ),
        n_star=[
            registry.NStar(
                cell=c["label"],
                model=c["model"],
                values=c["values"],
                n_star=c.get("n_star"),
                known=bool(c.get("n_star_known")),
                ci95=c.get("n_star_ci95"),
            )
            for c in summary["cells"]
        ],
        exponents=fits(summary.get("exponent") or {}),
        exponent_differences=fits(summary.get("exponent_difference") or {}),
    )
    return entry, registry.write(entry, folder)


def frames(uri: str, sweep_id: str | None) -> "SweepFrames":
    """A recorded sweep (the latest when ``sweep_id`` is None) as DataFrames of its model records
    and its cells, its cells as its run recorded them where it did; LookupError: no such sweep."""
    from services.report.frames import SweepFrames, cells_frame, models_frame  # noqa: PLC0415  (pandas loads on use)
    from services.store.tracking import load_sweep  # noqa: PLC0415  (MLflow loads on use)

    loaded = load_sweep(uri, sweep_id)
    found_id, rows = _cell_rows(uri, loaded[1], False, loaded)
    return SweepFrames(found_id, models_frame(found_id, loaded[2]), cells_frame(found_id, rows))


def models_frame(uri: str, sweep_id: str | None) -> tuple[str, "pd.DataFrame"]:
    """(sweep id, one row per model record) of a recorded sweep; LookupError: no such sweep."""
    from services.report.frames import models_frame as build  # noqa: PLC0415  (pandas loads on use)
    from services.store.tracking import load_sweep  # noqa: PLC0415  (MLflow loads on use)

    _, found_id, cells = load_sweep(uri, sweep_id)
    return found_id, build(found_id, cells)


def cells_frame(uri: str, sweep_id: str | None, *, recompute: bool = False) -> tuple[str, "pd.DataFrame"]:
    """(sweep id, one row per cell) of a recorded sweep: from the summary its run recorded at its
    end, unless ``recompute`` (or its run recorded none): then from its records, now."""
    from services.report.frames import cells_frame as build  # noqa: PLC0415  (pandas loads on use)

    found_id, rows = _cell_rows(uri, sweep_id, recompute)
    return found_id, build(found_id, rows)


def _cell_rows(uri: str, sweep_id: str | None, recompute: bool, loaded: tuple | None = None) -> tuple[str, list[dict]]:
    """(sweep id, its summary's cell rows as JSON holds them): as its run recorded them, unless
    ``recompute`` or it recorded none; then summarized from ``loaded`` (load_sweep's), or loaded now."""
    if not recompute:
        from services.store.recorded import recorded_summary  # noqa: PLC0415  (MLflow loads on use)

        if found := recorded_summary(uri, sweep_id):
            return found[0], found[1]["cells"]
    from services.store.tracking import load_sweep  # noqa: PLC0415  (MLflow loads on use)

    summary = summarize(*(loaded or load_sweep(uri, sweep_id)))
    return summary.sweep_id, summary.to_dict()["cells"]


def compare(uri: str, sweep_a: str, sweep_b: str, out: Path | None, home: Path) -> tuple["Comparison", Path, str]:
    """Sweep B against sweep A, both read from ``uri``: the comparison, the folder its figure and
    JSON were written to (default HOME/reports/compare-A-B), and the MLflow run that records it."""
    from services.report import figures  # noqa: PLC0415  (matplotlib loads on use)
    from services.store import tracking  # noqa: PLC0415  (MLflow loads on use)

    comparison = compared(tracking.load_sweep(uri, sweep_a), tracking.load_sweep(uri, sweep_b))
    figure = figures.comparison_figure(comparison)
    document = comparison.to_dict()
    folder = _written(
        out or home / "reports" / f"compare-{sweep_a}-{sweep_b}",
        figure,
        (tracking.COMPARE_FIGURE, tracking.COMPARE_JSON),
        document,
    )
    difference = {group: d.value for group, d in comparison.difference.items()}
    run_id = tracking.record_comparison(uri, comparison.sweep_a, comparison.sweep_b, difference, document, figure)
    return comparison, folder, run_id


def paper_grid(uri: str, sweeps: list[str], out: Path | None, home: Path) -> tuple["PaperGrid", Path, str]:
    """The paper's figure beside the given sweeps (ids, or spec names for their latest sweeps),
    read from ``uri``: the grid, the folder its figure and JSON went to (default
    HOME/reports/paper-grid-<first sweep>), and the MLflow run that records it."""
    from services.report import figures  # noqa: PLC0415  (matplotlib loads on use)
    from services.store import tracking  # noqa: PLC0415  (MLflow loads on use)

    grid = gridded([tracking.load_sweep(uri, sweep) for sweep in sweeps])
    figure = figures.paper_grid_figure(grid)
    document = grid.to_dict()
    folder = _written(
        out or home / "reports" / f"paper-grid-{grid.sweeps[0]}",
        figure,
        (tracking.GRID_FIGURE, tracking.GRID_JSON),
        document,
    )
    return grid, folder, tracking.record_paper_grid(uri, grid.sweeps, document, figure)


def _written(folder: Path, figure, names: tuple[str, str], document: dict) -> Path:
    """``folder``, with ``figure`` and ``document`` (JSON) written into it under ``names`` (figure, JSON)."""
    folder.mkdir(parents=True, exist_ok=True)
    figure.savefig(folder / names[0], **SAVE)
    (folder / names[1]).write_text(json.dumps(document, indent=2))
    return folder


def status(home: Path) -> list[dict]:
    """Every sweep under ``home``: its trials by status (from Ray Tune's own state), the models
    its finished trials trained or read from the cache, and its MLflow parent run once logged."""
    logged = {sweep_id: m["recorded"] for sweep_id, m in state.markers(home)}
    rows = []
    for sweep_id in state.sweep_ids(home):
        counts, models, trials = {"NO_STATE": 1}, 0, 0  # stopped before Tune saved any state
        if state.has_tune_state(state.folder(home, sweep_id)):
            from services.execution.ray_tune import trial_status  # noqa: PLC0415  (Ray loads on use)

            try:
                counts, models = trial_status(state.folder(home, sweep_id))
                trials = sum(counts.values())
            except CorruptFile as corrupt:  # one sweep's broken state: said in its row, the others listed
                counts = {f"UNREADABLE ({corrupt})": 1}
        rows.append(
            {
                "sweep_id": sweep_id,
                "trials": trials,
                "by_status": counts,
                "models_done": models,
                "mlflow_parent_run_id": logged.get(sweep_id),
            }
        )
    return rows
