"""What `vitsweep run` does, without the command line: the flow from a spec to a recorded sweep,
with its state explicit (``Stage``) so that every path is testable (recording it and `sync`:
services.app.recording; `report`, `compare`, `paper` and `status`: services.app.recorded).

Running a spec again continues its newest sweep under the home, whatever stopped it: a sweep
whose trials did not all finish RESUMEs (Ray Tune's state), a FINISHED one (results saved under
the home) is logged to MLflow, or shown when its record is already there; a NEW one starts when
there is none, or when asked (``new``). Nothing here prints: messages go to ``say``. Ray,
MLflow and matplotlib load in the functions that use them, so that each command loads only what it
needs (``status`` of a home with no Tune state loads none of them).
"""

import contextlib
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from services.app.printing import command
from services.app.recording import Recorded, record, warn_if_unreachable
from services.estimate import plan
from services.results import CellResult, SweepResult
from services.search.planners import trial_count
from services.spec import Sweep
from services.stats.summarize import summarize
from services.store import registry, state
from services.store.uris import redact
from services.sweep_run import SweepRun, Trials

if TYPE_CHECKING:
    from services.stats.rows import Summary
    from services.store.live import LiveRecord
    from services.store.logged import SummaryLog
    from services.store.tracking import Record


class Stage(Enum):
    NEW = "new"  # no sweep of this spec under the home (or a new one was asked for): train
    RESUME = "resume"  # an earlier run stopped before every trial finished: train what is left
    FINISHED = "finished"  # every trial finished earlier: log it, or show its record


class Progress(Protocol):
    """Follows a sweep's trials (a progress bar, or progress lines): ``start`` once Ray knows how
    many trials run (None: the searcher decides) on how many slots, and how long the spec's plan
    expects the sweep to take there (None: never planned)."""

    def start(self, sweep_id: str, trials: int | None, slots: int, planned_s: float | None) -> None: ...

    def advance(self, trials: Trials) -> None: ...

    def ended(self, now: str) -> None:
        """The trials are over; ``now``: what the command does until it exits, said once, in place of the trials'."""


class Interrupted(Exception):
    """The sweep stopped before every trial finished (Ctrl-C, or SIGTERM: ``signum``); the
    finished ones are kept. ``result``: what Tune returned, None where a second Ctrl-C cut its
    stop short (its state as last saved, at ``storage``). ``exit_code``: 128 + the signal's
    number, as a shell reports it."""

    def __init__(self, result: SweepResult | None, signum: int = signal.SIGINT, storage: Path | None = None):
        self.exit_code = 128 + signum
        by = "" if signum == signal.SIGINT else f" by {signal.Signals(signum).name}"
        if result is None:
            what, kept = "Ray Tune's stop was cut short", f"in Ray Tune's state as last saved at {storage}"
        else:
            what = f"{result.unfinished} trials did not finish" + (
                ", and the search had more to plan" if result.search_stopped else ""
            )
            kept = f"in Ray Tune's state at {result.storage}"
        super().__init__(
            f"interrupted{by}: {what}. The finished ones are kept {kept} and in the result cache; its live MLflow "
            "record (where the server answered) ends KILLED. Run the same command again to resume: it goes on in "
            "the same runs."
        )


class NoCluster(Exception):
    """Nothing answers at the Ray cluster address the run was given; nothing was started."""

    def __init__(self, address: str, why: str):
        super().__init__(
            f"no Ray cluster answers at {address} (--ray-address, else RAY_ADDRESS): {why}. Nothing was started. "
            "Start the cluster first (`ray start --head`, or `make stack` for the compose stack), or give neither "
            "to run on a Ray of this machine's own."
        )


