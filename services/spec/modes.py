"""Deprecated: services.spec.strategies (``Mode`` is ``Strategy`` there, ``SEARCH_MODES``
``search_strategies()``, ``load_modes`` ``load_strategies``). Kept for one release for the
strategies of other packages that import it; every name warns and names its new place."""

import warnings
from importlib.metadata import entry_points

from services.spec import strategies
from services.spec.strategies import GROUP

__all__ = ["GROUP", "entry_points", "load_modes"]

RENAMED = {"Mode": "Strategy", "mode_name": "strategy_name"}


def load_modes() -> dict:
    """Deprecated: services.spec.strategies.load_strategies (this one answers the strategies a
    search section may name, from this module's ``entry_points``)."""
    warnings.warn(
        "services.spec.modes.load_modes is deprecated: use services.spec.strategies.load_strategies",
        DeprecationWarning,
        stacklevel=2,
    )
    strategies.load_strategies(entry_points(group=GROUP))
    return strategies.search_strategies()


def __getattr__(name: str):
    if name == "SEARCH_MODES":
        new, value = "search_strategies()", strategies.search_strategies()
    elif hasattr(strategies, RENAMED.get(name, name)):
        new = RENAMED.get(name, name)
        value = getattr(strategies, new)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"services.spec.modes.{name} is deprecated: use services.spec.strategies.{new}",
        DeprecationWarning,
        stacklevel=2,
    )
    return value
