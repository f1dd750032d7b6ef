"""Sweep specs: the schema (schema), the search strategies' shape (strategies; the built-in ones are
services.search's, found by entry points), the checks that read a YAML file
into a spec or one problem per field (checks), and the spec resolved once (sweep: Sweep; resolved:
a cell's configs), which every layer past this one receives."""

import warnings

from services.spec.base import Problem, SpecError
from services.spec.checks import check_sweep, load_spec, parse_spec, spec_text
from services.spec.resolved import ResolvedCell, TrialSweep
from services.spec.schema import DEFAULT_FAMILY, FAMILIES, SweepSpec, json_schema, refresh, spec_class, spec_from_dict
from services.spec.strategies import STRATEGIES, PilotRun, Strategy, search_strategies
from services.spec.sweep import Sweep
from services.spec.tuning import DIMENSIONS, Setting, Tuning


def __getattr__(name: str):
    """The names of the previous release, deprecated: ``Mode`` (Strategy), ``SEARCH_MODES`` (search_strategies())."""
    if name == "Mode":
        new, value = "Strategy", Strategy
    elif name == "SEARCH_MODES":
        new, value = "search_strategies()", search_strategies()
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(f"services.spec.{name} is deprecated: use services.spec.{new}", DeprecationWarning, stacklevel=2)
    return value


# every installed family's spec, with every installed strategy: a strategy's package may import this one (by a name of
# the previous release too, which __getattr__, above, answers)
refresh()

__all__ = [
    "DEFAULT_FAMILY",
    "DIMENSIONS",
    "FAMILIES",
    "STRATEGIES",
    "PilotRun",
    "Problem",
    "ResolvedCell",
    "Setting",
    "SpecError",
    "Strategy",
    "Sweep",
    "SweepSpec",
    "TrialSweep",
    "Tuning",
    "check_sweep",
    "json_schema",
    "load_spec",
    "parse_spec",
    "search_strategies",
    "spec_class",
    "spec_from_dict",
    "spec_text",
]
