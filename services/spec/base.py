"""What every part of a spec shares: strict sections, distinct lists, and a problem found in a spec."""

import dataclasses
from typing import Any

from pydantic import ConfigDict

FORBID = ConfigDict(extra="forbid", strict=True)


def distinct(values: list) -> list:
    if len(set(values)) != len(values):
        raise ValueError("each value at most once")
    return values


@dataclasses.dataclass(frozen=True)
class Problem:
    """One thing wrong with a spec: where, what was given, what is allowed."""

    path: str
    value: Any
    message: str

    def __str__(self) -> str:
        value = "" if self.value is None else f" {self.value!r}:"
        return f"{self.path or '(spec)'}:{value} {self.message}"


class SpecError(Exception):
    """A spec that cannot run; ``problems`` lists every reason."""

    def __init__(self, source: str, problems: list[Problem]):
        super().__init__("\n".join(f"{source}: {p}" for p in problems))
        self.problems = problems
