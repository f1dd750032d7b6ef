"""Keep credentials out of what vitsweep prints and logs: a tracking URI such as
postgresql+psycopg2://user:password@host/db is shown as postgresql+psycopg2://***@host/db."""

from urllib.parse import urlsplit, urlunsplit


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
