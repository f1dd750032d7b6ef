"""The ``vitsweep`` command line: each command parses its arguments, calls the layer that does the
work (services.runs for run, sync, report, export, compare and status) and prints what came back.
Heavy modules (torch, Ray, MLflow, matplotlib, pandas) are imported by the commands that use them:
`validate` loads none.

``vitsweep train`` trains one pack: every (N, seed) pair of one model kind at once. Its data,
model and training flags are made from the fields of vit_core's config dataclasses, so their
defaults and help texts live in one place.
"""

import dataclasses
import inspect
import json
import os
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from services import process
from services.uris import embedded_uri, redact, resolve_tracking_uri
from vit_core.configs import ModelConfig, TokenDataConfig, TrainConfig, check_fits_data
from vit_core.fields import ConfigError

if TYPE_CHECKING:
    from services.compare import Comparison, PaperGrid
    from services.stats.rows import Summary

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Sample-complexity experiments for shallow ViTs.")
CONFIGS = {"Data": TokenDataConfig, "Model": ModelConfig, "Training": TrainConfig}
FLAG_NAMES = {"kind": "--model"}  # a friendlier flag than the field's own name


@app.callback()
def main() -> None:
    """Sample-complexity experiments for shallow Vision Transformers."""


def entry() -> None:
    """The ``vitsweep`` command: the app, with the garbage collector frozen at exit (services.process)."""
    process.freeze_garbage_at_exit()
    app()


def _keyword(name: str, annotation: Any, option: Any) -> inspect.Parameter:
    """A keyword parameter of a command whose signature is built, not written (train)."""
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=annotation)


def _flag(field: dataclasses.Field, panel: str) -> inspect.Parameter:
    """A typer option for one config field: its default, help text and allowed values."""
    decl = _flag_name(field.name)
    if field.type is bool:
        decl = f"{decl}/--no-{decl[2:]}"
    option = typer.Option(field.default, decl, help=field.metadata["help"], rich_help_panel=panel)
    return _keyword(field.name, field.type, option)


def _flag_name(field: str) -> str:
    return FLAG_NAMES.get(field, "--" + field.replace("_", "-"))


def _int_list(text: str) -> list[int]:
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise typer.BadParameter(f"{text!r}: expected comma-separated integers such as 10,20,40") from None
    if not values or min(values) < 1:
        raise typer.BadParameter(f"{text!r}: expected positive integers such as 10,20,40")
    return values


def _device(name: str) -> str:
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(name)
    except RuntimeError:
        raise typer.BadParameter(f"{name!r}: expected cpu, cuda, cuda:N or auto") from None
    if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
        raise typer.BadParameter(f"{name!r}: {torch.cuda.device_count()} CUDA devices are visible; use cpu or auto")
    return name


def _configs(values: dict[str, Any]) -> tuple[TokenDataConfig, ModelConfig, TrainConfig]:
    """Build the three configs from the flags; a bad value is a usage error (exit code 2)."""
    try:
        data, model, training = (
            cls(**{f.name: values[f.name] for f in dataclasses.fields(cls)}) for cls in CONFIGS.values()
        )
        check_fits_data(model, data.dim, data.n_patterns)
        return data, model, training
    except ConfigError as error:
        raise typer.BadParameter(
            f"{error.value!r}: {error.allowed}", param_hint=f"'{_flag_name(error.field)}'"
        ) from None


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


def _per_n_rows(rows: list[dict]) -> list[list[str]]:
    fmt = lambda v, spec: "-" if v is None else format(v, spec)  # noqa: E731
    return [
        [
            str(r["n"]),
            str(r["models"]),
            fmt(r["success_rate"], ".2f"),
            fmt(r["mean_test_error"], ".4f"),
            fmt(r["median_iterations_to_zero"], ".0f"),
            str(r["settled"]),
            str(r["diverged"]),
            fmt(r["mean_attention_mass"], ".3f"),
        ]
        for r in rows
    ]


