"""The ``vitsweep`` command line: each command parses its arguments, calls the layer that does the
work (services.app.runs for run and sync) and prints what came back; the commands that read what
sweeps left (report, export, compare, paper, status) are services.app.cli_recorded's.
Heavy modules (torch, Ray, MLflow, matplotlib, pandas) are imported by the commands that use them:
`validate` loads none.

What it prints: services.app.printing; progress: services.app.progress; ``vitsweep train``:
services.app.train_command.
"""

import json
import os
import signal
import sys
import warnings
from pathlib import Path

import typer
from rich.console import Console

from services import process
from services.app import cli_recorded
from services.app.printing import (
    command,
    duration,
    estimate,
    models_resolved,
    print_rates,
    print_screen,
    print_summary,
    print_sweep,
    run_json,
    show,
    show_table,
    training_resolved,
    usage,
)
from services.app.progress import progress
from services.app.train_command import train
from services.spec import SpecError, json_schema, load_spec, spec_text
from services.store import state
from services.store.files import CorruptFile
from services.store.uris import UI_HOST, UI_PORT, embedded_uri, resolve_tracking_uri

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Sample-complexity experiments for shallow ViTs.")


app.command()(train)


@app.callback()
def main() -> None:
    """Sample-complexity experiments for shallow Vision Transformers."""


def entry() -> None:
    """The ``vitsweep`` command: the app, with the garbage collector frozen at exit (services.process).
    A file of the home that does not read back costs one line naming it and exit 2, not a traceback."""
    process.freeze_garbage_at_exit()
    warnings.formatwarning = lambda message, *_args, **_kw: f"vitsweep: warning: {message}\n"  # one line, no source
    try:
        app()
    except CorruptFile as corrupt:
        print(
            f"vitsweep: {corrupt.path} cannot be read ({corrupt.why}); nothing was started or changed. Move it out of "
            "the home to go on without it (the result cache keeps every model trained), or put back a good copy.",
            file=sys.stderr,
        )
        raise SystemExit(2) from None


@app.command()
def validate(path: str = typer.Argument(..., help="a sweep spec (YAML)")) -> None:
    """Check a sweep spec: exit 0, or 2 with one line per problem (field path, value, what is allowed)."""
    sweep = _load_or_exit(path)
    size = sweep.strategy.trainings_text(sweep, sweep.trainings, sweep.max_trainings_bound)
    print(f"{path}: ok: {len(sweep.cells)} cells, {size}")
    for model, config in models_resolved(sweep).items():
        print(f"  {model}: " + ", ".join(f"{key}={value}" for key, value in config.items()))
    for model, (values, written) in training_resolved(sweep).items():
        shown = ", ".join(f"{key}={value}" + ("" if key in written else " (default)") for key, value in values.items())
        print(f"  {model} training: {shown}")


@app.command()
def schema() -> None:
    """Print the JSON Schema of sweep specs (for editors)."""
    print(json.dumps(json_schema(), indent=2))


def _load_or_exit(path: str, seed_start: int | None = None):
    try:
        return load_spec(path, seed_start)
    except SpecError as error:
        print(error, file=sys.stderr)
        raise typer.Exit(2) from None


