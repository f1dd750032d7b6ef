"""Files that a crash at any moment leaves old or new, never half written, and locks that a
crash lets go."""

import contextlib
import fcntl
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