def train(**values: Any) -> None:
    """Train every (N, seed) pair of one model kind as one pack and report outcomes per N."""
    import torch

    from vit_core import train_pack

    data, model, training = _configs(values)
    n_values, seeds = values["n"], list(range(values["seed_start"], values["seed_start"] + values["seeds"]))
    if values["threads"]:
        torch.set_num_threads(values["threads"])
    n_train = [n for n in n_values for _ in seeds]
    console = Console(stderr=True)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task(f"{model.kind}: {len(n_train)} models", total=training.max_steps)

        def report(step: int, left: int) -> None:
            done = step if left else training.max_steps
            bar.update(task, completed=done, description=f"{model.kind}: {left} of {len(n_train)} models training")

        result = train_pack(
            data, model, training, n_train, seeds * len(n_values), device=values["device"], progress=report
        )
    rows = result.by_n()
    show_table(
        f"{model.kind}, alpha*={data.alpha_star} (effective {data.effective_alpha_star:.4f}), "
        f"{len(seeds)} seeds, {result.wall_s:.1f} s",
        ["N", "models", "success", "test error", "steps to 0", "settled", "diverged", "attn mass"],
        _per_n_rows(rows),
        left=(),
    )
    if values["json"]:
        summary = {
            "model": model.kind,
            "alpha_star": data.alpha_star,
            "effective_alpha_star": data.effective_alpha_star,
            "trainings": len(n_train),
            "wall_s": round(result.wall_s, 3),
            "per_n": rows,
            "models": result.records(),
            "config": {name.lower(): dataclasses.asdict(cfg) for name, cfg in zip(CONFIGS, (data, model, training))},
        }
        print(json.dumps(summary))


_RUN_FLAGS = [
    _keyword(
        "n",
        str,
        typer.Option(
            "10,20,40,80", "--n", help="training-set sizes N, comma-separated", parser=_int_list, rich_help_panel="Pack"
        ),
    ),
    _keyword("seeds", int, typer.Option(8, "--seeds", min=1, help="seeds per N", rich_help_panel="Pack")),
    _keyword("seed_start", int, typer.Option(0, "--seed-start", min=0, help="first seed", rich_help_panel="Pack")),
    _keyword(
        "device",
        str,
        typer.Option("cpu", "--device", help="cpu, cuda, cuda:N, or auto", parser=_device, rich_help_panel="Pack"),
    ),
    _keyword(
        "threads",
        int,
        typer.Option(0, "--threads", min=0, help="torch threads (0: torch's default)", rich_help_panel="Pack"),
    ),
    _keyword("json", bool, typer.Option(False, "--json", help="end stdout with one JSON object of the results")),
]
train.__signature__ = inspect.Signature(
    [_flag(f, panel) for panel, cls in CONFIGS.items() for f in dataclasses.fields(cls)] + _RUN_FLAGS
)
app.command()(train)


@app.command()
def validate(path: str = typer.Argument(..., help="a sweep spec (YAML)")) -> None:
    """Check a sweep spec: exit 0, or 2 with one line per problem (field path, value, what is allowed)."""
    spec = _load_or_exit(path)
    size = spec.mode.trainings_text(spec, spec.trainings, spec.max_trainings_bound)
    print(f"{path}: ok: {len(spec.cells)} cells, {size}")
    for model, config in _models_resolved(spec).items():
        print(f"  {model}: " + ", ".join(f"{key}={value}" for key, value in config.items()))


def _models_resolved(spec) -> dict[str, dict]:
    """Each model's resolved config (its first cell's: per-model values included), as the trials build it."""
    from dataclasses import asdict

    first = {}
    for cell in spec.cells:
        first.setdefault(cell.model, asdict(spec.plan(cell).model))
    return first


@app.command()
def schema() -> None:
    """Print the JSON Schema of sweep specs (for editors)."""
    from services.spec import SCHEMA

    print(json.dumps(SCHEMA.json_schema(), indent=2))