SEED_START_HELP = (
    "the first measurement seed, replacing the spec's seed_start: a replication on seeds another sweep of the "
    "spec never saw (`vitsweep compare A B` says whether they agree)"
)
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
    seed_start: int = typer.Option(None, "--seed-start", help=SEED_START_HELP),
) -> None:
    """Run a sweep: Ray Tune trials of packed models, results recorded in MLflow.

    Running the same command again continues this spec's sweep under HOME, whatever stopped it:
    finished trainings are kept, and a sweep already recorded is shown, not run again (--new runs
    it again; the result cache still spares every training it holds). Exit code 1: a trial failed,
    or Ray did not start. Exit code 2: a bad spec, or nothing answers at --ray-address
    (RAY_ADDRESS); nothing started. Exit code 3: the sweep
    finished but MLflow was unreachable; its results wait under HOME for `vitsweep sync`.
    """
    sweep = _load_or_exit(path, seed_start)
    if max_minutes is not None:
        _refuse_beyond(sweep, home, max_minutes)
    from services.app import runs  # noqa: PLC0415  (CLI start-up: loads with its command)

    try:
        with progress(sweep, progress_every) as follow:
            options = runs.RunOptions(
                home=home,
                uri=resolve_tracking_uri(sweep, tracking_uri, home),
                uri_given=tracking_uri is not None,
                ray_address=ray_address,
                cache=None if no_cache else (cache or home / "cache"),
                new=new,
            )
            out = runs.run(sweep, spec_text(path, seed_start), options, progress=follow, say=runs.stderr)
    except runs.Interrupted as stopped:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # stopped already: one more Ctrl-C has nothing left to stop
        print(stopped, file=sys.stderr)
        raise typer.Exit(stopped.exit_code) from None
    except runs.NoCluster as refused:
        print(f"vitsweep run: {refused}", file=sys.stderr)
        raise typer.Exit(2) from None
    except state.Running as running:
        print(
            f"vitsweep run: a sweep of this spec under {home} is being run by {running.holder}; nothing was started. "
            f"Wait for it to end (its trials: {command('status', '--home', home)}), or run it under another --home.",
            file=sys.stderr,
        )
        raise typer.Exit(2) from None
    except runs.RayDidNotStart as failed:
        print(f"vitsweep run: {failed}", file=sys.stderr)
        raise typer.Exit(1) from None
    parent_id = out.record.run_id if out.record else None
    if out.recorded.screen is not None:
        print_screen(out.recorded.screen)
    else:
        print_summary(out.summary)
        print_rates(sweep, out.result)
    print_sweep(sweep, out.result, out.uri, parent_id, home, out.recorded.folder)
    failed = [f for c in out.result.cells for f in c.failures]
    if as_json:
        print(json.dumps(run_json(out, failed)))
    if parent_id is None:
        raise typer.Exit(RECORDING_PENDING)
    if failed:
        raise typer.Exit(1)


def _refuse_beyond(sweep, home: Path, max_minutes: float) -> None:
    """Plan the spec here (kept under the home, for the report); exit 2 when it is estimated beyond ``max_minutes``."""
    made = _plan_here(sweep, home)
    if made.wall_s() > 60 * max_minutes:
        usage(
            f"{sweep.name}: estimated {estimate(made)} on {made.slots} slots, beyond --max-minutes {max_minutes:g}; "
            "nothing started (`vitsweep plan` shows it per cell)"
        )


def _plan_here(sweep, home: Path, pilot_s: float | None = None):
    """The spec's plan on this machine's slots, kept under the home for the run to report."""
    from services.estimate import plan, timing  # noqa: PLC0415  (CLI start-up: loads with its command)

    made = plan.make_plan(sweep, home, timing.local_slots(sweep), pilot_s or plan.PILOT_S)
    plan.save(made, sweep, home)
    return made


