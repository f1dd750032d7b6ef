"""A cell resolved once into vit_core's configs and N values, and what a search mode may ask of a
sweep (the spec class implements it; modes read a sweep through it, never the schema)."""

import dataclasses
from typing import Any, Protocol

from services.results import Cell
from vit_core.configs import TrainConfig


@dataclasses.dataclass(frozen=True)
class ResolvedCell:
    """One cell resolved once (SweepSpec.plan): vit_core's configs, and the N each seed trains at:
    its model's n_train (multi_pass), or the sample budget B·max_steps (one_pass: that one run is
    evaluated at every N below it). What trials train and statistics read."""

    cell: Cell
    data: Any
    model: Any
    training: TrainConfig
    n_values: tuple[int, ...]

    @property
    def one_pass(self) -> bool:
        """Whether the cell trains one pass over fresh samples (training.protocol)."""
        return self.training.protocol == "one_pass"

    @property
    def configs(self) -> tuple[Any, Any, TrainConfig]:
        """(data, model, training): train_pack's first arguments."""
        return self.data, self.model, self.training


class Sweep(Protocol):
    """What a search mode reads of a sweep to count its budget and check itself."""

    FAMILY: Any
    models: list[str]
    seeds: int
    cells: list[Cell]
    search: Any
    tuning: Any
    per_model: dict
    resources: Any
    scaling_rules: dict
    swept: dict[str, list]

    @property
    def largest_n(self) -> int: ...
    def plan(self, cell: Cell) -> ResolvedCell: ...
    def tuning_of(self, model: str) -> Any: ...
    def axes_of(self, model: str) -> dict[str, list]: ...
    def section_of(self, field: str) -> str: ...
    def resolve(self, cell: Cell) -> ResolvedCell: ...
