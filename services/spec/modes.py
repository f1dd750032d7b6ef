"""The search modes: how a sweep chooses the N (and, tuned, the settings) its cells train at. Each
mode is its schema, its budget (trainings and steps a cell may take), its problems, its words, how
its cells are piloted for `vitsweep plan` (``pilots``) and its round planner (``planner``: a
"module:attribute" of the search layer, found when the sweep is planned or run, so that this
layer never imports that one). Modes are found by entry points of group ``vitsweep.search_modes``
(the built-in ones in pyproject.toml, as any other package's). ``Sweep.mode`` is the sweep's
mode: its search section's, or Tuned (services.spec.tuned) where a tuning section searches every cell."""

import dataclasses
import functools
import math
import operator
import typing
import warnings
from importlib.metadata import entry_points
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, Discriminator, Field, Tag, model_validator

from services.analysis import full_grid_size
from services.results import Cell
from services.spec.base import FORBID, Problem
from services.spec.resolved import SweepView
from vit_core.fields import ConfigError
from vit_core.train_config import TrainConfig

SPEC_ONLY = {"kind"}  # set by `models`, never inside `model:` or as an axis
GROUP = "vitsweep.search_modes"


@dataclasses.dataclass(frozen=True)
class PilotRun:
    """One pilot run of a cell (services.estimate.pilot): its training config, its models, each one's
    step size (None: the config's) and, multi-pass, its N (None: the grid's largest, the slowest)."""

    training: TrainConfig
    models: int
    lr: tuple[float, ...] | None = None
    n: tuple[int, ...] | None = None


def spread(values, models: int) -> tuple:
    """``models`` of ``values`` evenly spaced from the smallest to the largest."""
    ordered = sorted(values)
    return tuple(ordered[round(k * (len(ordered) - 1) / max(1, models - 1))] for k in range(models))


class Range(BaseModel):
    """A field's search range for Optuna."""

    model_config = FORBID
    low: float
    high: float
    log: bool = Field(False, description="sample on a log scale")
    integer: bool = Field(False, description="sample integers")

    @model_validator(mode="after")
    def _ordered(self) -> "Range":
        if not self.low < self.high:
            raise ValueError(f"low={self.low} must be below high={self.high}")
        if self.log and self.low <= 0:
            raise ValueError(f"low={self.low}: a log scale needs low > 0")
        return self


class Mode(BaseModel):
    """A search section: what every mode has (a grid's budget), which each mode may change."""

    model_config = FORBID
    mode: str
    samples: ClassVar[int] = 1  # trainings of a cell's first round per (N, seed)
    fixed: ClassVar[bool] = False  # whether every training is known before the sweep starts
    planned: ClassVar[bool] = True  # whether its first round is the n_train grid's packs (services.search.packs)
    planner: ClassVar[str]  # "module:attribute" of its round planner, called with (Sweep, slots)

    @property
    def name(self) -> str:
        return self.mode

    def pilots(self, sweep: SweepView, cell: Cell, models: int) -> list[PilotRun]:
        """How `vitsweep plan` pilots a cell: ``models`` models at its own settings; multi-pass at
        Ns spread over its grid, as its grid or N* search trains them (a run to zero training
        loss grows with N: at the largest N alone fig1_grid_multi_pass's ViT pilots counted
        2.2-3.6x the model-steps its sweep took); one pass at its sample budget."""
        resolved = sweep.resolved_cell(cell)
        n = None if resolved.one_pass else spread(resolved.n_values, models)
        return [PilotRun(resolved.training, models, None, n)]

    def problems(self, sweep: SweepView) -> list[Problem]:
        return []

    def first_trainings(self, sweep: SweepView, cell: Cell) -> int:
        """Models a cell trains in its first round."""
        return self.samples * len(sweep.resolved_cell(cell).n_values) * sweep.seeds

    def most_trainings(self, sweep: SweepView, cell: Cell) -> int:
        """The most models a cell can train."""
        return self.first_trainings(sweep, cell)

    def most_steps(self, sweep: SweepView, cell: Cell) -> int:
        """The most SGD steps one training of the cell takes."""
        return sweep.resolved_cell(cell).training.max_steps

    def smallest_batch(self, sweep: SweepView, cell: Cell) -> int:
        """The smallest batch size a training of the cell may take."""
        return sweep.resolved_cell(cell).training.batch_size

    def most_rounds(self, sweep: SweepView, cell: Cell) -> int:
        """The longest chain of a cell's rounds, each waiting for the one before (1: no round waits)."""
        return 1

    def n_limit(self, sweep: SweepView) -> int:
        """The largest N the sweep may train."""
        return sweep.largest_n

    def objective(self) -> tuple[str, str] | None:
        """(metric, direction) where trials are samples scored by an objective (the best is reported)."""
        return None

    def trials(self, first_packs: int) -> int | None:
        """Ray Tune trials the sweep runs (given its first round's packs); None where later
        rounds depend on the results."""
        return first_packs if self.fixed else None

    def trainings_text(self, sweep: SweepView, first: int, most: int) -> str:
        """What `vitsweep validate` says of the sweep's size."""
        return f"{first} trainings"


