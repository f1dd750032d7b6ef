"""Strategy ``optuna``: fields of one cell tuned by Optuna's TPE sampler through its ask and tell
interface, one trial per sample, each training every (N, seed) of the cell at the sampled values."""

import base64
import dataclasses
import pickle
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import BaseModel, Field, model_validator

from services.results import Cell
from services.search.packs import Pack, TrialConfig, packs
from services.search.rounds import RoundPlanner
from services.spec import Problem, Strategy
from services.spec.base import FORBID
from services.spec.resolved import SweepView
from services.spec.strategies import SPEC_ONLY, renamed
from vit_core.fields import ConfigError

if TYPE_CHECKING:
    from services.results import ModelRecord
    from services.spec import Sweep


class OptunaPlanner(RoundPlanner):
    """``num_samples`` trials of the sweep's one cell, each a pack of every (N, seed) at values
    Optuna asks for; the ``metric`` the trial reported (services.results.trial_metrics)
    is told to Optuna. A failed trial is told as failed, and the search goes on."""

    def __init__(self, sweep: "Sweep", slots: int | None = None):
        import optuna  # noqa: PLC0415  (Optuna loads on use)

        super().__init__(1)
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.sweep, self.search, self.pack = sweep, sweep.search, packs(sweep)[0]
        self.distributions = sweep.search.distributions()
        direction = "maximize" if sweep.search.direction == "max" else "minimize"
        self.study = optuna.create_study(
            sampler=optuna.samplers.TPESampler(seed=sweep.search.seed), direction=direction
        )
        self.asked: dict[str, object] = {}  # trial id -> Optuna's trial
        self.left = sweep.search.num_samples

    def suggest(self, trial_id: str) -> "Pack | str | None":
        if not self.left:
            return None if self.in_flight else self.FINISHED
        self.left -= 1
        self.asked[trial_id] = self.study.ask(self.distributions)
        self.in_flight[trial_id] = self.pack
        return self.pack

    def trial_config(self, trial_id: str, pack: Pack) -> TrialConfig:
        """The pack, the values sampled, and its cell with them resolved here (the trial has no schema)."""
        trial = TrialConfig(pack, self.asked[trial_id].params)
        return dataclasses.replace(trial, resolved=self.sweep.resolve(trial.cell(self.sweep)).to_config())

    def complete(self, trial_id: str, records: "list[ModelRecord] | None", metrics: dict | None = None) -> None:
        import optuna  # noqa: PLC0415  (Optuna loads on use)

        self.in_flight.pop(trial_id, None)
        trial = self.asked.pop(trial_id)
        if records is None or metrics is None:
            self.study.tell(trial, state=optuna.trial.TrialState.FAIL)
        else:
            self.study.tell(trial, metrics[self.search.metric])

    def get_state(self) -> dict:
        study = base64.b64encode(pickle.dumps((self.study, self.asked))).decode()
        return super().get_state() | {"study": study, "left": self.left}

    def set_state(self, state: dict) -> None:
        super().set_state(state)
        self.study, self.asked = pickle.loads(base64.b64decode(state["study"]))
        self.left = state["left"]


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


class OptunaStrategy(Strategy):
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

    def params(self) -> dict[str, Any]:
        """Its fields, each range of the space as "[low, high]" (" log" on a log scale)."""
        space = {f"space.{k}": f"[{r.low}, {r.high}]{' log' if r.log else ''}" for k, r in self.space.items()}
        return self.model_dump(exclude={"space"}) | space

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

    def distributions(self) -> dict:
        """Optuna's distribution of each field of the search space."""
        from optuna.distributions import FloatDistribution, IntDistribution  # noqa: PLC0415  (Optuna loads on use)

        return {
            name: IntDistribution(int(r.low), int(r.high), log=r.log)
            if r.integer
            else FloatDistribution(r.low, r.high, log=r.log)
            for name, r in self.space.items()
        }

    def make_planner(self, sweep: "Sweep", slots: int | None = None) -> "OptunaPlanner":
        return OptunaPlanner(sweep, slots)


__getattr__ = renamed(__name__, {"OptunaMode": ("OptunaStrategy", OptunaStrategy)})
