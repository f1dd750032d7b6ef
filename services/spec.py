"""Sweep specs: YAML files validated by Pydantic v2 models built from vit_core's config dataclasses.

Each installed experiment family (vit_core.family) gets a spec class: its data, model and training
sections (and the sweep axes) are generated from the fields of the family's data and model
configs and ``TrainConfig``: each field keeps its one default and help text, and a new field is a
spec field (and an axis) at once. Parsing checks types, unknown
keys and ranges; ``check_sweep`` then builds the configs of every cell so that vit_core's own
checks (alpha# < alpha*, orthonormal patterns need d >= M, ...) run before anything starts.
"""

import dataclasses
import itertools
import json
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Union

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

from services.analysis import full_grid_size
from services.results import Cell
from vit_core.configs import TrainConfig
from vit_core.family import Family, families
from vit_core.fields import ConfigError

FORBID = ConfigDict(extra="forbid", strict=True)
SPEC_ONLY = {"kind"}  # set by `models`, never inside `model:` or as an axis


def _section(name: str, cls: type, partial: bool = False) -> type[BaseModel]:
    """A Pydantic model with one optional field per dataclass field (default: the dataclass's; a
    ``partial`` section's default is None, so that only the values it sets survive a dump)."""
    fields = {
        f.name: (
            f.type | None if partial else f.type,
            Field(None if partial else f.default, description=f.metadata["help"]),
        )
        for f in dataclasses.fields(cls)
        if f.name not in SPEC_ONLY
    }
    return create_model(name, __config__=FORBID, __doc__=cls.__doc__, **fields)


def _axes(name: str, sections: dict[str, type]) -> type[BaseModel]:
    """Any data, model or training field as a sweep axis: a non-empty list of its values."""
    fields = {
        f.name: (Annotated[list[f.type], Field(min_length=1)] | None, Field(None, description=f.metadata["help"]))
        for cls in sections.values()
        for f in dataclasses.fields(cls)
        if f.name not in SPEC_ONLY
    }
    return create_model(
        name, __config__=FORBID, __doc__="Sweep axes; the sweep is the product of all of them.", **fields
    )


def _distinct(values: list) -> list:
    if len(set(values)) != len(values):
        raise ValueError("each value at most once")
    return values


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


@dataclasses.dataclass(frozen=True)
class CellPlan:
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


class TuningSpace(BaseModel):
    """The values of the training fields a tuned cell searches (services.tuning)."""

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
        return values if values is None else sorted(_distinct(values))


def _model_grid(name: str, axes: type[BaseModel]) -> type[BaseModel]:
    """One model kind's own grid: N values, training values and axis values that replace the sweep's for it."""
    n_train = Annotated[list[Annotated[int, Field(ge=1)]], Field(min_length=1), AfterValidator(_distinct)]
    return create_model(
        name,
        __config__=FORBID,
        __doc__="A model's own n_train, training values and axes (each replaces the sweep's of that name).",
        n_train=(
            n_train | None,
            Field(None, description="this model's training-set sizes N (default: the sweep's n_train)"),
        ),
        training=(
            OwnTraining | None,
            Field(None, description="this model's training values (those it sets replace the sweep's)"),
        ),
        axes=(axes | None, Field(None, description="this model's axis values; the sweep's other axes still apply")),
        tuning=(
            TuningSpace | None,
            Field(None, description="this model's values to try (those it lists replace the sweep tuning's)"),
        ),
    )


TrainingSpec = _section("TrainingSpec", TrainConfig)
OwnTraining = _section("OwnTraining", TrainConfig, partial=True)
PER_MODEL = (
    "a model's own n_train and axis values, replacing the sweep's for that model "
    "(Fig 1: the ViT and the CNN on different grids)"
)


class Resources(BaseModel):
    """What one Ray Tune trial (one pack of models) asks the cluster for."""

    model_config = FORBID
    cpus_per_trial: float = Field(1.0, gt=0, description="CPUs per trial; torch uses as many threads")
    gpus_per_trial: float = Field(0.0, ge=0, description="GPUs per trial, fractions allowed; > 0 trains on CUDA")
    models_per_pack: int = Field(64, ge=1, description="models trained together in one trial")
    max_failures: int = Field(1, ge=0, description="retries of a trial that raises (Ray Tune FailureConfig)")


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


