"""The sweep spec's schema: Pydantic v2 models built from vit_core's config dataclasses.

Each installed experiment family (vit_core.family) gets a spec class: its data, model and training
sections (and the sweep axes) are generated from the fields of the family's data and model
configs and ``TrainConfig``: each field keeps its one default and help text, and a new field is a
spec field (and an axis) at once. A checked spec resolves once into a Sweep (services.spec.sweep).
"""

import dataclasses
import itertools
from typing import Annotated, Any, ClassVar, Literal, Union, get_origin

from pydantic import AfterValidator, BaseModel, BeforeValidator, Field, TypeAdapter, create_model, field_validator

from services import legacy
from services.results import Cell
from services.spec.base import FORBID, distinct
from services.spec.resolved import ResolvedCell
from services.spec.strategies import (
    SPEC_ONLY,
    Strategy,
    default_search,
    load_strategies,
    search_strategies,
    search_union,
)
from services.spec.tuning import Tuning, TuningSpace
from vit_core.family import Family, families
from vit_core.train_config import TrainConfig


def _typed(t: Any) -> Any:
    """A config field's type in the spec: a tuple's (``positive: [0, 2]``) read from YAML's list,
    which strict sections refuse as a tuple."""
    return (
        Annotated[t, BeforeValidator(lambda v: tuple(v) if isinstance(v, list) else v)] if get_origin(t) is tuple else t
    )


def _section(name: str, cls: type, partial: bool = False) -> type[BaseModel]:
    """A Pydantic model with one optional field per dataclass field (default: the dataclass's; a
    ``partial`` section's default is None, so that only the values it sets survive a dump)."""
    fields = {
        f.name: (
            _typed(f.type) | None if partial else _typed(f.type),
            Field(None if partial else f.default, description=f.metadata["help"]),
        )
        for f in dataclasses.fields(cls)
        if f.name not in SPEC_ONLY
    }
    return create_model(name, __config__=FORBID, __doc__=cls.__doc__, **fields)


def _axes(name: str, sections: dict[str, type]) -> type[BaseModel]:
    """Any data, model or training field as a sweep axis: a non-empty list of its values."""
    fields = {
        f.name: (
            Annotated[list[_typed(f.type)], Field(min_length=1)] | None,
            Field(None, description=f.metadata["help"]),
        )
        for cls in sections.values()
        for f in dataclasses.fields(cls)
        if f.name not in SPEC_ONLY
    }
    return create_model(
        name, __config__=FORBID, __doc__="Sweep axes; the sweep is the product of all of them.", **fields
    )


def _model_grid(name: str, axes: type[BaseModel]) -> type[BaseModel]:
    """One model kind's own grid: N values, training values and axis values that replace the sweep's for it."""
    n_train = Annotated[list[Annotated[int, Field(ge=1)]], Field(min_length=1), AfterValidator(distinct)]
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


class Tracking(BaseModel):
    """Where results go."""

    model_config = FORBID
    experiment: str = Field("vitsweep", min_length=1, description="MLflow experiment name")
    tracking_uri: str | None = Field(
        None, description="MLflow tracking URI; default: a SQLite store under the sweep home"
    )


