"""What the command line prints: tables (rich's, or plain Markdown rows off a terminal), a
sweep's summary and where it is recorded, comparisons and the paper's grid, estimates."""

import math
import os
import shlex
import shutil
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import typer
from rich.console import Console
from rich.table import Table

from services.analysis import Estimate
from services.stats.base import fmt
from services.store.uris import embedded_uri, redact, ui_address

if TYPE_CHECKING:
    from services.report.answer_text import Screen
    from services.report.compare import Comparison, PaperGrid
    from services.report.text import ReportView
    from services.stats.rows import Summary


def show_table(title: str, header: list[str], rows: list[list[str]], left: tuple[str, ...] = ("cell",)) -> None:
    """A table on stdout: rich's on a terminal; elsewhere (a file, a pipe, a Ray job's log) its
    title and Markdown rows, every cell whole and no colour codes, whatever the width."""
    if not sys.stdout.isatty():
        print(f"{title}\n\n| " + " | ".join(header) + " |\n|" + " --- |" * len(header), flush=True)
        print("".join("| " + " | ".join(row) + " |\n" for row in rows), flush=True)
        return
    table = Table(title=title)
    for column in header:
        table.add_column(column, justify="left" if column in left else "right", no_wrap=column in left)
    for row in rows:
        table.add_row(*row)
    Console().print(table)


def show(line: str) -> None:
    """A line on stdout: wrapped to a terminal by rich there, whole elsewhere (never wrapped)."""
    if sys.stdout.isatty():
        Console().print(line, markup=False)
    else:
        print(line, flush=True)


def usage(message: str) -> NoReturn:
    """Print why the command cannot run, and exit with code 2 (nothing was started)."""
    print(message, file=sys.stderr)
    raise typer.Exit(2)


def estimate(made, slots: int | None = None) -> str:
    """A plan's wall time in words: its expectation (and how much of it is a guess) and its upper bound."""
    guess = f" ({made.guessed_share:.0%} of its work a guess)" if made.guessed_share >= 0.005 else ""
    return f"{duration(made.wall_s(slots))} expected{guess}, at most {duration(made.most_wall_s(slots))}"


def duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def print_summary(summary: "Summary") -> None:
    """The per-cell N* table (bracket, CI, T) and the fits against theory."""
    from services.report.text import view  # noqa: PLC0415  (CLI start-up: loads with its command)

    print_view(view(summary))


def print_screen(screen: "Screen") -> None:
    """The answer's screen (services.report.answer_text): its lines, the N* table, the three
    statements, the checks' table and the verdict."""
    for line in screen.lines:
        show(line)
    for table, after in screen.blocks():
        if table is not None:
            show_table(table.title, table.header, table.rows, left=tuple(table.left))
        for line in after:
            show(line)


def print_view(report: "ReportView") -> None:
    """A report's text: its tables (the per-cell one, the fits, the forms) and its notes."""
    for table in report.tables:
        show_table(table.title, table.header, table.rows, left=tuple(table.left))
    for line in report.notes:
        show(f"- {line}")


def _rate(row: dict) -> str:
    """A success rate, with the models left out of it (not converged, diverged) when there are any."""
    rate = "-" if row["success_rate"] is None else f"{row['success_rate']:.2f}"
    left_out = row["not_converged"] + row["diverged"]
    return f"{rate}({left_out} left out)" if left_out else rate


def print_rates(sweep, result) -> None:
    """Success rates per N, per cell (one pass: where the rate changes)."""
    rows = []
    for cell in result.cells:
        per_n = cell.by_n()
        if sweep.resolved_cell(cell.cell).one_pass:  # every evaluated N: show where the rate changes
            per_n = [r for i, r in enumerate(per_n) if i in (0, len(per_n) - 1) or _rate(r) != _rate(per_n[i - 1])]
        rows.append([cell.cell.label, " ".join(f"{r['n']}:{_rate(r)}" for r in per_n)])
    show_table("success rate per N", ["cell", "success rate per N"], rows, left=("cell", "success rate per N"))


