"""The sweep's round planner, made by its strategy (``Mode.make_planner``), and what its first round
holds. The executor runs whichever planner it gets through one Ray Tune Searcher
(services.execution.ray_tune.PlanSearcher); `vitsweep plan` plays it out (services.estimate.rehearse)."""

from typing import TYPE_CHECKING

from services.search.packs import Pack, packs
from services.search.rounds import RoundPlanner

if TYPE_CHECKING:
    from services.spec import Sweep


def planner(sweep: "Sweep", slots: int | None = None) -> RoundPlanner:
    """The round planner of the sweep's strategy, its packs sized for ``slots`` trials at once."""
    return sweep.mode.make_planner(sweep, slots)


def first_packs(sweep: "Sweep", slots: int | None = None) -> list[Pack]:
    """The packs of the sweep's first round where they are known before it starts (grid, and the
    N* search's starting grid); [] where a searcher decides them (Optuna, tuning)."""
    return packs(sweep, slots) if sweep.mode.planned else []


def trial_count(sweep: "Sweep", slots: int | None = None) -> int | None:
    """How many Ray Tune trials the sweep runs: one per pack (grid), one per Optuna sample; None
    where later rounds depend on the results."""
    return sweep.mode.trials(len(first_packs(sweep, slots)))