class AnswerSpec(BaseModel):
    """What a sweep answers, named before its data (services.stats.answer): the setting its three
    statements are read at (with the spec's ``criterion``), the margin within which two exponents
    count as equal, and the bundled specs whose recorded sweeps check it."""

    model_config = FORBID
    primary: dict[str, Any] = Field(
        default_factory=dict,
        description="the setting the answer is read at: a value of each swept axis other than the family's scaling "
        "field (Paper A: alpha_star), e.g. {counts: premised}; an axis left out is read at its first value. The "
        "other values of those axes, and the other success criteria, are checks read from the same runs",
    )
    margin: float = Field(
        0.5,
        gt=0,
        description="equivalence margin of the exponents' difference: 'equal within +-margin' where its 95% CI lies "
        "inside (-margin, +margin)",
    )
    checks: list[str] = Field(
        default_factory=list,
        description="names of the specs whose recorded sweeps in the same home check this answer (each run as "
        "`vitsweep run sweeps/NAME.yaml`); the report says, claim by claim, whether each agrees",
    )
    regimes: list[str] = Field(
        default_factory=list,
        description="swept axes whose values are data regimes of their own (e.g. [tau, patterns]): the three "
        "statements are read in every combination of their values, the other axes at the primary's (a regime "
        "map, each regime's premises met or not), instead of as checks of the primary",
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
    seed_start: int = Field(
        0,
        ge=0,
        description="the first measurement seed: every cell and N trains seeds seed_start .. seed_start + seeds - 1 "
        "(another value: a replication on fresh seeds, `vitsweep run --seed-start`; tuning's selection seeds shift "
        "with it)",
    )
    success_rate: float = Field(0.5, gt=0, le=1, description="p: N* is the smallest N whose success rate reaches p")
    criterion: Literal["iterate", "first_zero", "stable"] = Field(
        "iterate",
        description="one pass: the success criterion of the headline N* (the report gives all three): iterate, the "
        "model at N has zero test error (Theorem 1's iterate at T, N = B·T; the paper's Fig 1), its share over seeds "
        "fitted monotone in N; first_zero, zero test error reached at N or before; stable, zero test error from N on "
        "over the stability window. Multi-pass cells have one (each N's final models, stable over N)",
    )
    answer: AnswerSpec = Field(default_factory=AnswerSpec)
    max_not_converged: float = Field(
        0.1,
        ge=0,
        le=1,
        description="flag a cell where more than this share of an N's models did not "
        "converge (training error above 0 at the step budget); flagged cells are left out of the fits",
    )
    search: Strategy = Field(default_factory=default_search)  # each family's spec: a search strategy (spec_class)
    tuning: Tuning | None = Field(
        None, description="one pass: search these training settings inside every cell, N* at each cell's best"
    )
    max_trainings: int = Field(200_000, ge=1, description="refuse sweeps larger than this many trainings")
    resources: Resources = Field(default_factory=Resources)
    tracking: Tracking = Field(default_factory=Tracking)

    @field_validator("models", "n_train", check_fields=False)
    @classmethod
    def _distinct(cls, values: list | None) -> list | None:
        return values if values is None else distinct(values)

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
    def cells(self) -> list[Cell]:
        """Every (model, axis values) combination of each model's axes, in a stable order."""
        return [
            Cell(model, dict(zip(axes, values)))
            for model in self.models
            for axes in [self.axes_of(model)]
            for values in itertools.product(*axes.values())
        ]

    def resolve(self, cell: Cell) -> ResolvedCell:
        """One cell resolved into vit_core's configs (the sections, its model's own training values
        (per_model), the cell's axis values and its model) and the N it trains at (services.spec.sweep
        resolves every cell once)."""
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
        return ResolvedCell(cell, data, model, training, tuple(n_values))

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

    def section_of(self, field: str) -> str:
        """The section (data, model, training) that has ``field``, or "" where none has."""
        return next((s for s, cls in self.SECTIONS.items() if field in {f.name for f in dataclasses.fields(cls)}), "")


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
        "search": (search_union(), Field(default_factory=default_search, description=_search_words())),
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


FAMILIES: dict[str, type[SweepSpec]] = {}


def _search_words() -> str:
    """The search section's description: the installed strategies it may name."""
    names = list(search_strategies())
    return "how N is chosen: " + " or ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)


def refresh() -> None:
    """Build every installed family's spec class with every installed strategy (services.spec
    calls it once it is imported: a strategy's package may import services.spec)."""
    load_strategies()
    FAMILIES.clear()
    FAMILIES.update({name: spec_class(family) for name, family in families().items()})


def json_schema() -> dict:
    """The JSON Schema of every family's spec (``vitsweep schema``: for editors)."""
    return TypeAdapter(Annotated[Union[tuple(FAMILIES.values())], Field(discriminator="family")]).json_schema()  # noqa: UP007


def spec_from_dict(raw: dict, strict: bool = False) -> SweepSpec:
    """The spec class of raw's family (DEFAULT_FAMILY when absent), validated (ValidationError). A
    recorded spec (not strict) is read as today's code reads it: only its strategy's fields (sweeps
    recorded before the strategies were classes of their own hold every one's), none of the removed ones."""
    named = search_strategies()
    strategy = named.get(raw["search"].get("mode", "grid")) if isinstance(raw.get("search"), dict) else None
    if not strict:
        raw = legacy.removed_training_fields(raw)
    if not strict and strategy is not None:
        raw = raw | {"search": legacy.search_section(raw["search"], strategy.model_fields)}
    return FAMILIES[raw.get("family", DEFAULT_FAMILY)].model_validate(raw, strict=strict)
