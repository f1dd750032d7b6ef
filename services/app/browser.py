"""`vitsweep ui` opens its page in the user's browser once the server answers, where a browser can
show one. The ui command then becomes the server (os.execv), so the wait is a process of its own:
this module as a command (``python -m services.app.browser URL UI``), which returns at once and
leaves a child that nothing waits for (it is reparented, so it leaves no zombie behind)."""

import os
import subprocess
import sys
import time
import webbrowser

from services.store.uris import unreachable

WAIT_S = 300  # a server not answering by then is not coming up: nothing is opened


def can_open() -> bool:
    """Whether a browser can show a page here: a display (always on macOS and Windows; elsewhere
    DISPLAY or WAYLAND_DISPLAY) and a browser Python's webbrowser knows (BROWSER included)."""
    shown = sys.platform in ("darwin", "win32") or os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
    if not shown:  # a terminal browser (lynx, w3m) would take the terminal the server logs to
        return False
    try:
        webbrowser.get()
    except webbrowser.Error:
        return False
    return True


def open_when_up(url: str, ui: str) -> None:
    """Open ``url`` in the browser once the server at ``ui`` answers, from a process of its own:
    this returns at once, before the server has started (a browser that fails fails no server)."""
    command = [sys.executable, "-m", __name__, url, ui]
    subprocess.run(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)


def main(url: str, ui: str) -> None:
    """Fork; the child waits until the server at ``ui`` answers, then opens ``url`` (the parent returns)."""
    if os.fork():
        return
    deadline = time.monotonic() + WAIT_S
    while unreachable(ui):
        if time.monotonic() > deadline:
            return
        time.sleep(0.5)
    webbrowser.open(url)


if __name__ == "__main__":
    main(*sys.argv[1:])
