"""A cell resolved once into vit_core's configs and N values (ResolvedCell), what a strategy
reads of a resolved sweep (SweepView: services.spec.sweep.Sweep is one) and what a trial receives
of it (TrialSweep)."""

import dataclasses
from typing import Any, Protocol

from services.results import Cell
from vit_core.train_config import TrainConfig

SECTIONS = ("data", "model", "training")


@dataclasses.dataclass(frozen=True)
class ResolvedCell:
    """One cell resolved once (Sweep.resolved_cell): vit_core's configs, and the N each seed trains at:
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

    def to_config(self) -> dict:
        """Plain JSON values (a trial config's ``resolved``); with_config reads them back."""
        sections = {"data": self.data, "model": self.model, "training": self.training}
        return {"values": self.cell.values, "n_values": list(self.n_values)} | {
            name: dataclasses.asdict(cfg) for name, cfg in sections.items()
        }

    def with_config(self, config: dict) -> "ResolvedCell":
        """This cell's model with the values and configs of ``config`` (to_config), of this cell's types."""
        data, model, training = (dataclasses.replace(c, **config[n]) for c, n in zip(self.configs, SECTIONS))
        return ResolvedCell(Cell(self.cell.model, config["values"]), data, model, training, tuple(config["n_values"]))


class SweepView(Protocol):
    """What a strategy reads of a resolved sweep (services.spec.sweep.Sweep): named here, below
    the strategies, so that the sweep that holds a strategy and the strategy that reads it import no circle."""

    spec: Any  # the schema, for problems that name where a value was written
    family: Any
    models: tuple[str, ...]
    cells: tuple[Cell, ...]
    search: Any
    tuning: Any
    swept: dict[str, list]
    seeds: int
    resources: Any

    @property
    def largest_n(self) -> int: ...
    def resolved_cell(self, cell: Cell) -> ResolvedCell: ...
    def resolve(self, cell: Cell) -> ResolvedCell: ...
    def tuning_of(self, model: str) -> Any: ...


@dataclasses.dataclass(frozen=True)
class TrialSweep:
    """What a trial needs of a sweep, resolved once in the driver (Sweep.for_trials): every
    cell's configs and N values, and what a trial asks of its node. Plain data, no schema: no
    spec class travels to the workers, so a strategy of one's own need not be importable there."""

    name: str
    cells: tuple[ResolvedCell, ...]  # by a pack's cell index
    cpus_per_trial: float
    gpus_per_trial: float