class GridMode(Mode):
    """grid: every cell of the axes at every N of n_train (one pass: at its sample budget)."""

    mode: Literal["grid"] = "grid"
    fixed: ClassVar[bool] = True
    planner: ClassVar[str] = "services.search.grid:GridPlanner"


class SampleComplexityMode(Mode):
    """sample_complexity: per cell, find N* adaptively, starting from n_train (services.search.nstar)."""

    mode: Literal["sample_complexity"]
    planner: ClassVar[str] = "services.search.nstar:NStarSearch"
    precision: float = Field(0.1, gt=0, le=1, description="stop once N* is bracketed within this relative width")
    factor: float = Field(2.0, gt=1, description="grid step when N* lies beyond an end of n_train")
    n_max: int | None = Field(None, ge=1, description="never train above this N (default: 16x the largest n_train)")
    max_steps_cap: int | None = Field(
        None,
        ge=1,
        description="a model whose training error is not 0 when its step budget runs out trains again with twice "
        "the budget, up to this many steps (None: never)",
    )

    def problems(self, sweep: SweepView) -> list[Problem]:
        if self.n_max is not None and self.n_max < sweep.largest_n:
            return [Problem("search.n_max", self.n_max, f"must be at least the largest n_train ({sweep.largest_n})")]
        return []

    def most_n(self, sweep: SweepView, cell: Cell) -> int:
        """The most N one seed of a multi-pass cell trains at: its grid and every N of ratio
        1 + precision up to n_max."""
        return len(sweep.resolved_cell(cell).n_values) + full_grid_size(1, self.n_limit(sweep), self.precision)

    def most_trainings(self, sweep: SweepView, cell: Cell) -> int:
        """Multi-pass: every N of a geometric grid of ratio 1 + precision up to n_max (it trains far fewer)."""
        return (
            super().most_trainings(sweep, cell)
            if sweep.resolved_cell(cell).one_pass
            else self.most_n(sweep, cell) * sweep.seeds
        )

    def most_steps(self, sweep: SweepView, cell: Cell) -> int:
        """Multi-pass: a model that did not converge may train again, up to max_steps_cap."""
        searched = not sweep.resolved_cell(cell).one_pass
        return (searched and self.max_steps_cap) or sweep.resolved_cell(cell).training.max_steps

    def most_rounds(self, sweep: SweepView, cell: Cell) -> int:
        """Multi-pass: a round per N it may try, each maybe followed by retries that double the
        step budget up to max_steps_cap (one pass: its one round)."""
        if sweep.resolved_cell(cell).one_pass:
            return 1
        budget, cap = sweep.resolved_cell(cell).training.max_steps, self.max_steps_cap or 0
        return self.most_n(sweep, cell) * (1 + max(0, math.ceil(math.log2(cap / budget))) if cap > budget else 1)

    def n_limit(self, sweep: SweepView) -> int:
        return self.n_max or 16 * sweep.largest_n

    def trainings_text(self, sweep: SweepView, first: int, most: int) -> str:
        return f"{first} trainings in the first round of the adaptive N* search (at most {most})"


