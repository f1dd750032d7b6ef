"""A sweep in MLflow while it runs: the parent run exists (RUNNING) from the start, with its spec,
description and provenance; each cell's child run opens when its first pack starts and gets its
per-N metrics as packs report; N*, the fits and the figures of the sweep so far are refreshed
as trials end. The final record (tracking.record_sweep) completes these runs; a sweep stopped
before it leaves them KILLED or FAILED, and running its spec again attaches to them.

MLflow is written from one background thread, so that a slow tracking server never holds up
Ray Tune's scheduling loop (the callbacks only queue); a live record that fails stops with one
warning, and the sweep goes on: its end is logged whole as before.
"""

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from mlflow.entities import Metric
from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

from services.results import Cell, CellResult, in_spec_order
from services.store import run_values, tracking
from services.store.client import client_of
from services.store.logged import SummaryLog
from services.store.uris import redact
from services.sweep_run import SweepRun

REFRESH_S = 30.0  # the shortest time between two refreshes of the sweep's summary and figures
SYSTEM_METRICS_S = 10.0  # MLflow's system metrics: one sample per this many seconds
# The live record is a view; the record is the one logged whole at the end (or by `vitsweep sync`).
# So while it runs, MLflow's requests give up after two quick retries where a user has not set
# their own: MLflow's default retries for ~4 minutes, which would hold a sweep's end that long after
# its server went down (tests/test_compose_stack.py's outage).
FAIL_FAST = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "20",
}


LIVE_NICENESS = 10  # the live record's thread's nice value: the trials' cores first


def _yielding() -> None:
    """This thread at LIVE_NICENESS: its refreshes (a summary of the sweep so far, its figures) take
    what the trials leave of the cores, instead of a share of theirs (the main job's summary is tens
    of seconds of CPU). Linux sets a thread's priority by its id; elsewhere nothing changes."""
    with contextlib.suppress(AttributeError, OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), LIVE_NICENESS)


