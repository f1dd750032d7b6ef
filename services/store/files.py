"""Files that a crash at any moment leaves old or new, never half written, locks that a crash
lets go, and JSON files read back only as the format they say they are (CorruptFile otherwise)."""

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and ``os.replace``: readers, and a
    process killed mid-write, see the old file or the new one, whole. Several writers may race."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    partial.write_text(text)
    os.replace(partial, path)


@contextlib.contextmanager
def locked(path: Path, wait: bool = True) -> Iterator[TextIO]:
    """An exclusive lock on ``path`` (made where missing) while this runs, its file open to write
    in; BlockingIOError where another process holds it and ``wait`` is False. The kernel lets it go
    when the process ends, however it ends (``flock``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        yield lock


class CorruptFile(Exception):
    """A file of a home that cannot be read as vitsweep wrote it: truncated, overwritten, or of a
    newer vitsweep's format (``why``: which)."""

    def __init__(self, path: Path, why: str):
        self.path, self.why = path, why
        super().__init__(f"{path}: {why}")


def read_json(path: Path, kind: str, fmt: int, required: tuple[str, ...] = ()) -> dict:
    """The JSON object ``path`` holds, a ``kind`` file of format ``fmt`` at most (a file that names
    none is format 1, as written before formats were named) with every key ``required``;
    CorruptFile where it is not."""
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise CorruptFile(path, f"not a JSON {kind} ({error})") from None
    if not isinstance(data, dict):
        raise CorruptFile(path, f"not a JSON {kind}: a {type(data).__name__}")
    if not isinstance(found := data.get("format", 1), int) or found > fmt:
        raise CorruptFile(path, f"a {kind} of format {found!r}; this vitsweep reads format {fmt} and older")
    if missing := [key for key in required if key not in data]:
        raise CorruptFile(path, f"a {kind} without {', '.join(missing)}")
    return data
