"""Config fields that carry their own help text, read by the CLI and the sweep specs."""

from dataclasses import field
from typing import Any


def param(default: Any, help: str) -> Any:
    """A dataclass field with a default and a one-line description in its metadata."""
    return field(default=default, metadata={"help": help})


class ConfigError(ValueError):
    """A config value that is not allowed: names the field, the value and what is allowed."""

    def __init__(self, field: str, value: Any, allowed: str):
        super().__init__(f"{field}={value!r}: {allowed}")
        self.field, self.value, self.allowed = field, value, allowed