class RayDidNotStart(Exception):
    """Ray could not be started, or the cluster at ``address`` joined (ray.init raised); nothing was trained."""

    def __init__(self, error: BaseException, address: str | None):
        reason = " ".join(str(error).split()) or type(error).__name__
        if address:
            super().__init__(
                f"the Ray cluster at {address} could not be joined: {reason} Nothing was trained; the same command "
                "goes on in this sweep's runs once it can."
            )
        else:
            super().__init__(
                f"Ray did not start: {reason} Nothing was trained. Run the same command again: it goes on in this "
                "sweep's runs (a machine busy enough to delay Ray's own processes fails its start now and then)."
            )


@dataclass(frozen=True, kw_only=True)
class RunOptions:
    """How a spec's sweep runs, beside the spec: its home, its MLflow store (``uri_given``: named by
    the user, so the sweep's marker keeps it), the cluster (None: a local Ray unless RAY_ADDRESS), the
    result cache (None: none) and whether to start a new sweep whatever the home holds."""

    home: Path
    uri: str
    uri_given: bool = False
    ray_address: str | None = None
    cache: Path | None = None
    new: bool = False


@dataclass
class Found:
    """What a home holds of a spec's sweeps, so what running it will do: its stage, the sweep it
    continues (None: a new one) and that sweep's saved results (FINISHED only)."""

    stage: Stage
    sweep_id: str | None
    result: SweepResult | None = None


@dataclass
class Ran:
    """A run's end: the sweep's results, and what recording it left (Recorded)."""

    found: Found
    result: SweepResult
    recorded: Recorded
    uri: str

    @property
    def summary(self) -> "Summary":
        return self.recorded.summary

    @property
    def record(self) -> "Record | None":
        return self.recorded.record


def find(sweep: Sweep, home: Path, new: bool) -> Found:
    """The stage of this spec's newest sweep under ``home`` (``new``: a new sweep whatever exists)."""
    sweep_id = None if new else state.latest_sweep(sweep, home)
    if sweep_id is None:
        return Found(Stage.NEW, None)
    result = state.load_result(home, sweep_id)
    return Found(Stage.FINISHED, sweep_id, result) if result else Found(Stage.RESUME, sweep_id)


def run(sweep: Sweep, spec_text: str, options: RunOptions, *, progress: Progress, say: Callable[[str], None]) -> Ran:
    """Run, resume, log or show this spec's sweep (see the module's docstring); state.Running,
    nothing done, where another process drives a sweep of this spec under its home."""
    home, uri, uri_given, new = options.home, options.uri, options.uri_given, options.new
    home.mkdir(parents=True, exist_ok=True)
    with state.driving(sweep, home):
        step, stop_ray = find(sweep, home, new), None
        result = step.result
        if step.stage is Stage.NEW:
            step.sweep_id = state.new_sweep_id(sweep, home)
        run = SweepRun(sweep, step.sweep_id, home, uri, spec_text, say, progress=progress.advance)
        if step.stage is not Stage.FINISHED:
            _check_cluster(options.ray_address)
            reachable = warn_if_unreachable(
                uri, f"training goes on; results are kept under {home} and logged when it is back", say
            )
            if step.stage is Stage.RESUME:
                say(
                    f"resuming {step.sweep_id}: an earlier run of this spec under {home} did not finish; its finished "
                    "trials are kept"
                )
            else:
                state.mark_sweep(sweep, step.sweep_id, home, spec_text, uri_given=uri_given)
            live = run.live = _live_record(run) if reachable else None
            try:
                result, stop_ray = train(run, options, resume=step.stage is Stage.RESUME, progress=progress)
            except BaseException as stopped:
                with _deaf_to_ctrl_c():  # a Ctrl-C more, here, would leave the record RUNNING and the user no word
                    if live is not None:
                        live.close("KILLED" if isinstance(stopped, (Interrupted, KeyboardInterrupt)) else "FAILED")
                if isinstance(stopped, KeyboardInterrupt):  # a second Ctrl-C while Tune stopped: no last save
                    raise Interrupted(None, storage=state.folder(home, step.sweep_id).resolve()) from None
                raise
            progress.ended(f"summarizing its {len(result.cells)} cells and logging them to MLflow")
            if live is not None:
                live.close(None)
            result.estimated_s = _estimated_s(sweep, home, result.slots)
            state.save_result(result, home)
        recorded = _record_alongside(stop_ray, run, result)
        record = recorded.record
        if record and record.earlier:
            say(
                f"{step.sweep_id}: this spec's sweep is already recorded in MLflow at {redact(uri)} (parent run "
                f"{record.run_id}); its summary follows. Another sweep of it, training only what the result cache "
                "lacks: "
                + command(
                    "run",
                    state.folder(home, step.sweep_id) / state.SPEC,
                    "--home",
                    home,
                    "--new",
                    *(("--tracking-uri", redact(uri)) if uri_given else ()),
                )
            )
        elif record and step.stage is Stage.FINISHED:
            say(f"{step.sweep_id}: this spec's sweep finished earlier and was not logged to MLflow; logged now")
        return Ran(step, result, recorded, uri)