class GridMode(BaseModel):
    """grid: every cell of the axes at every N of n_train (one pass: at its sample budget)."""

    model_config = FORBID
    mode: Literal["grid"] = "grid"
    samples: ClassVar[int] = 1  # trainings of a cell's first round per (N, seed)

    def problems(self, spec: "SweepSpec") -> list["Problem"]:
        return []


class SampleComplexityMode(BaseModel):
    """sample_complexity: per cell, find N* adaptively, starting from n_train (services.nstar)."""

    model_config = FORBID
    mode: Literal["sample_complexity"]
    samples: ClassVar[int] = 1
    precision: float = Field(0.1, gt=0, le=1, description="stop once N* is bracketed within this relative width")
    factor: float = Field(2.0, gt=1, description="grid step when N* lies beyond an end of n_train")
    n_max: int | None = Field(None, ge=1, description="never train above this N (default: 16x the largest n_train)")
    max_steps_cap: int | None = Field(
        None,
        ge=1,
        description="a model whose training error is not 0 when its step budget runs out trains again with twice "
        "the budget, up to this many steps (None: never)",
    )

    def problems(self, spec: "SweepSpec") -> list["Problem"]:
        if self.n_max is not None and self.n_max < spec.largest_n:
            return [Problem("search.n_max", self.n_max, f"must be at least the largest n_train ({spec.largest_n})")]
        return []


class OptunaMode(BaseModel):
    """optuna: tune fields of one cell with Ray Tune's OptunaSearch, each trial training every
    (N, seed) of the cell with the sampled values."""

    model_config = FORBID
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

    @property
    def samples(self) -> int:
        return self.num_samples

    def problems(self, spec: "SweepSpec") -> list["Problem"]:
        """Optuna tunes the fields of `space` in one cell, one pack per trial."""
        problems = []
        if not self.space:
            problems.append(Problem("search.space", {}, "optuna needs at least one field to tune"))
        if len(spec.cells) != 1:
            problems.append(Problem("models", spec.models, "optuna tunes one cell: one model and no axes"))
        per_trial = len(spec.plan(spec.cells[0]).n_values) * spec.seeds
        if per_trial > spec.resources.models_per_pack:
            problems.append(
                Problem(
                    "resources.models_per_pack",
                    spec.resources.models_per_pack,
                    f"an optuna trial trains all {per_trial} (N, seed) pairs in one pack",
                )
            )
        return problems + [p for name, bounds in self.space.items() for p in _space_problems(spec, name, bounds)]


SEARCH_MODES = {"grid": GridMode, "sample_complexity": SampleComplexityMode, "optuna": OptunaMode}


def _search_mode(value: Any) -> str | None:
    """The mode of a search section (grid where it names none; None where it is not a section)."""
    if isinstance(value, dict):
        return value.get("mode", "grid")
    return value.mode if isinstance(value, BaseModel) else None


Search = Annotated[
    Annotated[GridMode, Tag("grid")]
    | Annotated[SampleComplexityMode, Tag("sample_complexity")]
    | Annotated[OptunaMode, Tag("optuna")],
    Discriminator(
        _search_mode, custom_error_type="search_mode", custom_error_message=f"one of {', '.join(SEARCH_MODES)}"
    ),
]