def _load_or_exit(path: str):
    from services.spec import SpecError, load_spec

    try:
        return load_spec(path)
    except SpecError as error:
        print(error, file=sys.stderr)
        raise typer.Exit(2) from None


RECORDING_PENDING = 3  # exit code of run: the sweep finished but MLflow was unreachable; `vitsweep sync` logs it later


@app.command()
def run(
    path: str = typer.Argument(..., help="a sweep spec (YAML)"),
    ray_address: str = typer.Option(
        None, "--ray-address", help="an existing Ray cluster (default: RAY_ADDRESS, else a local Ray on this machine)"
    ),
    tracking_uri: str = typer.Option(
        None, "--tracking-uri", help="MLflow tracking URI; default: the spec's, else SQLite under --home"
    ),
    home: Path = typer.Option(
        Path("runs"), "--home", help="sweep home: Ray's trial state, the result cache and the embedded MLflow store"
    ),
    cache: Path = typer.Option(
        None, "--cache", help="result cache folder (default: HOME/cache; on a cluster, a folder every node mounts)"
    ),
    no_cache: bool = typer.Option(False, "--no-cache", help="train every model; read and write no result cache"),
    as_json: bool = typer.Option(False, "--json", help="end stdout with one JSON object summarising the sweep"),
    new: bool = typer.Option(
        False, "--new", help="start a new sweep even if this spec's sweep under HOME is finished and recorded"
    ),
    max_minutes: float = typer.Option(
        None,
        "--max-minutes",
        min=0,
        help="refuse (exit 2) a sweep that `vitsweep plan` estimates longer than this on this machine",
    ),
    progress_every: float = typer.Option(
        None,
        "--progress-every",
        min=0,
        help="where stderr is not a terminal: a progress line every SECONDS (default: VITSWEEP_PROGRESS_S, else 30)",
    ),
) -> None:
    """Run a sweep: Ray Tune trials of packed models, results recorded in MLflow.

    Running the same command again continues this spec's sweep under HOME, whatever stopped it:
    finished trainings are kept, and a sweep already recorded is shown, not run again (--new runs
    it again; the result cache still spares every training it holds). Exit code 3: the sweep
    finished but MLflow was unreachable; its results wait under HOME for `vitsweep sync`.
    """
    spec = _load_or_exit(path)
    if max_minutes is not None:
        _refuse_beyond(spec, home, max_minutes)
    from services import runs

    try:
        with _progress(spec, progress_every) as follow:
            out = runs.run(
                spec,
                Path(path).read_text(),
                home,
                resolve_tracking_uri(spec, tracking_uri, home),
                tracking_uri is not None,
                ray_address,
                None if no_cache else (cache or home / "cache"),
                new,
                follow,
                runs.stderr,
            )
    except runs.Interrupted as stopped:
        print(stopped, file=sys.stderr)
        raise typer.Exit(130) from None
    parent_id = out.record.run_id if out.record else None
    _print_summary(out.summary)
    _print_sweep(spec, out.result, redact(out.uri), parent_id, home)
    failed = [f for c in out.result.cells for f in c.failures]
    if as_json:
        print(json.dumps(_run_json(out, failed)))
    if parent_id is None:
        raise typer.Exit(RECORDING_PENDING)
    if failed:
        raise typer.Exit(1)


def _refuse_beyond(spec, home: Path, max_minutes: float) -> None:
    """Plan the spec here (kept under the home, for the report); exit 2 when it is estimated beyond ``max_minutes``."""
    made = _plan_here(spec, home)
    if made.wall_s() > 60 * max_minutes:
        _usage(
            f"{spec.name}: estimated {_estimate(made)} on {made.slots} slots, beyond --max-minutes {max_minutes:g}; "
            "nothing started (`vitsweep plan` shows it per cell)"
        )


def _plan_here(spec, home: Path):
    """The spec's plan on this machine's slots, kept under the home for the run to report."""
    from services import plan

    made = plan.make_plan(spec, home, plan.local_slots(spec))
    plan.save(made, spec, home)
    return made


