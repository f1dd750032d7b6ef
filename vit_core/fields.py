"""Config fields that carry their own help text, read by the CLI and the sweep specs."""

import functools
import typing
from collections.abc import Mapping
from dataclasses import Field, field, fields
from typing import Any, Literal


def param(default: Any, help: str, choices: Mapping[str, Any] | None = None) -> Any:
    """A dataclass field with a default and a one-line description in its metadata; ``choices``:
    the registry whose keys are its allowed values, read at each check (a kind declared later
    counts), for a field whose values are declared elsewhere rather than in a Literal."""
    metadata = {"help": help} | ({} if choices is None else {"choices": choices})
    return field(default=default, metadata=metadata)


class ConfigError(ValueError):
    """A config value that is not allowed: names the field, the value and what is allowed."""

    def __init__(self, field: str, value: Any, allowed: str):
        super().__init__(f"{field}={value!r}: {allowed}")
        self.field, self.value, self.allowed = field, value, allowed


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    """A dataclass's resolved field types, once per class (a plan builds configs by the ten thousand)."""
    return typing.get_type_hints(cls)


def check_choices(cfg: Any) -> None:
    """Raise ConfigError where a field of the dataclass ``cfg`` typed ``Literal[...]`` or given
    ``choices`` holds another value (dataclasses check no types; an unknown model kind must not
    build another model)."""
    hints = _hints(type(cfg))
    for f in fields(cfg):
        choices = _choices(f, hints[f.name])
        if choices and getattr(cfg, f.name) not in choices:
            raise ConfigError(f.name, getattr(cfg, f.name), f"one of {', '.join(map(str, choices))}")


def choices_of(cls: type, name: str) -> tuple:
    """The values field ``name`` of the dataclass ``cls`` allows: its registry's keys or its
    Literal's values; () where any value of its type is."""
    f = next(f for f in fields(cls) if f.name == name)
    return _choices(f, typing.get_type_hints(cls)[name])


def _choices(f: Field, hint: Any) -> tuple:
    """A field's allowed values: its ``choices`` registry's keys (now), else its Literal's."""
    if "choices" in f.metadata:
        return tuple(f.metadata["choices"])
    return typing.get_args(hint) if typing.get_origin(hint) is Literal else ()
