"""Each search mode's round planner, found by the mode's name (``SweepSpec.mode.name``): the one
place a mode's planner is named. The executor runs whichever it gets through one Ray Tune
Searcher (services.execution.ray_tune.PlanSearcher)."""

import typing
from collections.abc import Callable
from typing import TYPE_CHECKING

from services.search.grid import GridPlanner
from services.search.nstar import NStarSearch
from services.search.optuna import OptunaPlanner
from services.search.packs import Pack, packs
from services.search.rounds import RoundPlanner
from services.search.tuning import TuningSearch
from services.search.tuning_multi_pass import MultiPassTuning
from services.spec import schema
from services.spec.modes import SEARCH_MODES, Mode

if TYPE_CHECKING:
    from services.spec import SweepSpec


def _tuning(spec: "SweepSpec", slots: int | None) -> RoundPlanner:
    """One pass's (successive caps) or multi-pass's (an N* search per setting)."""
    return TuningSearch(spec) if spec.resolved_cell(spec.cells[0]).one_pass else MultiPassTuning(spec)


PLANNERS: dict[str, Callable[["SweepSpec", int | None], RoundPlanner]] = {
    "grid": GridPlanner,
    "sample_complexity": lambda spec, slots: NStarSearch(spec),
    "optuna": lambda spec, slots: OptunaPlanner(spec),
    "tuning": _tuning,
}


def register(config: type[Mode], make: Callable[["SweepSpec", int | None], RoundPlanner]) -> None:
    """A search mode of one's own: its schema and budget (a Mode whose ``mode`` field is a Literal
    of its name) and ``make``, which gives its round planner for a spec and the trial slots.
    Specs read after this accept ``search: {mode: <name>, ...}`` and run it like the others."""
    name = typing.get_args(config.model_fields["mode"].annotation)[0]
    SEARCH_MODES[name], PLANNERS[name] = config, make
    schema.refresh()


def planner(spec: "SweepSpec", slots: int | None = None) -> RoundPlanner:
    """The round planner of the sweep's search mode, its packs sized for ``slots`` trials at once."""
    return PLANNERS[spec.mode.name](spec, slots)


def first_packs(spec: "SweepSpec", slots: int | None = None) -> list[Pack]:
    """The packs of the sweep's first round where they are known before it starts (grid, and the
    N* search's starting grid); [] where a searcher decides them (Optuna, tuning)."""
    return packs(spec, slots) if spec.mode.planned else []


def trial_count(spec: "SweepSpec", slots: int | None = None) -> int | None:
    """How many Ray Tune trials the sweep runs: one per pack (grid), one per Optuna sample; None
    where later rounds depend on the results."""
    return spec.mode.trials(len(first_packs(spec, slots)))