class Tuning(TuningSpace):
    """Training settings searched inside every cell: each cell's N* is the smallest over these
    settings, chosen on the selection seeds and measured on the sweep's own seeds
    (services.tuning). A value list per searched field: a grid (every combination), or, with
    sampler optuna (one pass only), the log range the list spans. Multi-pass cells search each
    setting's N* adaptively (search mode sample_complexity); the caps are one pass's.
    ``per_model.<model>.tuning`` gives a model lists of its own."""

    model_config = FORBID
    selection_seeds: int = Field(8, ge=1, description="seeds that choose each cell's setting")
    selection_seed_start: int = Field(
        1000, ge=0, description="the first selection seed; the measurement seeds are 0 .. seeds - 1"
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

    @property
    def most_extensions(self) -> int:
        """Settings a cell may add past the edges of a grid: ``max_extensions`` past each end of each searched field."""
        return 2 * len(self.searched) * self.max_extensions * (self.sampler == "grid")

    def settings(self, base: Setting) -> list[Setting]:
        """Every combination of the listed values; a field not listed keeps ``base``'s value."""
        return [Setting(b, float(lr)) for b in self.batch_size or [base.batch_size] for lr in self.lr or [base.lr]]

    def caps(self, budget: int) -> list[int]:
        """The selection caps in samples, ascending, ending at a cell's sample ``budget``."""
        return sorted({max(1, round(budget / self.cap_factor**k)) for k in range(self.cap_rounds)})

    def selection_seed_list(self) -> list[int]:
        return list(range(self.selection_seed_start, self.selection_seed_start + self.selection_seeds))

    def distributions(self) -> dict:
        """Optuna's distributions of the searched fields: log-uniform eta, log-spaced integer B."""
        from optuna.distributions import FloatDistribution, IntDistribution

        out = {}
        if "batch_size" in self.searched:
            out["batch_size"] = IntDistribution(min(self.batch_size), max(self.batch_size), log=True)
        if "lr" in self.searched:
            out["lr"] = FloatDistribution(min(self.lr), max(self.lr), log=True)
        return out


class Tracking(BaseModel):
    """Where results go."""

    model_config = FORBID
    experiment: str = Field("vitsweep", min_length=1, description="MLflow experiment name")
    tracking_uri: str | None = Field(
        None, description="MLflow tracking URI; default: a SQLite store under the sweep home"
    )


class SweepSpec(BaseModel):
    """A sweep: models x the product of the axes, each cell trained at every N with `seeds` seeds.
    Its family (spec_class) decides the models and the data and model sections."""

    model_config = FORBID
    FAMILY: ClassVar[Family]
    SECTIONS: ClassVar[dict[str, type]]
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", description="the sweep's name")
    training: TrainingSpec = Field(default_factory=TrainingSpec)
    n_train: list[Annotated[int, Field(ge=1)]] | None = Field(
        None,
        min_length=1,
        description="training-set sizes N of every multi_pass "
        "cell (one_pass cells need none: one run gives every N up to B·max_steps)",
    )
    seeds: int = Field(20, ge=1, description="seeds per (cell, N)")
    success_rate: float = Field(0.5, gt=0, le=1, description="p: N* is the smallest N whose success rate reaches p")
    max_not_converged: float = Field(
        0.1,
        ge=0,
        le=1,
        description="flag a cell where more than this share of an N's models did not "
        "converge (training error above 0 at the step budget); flagged cells are left out of the fits",
    )
    search: Search = Field(default_factory=GridMode, description="how N is chosen: grid, sample_complexity or optuna")
    tuning: Tuning | None = Field(
        None, description="one pass: search these training settings inside every cell, N* at each cell's best"
    )
    max_trainings: int = Field(200_000, ge=1, description="refuse sweeps larger than this many trainings")
    resources: Resources = Field(default_factory=Resources)
    tracking: Tracking = Field(default_factory=Tracking)

    @field_validator("models", "n_train", check_fields=False)
    @classmethod
    def _distinct(cls, values: list | None) -> list | None:
        return values if values is None else _distinct(values)

    def axes_of(self, model: str) -> dict[str, list]:
        """A model's axes, in spec order: the sweep's, with its own (per_model) replacing or added."""
        own = self.per_model.get(model)
        return self.axes.model_dump(exclude_none=True) | (
            own.axes.model_dump(exclude_none=True) if own and own.axes else {}
        )

    def tuning_of(self, model: str) -> "Tuning | None":
        """A model's tuning: the sweep's, with the value lists of its own (per_model) replacing."""
        own = getattr(self.per_model.get(model), "tuning", None)
        if self.tuning is None or own is None:
            return self.tuning
        return self.tuning.model_copy(update=own.model_dump(exclude_none=True))

    def n_train_of(self, model: str) -> list[int] | None:
        """A model's training-set sizes: its own (per_model), else the sweep's."""
        own = self.per_model.get(model)
        return own.n_train if own and own.n_train else self.n_train

    @property
    def swept(self) -> dict[str, list]:
        """Every axis that some model sweeps, in spec order, with its first model's values."""
        swept: dict[str, list] = {}
        for model in self.models:
            for axis, values in self.axes_of(model).items():
                swept.setdefault(axis, values)
        return swept

    @property
    def trainings(self) -> int:
        """Models the sweep trains (sample_complexity: its first round; later rounds add more;
        tuning: its grid on the selection seeds and the measurement, before any extension)."""
        if self.tuning is None and isinstance(self.search, OptunaMode):  # one cell (checked)
            return self.search.samples * len(self.plan(self.cells[0]).n_values) * self.seeds
        return sum(self.trainings_of(c) for c in self.cells)

    def trainings_of(self, cell: Cell) -> int:
        """Models one cell trains in its first round (tuning: its grid on the selection seeds and the
        measurement; optuna: every sample's (N, seed) pairs)."""
        if self.tuning is not None:
            runs = self.selection_settings(cell.model) * self.tuning.selection_seeds + self.seeds
            return runs * (1 if self.plan(cell).one_pass else len(self.plan(cell).n_values))
        return self.search.samples * len(self.plan(cell).n_values) * self.seeds

    def max_trainings_of(self, cell: Cell) -> int:
        """The most models one cell can train: a multi-pass sample_complexity search's every N of a
        geometric grid of ratio 1 + precision up to n_max; a tuned cell's every setting (extensions
        included) on the selection seeds once per sample cap (one pass) or through a whole N*
        search (multi-pass), and its measurement; any other cell's first round."""
        one_pass = self.plan(cell).one_pass
        searched = isinstance(self.search, SampleComplexityMode) and not one_pass
        if self.tuning is not None:
            tuning, training = self.tuning_of(cell.model), self.plan(cell).training
            settings = (self.selection_settings(cell.model) + tuning.most_extensions) * self.tuning.selection_seeds
            if one_pass:
                return settings * len(tuning.caps(training.batch_size * training.max_steps)) + self.seeds
            return (settings + self.seeds) * self._most_n(cell)
        return self._most_n(cell) * self.seeds if searched else self.trainings_of(cell)

    def _most_n(self, cell: Cell) -> int:
        """The most N one seed of a multi-pass cell trains at: an N* search's grid and every N of
        ratio 1 + precision up to n_max; else its grid."""
        grid = len(self.plan(cell).n_values)
        if isinstance(self.search, SampleComplexityMode):
            return grid + full_grid_size(1, self.n_max, self.search.precision)
        return grid

    @property
    def largest_n(self) -> int:
        """The largest N any multi_pass cell starts from (any cell's, when all are one_pass)."""
        searched = [c for c in self.cells if not self.plan(c).one_pass] or self.cells
        return max(max(self.plan(c).n_values) for c in searched)

    @property
    def n_max(self) -> int:
        """The largest N the sweep may train."""
        if isinstance(self.search, SampleComplexityMode):
            return self.search.n_max or 16 * self.largest_n
        return self.largest_n

    def selection_settings(self, model: str) -> int:
        """Settings tried per cell of a model before any extension: the grid's, or Optuna's samples."""
        t = self.tuning_of(model)
        return t.num_samples if t.sampler == "optuna" else len(t.lr or [0]) * len(t.batch_size or [0])

    @property
    def max_trainings_bound(self) -> int:
        """The most models the sweep can train: for sample_complexity, every cell at every N of a
        geometric grid of ratio 1 + precision up to n_max (it trains far fewer); tuning: with
        every extension past every edge (max_trainings_of)."""
        if self.tuning is None and not isinstance(self.search, SampleComplexityMode):
            return self.trainings
        return sum(self.max_trainings_of(c) for c in self.cells)

    @cached_property
    def cells(self) -> list[Cell]:
        """Every (model, axis values) combination of each model's axes, in a stable order."""
        return [
            Cell(model, dict(zip(axes, values)))
            for model in self.models
            for axes in [self.axes_of(model)]
            for values in itertools.product(*axes.values())
        ]

    def plan(self, cell: Cell) -> "CellPlan":
        """One cell resolved into vit_core's configs (the sections, its model's own training values
        (per_model), the cell's axis values and its model) and the N it trains at. Resolved once
        per cell (a ConfigError is raised again each time)."""
        if cell.key not in self.plans:
            self.plans[cell.key] = self._resolve(cell)
        return self.plans[cell.key]

    @cached_property
    def plans(self) -> dict[str, "CellPlan"]:
        """Cell key -> the cell's plan, as ``plan`` resolved it (kept beside the fields, as ``cells``
        is: neither takes part in equality; pickled with the spec, so a trial's cell travels resolved)."""
        return {}

    def model_copy(self, *, update: dict[str, Any] | None = None, deep: bool = False) -> "SweepSpec":
        """pydantic's copy, without the cells and plans derived from fields ``update`` may change."""
        copy = super().model_copy(update=update, deep=deep)
        copy.__dict__.pop("cells", None)
        copy.__dict__.pop("plans", None)
        return copy

    def _resolve(self, cell: Cell) -> "CellPlan":
        built = []
        own = getattr(self.per_model.get(cell.model), "training", None)
        for section, cls in self.SECTIONS.items():
            values = getattr(self, section).model_dump() | (
                own.model_dump(exclude_none=True) if own and section == "training" else {}
            )
            values |= {k: v for k, v in cell.values.items() if k in type(getattr(self, section)).model_fields}
            if section == "training":
                values = self.scaled_training(cell, built[0], values)
            built.append(cls(**values, **({"kind": cell.model} if section == "model" else {})))
        data, model, training = built
        self.FAMILY.check(data, model)
        one_pass = training.protocol == "one_pass"
        n_values = [training.batch_size * training.max_steps] if one_pass else self.n_train_of(cell.model) or []
        return CellPlan(cell, data, model, training, tuple(n_values))

    def scaled_training(self, cell: Cell, data, values: dict) -> dict:
        """A cell's training values after its model's scaling rule (the family's, where it has one)."""
        rule = self.scaling_rules.get(cell.model)
        if rule is None:
            return values
        scaling = self.FAMILY.scaling
        return rule.apply(scaling.growth(rule.reference, getattr(data, scaling.field)), values)

    @property
    def scaling_rules(self) -> dict[str, "ScalingRule"]:
        """Model kind -> its training values' scaling rule (the family's ``scaling.rule`` section)."""
        rule = self.FAMILY.scaling.rule if self.FAMILY.scaling else None
        return getattr(self, rule) if rule else {}

    def sample_cost(self, cell: Cell) -> float:
        """Multiply-adds of one model's forward pass on one sample, as the family counts them: what
        orders packs longest first (services.packs.pack_cost)."""
        plan = self.plan(cell)
        return self.FAMILY.sample_cost(plan.data, plan.model)


class ScalingRule(BaseModel):
    """Training values of one model that grow with the family's scaling variable x (Paper A: 1/alpha*):
    value = round(value * (x / x_reference) ** power), from the value the training section (or an
    axis) gives. For one-pass step budgets that follow a cell's N*, and batches that grow like
    1/alpha* (Theorem 1's T = N/B with N ~ alpha*^-2 and T ~ alpha*^-1)."""

    model_config = FORBID
    reference: float = Field(
        gt=0, description="the scaling field's value (Paper A: alpha*) at which the training values hold as given"
    )
    batch_size: float = Field(
        0.0, ge=0, description="power of x / x_reference the batch size B grows with (Paper A: 1 gives B ~ 1/alpha*)"
    )
    max_steps: float = Field(0.0, ge=0, description="power of x / x_reference the step budget grows with")

    def apply(self, factor: float, values: dict) -> dict:
        """``values`` at a scaling variable ``factor`` times the reference's."""
        return values | {
            name: max(1, round(values[name] * factor ** getattr(self, name))) for name in ("batch_size", "max_steps")
        }


DEFAULT_FAMILY = "li2023"  # a spec without `family` (as every spec was before Paper B)


def spec_class(family: Family) -> type[SweepSpec]:
    """The spec of one family: its data and model sections, its model kinds, axes over every field
    and each kind's own grid (and its scaling rules, where the family has a rule section)."""
    sections = {"data": family.data, "model": family.model, "training": TrainConfig}
    stem = type(family).__name__
    kind = Literal[family.kinds()]
    axes = _axes(f"{stem}Axes", sections)
    grid = _model_grid(f"{stem}ModelGrid", axes)
    data, model = _section(f"{stem}Data", family.data), _section(f"{stem}Model", family.model)
    fields: dict[str, Any] = {
        "family": (
            Literal[family.name],
            Field(family.name if family.name == DEFAULT_FAMILY else ..., description=family.description),
        ),
        "models": (list[kind], Field(min_length=1, description="which models every cell trains")),
        "data": (data, Field(default_factory=data)),
        "model": (model, Field(default_factory=model)),
        "axes": (axes, Field(default_factory=axes)),
        "per_model": (dict[kind, grid], Field(default_factory=dict, description=PER_MODEL)),
    }
    if family.scaling and family.scaling.rule:
        fields[family.scaling.rule] = (
            dict[kind, ScalingRule],
            Field(
                default_factory=dict,
                description=f"per model: batch_size and max_steps that grow with {family.scaling.symbol} (ScalingRule)",
            ),
        )
    spec = create_model(f"{stem}Sweep", __base__=SweepSpec, __module__=__name__, __doc__=family.__doc__, **fields)
    spec.FAMILY, spec.SECTIONS = family, sections
    # importable by name: specs are pickled to the trials
    globals().update({cls.__name__: cls for cls in (spec, axes, grid, data, model)})
    return spec


FAMILIES: dict[str, type[SweepSpec]] = {name: spec_class(family) for name, family in families().items()}
SCHEMA = TypeAdapter(Annotated[Union[tuple(FAMILIES.values())], Field(discriminator="family")])  # noqa: UP007


def spec_from_dict(raw: dict, strict: bool = False) -> SweepSpec:
    """The spec class of raw's family (DEFAULT_FAMILY when absent), validated (ValidationError). A
    recorded spec (not strict) keeps only its search mode's fields: sweeps recorded before the modes
    were classes of their own hold every mode's."""
    mode = SEARCH_MODES.get(raw["search"].get("mode", "grid")) if isinstance(raw.get("search"), dict) else None
    if not strict and mode is not None:
        raw = raw | {"search": {k: v for k, v in raw["search"].items() if k in mode.model_fields}}
    return FAMILIES[raw.get("family", DEFAULT_FAMILY)].model_validate(raw, strict=strict)


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


def _pydantic_problems(error: ValidationError) -> list[Problem]:
    problems = []
    for e in error.errors(include_url=False):
        loc = e["loc"]
        if loc[:1] == ("search",) and len(loc) > 1 and loc[1] in SEARCH_MODES:  # the union's tag, not a field
            loc = (loc[0], *loc[2:])
        path = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc).lstrip(".")
        message = e["msg"].removeprefix("Value error, ")
        if e["type"] == "search_mode":  # a mode the union has no class for
            path, e = f"{path}.mode", e | {"input": _search_mode(e["input"])}
        if loc[:1] == ("search",) and e["type"] == "extra_forbidden":
            owners = [mode for mode, cls in SEARCH_MODES.items() if loc[-1] in cls.model_fields]
            message = f"only used with search.mode={' or '.join(owners)}" if owners else message
        problems.append(Problem(path, e.get("input") if e["type"] != "missing" else None, message))
    return problems


