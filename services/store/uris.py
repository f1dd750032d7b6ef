"""Tracking URIs: which one a sweep records to, whether its server answers, and how to print one.

Credentials stay out of what vitsweep prints and logs: a tracking URI such as
postgresql+psycopg2://user:password@host/db is shown as postgresql+psycopg2://***@host/db.
Nothing here imports MLflow, so ``vitsweep run`` can decide these before MLflow is loaded.
"""

import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from services.spec import Sweep


def resolve_tracking_uri(sweep: Sweep, override: str | None, home: Path) -> str:
    """The tracking URI: the command line's, else the spec's, else SQLite under the sweep home."""
    return override or sweep.tracking.tracking_uri or embedded_uri(home)


def embedded_uri(home: Path) -> str:
    """The embedded default: a SQLite MLflow store in the sweep home."""
    return f"sqlite:///{(home / 'mlflow.db').resolve()}"


UI_HOST, UI_PORT = "127.0.0.1", 5000  # where `vitsweep ui` serves the embedded store unless told otherwise


def ui_address(uri: str, home: Path) -> str | None:
    """Where MLflow's UI shows the store at ``uri``: a tracking server's own address (it serves the
    UI; any credentials left out), the one `vitsweep ui` serves for the embedded store under
    ``home``, else None (a database or file no UI is known to serve)."""
    if uri.startswith(("http://", "https://")):
        parts = urlsplit(uri)
        return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2], query="", fragment="")).rstrip("/")
    return f"http://{UI_HOST}:{UI_PORT}" if uri == embedded_uri(home) else None


def unreachable(uri: str, timeout_s: float = 5.0) -> str | None:
    """Why the tracking server at ``uri`` cannot be reached now (its /health endpoint), or None
    when it can, or when ``uri`` is a local store (SQLite, files) with no server to be down."""
    if not uri.startswith(("http://", "https://")):
        return None
    parts = urlsplit(uri)
    health = urlunsplit(
        parts._replace(
            netloc=parts.hostname + (f":{parts.port}" if parts.port else ""), path=parts.path.rstrip("/") + "/health"
        )
    )
    try:
        urllib.request.urlopen(health, timeout=timeout_s).close()
    except urllib.error.HTTPError:
        return None  # it answered (an auth proxy may guard /health)
    except OSError as error:  # refused, timed out, no such host
        return redact(str(getattr(error, "reason", error)))
    return None


def redact(uri: str | None) -> str | None:
    """The URI with any user name and password replaced by ***, for printing and logging."""
    if not uri:
        return uri
    parts = urlsplit(uri)
    if parts.username is None and parts.password is None:
        return uri
    host = parts.hostname or ""
    netloc = f"***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))
