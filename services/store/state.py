"""What a sweep keeps under its home beside Ray Tune's own state, so that nothing computed is lost.

``ray/SWEEP_ID/vitsweep.json`` (the marker) holds the spec's key and, once the sweep is logged,
its MLflow parent run; ``spec.yaml`` is the spec as the user wrote it (the marker keeps its hash);
``searcher-state-*.pkl`` (Tune names it) is the search's checkpoint (searcher_checkpoint, JSON,
read back by restore_searcher). Once every trial is done,
``result.json`` holds the collected results: a driver killed after training, or a tracking server
that was down, costs a logging step, never a training, and a sweep already recorded is shown
from it. Every file is written atomically (a temporary file, then ``os.replace``), and each is
written after what it stands on, so that a kill at any moment leaves a state the same command
continues from (docs/resume.md).
"""

import contextlib
import hashlib
import itertools
import json
import os
import socket
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from services import legacy
from services.results import SweepResult
from services.store.cache import vit_core_hash
from services.store.files import CorruptFile, locked, read_json, write_atomic

if TYPE_CHECKING:
    from services.spec import Sweep

MARKER, SPEC, RESULT = "vitsweep.json", "spec.yaml", "result.json"
MARKER_FORMAT = 1  # the marker's keys: format, spec_key, recorded, uri_given, created, spec_sha256
MARKER_KEYS = ("spec_key", "recorded")
SEARCHER_FORMAT = 1  # the searcher checkpoint's keys: format, search_finished, and its planner's state


def new_sweep_id(sweep: "Sweep", home: Path) -> str:
    """The spec's name and the UTC time; -2, -3, ... after it when a sweep of that second exists."""
    base = f"{sweep.name}-{datetime.now(UTC):%Y%m%d-%H%M%S}"
    return next(
        sweep_id for k in itertools.count(1) if not folder(home, sweep_id := base if k == 1 else f"{base}-{k}").exists()
    )


class Running(Exception):
    """Another process drives this spec's sweep under the home (``holder``: which, and since when)."""

    def __init__(self, holder: str):
        self.holder = holder
        super().__init__(holder)


