"""Packs: the unit of work of a sweep. A pack is some (N, seed) models of one cell trained together
(vit_core.train_pack), and one Ray Tune trial; here is how a sweep's models are cut into packs."""

import dataclasses
import math
from dataclasses import asdict, dataclass
from typing import Any

from services import legacy
from services.results import SELECTION, Cell
from services.spec import ResolvedCell, Sweep, TrialSweep


@dataclass(frozen=True)
class Pack:
    """Models of one cell trained at once: model k has N = n_train[k] and seed seeds[k] (and,
    in a tuned cell, step size lr[k]; the pack's batch size and the tuning phase it serves)."""

    cell: int  # index into Sweep.cells
    n_train: tuple[int, ...]
    seeds: tuple[int, ...]
    max_steps: int | None = None  # a retry's larger step budget (None: the cell's own)
    lr: tuple[float, ...] | None = None  # each model's step size (None: the cell's)
    batch_size: int | None = None  # None: the cell's
    phase: str | None = None  # tuning: "selection" or "measurement" (services.search.tuning_one_pass)

    def config(self) -> dict:
        """The pack as a Ray Tune trial's config entry (plain JSON values); from_config reads it."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_config(cls, config: dict) -> "Pack":
        lr = config.get("lr")
        return cls(
            config["cell"],
            tuple(config["n_train"]),
            tuple(config["seeds"]),
            config.get("max_steps"),
            None if lr is None else tuple(lr),
            config.get("batch_size"),
            config.get("phase"),
        )

    def training(self, cell_training):
        """The cell's training config as this pack trains it: a tuned setting's batch size at the
        cell's sample budget, a retry's larger step budget."""
        training = cell_training.at_batch(self.batch_size) if self.batch_size else cell_training
        return dataclasses.replace(training, max_steps=self.max_steps or training.max_steps)

    @property
    def name(self) -> str:
        """A short name for trial folders: its cell, N range and first seed."""
        return f"cell{self.cell}-n{self.n_train[0]}-{self.n_train[-1]}-s{self.seeds[0]}"


@dataclass(frozen=True)
class TrialConfig:
    """What one Ray Tune trial trains, the one form its config carries (a Tune config is a dict:
    as_config writes it, of reads it): its pack and, for a searcher's trial, the values it sampled
    and the cell they resolve to (ResolvedCell.to_config, resolved in the driver: a worker holds no
    schema). The driver reads the trial's cell (cell), a worker its configs (resolved_cell)."""

    pack: Pack
    sampled: dict[str, Any] | None = None  # a searcher's values, as it handed them (None: the spec's cell)
    resolved: dict | None = None  # the sampled cell resolved, ResolvedCell.to_config

    def as_config(self) -> dict:
        own = {"pack": self.pack.config()}
        if self.sampled is not None:
            own |= {"sampled": self.sampled, "resolved": self.resolved}
        return {"trial": own}

    @classmethod
    def of(cls, config: dict) -> "TrialConfig":
        own = legacy.trial_config(config)
        return cls(Pack.from_config(own["pack"]), own.get("sampled"), own.get("resolved"))

    def cell(self, sweep: "Sweep") -> Cell:
        """The cell the trial trains: its pack's, with the values a searcher sampled for it."""
        base = sweep.cells[self.pack.cell]
        sampled = sweep.search.typed(self.sampled) if self.sampled is not None else {}
        return Cell(base.model, {**base.values, **sampled})

    def resolved_cell(self, sweep: TrialSweep) -> ResolvedCell:
        """The cell's configs and N, on a worker: its pack's, or the sampled cell the driver resolved."""
        base = sweep.cells[self.pack.cell]
        return base if self.resolved is None else base.with_config(self.resolved)


def packs(sweep: "Sweep", slots: int | None = None) -> list[Pack]:
    """The packs of a sweep: for each cell, its (N, seed) pairs cut into packs of at most
    ``resources.models_per_pack`` models and, given the ``slots`` (trials the cluster runs at
    once), small enough that there are at least two packs per slot, so that no CPU idles through
    a long tail; a cell's packs are of equal size. Longest first (pack_cost), as Tune runs a grid
    in order."""
    pairs = [
        [(n, seed) for n in sweep.resolved_cell(cell).n_values for seed in sweep.measurement_seeds]
        for cell in sweep.cells
    ]
    size = sweep.resources.models_per_pack
    if slots:
        size = min(size, max(1, math.ceil(sum(map(len, pairs)) / (2 * slots))))
    made = [pack for index, cell_pairs in enumerate(pairs) for pack in cut(index, cell_pairs, size)]
    return sorted(made, key=pack_cost(sweep), reverse=True)


def chunks(items: list, size: int) -> list[list]:
    """``items`` in consecutive chunks of at most ``size``, as equal in size as they can be."""
    count = math.ceil(len(items) / size)
    return [items[len(items) * i // count : len(items) * (i + 1) // count] for i in range(count)]


def cut(cell: int, pairs: list[tuple[int, int]], size: int, max_steps: int | None = None) -> list[Pack]:
    """A cell's (N, seed) pairs as packs of at most ``size`` models, of equal size."""
    return [
        Pack(cell, tuple(n for n, _ in chunk), tuple(s for _, s in chunk), max_steps) for chunk in chunks(pairs, size)
    ]


def len_of_pack(pack: Pack) -> float:
    """The plainest cost of a pack: its models."""
    return len(pack.seeds)


def pack_cost(sweep: "Sweep"):
    """A pack's estimated cost, for ordering packs longest first: its models x the multiply-adds of
    one model's forward pass on one sample (spec.sample_cost: a ViT's attention grows as L^2) x the
    samples a model trains on, except in a tuned cell, whose runs stop at their window long
    before their cap (there the cap says little, and the model's cost per sample decides). A
    tuning round's pack also counts the measurement it stands before (``seeds`` models), the
    work of the chain it holds up: a small late round of one cell (a step past the end of its
    range) went behind the other cells' measurements, and its own measurement then ran alone at
    the end of the main job (9 s of its 203)."""

    def cost(pack: Pack) -> float:
        per_sample = sweep.sample_cost(sweep.cells[pack.cell])
        samples = 1 if pack.phase else sum(pack.n_train) / len(pack.n_train)
        models = len(pack.seeds) + (sweep.seeds if pack.phase == SELECTION else 0)
        return models * per_sample * samples

    return cost