def print_sweep(sweep, result, uri: str, parent_id: str | None, home: Path, folder: Path) -> None:
    """Failed trials, the best Optuna trial, what the sweep cost and where its report and records are."""
    for failure in (f for cell in result.cells for f in cell.failures):
        print(f"failed trial: {failure}", file=sys.stderr)
    if result.best:
        metric, direction = sweep.strategy.objective()
        show(f"best ({metric}, {direction}): {result.best}")
    show(
        f"{result.trainings} trainings ({result.cache_hits} more read from the result cache) in {result.wall_s:.1f} s"
        + ("" if result.estimated_s is None else f" (vitsweep plan estimated {result.estimated_s:.0f} s)")
        + ("." if result.busy_fraction is None else f"; {result.slots} slots {result.busy_fraction:.0%} busy.")
    )
    full = f"{folder / 'summary.html'} (or {command('report', '--home', home)})"
    show(f"the full report, every cell, fit, check and figure: {full}")
    if parent_id is None:
        return
    show(f"MLflow: {redact(uri)} (parent run {parent_id})")
    show_pages(uri, home, result.sweep_id)


def show_pages(uri: str, home: Path, sweep_id: str) -> None:
    """Where a recorded sweep is in MLflow's UI, each address whole on a line of its own (a wrapped
    one would not open): for the embedded store, the command that serves its UI; then the sweep's
    runs and its parent run. Nothing where no UI is known to serve ``uri`` (services.store.uris)."""
    ui = ui_address(uri, home)
    if ui is None:
        return
    from services.store.ui_view import ui_pages  # noqa: PLC0415  (MLflow loads on use)

    pages = ui_pages(uri, ui, sweep_id)
    if uri == embedded_uri(home):
        print(f"Open the UI with: {command('ui', '--home', home)}", flush=True)
    print(f"the sweep's runs: {pages.runs}\nits parent run: {pages.parent}", flush=True)


def command(*args: object) -> str:
    """A vitsweep command line that works as printed where the user is: this program as they can
    type it (``vitsweep`` where PATH finds this very one, else the path they started it by,
    relative where they typed it so), then ``args``, each shell-quoted."""
    started = sys.argv[0]
    on_path = shutil.which("vitsweep")
    if on_path and os.path.exists(started) and os.path.samefile(on_path, started):
        program = "vitsweep"
    else:  # a vitsweep PATH does not find, or another program running vitsweep's code (a test's)
        program = started if Path(started).stem == "vitsweep" else "vitsweep"
    return shlex.join([program, *map(str, args)])


def print_comparison(comparison: "Comparison") -> None:
    """N* of both sweeps per cell with B / A, then each fitted group's exponents and their
    difference, each with its verdict; whose seeds each measured on (a warning on stderr where they
    share some: then B is no replication of A), and where their specs differ."""
    from services.report.compare import AGREE, MAY_DIFFER  # noqa: PLC0415  (CLI start-up: loads with its command)

    none = Estimate(None, None)
    rows = [
        [
            pair.label,
            fmt(pair.n_star_a),
            fmt(pair.ci95_a),
            fmt(pair.n_star_b),
            fmt(pair.ci95_b),
            fmt(ratio.value, ".2f"),
            fmt(ratio.ci95 and [math.inf if end is None else end for end in ratio.ci95], ".2f"),
            pair.verdict or "-",
        ]
        for pair in comparison.cells
        for ratio in [pair.ratio or none]
    ]
    show_table(
        f"A = {comparison.sweep_a}, B = {comparison.sweep_b}: N* per cell",
        ["cell", "A: N*", "A: 95% CI", "B: N*", "B: 95% CI", "B / A", "B / A: 95% CI", "verdict"],
        rows,
    )
    for group in comparison.groups:
        a, b = comparison.exponent_a.get(group, none), comparison.exponent_b.get(group, none)
        diff = comparison.difference.get(group, none)
        show(
            f"- exponent of N*, {group}: A {fmt(a.value, '.2f')} {fmt(a.ci95, '.2f')}, "
            f"B {fmt(b.value, '.2f')} {fmt(b.ci95, '.2f')}; "
            f"B - A {fmt(diff.value, '+.2f')}, 95% CI {fmt(diff.ci95, '+.2f')}: {comparison.verdicts.get(group, '-')}"
        )
    cells = _agreeing([p.verdict for p in comparison.cells if p.verdict], "cells (B / A's 95% CI holds 1)")
    exponents = _agreeing(list(comparison.verdicts.values()), "exponents (B - A's holds 0)")
    show(f"- {AGREE}: {cells}, {exponents}")
    show(f"- {comparison.seed_words()}")
    if comparison.shared_seeds:
        print(
            f"warning: A and B measured N* on {len(comparison.shared_seeds)} of the same seeds: B is no replication "
            "of A on fresh seeds (`vitsweep run SPEC --seed-start K`)",
            file=sys.stderr,
        )
    differences = comparison.spec_differences
    specs = f"B sets {', '.join(differences)} otherwise than A" if differences else "the same"
    show(f"- specs: {specs} ({', '.join(MAY_DIFFER)} aside)")
    if (c := comparison.contract) is not None:
        statements = "the same" if not c.statements else f"decided otherwise: {', '.join(c.statements)}"
        show(
            f"- the same answer: {'HOLDS' if c.holds else 'FAILS'} (primary N* inside the other's 95% CI: "
            f"{c.inside[0]} of {c.inside[1]}; the primary's statements {statements}; (cell, criterion) N* within "
            f"one evaluation-grid step: {c.within_step[0]} of {c.within_step[1]}, {c.CELLS_WITHIN:.0%} needed)"
        )


