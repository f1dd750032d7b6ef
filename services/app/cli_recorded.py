"""The command line's commands that read what sweeps left: `report`, `export`, `compare`, `paper`
and `status`. Each parses its arguments, calls services.app.recorded (its frames are the
notebook API's) and prints what came back; services.app.cli registers them."""

import json
import sys
from contextlib import contextmanager
from pathlib import Path

import typer

from services.app.printing import (
    checks_json,
    print_comparison,
    print_paper_grid,
    print_screen,
    print_view,
    show,
    show_pages,
    show_table,
    usage,
)
from services.store.uris import embedded_uri


def report(
    sweep_id: str = typer.Argument(None, help="a sweep id (default: the latest sweep in the store)"),
    tracking_uri: str = typer.Option(None, "--tracking-uri", help="MLflow tracking URI; default: SQLite under --home"),
    home: Path = typer.Option(Path("runs"), "--home", help="the sweep home whose embedded MLflow store to read"),
    out: Path = typer.Option(None, "--out", help="folder for the figures and summary (default: HOME/reports/SWEEP_ID)"),
    as_json: bool = typer.Option(
        False, "--json", help="end stdout with one JSON object: exponent, n_star, and the rest"
    ),
    recompute: bool = typer.Option(
        False, "--recompute", help="recompute the summary from the records, redraw the figures (the code as it is now)"
    ),
    publish: bool = typer.Option(
        False,
        "--publish",
        help="instead: write the sweep's entry in the results registry (RESULTS/<spec>.json and .md), nothing else",
    ),
    results: Path = typer.Option(None, "--results", help="--publish: the registry's folder (default: results/)"),
    machine: str = typer.Option(
        None, "--machine", help="--publish: the machine it ran on, where its record names none (older sweeps)"
    ),
) -> None:
    """Write a recorded sweep's figures and summary table (Markdown, HTML, JSON) and print the table:
    as its run recorded them at its end (--recompute: from its records, now). With --publish, write
    its entry in the results registry instead: its provenance (commit, date, machine, wall time, spec
    and vit_core hashes as recorded), the answer, N* per cell and the fitted exponents."""
    from services.app import recorded  # noqa: PLC0415  (CLI start-up: loads with its command)

    if publish:
        with _store(tracking_uri, home) as uri:
            entry, written = recorded.publish(uri, sweep_id, results, machine)
        print(f"{entry.sweep_id}: published as {written[0]} and {written[1]}")
        return
    with _store(tracking_uri, home) as uri:
        found = recorded.report(uri, sweep_id, out, home, recompute=recompute)
    if found.screen is not None:
        print_screen(found.screen)
        show("## Details")
    print_view(found.view)
    how = "as the sweep's run recorded it; --recompute recomputes it" if found.recorded else "recomputed"
    show(f"report written to {found.folder} ({how})")
    show_pages(uri, home, found.sweep_id)
    if as_json:
        print(json.dumps(found.summary | checks_json(found.checks) | {"folder": str(found.folder)}))


EXPORT_FORMATS = {".csv": "to_csv", ".parquet": "to_parquet", ".pq": "to_parquet"}


def export(
    sweep_id: str = typer.Argument(None, help="a sweep id (default: the latest sweep in the store)"),
    out: Path = typer.Option(..., "--out", help="the file to write: .csv, or .parquet (.pq)"),
    table: str = typer.Option(
        "models", "--table", help="models: one row per model record; cells: one row per cell (N*, its CI, ...)"
    ),
    tracking_uri: str = typer.Option(None, "--tracking-uri", help="MLflow tracking URI; default: SQLite under --home"),
    home: Path = typer.Option(Path("runs"), "--home", help="the sweep home whose embedded MLflow store to read"),
    recompute: bool = typer.Option(
        False, "--recompute", help="cells: recompute the summary from the records (default: as the run recorded it)"
    ),
) -> None:
    """Write a recorded sweep's per-model records or per-cell results as CSV or Parquet: the
    DataFrames vitsweep.load_sweep returns."""
    if out.suffix.lower() not in EXPORT_FORMATS:
        usage(f"--out {out}: the file name must end in {', '.join(EXPORT_FORMATS)}")
    if table not in ("models", "cells"):
        usage(f"--table {table}: must be models or cells")
    from services.app import recorded  # noqa: PLC0415  (CLI start-up: loads with its command)

    with _store(tracking_uri, home) as uri:
        if table == "cells":
            found_id, frame = recorded.cells_frame(uri, sweep_id, recompute=recompute)
        else:
            found_id, frame = recorded.models_frame(uri, sweep_id)
    out.parent.mkdir(parents=True, exist_ok=True)
    getattr(frame, EXPORT_FORMATS[out.suffix.lower()])(out, index=False)
    print(f"{found_id}: {len(frame)} rows of {table} written to {out}")


