"""The tuning section: the training settings (B, eta) a tuned cell searches, their values or
ranges, the selection seeds and the caps (services.search.tuning's strategy plans with them)."""

import dataclasses
from typing import Annotated, Literal

from pydantic import BaseModel, Field, field_validator

from services.spec.base import FORBID, distinct

DIMENSIONS = ("batch_size", "lr")  # what a tuning setting fixes, in this order


@dataclasses.dataclass(frozen=True, order=True)
class Setting:
    """One training setting of a cell: its batch size B and step size eta."""

    batch_size: int
    lr: float

    @property
    def label(self) -> str:
        return f"B={self.batch_size} lr={self.lr:g}"

    def value(self, dimension: str) -> float:
        return getattr(self, dimension)

    def replace(self, dimension: str, value: float) -> "Setting":
        values = {d: self.value(d) for d in DIMENSIONS} | {dimension: value}
        return Setting(int(values["batch_size"]), float(values["lr"]))


class TuningSpace(BaseModel):
    """The values of the training fields a tuned cell searches (services.search.tuning)."""

    model_config = FORBID
    lr: list[Annotated[float, Field(gt=0)]] | None = Field(
        None, min_length=1, description="step sizes eta to try (default: the training section's alone)"
    )
    batch_size: list[Annotated[int, Field(ge=1)]] | None = Field(
        None, min_length=1, description="batch sizes B to try (default: the training section's alone)"
    )

    @field_validator("lr", "batch_size")
    @classmethod
    def _distinct_values(cls, values: list | None) -> list | None:
        return values if values is None else sorted(distinct(values))


class Tuning(TuningSpace):
    """Training settings searched inside every cell: each cell's N* is the smallest over these
    settings, chosen on the selection seeds and measured on the sweep's own seeds
    (services.search.tuning). A value list per searched field: a grid (every combination), or, with
    sampler optuna (one pass only), the log range the list spans. Multi-pass cells search each
    setting's N* adaptively (strategy sample_complexity); the caps are one pass's.
    ``per_model.<model>.tuning`` gives a model lists of its own."""

    model_config = FORBID
    selection_seeds: int = Field(8, ge=1, description="seeds that choose each cell's setting")
    selection_seed_start: int = Field(
        1000,
        ge=0,
        description="the first selection seed, before the sweep's seed_start shifts it (at least seeds: the "
        "measurement seeds are seed_start .. seed_start + seeds - 1)",
    )
    at_edge: Literal["extend", "flag"] = Field(
        "extend",
        description="a best setting at the end of the values tried: extend: try one geometric step past it; "
        "flag: report it as found at the edge",
    )
    max_extensions: int = Field(2, ge=0, description="extend: steps past each edge at most, per cell")
    cap_rounds: int = Field(
        3,
        ge=1,
        description="grid: selection runs under this many growing sample caps, the last the cell's sample budget "
        "(training.batch_size x max_steps); a setting goes on to the next only while it could still win",
    )
    cap_factor: float = Field(4.0, gt=1, description="grid: each cap is this times the one before")
    sampler: Literal["grid", "optuna"] = Field(
        "grid", description="grid: every combination of the values; optuna: TPE over the range they span (log scale)"
    )
    num_samples: int = Field(12, ge=1, description="optuna: settings tried per cell")
    parallel: int = Field(4, ge=1, description="optuna: settings asked at once per cell (one round)")
    seed: int = Field(0, description="optuna: seed of the sampler")

    @property
    def searched(self) -> tuple[str, ...]:
        """The fields with more than one value to try."""
        return tuple(d for d in ("batch_size", "lr") if len(getattr(self, d) or []) > 1)

    def reach(self, dimension: str, default: float) -> list[float]:
        """Every value of a field a cell may try, ascending: its list (``default`` where it has
        none) and, a grid extending, up to ``max_extensions`` geometric steps past each end."""
        values = sorted(getattr(self, dimension) or [default])
        extending = dimension in self.searched and self.sampler == "grid" and self.at_edge == "extend"
        for side in ("low", "high") if extending else ():
            for _ in range(self.max_extensions):
                if (value := beyond(values, side, dimension)) is None:
                    break
                values = sorted([*values, value])
        return values

    def most_settings(self, base: Setting) -> int:
        """The most settings a cell may try: Optuna's samples, or every combination of the values
        each field may reach (a chosen setting's neighbours pair a new value of one field with the
        values of the other: sample_complexity_arms tried 15 settings in a cell of a 2 x 3 grid)."""
        if self.sampler == "optuna":
            return self.num_samples
        return len(self.reach("batch_size", base.batch_size)) * len(self.reach("lr", base.lr))

    def settings(self, base: Setting) -> list[Setting]:
        """Every combination of the listed values; a field not listed keeps ``base``'s value."""
        return [Setting(b, float(lr)) for b in self.batch_size or [base.batch_size] for lr in self.lr or [base.lr]]

    def caps(self, budget: int) -> list[int]:
        """The selection caps in samples, ascending, ending at a cell's sample ``budget``."""
        return sorted({max(1, round(budget / self.cap_factor**k)) for k in range(self.cap_rounds)})

    def selection_seed_list(self, seed_start: int) -> list[int]:
        """The selection seeds, shifted by the sweep's ``seed_start`` as its measurement seeds are: a
        replication (another seed_start) then draws the seeds that choose each setting afresh too, the
        whole procedure on unseen seeds, and no seed_start can make the two sets overlap (TuningStrategy.problems'
        one check, selection_seed_start >= seeds, holds whatever the shift), so that --seed-start never
        refuses a spec that validated."""
        first = seed_start + self.selection_seed_start
        return list(range(first, first + self.selection_seeds))

    def distributions(self) -> dict:
        """Optuna's distributions of the searched fields: log-uniform eta, log-spaced integer B."""
        from optuna.distributions import FloatDistribution, IntDistribution  # noqa: PLC0415  (Optuna loads on use)

        out = {}
        if "batch_size" in self.searched:
            out["batch_size"] = IntDistribution(min(self.batch_size), max(self.batch_size), log=True)
        if "lr" in self.searched:
            out["lr"] = FloatDistribution(min(self.lr), max(self.lr), log=True)
        return out


def beyond(values: list[float], side: str, dimension: str) -> float | None:
    """One geometric step past an end of the sorted ``values``: the end times its ratio to its
    neighbour (a batch size rounded, and at least 1; None where that gives nothing new)."""
    edge, neighbour = (values[0], values[1]) if side == "low" else (values[-1], values[-2])
    value = edge * edge / neighbour
    if dimension == "batch_size":
        value = max(1, round(value))
    return None if value == edge else value
