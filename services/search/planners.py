"""Each search mode's round planner, named by the mode itself (``Mode.planner``, "module:attribute",
found here so that the spec layer never imports this one). The executor runs whichever it gets
through one Ray Tune Searcher (services.execution.ray_tune.PlanSearcher); `vitsweep plan` plays
it out (services.estimate.rehearse)."""

import pkgutil
from typing import TYPE_CHECKING

from services.search.packs import Pack, packs
from services.search.rounds import RoundPlanner
from services.search.tuning import TuningSearch
from services.search.tuning_multi_pass import MultiPassTuning

if TYPE_CHECKING:
    from services.spec import Sweep


def tuned(sweep: "Sweep", slots: int | None = None) -> RoundPlanner:
    """A tuned sweep's: one pass's (successive caps) or multi-pass's (an N* search per setting)."""
    return TuningSearch(sweep) if sweep.resolved_cell(sweep.cells[0]).one_pass else MultiPassTuning(sweep)


def planner(sweep: "Sweep", slots: int | None = None) -> RoundPlanner:
    """The round planner of the sweep's search mode, its packs sized for ``slots`` trials at once."""
    return pkgutil.resolve_name(sweep.mode.planner)(sweep, slots)


def first_packs(sweep: "Sweep", slots: int | None = None) -> list[Pack]:
    """The packs of the sweep's first round where they are known before it starts (grid, and the
    N* search's starting grid); [] where a searcher decides them (Optuna, tuning)."""
    return packs(sweep, slots) if sweep.mode.planned else []


def trial_count(sweep: "Sweep", slots: int | None = None) -> int | None:
    """How many Ray Tune trials the sweep runs: one per pack (grid), one per Optuna sample; None
    where later rounds depend on the results."""
    return sweep.mode.trials(len(first_packs(sweep, slots)))