def _section_of(spec: SweepSpec, field: str) -> str:
    return next((s for s, cls in spec.SECTIONS.items() if field in {f.name for f in dataclasses.fields(cls)}), "")


def check_sweep(spec: SweepSpec) -> list[Problem]:
    """What a single field cannot say: axes set twice, the sweep's size, and vit_core's own
    checks on every cell, each problem named by where its value came from."""
    problems = [
        Problem(f"axes.{axis}", values, f"also set in {_section_of(spec, axis)}.{axis}: keep one")
        for axis, values in spec.swept.items()
        if axis in getattr(spec, _section_of(spec, axis)).model_fields_set
    ]
    problems += [
        Problem(f"{field}.{m}", m, f"not one of the sweep's models ({', '.join(spec.models)})")
        for field, by_model in [("per_model", spec.per_model), *_rule_section(spec)]
        for m in by_model
        if m not in spec.models
    ]
    cells = _cell_problems(spec)
    if cells:  # the checks below build every cell's configs
        return problems + cells
    problems += [
        Problem("n_train", None, "required: multi_pass cells train at each of these N (one_pass cells need none)")
        for model in spec.models
        if spec.n_train_of(model) is None and not all(spec.plan(c).one_pass for c in spec.cells if c.model == model)
    ][:1]
    if problems:
        return problems
    problems += spec.search.problems(spec) + _tuning_problems(spec) + _pack_problems(spec)
    if spec.max_trainings_bound > spec.max_trainings:
        problems.append(
            Problem(
                "max_trainings",
                spec.max_trainings,
                f"the sweep can train {spec.max_trainings_bound} models; raise max_trainings or shrink the axes",
            )
        )
    return problems