def _agreeing(verdicts: list[str], what: str) -> str:
    """How many of the decided ``verdicts`` say agree ("2 of 3 what"), and how many are undetermined."""
    from services.report.compare import AGREE, UNDETERMINED  # noqa: PLC0415  (CLI start-up: loads with its command)

    decided = [v for v in verdicts if v != UNDETERMINED]
    left = len(verdicts) - len(decided)
    return f"{decided.count(AGREE)} of {len(decided)} {what}" + (f", {left} undetermined" if left else "")


def print_paper_grid(grid: "PaperGrid") -> None:
    """One table per model: the paper's N* per column of its figure, then every sweep's."""
    for k, sweep in enumerate(grid.sweeps):
        first = next((g.ours[sweep] for g in grid.points if sweep in g.ours), None)
        show(f"[{k + 1}] {sweep}: {first.setting if first else 'no cell of these models'}")
    scaling = grid.scaling
    for model, power in grid.x_power.items():
        rows = [
            [fmt(g.value, ".4g"), fmt(scaling.x(g.value) ** power, ".4g"), g.paper_text()]
            + [g.ours[s].text() if s in g.ours else "-" for s in grid.sweeps]
            for g in grid.points
            if g.model == model
        ]
        columns = [f"[{k + 1}] N* (95% CI)" for k in range(len(grid.sweeps))]
        show_table(
            f"{model}: N* at p = {grid.p:g}, the paper's figure beside ours",
            [scaling.name, f"({scaling.symbol})^{power:g}", "paper", *columns],
            rows,
        )


def models_resolved(sweep) -> dict[str, dict]:
    """Each model's resolved config (its first cell's: per-model values included), as the trials build it."""
    first = {}
    for cell in sweep.cells:
        first.setdefault(cell.model, asdict(sweep.resolved_cell(cell).model))
    return first


def training_resolved(sweep) -> dict[str, tuple[dict, set[str]]]:
    """Each model's resolved training settings (its first cell's, its axes' and scaling rule's values
    in) and the names the spec wrote (the training section, the model's own, an axis, a scaling rule)."""
    spec, out = sweep.spec, {}
    for cell in sweep.cells:
        if cell.model in out:
            continue
        own = getattr(spec.per_model.get(cell.model), "training", None)
        written = set(spec.training.model_fields_set) | set(cell.values)
        written |= set(own.model_dump(exclude_none=True)) if own else set()
        rule = spec.scaling_rules.get(cell.model)
        written |= {name for name in ("batch_size", "max_steps") if rule and getattr(rule, name)}
        out[cell.model] = (asdict(sweep.resolved_cell(cell).training), written)
    return out


def run_json(out, failed: list[str]) -> dict:
    """`vitsweep run --json`: the sweep's summary as `report --json` gives it, and the run's own
    facts: where it is recorded, its trainings and times, which trials failed, Optuna's best."""
    result = out.result
    return (
        out.summary.to_dict()
        | checks_json(out.recorded.checks)
        | {
            "mlflow_parent_run_id": out.record.run_id if out.record else None,
            "tracking_uri": redact(out.uri),
            "recorded_earlier": bool(out.record and out.record.earlier),
            "trainings": result.trainings,
            "cache_hits": result.cache_hits,
            "wall_s": round(result.wall_s, 3),
            "estimated_wall_s": result.estimated_s,
            "train_s": round(result.train_s, 3),
            "busy_fraction": result.busy_fraction,
            "failed_trials": failed,
            "best": result.best,
        }
    )


def checks_json(checks) -> dict:
    """The checks other sweeps gave the answer (services.app.recorded.Checks) as JSON: those read, with
    their statements and agreement, and those not read, with why."""
    missing = [{"name": name, "why": why} for name, why in checks.missing]
    return {"sweep_checks": [asdict(c) for c in checks.found], "sweep_checks_missing": missing}