@app.command("plan")
def plan_command(
    path: str = typer.Argument(..., help="a sweep spec (YAML)"),
    home: Path = typer.Option(Path("runs"), "--home", help="the sweep home whose earlier sweeps inform the estimate"),
    cpus: float = typer.Option(None, "--cpus", min=1, help="also estimate on a cluster of this many CPUs"),
    gpus: float = typer.Option(0, "--gpus", min=0, help="... and this many GPUs (step times are this machine's)"),
    as_json: bool = typer.Option(False, "--json", help="print the plan as one JSON object"),
    pilot_s: float = typer.Option(
        None,
        "--pilot-s",
        min=0.1,
        help="cut each cell's pilot after this many seconds (default 3; up to 10x while none of its models "
        "stopped; the probes and pilots end within 8x it, or a 30th of the sweep expected where pilots so cut "
        "short left guesses): longer sees more runs stop",
    ),
    seed_start: int = typer.Option(None, "--seed-start", help=SEED_START_HELP),
) -> None:
    """Before a sweep runs: per cell and in total its packs, trainings and model-steps, and its
    estimated wall time here (a pilot of each cell: one pack trained briefly; an earlier sweep of
    the same name under HOME sets the rate and the steps of runs that stop early) and on --cpus/--gpus.
    The plan is kept under HOME: the sweep's run reports it beside the time it takes."""
    sweep = _load_or_exit(path, seed_start)
    from services.estimate import plan, timing  # noqa: PLC0415  (CLI start-up: loads with its command)

    made = _plan_here(sweep, home, pilot_s)
    cluster = timing.slots_of(sweep, cpus, gpus) if cpus else None
    if as_json:
        print(json.dumps(made.to_dict(cluster)))
        return
    rows = [
        [
            c.label,
            str(c.packs),
            f"{c.trainings} / {c.trainings_most}",
            f"{c.model_steps:,} / {c.model_steps_most:,}",
            f"{1000 * c.pack_step_s:.3g} + {1000 * c.step_s:.3g} k",
            duration(c.seconds),
            c.basis,
        ]
        for c in made.cells
    ]
    header = ["cell", "packs", "trainings (first round / most)", "model-steps (expected / most)", "ms a step, k models"]
    show_table(f"plan of {sweep.name}", [*header, "work", "expected from"], rows, left=("cell", "expected from"))
    show(
        f"total: {sum(c.trainings for c in made.cells)} trainings in the first rounds, "
        f"{sum(c.model_steps for c in made.cells):,} model-steps, {duration(made.work_s)} of work; "
        f"Ray Tune's own time {duration(made.start_s)} ({made.start_basis})"
    )
    show(f"this machine, {made.slots} slots: {estimate(made)} in the sweep (starting Ray and logging come on top)")
    if made.share > 1:
        show(
            f"{made.share} trials share each GPU: training side by side, each took {made.sharing:.1f}x as long a step "
            "as alone (timed here); the work counts at that pace"
        )
    if cluster:
        show(f"{cpus:g} CPUs, {gpus:g} GPUs ({cluster} slots): {estimate(made, cluster)}")
    show(
        "at most: every training at its step budget and every round its search may take, each chain of "
        f"rounds after the other, the trials up to {plan.IN_SWEEP:g}x slower than timed here"
    )
    show(
        "expected: the steps each cell's pilot saw its models take to stop (one cut at zero test error: where its "
        "window would confirm; one cut otherwise: a guess between the soonest it can stop, one pass W x the cut, "
        "and its budget) over the trainings its "
        "mode expects (an N* search: its grid and one grid step bisected; a tuned one-pass cell: its search played "
        "out where each run stops as the pilot's model nearest its batch and step size did, piloted at the grid's "
        "smallest and largest batch: later caps, settings past an edge, the "
        "measurement), at the rates timed here; after one sweep of this name under the home, "
        "plan estimates from it"
    )
    if made.guessed_share >= 0.005:
        show(
            f"a guess: {made.guessed_share:.0%} of the expected work is in cells whose pilot cut a model before it "
            "could stop (its steps: a log-uniform law between the soonest it can stop and its budget); "
            "a longer pilot (--pilot-s) or a smaller sweep of this name first measures them"
        )


@app.command()
def sync(
    home: Path = typer.Option(Path("runs"), "--home", help="the sweep home to look in"),
    tracking_uri: str = typer.Option(
        None, "--tracking-uri", help="MLflow tracking URI; default: each spec's, else SQLite under --home"
    ),
) -> None:
    """Log to MLflow every finished sweep under HOME that is not logged yet (the server was down)."""
    from services.app import recording, runs  # noqa: PLC0415  (CLI start-up: loads with its command)

    logged, left = recording.sync(home, tracking_uri, runs.stderr)
    for sweep_id, run_id, uri in logged:
        print(f"{sweep_id}: logged to {uri} (parent run {run_id})")
    if not logged and not left:
        print(f"nothing to log: every sweep under {home} is in MLflow")
    if left:
        raise typer.Exit(1)