def _rule_section(spec: SweepSpec) -> list[tuple[str, dict]]:
    """[(the family's scaling rule section, its rules by model)], or [] where it has none."""
    return [(spec.FAMILY.scaling.rule, spec.scaling_rules)] if spec.scaling_rules else []


def _space_problems(spec: SweepSpec, name: str, bounds: Range) -> list[Problem]:
    """What is wrong with one field Optuna tunes: not a field, set elsewhere, or an end vit_core refuses."""
    section = _section_of(spec, name)
    if not section or name in SPEC_ONLY:
        return [Problem(f"search.space.{name}", name, "not a data, model or training field")]
    problems = []
    if name in spec.swept or name in getattr(spec, section).model_fields_set:
        problems.append(Problem(f"search.space.{name}", name, f"also set in {section} or axes: keep one"))
    for end in ("low", "high"):
        value = int(getattr(bounds, end)) if bounds.integer else getattr(bounds, end)
        try:
            spec._resolve(Cell(spec.models[0], {**spec.cells[0].values, name: value}))  # a probe, not kept in plans
        except (ConfigError, TypeError) as error:
            problems.append(Problem(f"search.space.{name}.{end}", value, getattr(error, "allowed", str(error))))
    return problems


def _tuning_problems(spec: SweepSpec) -> list[Problem]:
    """Tuning searches eta and B in cells of one protocol (multi_pass: a grid, each setting's N*
    searched adaptively): nothing else may set them per cell, and its selection seeds are never
    measurement seeds."""
    tuning = spec.tuning
    own = {m: grid.tuning for m, grid in spec.per_model.items() if getattr(grid, "tuning", None)}
    if tuning is None:
        return [Problem(f"per_model.{m}.tuning", None, "needs a sweep tuning section beside it") for m in own]
    problems = []
    if not (tuning.lr or tuning.batch_size):
        problems.append(Problem("tuning", None, "give the values to try: lr, batch_size or both"))
    one_pass = [spec.plan(c).one_pass for c in spec.cells]
    if any(one_pass) and not all(one_pass):
        problems.append(Problem("tuning", None, "needs one training.protocol in every cell: one_pass or multi_pass"))
    if not any(one_pass):
        if not isinstance(spec.search, SampleComplexityMode):
            problems.append(
                Problem("search.mode", spec.search.mode, "multi_pass tuning searches N* per setting: sample_complexity")
            )
        if tuning.sampler != "grid":
            problems.append(Problem("tuning.sampler", tuning.sampler, "multi_pass tuning searches a grid: grid"))
    if isinstance(spec.search, OptunaMode):
        problems.append(
            Problem("search.mode", "optuna", "tuning searches every cell itself: grid or sample_complexity")
        )
    for model in spec.models:
        mine = spec.tuning_of(model)
        for name in ("lr", "batch_size"):
            if getattr(mine, name) is None:
                continue
            training = getattr(spec.per_model.get(model), "training", None)
            if name in spec.axes_of(model) or (training and getattr(training, name) is not None):
                where = "axes" if name in spec.axes_of(model) else f"per_model.{model}.training"
                path = f"per_model.{model}.tuning.{name}" if model in own else f"tuning.{name}"
                problems.append(Problem(path, getattr(mine, name), f"also set in {where}.{name}: keep one"))
    problems += [
        Problem(f"{spec.FAMILY.scaling.rule}.{m}.batch_size", rule.batch_size, "0 when tuning searches batch_size")
        for m, rule in spec.scaling_rules.items()
        if rule.batch_size and spec.tuning_of(m).batch_size
    ]
    if any(one_pass) and not all(spec.plan(c).training.stability_window for c in spec.cells):
        problems.append(
            Problem("training.stability_window", 0, "tuning needs a window (> 1): settings are compared on one rule")
        )
    if tuning.selection_seed_start < spec.seeds:
        problems.append(
            Problem(
                "tuning.selection_seed_start",
                tuning.selection_seed_start,
                f"must be at least seeds={spec.seeds}: selection seeds are never measurement seeds (0 .. seeds - 1)",
            )
        )
    return problems