def train(
    run: SweepRun, options: RunOptions, *, resume: bool, progress: Progress
) -> tuple[SweepResult, Callable[[], None] | None]:
    """The run's sweep through Ray Tune: (its result, ray.shutdown where this call started Ray,
    else None); Interrupted when it stopped before every trial finished. The run's followers (its
    progress, its live MLflow record) are told as trials start and end."""
    from services.execution.monitors import monitor_nodes  # noqa: PLC0415  (Ray loads on use)
    from services.execution.ray_start import cluster_address, start_ray  # noqa: PLC0415  (Ray loads on use)
    from services.execution.ray_tune import run_sweep, trial_slots  # noqa: PLC0415  (Ray loads on use)
    from services.execution.trial import train_pack_trial  # noqa: PLC0415  (Ray loads on use)
    from services.store.live import SYSTEM_METRICS_S  # noqa: PLC0415  (MLflow loads on use)

    sweep, live, home, ray_address = run.sweep, run.live, options.home, options.ray_address
    try:
        stop_ray = start_ray(ray_address)  # before _terminated_as_interrupted: ray.init sets its own SIGTERM handler
    except Exception as error:  # Ray raises bare Exceptions ("The current node timed out during startup")
        raise RayDidNotStart(error, cluster_address(ray_address)) from error
    try:
        slots = trial_slots(sweep)
        progress.start(run.sweep_id, trial_count(sweep, slots), slots, _paced_s(sweep, home, slots))
        parent = live.parent_run() if live is not None else None
        stop_monitors = monitor_nodes(parent, live.uri, SYSTEM_METRICS_S) if parent else lambda: None
        with _terminated_as_interrupted(live) as terminated:
            try:
                result = run_sweep(run, train_pack_trial, resume=resume, cache=options.cache)
            finally:
                stop_monitors()
        if result.unfinished or result.search_stopped:
            raise Interrupted(result, signal.SIGTERM if terminated else signal.SIGINT)
    except BaseException:
        if stop_ray is not None:  # here, not in Ray's atexit handler: a Ctrl-C there crashed the process (SIGSEGV)
            with _deaf_to_ctrl_c():
                stop_ray()
        raise
    return result, stop_ray