class LiveRecord:
    """The MLflow runs of one running sweep: ``open`` first; ``started`` and ``ended`` as trials
    start and end (from Ray Tune's callbacks); ``close`` at the end. ``so_far`` summarizes the
    measured cells for a refresh (given by the caller: the store knows no statistics or figures)."""

    def __init__(self, run: SweepRun, so_far: Callable[[list[CellResult]], SummaryLog]):
        self.sweep, self.sweep_id, self.uri, self.home = run.sweep, run.sweep_id, run.uri, run.home
        self.spec_text, self.say, self.so_far = run.spec_text, run.say, so_far
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="mlflow-live", initializer=_yielding)
        self.cells: dict[str, CellResult] = {}  # cell key -> its results as the run last told them
        self.children: dict[str, str] = {}  # cell key -> child run id
        self.logged: dict[str, dict[tuple[str, int], float]] = {}  # child run id -> its per-N metrics
        self.parent: str | None = None
        self.stopped = False
        self.monitor = None
        self.next_refresh = time.monotonic() + REFRESH_S
        self.user_env = {name: os.environ.get(name) for name in FAIL_FAST}

    def open(self) -> None:
        """Create the sweep's parent run (resuming: attach to the one an earlier run left) and
        start its system metrics; in the background, while Ray starts. MLflow fails fast until
        ``close`` (FAIL_FAST)."""
        for name, value in FAIL_FAST.items():
            os.environ.setdefault(name, value)
        self.opened = self.pool.submit(self._guarded, self._open)

    def parent_run(self) -> str | None:
        """The parent run's id once it is open (None: the live record stopped)."""
        self.opened.result()
        return None if self.stopped else self.parent

    def started(self, cell: Cell) -> None:
        """A trial of ``cell`` started: its child run opens (RUNNING) if it is not open yet."""
        self._queue(self._child, cell, time.time())

    def ended(self, result: CellResult, failed: bool = False) -> None:
        """A trial of ``result``'s cell ended (``failed``: without records): the cell's results so
        far, a copy this record's thread may read (SweepRun keeps the one that grows)."""
        self._queue(self._ended, result, failed)

    def close(self, status: str | None) -> None:
        """Log what is queued and stop. ``status``: the sweep stopped before its end (KILLED,
        FAILED), and its runs still RUNNING end so; None: its final record ends them."""
        if status is not None:
            self.end_now(status)
        self.pool.shutdown(wait=True)
        if self.monitor is not None:
            self.monitor.finish()
        for name, value in self.user_env.items():  # the final record retries as MLflow does
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    def end_now(self, status: str) -> None:
        """End its runs still RUNNING ``status`` once what is queued is logged, without waiting for
        ``close``: the process may not live that long (a SIGTERM that Ray's processes got too)."""
        self._queue(self._end, status)

    def _queue(self, work, *args) -> None:
        if not self.stopped:
            self.pool.submit(self._guarded, work, *args)

    def _guarded(self, work, *args) -> None:
        if self.stopped:
            return
        try:
            work(*args)
        except Exception as error:
            self.stopped = True
            self.say(
                f"warning: the live MLflow record at {redact(self.uri)} stopped ({type(error).__name__}: {error}); the "
                "sweep goes on, and is logged whole when it ends"
            )

    def _open(self) -> None:
        logging.getLogger("mlflow.system_metrics").setLevel(logging.WARNING)  # not its start and stop lines
        self.client = client_of(self.uri)
        self.experiment = tracking.experiment_of(self.client, self.sweep, self.uri, self.home)
        storage = str((self.home / "ray").resolve() / self.sweep_id)
        self.parent, whole = tracking.open_parent(
            self.client, self.experiment, self.sweep, self.sweep_id, self.spec_text, storage, time.time()
        )
        if whole:  # recorded whole elsewhere already: nothing to follow
            self.stopped = True
            return
        self.monitor = SystemMetricsMonitor(
            self.parent, sampling_interval=SYSTEM_METRICS_S, resume_logging=True, tracking_uri=self.uri
        )
        self.monitor.start()

    def _child(self, cell: Cell, started_at: float) -> str:
        if cell.key not in self.children:
            run_id = tracking.open_child(self.client, self.experiment, self.parent, self.sweep, cell, started_at)
            self.children[cell.key] = run_id
            self.logged[run_id] = tracking.logged_per_n(self.client, run_id)  # a resume's, else none
        return self.children[cell.key]

    def _ended(self, result: CellResult, failed: bool) -> None:
        run_id = self._child(result.cell, time.time())
        self.cells[result.cell.key] = result
        if failed:
            return
        complete = [row for row in result.by_n() if row["models"] >= self.sweep.seeds]  # every seed reported
        metrics = run_values.changed(run_values.per_n_metrics(complete), self.logged[run_id])
        metrics.append(Metric("trainings", result.trainings, run_values.now_ms(), 0))
        tracking.log_batch(self.client, run_id, metrics=metrics)
        self.logged[run_id] |= {(m.key, m.step): m.value for m in metrics}
        if time.monotonic() >= self.next_refresh:
            self._refresh()

    def _refresh(self) -> None:
        """N* per cell, the fits and the figures of the sweep so far; the next refresh no sooner
        than REFRESH_S, or ten times what this one took."""
        began = time.monotonic()
        measured = [c for c in self.cells.values() if c.measured()]  # a tuned cell still selecting has no N* yet
        if not measured:
            return
        cells = in_spec_order(measured, self.sweep.cells)
        made = self.so_far(cells)
        now = run_values.now_ms()
        for cell in cells:
            n_star = None if cell.failures else cell.n_star(self.sweep.success_rate, self.sweep.criterion)
            if n_star is not None:
                tracking.log_batch(
                    self.client, self.children[cell.cell.key], metrics=[Metric("n_star", n_star, now, 0)]
                )
        trainings = Metric("trainings", sum(c.trainings for c in cells), now, 0)
        tracking.log_batch(self.client, self.parent, metrics=[trainings, *run_values.fitted_metrics(made.metrics)])
        tracking.log_report(self.client, self.parent, made)
        self.next_refresh = time.monotonic() + max(REFRESH_S, 10 * (time.monotonic() - began))

    def _end(self, status: str) -> None:
        tracking.end_live(self.client, self.experiment, self.parent, status)