def _estimate(made, slots: int | None = None) -> str:
    """A plan's wall time in words: "at most" where some cell has only its budget to go by."""
    return f"{'at most ' if made.bounded else ''}{_duration(made.wall_s(slots))}"


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


@app.command("plan")
def plan_command(
    path: str = typer.Argument(..., help="a sweep spec (YAML)"),
    home: Path = typer.Option(Path("runs"), "--home", help="the sweep home whose earlier sweeps inform the estimate"),
    cpus: float = typer.Option(None, "--cpus", min=1, help="also estimate on a cluster of this many CPUs"),
    gpus: float = typer.Option(0, "--gpus", min=0, help="... and this many GPUs (step times are this machine's)"),
    as_json: bool = typer.Option(False, "--json", help="print the plan as one JSON object"),
) -> None:
    """Before a sweep runs: per cell and in total its packs, trainings and model-steps, and its
    estimated wall time here (a pilot of each cell: one pack trained briefly; an earlier sweep of
    the same name under HOME sets the rate and the steps of runs that stop early) and on --cpus/--gpus.
    The plan is kept under HOME: the sweep's run reports it beside the time it takes."""
    spec = _load_or_exit(path)
    from services import plan

    made = _plan_here(spec, home)
    cluster = plan.slots_of(spec, cpus, gpus) if cpus else None
    if as_json:
        print(json.dumps(made.to_dict(cluster)))
        return
    rows = [
        [
            c.label,
            str(c.packs),
            f"{c.trainings} / {c.trainings_most}",
            f"{c.model_steps:,} / {c.model_steps_most:,}",
            f"{1000 * c.step_s:.3g}",
            _duration(c.seconds),
            c.basis,
        ]
        for c in made.cells
    ]
    header = ["cell", "packs", "trainings (first round / most)", "model-steps (expected / most)", "ms a model-step"]
    show_table(f"plan of {spec.name}", [*header, "work", "expected from"], rows, left=("cell", "expected from"))
    show(
        f"total: {sum(c.trainings for c in made.cells)} trainings in the first rounds, "
        f"{sum(c.model_steps for c in made.cells):,} model-steps, {_duration(made.work_s)} of work; "
        f"Ray Tune's own time {_duration(made.start_s)} ({made.start_basis})"
    )
    show(f"this machine, {made.slots} slots: {_estimate(made)} in the sweep (starting Ray and logging come on top)")
    if cluster:
        show(f"{cpus:g} CPUs, {gpus:g} GPUs ({cluster} slots): {_estimate(made, cluster)}")
    if made.bounded:
        show(
            "at most: runs that stop early (settled, a window confirmed) and adaptive rounds take a fraction of "
            "their budget that only a run shows; after one sweep of this name under the home, plan estimates from it"
        )


@contextmanager
def _progress(spec, every: float | None):
    """How a run shows its progress: rich's live bar on a terminal, else ProgressLines every
    ``every`` seconds (VITSWEEP_PROGRESS_S, else 30)."""
    if sys.stderr.isatty():
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
        with Progress(
            *columns, TimeElapsedColumn(), TimeRemainingColumn(), console=Console(stderr=True), transient=True
        ) as bar:
            yield _ProgressBar(bar, spec)
        return
    with ProgressLines(spec, float(os.environ.get("VITSWEEP_PROGRESS_S", 30)) if every is None else every) as lines:
        yield lines


class _ProgressBar:
    """runs.Progress on a rich progress bar (a terminal): one task, the sweep's trials."""

    def __init__(self, bar: Progress, spec):
        self.bar, self.spec, self.task, self.sweep_id = bar, spec, None, ""

    def start(self, sweep_id: str, trials: int | None, slots: int) -> None:
        self.sweep_id, self.task = sweep_id, self.bar.add_task(f"{sweep_id}: trials", total=trials)

    def advance(self, done: int, failed: int, models: int, train_s: float, running_since: list[float]) -> None:
        self.bar.update(
            self.task,
            completed=done,
            description=f"{self.sweep_id}: {models}/{self.spec.trainings} models, {failed} trials failed; trials",
        )