for name, reader in (
    ("report", cli_recorded.report),
    ("export", cli_recorded.export),
    ("compare", cli_recorded.compare),
    ("paper", cli_recorded.paper),
    ("status", cli_recorded.status),
    ("results", cli_recorded.results),
):
    app.command(name)(reader)


@app.command()
def ui(
    home: Path = typer.Option(Path("runs"), "--home", help="the sweep home whose embedded MLflow store to serve"),
    host: str = typer.Option(UI_HOST, "--host", help="address to bind; 127.0.0.1 keeps it on this machine"),
    port: int = typer.Option(UI_PORT, "--port"),
    no_browser: bool = typer.Option(False, "--no-browser", help="open no browser (by default one opens where it can)"),
) -> None:
    """Serve the MLflow UI of the embedded store (runs until interrupted); first print the URLs of
    the latest sweep's parent run and of its runs, in MLflow's model-training view, and open its
    runs in a browser once the server answers (where there is a display and a browser)."""
    store = home / "mlflow.db"
    if not store.exists():
        usage(f"{store}: no MLflow store yet; run a sweep with --home {home} first")
    from services.app import browser  # noqa: PLC0415  (CLI start-up: loads with its command)
    from services.store.ui_view import ui_pages  # noqa: PLC0415  (MLflow loads on use)

    shown = f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{port}"  # what a browser here opens
    page = shown
    try:
        pages = ui_pages(embedded_uri(home), shown)
        print(f"latest sweep, {pages.sweep_id}: {pages.parent}\nthe sweep's runs: {pages.runs}", flush=True)
        page = pages.runs
    except LookupError:
        print(f"no sweep recorded in {store} yet", flush=True)
    if not no_browser and browser.can_open():
        browser.open_when_up(page, shown)
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
    follow: bool = typer.Option(
        False, "--follow", help="print the job's log as it runs, until it ends; exit 1 unless it succeeded"
    ),
) -> None:
    """Submit `vitsweep run` to a Ray cluster through the Ray Jobs API; prints the job id."""
    sweep = _load_or_exit(path)
    if not (tracking_uri or sweep.tracking.tracking_uri or home):
        print(
            "submit: give --tracking-uri (or tracking.tracking_uri in the spec) or --home: a job's working "
            "directory is deleted when it ends, and the embedded store with it",
            file=sys.stderr,
        )
        raise typer.Exit(2)
    from services.execution import jobs  # noqa: PLC0415  (Ray loads on use)

    try:
        client, job_id = jobs.submit(Path(path), sweep.name, address, tracking_uri, home)
    except ConnectionError as error:  # Ray's, at once: nothing answers at the address
        print(f"submit: {error} Is the cluster up, and --address its dashboard (http://HEAD:8265)?", file=sys.stderr)
        raise typer.Exit(2) from None
    print(job_id, flush=True)
    again = f"follow it with: ray job logs --address {address} --follow {job_id}"
    if not follow:
        Console(stderr=True).print(again, markup=False)
        return
    try:
        status = jobs.follow(client, job_id, lambda text: print(text, end="", flush=True))
    except KeyboardInterrupt:  # the job is the cluster's: it goes on
        stop = f"ray job stop --address {address} {job_id}"
        print(f"\njob {job_id} goes on; {again}; stop it with: {stop}", file=sys.stderr)
        raise typer.Exit(130) from None
    if status != "SUCCEEDED":
        print(f"job {job_id}: {status}", file=sys.stderr)
        raise typer.Exit(1)
