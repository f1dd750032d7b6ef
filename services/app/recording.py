"""A finished sweep's record: its summary logged to MLflow (unless it is there already), its report
written under the home with its answer's screen and the checks its spec names as the store holds them;
`vitsweep sync` logs the sweeps whose server was down when they ended. No printing: messages go to
``say``."""

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from services.app.printing import command
from services.app.recorded import Checks, screen_of, sweep_checks
from services.report.text import ReportView, write
from services.results import SweepResult
from services.spec import parse_spec
from services.stats.summarize import summarize
from services.store import state
from services.store.uris import redact, resolve_tracking_uri, unreachable
from services.sweep_run import SweepRun

if TYPE_CHECKING:
    from services.report.answer_text import Screen
    from services.stats.rows import Summary
    from services.store.tracking import Record


class Recorded(NamedTuple):
    """A finished sweep as `record` leaves it: its MLflow record (None: MLflow was unreachable and the
    results wait under the home for `vitsweep sync`), its summary, the folder its report was written
    to, the checks its answer names as found in the store, and its answer's screen (None: no answer)."""

    record: "Record | None"
    summary: "Summary"
    folder: Path
    checks: "Checks"
    screen: "Screen | None"


def record(run: SweepRun, result: SweepResult) -> Recorded:
    """Log a finished sweep to MLflow, unless it is there already, and mark it logged; write its
    report (HOME/reports/SWEEP_ID), its answer's screen with the checks found in the store first."""
    from services.app.logs import sweep_log  # noqa: PLC0415  (matplotlib loads on use)

    sweep, uri, home = run.sweep, run.uri, run.home
    summary = summarize(sweep, result.sweep_id, result.cells)
    log = sweep_log(sweep, summary, result.cells)
    made, checks = _logged(run, result, log), Checks([], [])
    if made is not None:
        state.set_recorded(home, result.sweep_id, made.run_id)
        checks = sweep_checks(uri, log.parent.summary)
    folder = home / "reports" / result.sweep_id
    shown = screen_of(log.parent.summary, checks)
    write(folder, ReportView.from_dict(log.view), log.parent.summary, log.parent.figures, shown)
    return Recorded(made, summary, folder, checks, shown)


def _logged(run: SweepRun, result: SweepResult, log) -> "Record | None":
    """The sweep logged to MLflow (record_sweep); None, said, where the server is unreachable."""
    from services.store.tracking import record_sweep  # noqa: PLC0415  (MLflow loads on use)

    sweep, uri, home, say = run.sweep, run.uri, run.home, run.say
    given = ("--tracking-uri", redact(uri)) if uri != resolve_tracking_uri(sweep, None, home) else ()
    later = f"its results are kept under {home}; log them with: {command('sync', '--home', home, *given)}"
    if not warn_if_unreachable(uri, later, say):
        return None
    try:
        return record_sweep(sweep, result, uri, home, run.spec_text, log)
    except Exception:
        if warn_if_unreachable(uri, later, say):
            raise  # the server is up: a real error, not an outage
        return None


def sync(home: Path, tracking_uri: str | None, say: Callable[[str], None]) -> tuple[list[tuple[str, str, str]], int]:
    """Log every finished sweep under ``home`` that is not logged yet: ([(sweep id, parent run,
    tracking URI)] logged now, how many are left)."""
    logged, left = [], 0
    for sweep_id, marker in state.markers(home):
        if marker["recorded"] is not None:
            continue
        result = state.load_result(home, sweep_id)
        if result is None:
            say(
                f"{sweep_id}: not finished; to resume it, run its spec again: "
                + command(
                    "run",
                    state.folder(home, sweep_id) / state.SPEC,
                    "--home",
                    home,
                    *(("--tracking-uri", redact(tracking_uri)) if tracking_uri else ()),
                )
            )
        elif marker.get("uri_given") and not tracking_uri:
            say(f"{sweep_id}: it ran with --tracking-uri; give it again")
        else:
            text = state.spec_text(home, sweep_id)
            sweep = parse_spec(text, str(state.folder(home, sweep_id) / state.SPEC))
            uri = resolve_tracking_uri(sweep, tracking_uri, home)
            made = record(SweepRun(sweep, sweep_id, home, uri, text, say), result).record
            if made is not None:
                logged.append((sweep_id, made.run_id, redact(uri)))
                continue
        left += 1
    return logged, left


def warn_if_unreachable(uri: str, consequence: str, say: Callable[[str], None]) -> bool:
    """Say so when the tracking server cannot be reached; True when it can."""
    why = unreachable(uri)
    if why:
        say(f"warning: MLflow at {redact(uri)} is unreachable ({why}): {consequence}")
    return why is None