def _pack_problems(spec: SweepSpec) -> list[Problem]:
    """An outside family's packs against the contract (vit_core.packed), one model of each kind
    built on the CPU: refused here in a line, not deep in a run. vitsweep's own families are
    tested, and building theirs would load torch for every ``validate``."""
    if type(spec.FAMILY).__module__.partition(".")[0] == "vit_core":
        return []
    from vit_core.train import build

    problems = []
    for model in spec.models:
        data, cfg, _ = spec.plan(next(c for c in spec.cells if c.model == model)).configs
        try:
            build(cfg, data, [0], "cpu")
        except Exception as error:  # a family's own code: whatever it raises, said in one line
            problems.append(Problem("family", spec.family, f"building one {model} model: {error}"))
    return problems


def _cell_problems(spec: SweepSpec) -> list[Problem]:
    problems: dict[str, Problem] = {}
    for cell in spec.cells:
        try:
            spec.plan(cell)
        except ConfigError as error:
            if error.field in cell.values:
                own = spec.per_model.get(cell.model)
                where = (
                    f"per_model.{cell.model}.axes"
                    if own and own.axes and error.field in own.axes.model_fields_set
                    else "axes"
                )
                path = f"{where}.{error.field}[{spec.axes_of(cell.model)[error.field].index(error.value)}]"
            else:
                section = _section_of(spec, error.field)
                path = f"{section}.{error.field}" + (f" (with model {cell.model})" if section == "model" else "")
            problems.setdefault(path, Problem(path, error.value, error.allowed))
    return list(problems.values())