def compare(
    sweep_a: str = typer.Argument(..., help="the first sweep's id (A)"),
    sweep_b: str = typer.Argument(..., help="the second sweep's id (B); differences are B minus A"),
    tracking_uri: str = typer.Option(None, "--tracking-uri", help="MLflow tracking URI; default: SQLite under --home"),
    home: Path = typer.Option(Path("runs"), "--home", help="the sweep home whose embedded MLflow store to read"),
    out: Path = typer.Option(None, "--out", help="folder for the figure and JSON (default: HOME/reports/compare-A-B)"),
    as_json: bool = typer.Option(False, "--json", help="end stdout with one JSON object of the comparison"),
) -> None:
    """Two recorded sweeps side by side: N* per cell with B / A, the exponents of N* in the family's
    x (Paper A: 1/alpha*) with their CIs, B's exponent minus A's, each difference with a bootstrap
    CI and whether the two agree (the CI holds no difference); whether their measurement seeds are
    disjoint (a replication: `vitsweep run SPEC --seed-start K`) and where their specs differ; one
    overlaid figure, also logged to MLflow as a run of its own in B's experiment."""
    from services.app import recorded  # noqa: PLC0415  (CLI start-up: loads with its command)

    with _store(tracking_uri, home) as uri:
        comparison, folder, run_id = recorded.compare(uri, sweep_a, sweep_b, out, home)
    print_comparison(comparison)
    show(f"figure and JSON written to {folder}; MLflow run {run_id}")
    if as_json:
        print(json.dumps(comparison.to_dict() | {"folder": str(folder), "mlflow_run_id": run_id}))


def paper(
    sweeps: list[str] = typer.Argument(..., help="sweep ids, or spec names (their latest sweeps), in column order"),
    tracking_uri: str = typer.Option(None, "--tracking-uri", help="MLflow tracking URI; default: SQLite under --home"),
    home: Path = typer.Option(Path("runs"), "--home", help="the sweep home whose embedded MLflow store to read"),
    out: Path = typer.Option(None, "--out", help="folder for the figure and JSON (default: HOME/reports/paper-grid-A)"),
    as_json: bool = typer.Option(False, "--json", help="end stdout with one JSON object of the grid"),
) -> None:
    """The paper's own figure (Paper A: Fig 1) beside recorded sweeps: per model and column of the
    figure, the paper's N* | each sweep's N* with its 95% CI and the (B, eta) it was measured at
    (tuned or fixed); one figure with the paper's boundary drawn over ours, also logged to MLflow."""
    from services.app import recorded  # noqa: PLC0415  (CLI start-up: loads with its command)

    with _store(tracking_uri, home) as uri:
        grid, folder, run_id = recorded.paper_grid(uri, sweeps, out, home)
    print_paper_grid(grid)
    show(f"figure and JSON written to {folder}; MLflow run {run_id}")
    if as_json:
        print(json.dumps(grid.to_dict() | {"folder": str(folder), "mlflow_run_id": run_id}))


def results(
    folder: Path = typer.Option(None, "--results", help="the registry's folder (default: results/)"),
    specs: Path = typer.Option(None, "--specs", help="the specs the entries are judged against (default: sweeps/)"),
    readme: Path = typer.Option(None, "--readme", help="the document whose quoted entries --check checks"),
    check: bool = typer.Option(False, "--check", help="exit 1 when an entry the README quotes is stale or missing"),
    as_json: bool = typer.Option(False, "--json", help="print the list as one JSON array"),
) -> None:
    """The results registry (`vitsweep report SWEEP --publish` writes it), one line per entry: spec,
    sweep, commit, date, and whether it is current or stale (its spec or vit_core changed since it
    was measured); entries the README quotes (results/<spec>.md) are marked."""
    from services.store import registry  # noqa: PLC0415  (CLI start-up: loads with its command)

    rows = registry.listing(folder or registry.RESULTS, specs or registry.SPECS, readme or registry.README)
    if as_json:
        print(json.dumps([row._asdict() for row in rows]))
    else:
        spec_w, sweep_w = (max((len(getattr(r, k) or "-") for r in rows), default=0) for k in ("spec", "sweep_id"))
        for row in rows:
            commit, date = (row.commit or "?")[:7], (row.date or "?")[:10]
            quoted = "  (quoted by the README)" if row.quoted else ""
            print(
                f"{row.spec:<{spec_w}}  {row.sweep_id or '-':<{sweep_w}}  {commit:<7}  {date:<10}  {row.status}{quoted}"
            )
    if check and (bad := [row for row in rows if row.quoted and row.status != registry.CURRENT]):
        for row in bad:
            print(f"vitsweep: results/{row.spec}.md is quoted by the README and {row.status}", file=sys.stderr)
        raise typer.Exit(1)


@contextmanager
def _store(tracking_uri: str | None, home: Path):
    """The tracking URI to read (the given one, else the embedded store under ``home``), exiting
    with code 2 where there is no store or the sweep asked for is not in it."""
    if not tracking_uri and not (home / "mlflow.db").exists():
        usage(
            f"{home / 'mlflow.db'}: no MLflow store yet; run a sweep with --home {home} first, or give --tracking-uri"
        )
    try:
        yield tracking_uri or embedded_uri(home)
    except LookupError as error:
        usage(str(error))


def status(
    home: Path = typer.Option(Path("runs"), "--home", help="the sweep home to look in"),
    as_json: bool = typer.Option(False, "--json", help="print the list as one JSON array"),
) -> None:
    """List the sweeps under a home with their trials by status (from Ray Tune's own state)."""
    from services.app import recorded  # noqa: PLC0415  (CLI start-up: loads with its command)

    rows = recorded.status(home)
    if as_json:
        print(json.dumps(rows))
        return
    header = ["sweep", "trials", "by status", "models done", "MLflow parent run"]
    show_table(
        f"sweeps under {home}",
        header,
        [
            [
                r["sweep_id"],
                str(r["trials"]),
                " ".join(f"{k}:{v}" for k, v in r["by_status"].items()),
                str(r["models_done"]),
                r["mlflow_parent_run_id"] or "not logged",
            ]
            for r in rows
        ],
        left=tuple(header),
    )
