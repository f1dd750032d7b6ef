"""What the first round of a sweep's strategy holds: its packs and its trials. The round planner
itself is the strategy's (``sweep.strategy.make_planner``); the executor runs it through one Ray Tune
Searcher (services.execution.ray_tune.PlanSearcher), and `vitsweep plan` plays it out
(services.estimate.rehearse)."""

from typing import TYPE_CHECKING

from services.search.packs import Pack, packs

if TYPE_CHECKING:
    from services.spec import Sweep


def first_packs(sweep: "Sweep", slots: int | None = None) -> list[Pack]:
    """The packs of the sweep's first round where they are known before it starts (grid, and the
    N* search's starting grid); [] where a searcher decides them (Optuna, tuning)."""
    return packs(sweep, slots) if sweep.strategy.planned else []


def trial_count(sweep: "Sweep", slots: int | None = None) -> int | None:
    """How many Ray Tune trials the sweep runs: one per pack (grid), one per Optuna sample; None
    where later rounds depend on the results."""
    return sweep.strategy.trials(len(first_packs(sweep, slots)))