class ProgressLines:
    """runs.Progress as plain lines on stderr (a log, a pipe, a Ray job's log), at most one every
    ``every`` seconds as trials end, and one every ``every`` seconds while none does: trials done
    of all (when known), models trained, elapsed time, an ETA and how busy the trials kept the
    slots so far (finished trials' training and running trials' time). A context manager: its
    timer stops on exit."""

    def __init__(self, spec, every: float):
        self.spec, self.every = spec, every
        self.sweep_id, self.trials, self.slots = "", None, 1
        self.done = self.failed = self.models = 0
        self.train_s, self.began, self.printed = 0.0, time.monotonic(), float("-inf")
        self.running: list[float] = []
        self.lock, self.stopped = threading.Lock(), threading.Event()

    def __enter__(self) -> "ProgressLines":
        threading.Thread(target=self._tick, name="progress-lines", daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopped.set()

    def start(self, sweep_id: str, trials: int | None, slots: int) -> None:
        self.sweep_id, self.trials, self.slots = sweep_id, trials, max(1, slots)
        self.began = time.monotonic()

    def advance(self, done: int, failed: int, models: int, train_s: float, running_since: list[float]) -> None:
        new = done > self.done
        self.done, self.failed, self.models, self.train_s, self.running = done, failed, models, train_s, running_since
        if new and time.monotonic() - self.printed >= self.every:
            self._line()

    def _tick(self) -> None:
        while not self.stopped.wait(max(self.every, 1.0)):
            if self.sweep_id and time.monotonic() - self.printed >= self.every:
                self._line()

    def _line(self) -> None:
        with self.lock:
            self.printed = now = time.monotonic()
            elapsed = now - self.began
            total, done = (self.trials, self.done) if self.trials else (self.spec.trainings, self.models)
            eta = elapsed * (total - done) / done if done and total and total > done else None
            busy_s = self.train_s + sum(
                now - start for start in self.running
            )  # finished trials, and running ones so far
            busy = min(1.0, busy_s / (self.slots * elapsed)) if elapsed > 0 else 0.0
            of = f"/{self.trials}" if self.trials else ""
            print(
                f"[{self.sweep_id}] {self.done}{of} trials ({self.failed} failed), {self.models} models trained, "
                f"{_clock(elapsed)} elapsed, ETA {'-' if eta is None else _clock(eta)}, "
                f"{self.slots} slots {busy:.0%} busy so far",
                file=sys.stderr,
                flush=True,
            )


def _clock(seconds: float) -> str:
    minutes, seconds = divmod(int(seconds), 60)
    return f"{minutes}:{seconds:02d}"


def _run_json(out, failed: list[str]) -> dict:
    """`vitsweep run --json`: the sweep's summary as `report --json` gives it, and the run's own
    facts: where it is recorded, its trainings and times, which trials failed, Optuna's best."""
    result = out.result
    return out.summary.to_dict() | {
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


@app.command()
def sync(
    home: Path = typer.Option(Path("runs"), "--home", help="the sweep home to look in"),
    tracking_uri: str = typer.Option(
        None, "--tracking-uri", help="MLflow tracking URI; default: each spec's, else SQLite under --home"
    ),
) -> None:
    """Log to MLflow every finished sweep under HOME that is not logged yet (the server was down)."""
    from services import runs

    logged, left = runs.sync(home, tracking_uri, runs.stderr)
    for sweep_id, run_id, uri in logged:
        print(f"{sweep_id}: logged to {uri} (parent run {run_id})")
    if not logged and not left:
        print(f"nothing to log: every sweep under {home} is in MLflow")
    if left:
        raise typer.Exit(1)


def _print_summary(summary: "Summary") -> None:
    """The per-cell N* table (bracket, CI, T) and the fits against theory."""
    from services.report import notes, table_header, table_rows

    title = f"{summary.sweep_id}: N* = smallest N from which the success rate stays >= {summary.success_rate}"
    show_table(title, table_header(summary), table_rows(summary))
    for line in notes(summary):
        show(f"- {line}")


def _rate(row: dict) -> str:
    """A success rate, with the models left out of it (not converged, diverged) when there are any."""
    rate = "-" if row["success_rate"] is None else f"{row['success_rate']:.2f}"
    left_out = row["not_converged"] + row["diverged"]
    return f"{rate}({left_out} left out)" if left_out else rate


def _print_sweep(spec, result, uri: str, parent_id: str | None, home: Path) -> None:
    """Success rates per N, failed trials, the best Optuna trial and where the results are."""
    rows = []
    for cell in result.cells:
        per_n = cell.by_n()
        if spec.plan(cell.cell).one_pass:  # every evaluated N: show where the rate changes
            per_n = [r for i, r in enumerate(per_n) if i in (0, len(per_n) - 1) or _rate(r) != _rate(per_n[i - 1])]
        rows.append([cell.cell.label, " ".join(f"{r['n']}:{_rate(r)}" for r in per_n)])
    show_table("success rate per N", ["cell", "success rate per N"], rows, left=("cell", "success rate per N"))
    for failure in (f for cell in result.cells for f in cell.failures):
        print(f"failed trial: {failure}", file=sys.stderr)
    if result.best:
        show(f"best ({spec.search.metric}, {spec.search.direction}): {result.best}")
    show(
        f"{result.trainings} trainings ({result.cache_hits} more read from the result cache) in {result.wall_s:.1f} s"
        + ("" if result.estimated_s is None else f" (vitsweep plan estimated {result.estimated_s:.0f} s)")
        + ("." if result.busy_fraction is None else f"; {result.slots} slots {result.busy_fraction:.0%} busy.")
    )
    if parent_id is None:
        return
    show(f"MLflow: {uri} (parent run {parent_id})")
    if (home / "mlflow.db").exists():
        show(f"Open the UI with: vitsweep ui --home {home}")


@app.command("report")
def report_command(
    sweep_id: str = typer.Argument(None, help="a sweep id (default: the latest sweep in the store)"),
    tracking_uri: str = typer.Option(None, "--tracking-uri", help="MLflow tracking URI; default: SQLite under --home"),
    home: Path = typer.Option(Path("runs"), "--home", help="the sweep home whose embedded MLflow store to read"),
    out: Path = typer.Option(None, "--out", help="folder for the figures and summary (default: HOME/reports/SWEEP_ID)"),
    as_json: bool = typer.Option(
        False, "--json", help="end stdout with one JSON object: exponent, n_star, and the rest"
    ),
) -> None:
    """Write a recorded sweep's figures and summary table (Markdown, HTML, JSON) and print the table."""
    from services import runs

    with _store(tracking_uri, home) as uri:
        summary, folder = runs.report(uri, sweep_id, out, home)
    _print_summary(summary)
    show(f"report written to {folder}")
    if as_json:
        print(json.dumps(summary.to_dict() | {"folder": str(folder)}))


EXPORT_FORMATS = {".csv": "to_csv", ".parquet": "to_parquet", ".pq": "to_parquet"}


@app.command()
def export(
    sweep_id: str = typer.Argument(None, help="a sweep id (default: the latest sweep in the store)"),
    out: Path = typer.Option(..., "--out", help="the file to write: .csv, or .parquet (.pq)"),
    table: str = typer.Option(
        "models", "--table", help="models: one row per model record; cells: one row per cell (N*, its CI, ...)"
    ),
    tracking_uri: str = typer.Option(None, "--tracking-uri", help="MLflow tracking URI; default: SQLite under --home"),
    home: Path = typer.Option(Path("runs"), "--home", help="the sweep home whose embedded MLflow store to read"),
) -> None:
    """Write a recorded sweep's per-model records or per-cell results as CSV or Parquet: the
    DataFrames vitsweep.load_sweep returns."""
    if out.suffix.lower() not in EXPORT_FORMATS:
        _usage(f"--out {out}: the file name must end in {', '.join(EXPORT_FORMATS)}")
    if table not in ("models", "cells"):
        _usage(f"--table {table}: must be models or cells")
    from services import runs

    with _store(tracking_uri, home) as uri:
        found = runs.frames(uri, sweep_id)
    frame = getattr(found, table)
    out.parent.mkdir(parents=True, exist_ok=True)
    getattr(frame, EXPORT_FORMATS[out.suffix.lower()])(out, index=False)
    print(f"{found.sweep_id}: {len(frame)} rows of {table} written to {out}")


@app.command()
def compare(
    sweep_a: str = typer.Argument(..., help="the first sweep's id (A)"),
    sweep_b: str = typer.Argument(..., help="the second sweep's id (B); differences are B minus A"),
    tracking_uri: str = typer.Option(None, "--tracking-uri", help="MLflow tracking URI; default: SQLite under --home"),
    home: Path = typer.Option(Path("runs"), "--home", help="the sweep home whose embedded MLflow store to read"),
    out: Path = typer.Option(None, "--out", help="folder for the figure and JSON (default: HOME/reports/compare-A-B)"),
    as_json: bool = typer.Option(False, "--json", help="end stdout with one JSON object of the comparison"),
) -> None:
    """Two recorded sweeps side by side: N* per cell, the exponents of N* in the family's x (Paper
    A: 1/alpha*) with their CIs, B's exponent minus A's with a bootstrap CI, and one overlaid
    figure, also logged to MLflow as a run of its own in B's experiment."""
    from services import runs

    with _store(tracking_uri, home) as uri:
        comparison, folder, run_id = runs.compare(uri, sweep_a, sweep_b, out, home)
    _print_comparison(comparison)
    show(f"figure and JSON written to {folder}; MLflow run {run_id}")
    if as_json:
        print(json.dumps(comparison.to_dict() | {"folder": str(folder), "mlflow_run_id": run_id}))


def _print_comparison(comparison: "Comparison") -> None:
    """N* of both sweeps per cell, then each fitted group's exponents and their difference."""
    from services.analysis import Estimate
    from services.stats.base import fmt

    rows = []
    for pair in comparison.cells:
        ratio = pair.n_star_b / pair.n_star_a if pair.n_star_a and pair.n_star_b else None
        rows.append(
            [pair.label, fmt(pair.n_star_a), fmt(pair.ci95_a), fmt(pair.n_star_b), fmt(pair.ci95_b), fmt(ratio, ".2f")]
        )
    show_table(
        f"A = {comparison.sweep_a}, B = {comparison.sweep_b}: N* per cell",
        ["cell", "A: N*", "A: 95% CI", "B: N*", "B: 95% CI", "B / A"],
        rows,
    )
    for group in comparison.groups:
        none = Estimate(None, None)
        a, b = comparison.exponent_a.get(group, none), comparison.exponent_b.get(group, none)
        diff = comparison.difference.get(group, none)
        show(
            f"- exponent of N*, {group}: A {fmt(a.value, '.2f')} {fmt(a.ci95, '.2f')}, "
            f"B {fmt(b.value, '.2f')} {fmt(b.ci95, '.2f')}; "
            f"B - A {fmt(diff.value, '+.2f')}, 95% CI {fmt(diff.ci95, '+.2f')}"
        )


@app.command()
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
    from services import runs

    with _store(tracking_uri, home) as uri:
        grid, folder, run_id = runs.paper_grid(uri, sweeps, out, home)
    _print_paper_grid(grid)
    show(f"figure and JSON written to {folder}; MLflow run {run_id}")
    if as_json:
        print(json.dumps(grid.to_dict() | {"folder": str(folder), "mlflow_run_id": run_id}))


def _print_paper_grid(grid: "PaperGrid") -> None:
    """One table per model: the paper's N* per column of its figure, then every sweep's."""
    from services.stats.base import fmt

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


@contextmanager
def _store(tracking_uri: str | None, home: Path):
    """The tracking URI to read (the given one, else the embedded store under ``home``), exiting
    with code 2 where there is no store or the sweep asked for is not in it."""
    if not tracking_uri and not (home / "mlflow.db").exists():
        _usage(
            f"{home / 'mlflow.db'}: no MLflow store yet; run a sweep with --home {home} first, or give --tracking-uri"
        )
    try:
        yield tracking_uri or embedded_uri(home)
    except LookupError as error:
        _usage(str(error))


def _usage(message: str) -> NoReturn:
    """Print why the command cannot run, and exit with code 2 (nothing was started)."""
    print(message, file=sys.stderr)
    raise typer.Exit(2)


@app.command()
def status(
    home: Path = typer.Option(Path("runs"), "--home", help="the sweep home to look in"),
    as_json: bool = typer.Option(False, "--json", help="print the list as one JSON array"),
) -> None:
    """List the sweeps under a home with their trials by status (from Ray Tune's own state)."""
    from services import runs

    rows = runs.status(home)
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


@app.command()
def ui(
    home: Path = typer.Option(Path("runs"), "--home", help="the sweep home whose embedded MLflow store to serve"),
    host: str = typer.Option("127.0.0.1", "--host", help="address to bind; 127.0.0.1 keeps it on this machine"),
    port: int = typer.Option(5000, "--port"),
) -> None:
    """Serve the MLflow UI of the embedded store (runs until interrupted); first print the URL of
    the latest sweep's parent run, in MLflow's model-training view."""
    store = home / "mlflow.db"
    if not store.exists():
        _usage(f"{store}: no MLflow store yet; run a sweep with --home {home} first")
    from services import tracking

    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host  # what a browser on this machine opens
    try:
        sweep_id, url = tracking.run_page(embedded_uri(home), f"http://{shown}:{port}")
        print(f"latest sweep, {sweep_id}: {url}", flush=True)
    except LookupError:
        print(f"no sweep recorded in {store} yet", flush=True)
    mlflow = Path(sys.executable).parent / "mlflow"
    serve = ["ui", "--backend-store-uri", embedded_uri(home), "--host", host, "--port", str(port)]
    # one worker: a person's UI on one SQLite file (MLflow's default of 4 starts four servers)
    process.apply_environment(process.UI_ENVIRONMENT)
    os.execv(str(mlflow), [str(mlflow), *serve, "--workers", "1"])


@app.command()
def submit(
    path: str = typer.Argument(..., help="a sweep spec (YAML), relative to the project root"),
    address: str = typer.Option(..., "--address", help="the cluster's dashboard, e.g. http://HEAD:8265"),
    tracking_uri: str = typer.Option(
        None, "--tracking-uri", help="an MLflow server the cluster reaches (default: the spec's)"
    ),
    home: str = typer.Option(
        None, "--home", help="a path on the cluster that outlives the job, for Ray's state and a SQLite store"
    ),
    follow: bool = typer.Option(False, "--follow", help="wait for the job, print its log, exit 1 unless it succeeded"),
) -> None:
    """Submit `vitsweep run` to a Ray cluster through the Ray Jobs API; prints the job id."""
    spec = _load_or_exit(path)
    if not (tracking_uri or spec.tracking.tracking_uri or home):
        print(
            "submit: give --tracking-uri (or tracking.tracking_uri in the spec) or --home: a job's working "
            "directory is deleted when it ends, and the embedded store with it",
            file=sys.stderr,
        )
        raise typer.Exit(2)
    from services.execution import jobs

    client, job_id = jobs.submit(Path(path), spec.name, address, tracking_uri, home)
    print(job_id, flush=True)
    if not follow:
        Console(stderr=True).print(f"follow it with: ray job logs --address {address} --follow {job_id}", markup=False)
        return
    status, logs = jobs.wait(client, job_id)
    print(logs, end="")
    if status != "SUCCEEDED":
        print(f"job {job_id}: {status}", file=sys.stderr)
        raise typer.Exit(1)