@contextlib.contextmanager
def driving(sweep: "Sweep", home: Path) -> Iterator[None]:
    """This process, while it runs, the one driver of the spec's sweeps under ``home`` (one writer of
    a sweep's state: a second `vitsweep run` of the spec took the running sweep for an interrupted
    one and drove it from a second Ray); Running where another holds it. A lock the kernel lets go
    when the process ends, however it ends, so a killed run is resumed as before."""
    path = home / "locks" / f"{spec_key(sweep)}.lock"
    with contextlib.ExitStack() as held:
        try:
            lock = held.enter_context(locked(path, wait=False))
        except BlockingIOError:
            raise Running(path.read_text().strip() or "another process") from None
        lock.truncate(0)
        lock.write(f"process {os.getpid()} on {socket.gethostname()}, since {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
        lock.flush()
        yield


def spec_key(sweep: "Sweep") -> str:
    """What identifies a sweep's work: a hash of its resolved spec and of vit_core's code (a
    sweep of the same spec on changed science is another sweep)."""
    text = json.dumps({"spec": sweep.spec.model_dump(mode="json"), "vit_core": vit_core_hash()}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def folder(home: Path, sweep_id: str) -> Path:
    return home / "ray" / sweep_id


def markers(home: Path) -> list[tuple[str, dict]]:
    """(sweep id, marker) of every sweep under ``home``, newest first; CorruptFile where one is
    unreadable (which sweep it stands for cannot be told, so nothing goes on past it)."""
    found = [(path.parent.name, _read_marker(path)) for path in (home / "ray").glob(f"*/{MARKER}")]
    return sorted(found, key=lambda item: (item[1].get("created", ""), item[0]), reverse=True)


def latest_sweep(sweep: "Sweep", home: Path) -> str | None:
    """The newest sweep of this very spec under ``home``, whatever became of it: the one that
    running the same command again continues (resumes, logs, or shows when it is recorded). An
    unreadable marker of a sweep of another spec (its spec.yaml names another) is passed over:
    one broken sweep does not stop the other specs of a home; one that may be this spec's does
    (CorruptFile)."""
    key, found = spec_key(sweep), []
    for path in (home / "ray").glob(f"*/{MARKER}"):
        try:
            found.append((path.parent.name, _read_marker(path)))
        except CorruptFile:
            if _spec_name(path.parent) in (sweep.name, None):
                raise
    found.sort(key=lambda item: (item[1].get("created", ""), item[0]), reverse=True)
    return next((sweep_id for sweep_id, marker in found if marker["spec_key"] == key), None)


def _spec_name(sweep_folder: Path) -> str | None:
    """The name the spec a sweep folder keeps gives (None: none readable)."""
    try:
        raw = yaml.safe_load((sweep_folder / SPEC).read_text())
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return None
    return raw.get("name") if isinstance(raw, dict) else None


def mark_sweep(sweep: "Sweep", sweep_id: str, home: Path, spec_text: str, uri_given: bool = False) -> None:
    """Write the sweep's marker and spec: its key, whether the tracking URI came from the command
    line (never the URI itself: it may hold credentials); set_recorded adds its MLflow parent run."""
    write_atomic(folder(home, sweep_id) / SPEC, spec_text)
    write_atomic(
        folder(home, sweep_id) / MARKER,
        json.dumps(
            {
                "format": MARKER_FORMAT,
                "spec_key": spec_key(sweep),
                "recorded": None,
                "uri_given": uri_given,
                "created": datetime.now(UTC).isoformat(),
                "spec_sha256": _sha256(spec_text),
            }
        ),
    )


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def marker(home: Path, sweep_id: str) -> dict:
    return _read_marker(folder(home, sweep_id) / MARKER)


def _read_marker(path: Path) -> dict:
    return read_json(path, "sweep marker", MARKER_FORMAT, MARKER_KEYS)


def set_recorded(home: Path, sweep_id: str, parent_run_id: str) -> None:
    write_atomic(folder(home, sweep_id) / MARKER, json.dumps(marker(home, sweep_id) | {"recorded": parent_run_id}))


def spec_text(home: Path, sweep_id: str) -> str:
    """The spec a sweep ran, as its user wrote it; CorruptFile where it is not the text the sweep's
    marker names (emptied, cut, overwritten; an older marker names none: then
    where it is not a YAML mapping)."""
    path = folder(home, sweep_id) / SPEC
    try:
        text = path.read_text()
    except UnicodeDecodeError:
        raise CorruptFile(path, "not a YAML spec (not text)") from None
    expected = marker(home, sweep_id).get("spec_sha256")
    if expected is not None and _sha256(text) != expected:
        raise CorruptFile(path, "not the spec this sweep ran (emptied, cut or overwritten since)")
    if expected is None and _spec_name(path.parent) is None:
        raise CorruptFile(path, "not a YAML spec with a name")
    return text


def save_result(result: SweepResult, home: Path) -> None:
    """Keep a finished sweep's results until they are logged."""
    write_atomic(folder(home, result.sweep_id) / RESULT, result.to_json())


def load_result(home: Path, sweep_id: str) -> SweepResult | None:
    """A finished sweep's results, or None when it did not finish; CorruptFile where the file is
    unreadable (Tune's own state still holds every finished trial's results)."""
    path = folder(home, sweep_id) / RESULT
    if not path.exists():
        return None
    saved = read_json(path, "sweep result", SweepResult.FORMAT, ("cells",))
    try:
        return SweepResult.from_dict(saved)
    except (KeyError, TypeError, ValueError) as error:
        raise CorruptFile(path, f"a sweep result that does not read back ({type(error).__name__}: {error})") from None


def searcher_checkpoint(planner_state: dict, finished: bool) -> str:
    """A sweep's searcher checkpoint: its planner's state (RoundPlanner.get_state) and whether its
    search ran to its end, as JSON that says its format; Tune's PlanSearcher.save writes it where
    Tune asks (``searcher-state-*.pkl`` in the sweep's folder), and restore_searcher reads it."""
    return json.dumps(planner_state | {"search_finished": finished, "format": SEARCHER_FORMAT})


def restore_searcher(path: Path, planner, named: Path | None = None) -> bool:
    """Restore ``planner`` (a RoundPlanner: its ``set_state``) from the searcher checkpoint at
    ``path`` (searcher_checkpoint's); whether its search had ended. CorruptFile where the file does
    not read back (emptied, cut, foreign, of a newer format, or a state the planner refuses),
    naming ``named`` where given: the home's file, where Tune reads a copy in its staging folder."""
    try:
        saved = read_json(path, "searcher checkpoint", SEARCHER_FORMAT, ("queue", "in_flight"))
        saved = legacy.searcher_state({key: value for key, value in saved.items() if key != "format"})
        finished = saved.pop("search_finished")
        try:
            planner.set_state(saved)
        except Exception as error:  # whatever the planner's own state makes of it (Optuna's study is a pickle)
            why = f"a searcher checkpoint its planner cannot restore ({type(error).__name__}: {error})"
            raise CorruptFile(path, why) from None
    except CorruptFile as corrupt:
        raise CorruptFile(named or path, corrupt.why) from None
    return bool(finished)


def sweep_ids(home: Path) -> list[str]:
    """Every sweep folder under ``home``, by name."""
    return sorted(path.name for path in (home / "ray").glob("*/"))


def has_tune_state(path: Path) -> bool:
    """Whether Ray Tune saved an experiment state in the sweep folder ``path`` (it had started trials)."""
    return any(path.glob("experiment_state-*.json"))
