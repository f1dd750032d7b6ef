"""How a running sweep shows its progress: rich's live bar on a terminal, else a line every so
many seconds: trials, models, elapsed, the ETA (services.estimate.eta: the packs' costs at the
pace of the trials so far, or of a saved plan) and the trials in flight."""

import os
import sys
import threading
import time
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from services.estimate.eta import Eta
from services.sweep_run import Trials


@contextmanager
def progress(sweep, every: float | None):
    """How a run shows its progress: rich's live bar on a terminal, else ProgressLines every
    ``every`` seconds (VITSWEEP_PROGRESS_S, else 30)."""
    if sys.stderr.isatty():
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*columns, TextColumn("{task.fields[eta]}"), console=Console(stderr=True), transient=True) as bar:
            yield ProgressBar(bar, sweep)
        return
    with ProgressLines(sweep, float(os.environ.get("VITSWEEP_PROGRESS_S", 30)) if every is None else every) as lines:
        yield lines


class ProgressBar:
    """runs.Progress on a rich progress bar (a terminal): one task, the sweep's trials, its ETA
    (services.estimate.eta) and the trials in flight."""

    def __init__(self, bar: Progress, sweep):
        self.bar, self.sweep, self.task, self.sweep_id, self.eta = bar, sweep, None, "", None

    def start(self, sweep_id: str, trials: int | None, slots: int, planned_s: float | None) -> None:
        self.eta = Eta.of(self.sweep, slots, planned_s, time.monotonic())
        self.sweep_id = sweep_id
        self.task = self.bar.add_task(f"{sweep_id}: trials", total=trials, eta=_eta_text(self.eta, Trials()))

    def advance(self, trials: Trials) -> None:
        self.bar.update(
            self.task,
            completed=trials.done,
            description=f"{self.sweep_id}: {trials.models}/{self.sweep.trainings} models, {trials.failed} trials "
            f"failed{_in_flight(trials)}; trials",
            eta=_eta_text(self.eta, trials),
        )

    def ended(self, now: str) -> None:
        if self.task is not None:
            self.bar.update(self.task, description=f"{self.sweep_id}: trials done; {now}")


class ProgressLines:
    """runs.Progress as plain lines on stderr (a log, a pipe, a Ray job's log), at most one every
    ``every`` seconds as trials end, and one every ``every`` seconds while none does: trials done
    of all (when known), models trained, elapsed time, an ETA and how busy the trials kept the
    slots so far (finished trials' training and running trials' time). A context manager: its
    timer stops on exit."""

    def __init__(self, sweep, every: float):
        self.sweep, self.every = sweep, every
        self.sweep_id, self.trials, self.slots, self.planned_s, self.eta = "", None, 1, None, None
        self.now = Trials()
        self.began, self.printed = time.monotonic(), float("-inf")
        self.lock, self.stopped = threading.Lock(), threading.Event()

    def __enter__(self) -> "ProgressLines":
        self.ticker = threading.Thread(target=self._tick, name="progress-lines", daemon=True)
        self.ticker.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopped.set()

    def start(self, sweep_id: str, trials: int | None, slots: int, planned_s: float | None) -> None:
        """The sweep's trials begin: a first line at once (a sweep's first trial can take minutes)."""
        self.sweep_id, self.trials, self.slots, self.planned_s = sweep_id, trials, max(1, slots), planned_s
        self.began = time.monotonic()
        self.eta = Eta.of(self.sweep, self.slots, planned_s, self.began)
        self._line()
        self.printed = float("-inf")  # the first trial's end is news: said at once

    def advance(self, trials: Trials) -> None:
        new = trials.done > self.now.done
        self.now = trials
        if new and time.monotonic() - self.printed >= self.every:
            self._line()

    def ended(self, now: str) -> None:
        """The last line: the trials' counts, their time, and ``now``; the timer stops (its lines
        said "ETA 0:00" for the minute fig1_grid_one_pass's 320 models took to summarize and log)."""
        self.stopped.set()
        with self.lock:
            self.printed = time.monotonic()
            print(
                f"[{self.sweep_id}] {self._counts()} in {_clock(self.printed - self.began)}; {now}",
                file=sys.stderr,
                flush=True,
            )

    def _counts(self) -> str:
        of = f"/{self.trials}" if self.trials else ""
        return f"{self.now.done}{of} trials ({self.now.failed} failed), {self.now.models} models trained"

    def _tick(self) -> None:
        while not self.stopped.wait(max(self.every, 1.0)):
            if self.sweep_id and time.monotonic() - self.printed >= self.every:
                self._line()

    def _line(self) -> None:
        with self.lock:
            self.printed = now = time.monotonic()
            elapsed, trials = now - self.began, self.now
            if self.eta is not None:
                eta = self.eta.left(trials, now)
            else:
                total, done = (self.trials, trials.done) if self.trials else (self.sweep.trainings, trials.models)
                share = done / total if total else 0.0
                # an adaptive sweep's later rounds add models beyond its first round's: its share done is then unknown
                eta = None if share >= 1 and not self.trials else _eta(elapsed, share, self.planned_s)
            busy_s = trials.train_s + sum(now - r.since for r in trials.running)  # finished trials, running ones so far
            busy = min(1.0, busy_s / (self.slots * elapsed)) if elapsed > 0 else 0.0
            print(
                f"[{self.sweep_id}] {self._counts()}, {_clock(elapsed)} elapsed, "
                f"ETA {'-' if eta is None else _clock(eta)}, "
                f"{self.slots} slots {busy:.0%} busy so far{_in_flight(trials, now)}",
                file=sys.stderr,
                flush=True,
            )


def _eta(elapsed: float, share: float, planned_s: float | None) -> float | None:
    """Seconds left: the plan's expectation less the time spent, refined by the share of the work
    done (the rate so far extrapolated), weighted by that share; None with neither."""
    extrapolated = elapsed * (1 - share) / share if 0 < share < 1 else None
    if planned_s is None or share >= 1:
        return extrapolated if share < 1 else 0.0
    planned = max(0.0, planned_s - elapsed)
    return planned if extrapolated is None else (1 - share) * planned + share * extrapolated


def _eta_text(eta: Eta | None, trials: Trials) -> str:
    """The bar's ETA column: the estimate where the packs are known and a pace is (else nothing)."""
    left = None if eta is None else eta.left(trials, time.monotonic())
    return "" if left is None else f"ETA {_clock(left)}"


def _in_flight(trials: Trials, now: float | None = None) -> str:
    """The trials in flight: their cells, their step against their cap once they said it, and
    (``now`` given) how long each has run."""
    if not trials.running:
        return ""
    shown = [
        r.cell
        + ("" if r.step is None else f" step {r.step[0]:,}/{r.step[1]:,}")
        + ("" if now is None else f" {_clock(now - r.since)}")
        for r in trials.running
    ]
    return "; running: " + ", ".join(shown)


def _clock(seconds: float) -> str:
    minutes, seconds = divmod(int(seconds), 60)
    return f"{minutes}:{seconds:02d}"
