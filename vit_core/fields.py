"""Config fields that carry their own help text, read by the CLI and the sweep specs."""

import typing
from dataclasses import field, fields
from typing import Any, Literal


def param(default: Any, help: str) -> Any:
    """A dataclass field with a default and a one-line description in its metadata."""
    return field(default=default, metadata={"help": help})


class ConfigError(ValueError):
    """A config value that is not allowed: names the field, the value and what is allowed."""

    def __init__(self, field: str, value: Any, allowed: str):
        super().__init__(f"{field}={value!r}: {allowed}")
        self.field, self.value, self.allowed = field, value, allowed


def check_choices(cfg: Any) -> None:
    """Raise ConfigError where a field of the dataclass ``cfg`` typed ``Literal[...]`` holds another
    value (dataclasses check no types; an unknown model kind must not build another model)."""
    hints = typing.get_type_hints(type(cfg))
    for f in fields(cfg):
        choices = typing.get_args(hints[f.name]) if typing.get_origin(hints[f.name]) is Literal else ()
        if choices and getattr(cfg, f.name) not in choices:
            raise ConfigError(f.name, getattr(cfg, f.name), f"one of {', '.join(map(str, choices))}")