class OptunaMode(Mode):
    """optuna: tune fields of one cell with Optuna (ask and tell), each trial training every
    (N, seed) of the cell with the sampled values."""

    mode: Literal["optuna"]
    metric: Literal["success_rate", "mean_test_error", "median_iterations_to_zero"] = Field(
        "success_rate",
        description="the objective, over the models of a trial (success_rate: over those that count, as everywhere; "
        "median_iterations_to_zero counts max_steps for a model that never reaches zero)",
    )
    direction: Literal["max", "min"] = "max"
    num_samples: int = Field(20, ge=1, description="Optuna trials")
    seed: int = Field(0, description="seed of Optuna's sampler")
    space: dict[str, Range] = Field(default_factory=dict, description="field -> range")

    planned: ClassVar[bool] = False
    planner: ClassVar[str] = "services.search.optuna:OptunaPlanner"

    @property
    def samples(self) -> int:
        return self.num_samples

    def trials(self, first_packs: int) -> int | None:
        return self.num_samples

    def objective(self) -> tuple[str, str] | None:
        return self.metric, self.direction

    def typed(self, sampled: dict[str, Any]) -> dict[str, Any]:
        """A trial's sampled values as its fields take them: integers where a range is of integers
        (Optuna, and Tune's saved state, may hand back floats)."""
        return {k: int(v) if self.space[k].integer else v for k, v in sampled.items()}

    def problems(self, sweep: SweepView) -> list[Problem]:
        """Optuna tunes the fields of `space` in one cell, one pack per trial."""
        problems = []
        if not self.space:
            problems.append(Problem("search.space", {}, "optuna needs at least one field to tune"))
        if len(sweep.cells) != 1:
            problems.append(Problem("models", sweep.models, "optuna tunes one cell: one model and no axes"))
        per_trial = len(sweep.resolved_cell(sweep.cells[0]).n_values) * sweep.seeds
        if per_trial > sweep.resources.models_per_pack:
            problems.append(
                Problem(
                    "resources.models_per_pack",
                    sweep.resources.models_per_pack,
                    f"an optuna trial trains all {per_trial} (N, seed) pairs in one pack",
                )
            )
        return problems + [p for name, bounds in self.space.items() for p in _space_problems(sweep, name, bounds)]


SEARCH_MODES: dict[str, type[Mode]] = {}  # the installed modes by name (load_modes)


def mode_name(mode: type[Mode]) -> str:
    """A mode's name: the value of its ``mode`` Literal."""
    return typing.get_args(mode.model_fields["mode"].annotation)[0]


def load_modes() -> dict[str, type[Mode]]:
    """The installed search modes (SEARCH_MODES, filled again), grid first, the others by name: a
    mode that fails to load is left out with a warning that names its entry point and why."""
    found = {}
    for point in entry_points(group=GROUP):
        try:
            mode = point.load()
            if mode_name(mode) != point.name:
                raise ValueError(f"its mode field is {mode_name(mode)!r}")
        except Exception as error:  # a broken package must not take the installed modes down with it
            warnings.warn(f"search mode {point.name} ({point.value}, group {GROUP}) left out: {error}", stacklevel=2)
            continue
        found[point.name] = mode
    SEARCH_MODES.clear()
    SEARCH_MODES.update(sorted(found.items(), key=lambda item: (item[0] != "grid", item[0])))
    return SEARCH_MODES


def _search_mode(value: Any) -> str | None:
    """The mode of a search section (grid where it names none; None where it is not a section)."""
    if isinstance(value, dict):
        return value.get("mode", "grid")
    return value.mode if isinstance(value, BaseModel) else None


def search_union() -> Any:
    """The search section's type: one of SEARCH_MODES by its ``mode``."""
    modes = [Annotated[cls, Tag(name)] for name, cls in SEARCH_MODES.items()]
    tag = Discriminator(
        _search_mode, custom_error_type="search_mode", custom_error_message=f"one of {', '.join(SEARCH_MODES)}"
    )
    return Annotated[functools.reduce(operator.or_, modes), tag]


def _space_problems(sweep: SweepView, name: str, bounds: Range) -> list[Problem]:
    """What is wrong with one field Optuna tunes: not a field, set elsewhere, or an end vit_core refuses."""
    section = sweep.spec.section_of(name)
    if not section or name in SPEC_ONLY:
        return [Problem(f"search.space.{name}", name, "not a data, model or training field")]
    problems = []
    if name in sweep.swept or name in getattr(sweep.spec, section).model_fields_set:
        problems.append(Problem(f"search.space.{name}", name, f"also set in {section} or axes: keep one"))
    for end in ("low", "high"):
        value = int(getattr(bounds, end)) if bounds.integer else getattr(bounds, end)
        try:
            sweep.resolve(Cell(sweep.models[0], {**sweep.cells[0].values, name: value}))  # a probe, not kept
        except (ConfigError, TypeError) as error:
            problems.append(Problem(f"search.space.{name}.{end}", value, getattr(error, "allowed", str(error))))
    return problems