def parse_spec(text: str, source: str = "<spec>") -> SweepSpec:
    """A validated spec from YAML text, or SpecError with every problem found."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "?"
        raise SpecError(source, [Problem("", where, f"not valid YAML: {getattr(error, 'problem', error)}")]) from None
    if not isinstance(raw, dict):
        raise SpecError(source, [Problem("", raw, "a spec is a YAML mapping of fields (name, models, n_train, ...)")])
    family = raw.get("family", DEFAULT_FAMILY)
    if family not in FAMILIES:
        installed = ", ".join(FAMILIES)
        raise SpecError(source, [Problem("family", family, f"one of the installed families: {installed}")])
    try:
        spec = spec_from_dict(raw, strict=True)
    except ValidationError as error:
        raise SpecError(source, _pydantic_problems(error) + _problems_beside(raw, error)) from None
    problems = check_sweep(spec)
    if problems:
        raise SpecError(source, problems)
    return spec


def _problems_beside(raw: dict, error: ValidationError) -> list[Problem]:
    """The checks across fields (check_sweep) of the spec without the fields Pydantic refused,
    so that one pass reports a type error and a range error together; nothing where the rest
    does not make a spec (a required field was among those refused)."""
    rest = json.loads(json.dumps(raw, default=str))
    for e in error.errors(include_url=False):
        parent, keys = rest, [k for k in e["loc"] if not isinstance(k, int)]
        for key in keys[:-1]:
            parent = parent.get(key) if isinstance(parent, dict) else None
        if isinstance(parent, dict) and keys:
            parent.pop(keys[-1], None)
    try:
        return check_sweep(spec_from_dict(rest, strict=True))
    except ValidationError:
        return []


def load_spec(path: str | Path) -> SweepSpec:
    """Read and validate a spec file (SpecError on any problem, including a missing file)."""
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise SpecError(str(path), [Problem("", str(path), f"cannot read the file: {error}")]) from None
    return parse_spec(text, str(path))