@contextlib.contextmanager
def _terminated_as_interrupted(live: "LiveRecord | None") -> Iterator[list[int]]:
    """SIGTERM (`kill`, `docker stop`, `scancel`, a Slurm time limit) stops the trials as Ctrl-C
    does: Ray Tune's own SIGINT handler saves its state and the sweep ends Interrupted. Ray's
    driver handler exited at once instead (code 15, a stack dump of Ray's threads, the live record
    FAILED). The live record is ended KILLED at once, from a thread of its own: where Ray's
    processes got the signal too (`scancel` signals the whole job), the driver dies with them,
    before Tune's stop returns (tests/test_slurm.py: every run KILLED in 11 of 13 cancelled jobs).
    Python's SIGINT handler is put back after: Tune leaves its own behind (Ray #37737), and the
    first Ctrl-C of the MLflow recording that follows only set its spent flag. Yields the SIGTERMs
    received; outside the main thread, none."""
    received: list[int] = []
    signalled = threading.Event()  # set in the handler: it may not take the locks the live record's queue takes

    def end_live() -> None:
        signalled.wait()
        if received and live is not None:
            live.end_now("KILLED")

    def interrupt(signum: int, frame) -> None:
        received.append(signum)
        signalled.set()
        signal.raise_signal(signal.SIGINT)  # Tune's graceful stop; once Tune restored Python's, KeyboardInterrupt

    try:
        earlier = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread: signals are not ours to handle
        yield received
        return
    ctrl_c = signal.getsignal(signal.SIGINT)
    watcher = threading.Thread(target=end_live, name="sigterm-live", daemon=True)
    watcher.start()
    try:
        yield received
    finally:
        signal.signal(signal.SIGTERM, earlier)
        signal.signal(signal.SIGINT, ctrl_c)
        signalled.set()
        watcher.join()


@contextlib.contextmanager
def _deaf_to_ctrl_c() -> Iterator[None]:
    """SIGINT ignored while this runs (in the main thread; elsewhere signals are not ours)."""
    try:
        before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


def _estimated_s(sweep: Sweep, home: Path, slots: int) -> float | None:
    """The wall time on ``slots`` that the spec's latest plan under ``home`` expects (None: never planned)."""
    made = plan.load(sweep, home)
    return None if made is None else round(made.wall_s(slots), 1)


def _paced_s(sweep: Sweep, home: Path, slots: int) -> float | None:
    """The wall time the progress line's ETA starts from, before a trial reports: the spec's latest
    plan under ``home``, else its entry in the results registry (services.store.registry)."""
    planned = _estimated_s(sweep, home, slots)
    return planned if planned is not None else registry.measured_wall_s(sweep, slots)


def _record_alongside(work: Callable[[], None] | None, *args) -> Recorded:
    """record(*args) in a thread while ``work`` runs in this one: stopping Ray, which must happen
    in the thread that started it."""
    if work is None:
        return record(*args)
    with ThreadPoolExecutor(1, thread_name_prefix="record") as pool:
        recording = pool.submit(record, *args)
        work()
        return recording.result()


def _check_cluster(ray_address: str | None) -> None:
    """NoCluster, before anything starts, when nothing answers at the cluster address: ray.init
    would retry it for many minutes first."""
    from services.execution.ray_start import cluster_address, unreachable_cluster  # noqa: PLC0415  (Ray loads on use)

    why = unreachable_cluster(ray_address)
    if why:
        raise NoCluster(cluster_address(ray_address), why)


def _live_record(run: SweepRun) -> "LiveRecord":
    """The run's live MLflow record, opening in the background while Ray starts (MLflow loads
    in ~2 s, a new SQLite store's tables take ~2 s more)."""
    from services.store.live import LiveRecord  # noqa: PLC0415  (MLflow loads on use)

    live = LiveRecord(run, so_far(run.sweep, run.sweep_id))
    live.open()
    return live


def so_far(sweep: Sweep, sweep_id: str) -> Callable[[list[CellResult]], "SummaryLog"]:
    """What the live record logs of the sweep so far, given its measured cells: the fitted
    metrics, the summary and its figures (statistics and figures load at the first refresh)."""

    def summarized(cells: list[CellResult]) -> "SummaryLog":
        from services.app.logs import summary_log  # noqa: PLC0415  (matplotlib loads on use)

        return summary_log(sweep, summarize(sweep, sweep_id, cells), cells)

    return summarized


def stderr(message: str) -> None:
    """The default ``say``: one line on stderr."""
    print(message, file=sys.stderr)
