"""The public API for search strategies: every name a strategy from outside vitsweep may import, in
this one module (docs/extending.md, "Public API"). A name here keeps working for at least one
release after it moves: its old place stays as a deprecation alias that warns and names this one.
Anything else in services is internal and may move without notice.

    from services.search.api import Pack, RoundPlanner, Strategy

A strategy is a ``Strategy`` (its spec section, budget, problems and ``make_planner``) registered by an
entry point of group ``GROUP`` (``vitsweep.search_modes``); its planner a ``RoundPlanner`` that
plans ``Pack``s round by round (``pack_cost``: the queue's order; ``packs``: the n_train grid's
first round). What it receives: the resolved ``Sweep`` (a ``Cell`` each), ``PilotRun``s it pilots
for `vitsweep plan`, the ``Problem``s it finds in a spec, the training config (``TrainConfig``)."""

from services.results import Cell
from services.search.packs import Pack, TrialConfig, pack_cost, packs
from services.search.rounds import RoundPlanner
from services.spec import PilotRun, Problem, Strategy, Sweep
from services.spec.strategies import GROUP, renamed
from vit_core.train_config import TrainConfig

__all__ = [
    "GROUP",
    "Strategy",
    "RoundPlanner",
    "Pack",
    "TrialConfig",
    "pack_cost",
    "packs",
    "PilotRun",
    "Problem",
    "Sweep",
    "Cell",
    "TrainConfig",
]

__getattr__ = renamed(__name__, {"Mode": ("services.search.api.Strategy", Strategy)})  # the previous release's name
