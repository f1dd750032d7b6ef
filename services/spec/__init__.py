"""Sweep specs: the schema (schema), the search strategies' shape (modes; the built-in ones are
services.search's, found by entry points), the checks that read a YAML file
into a spec or one problem per field (checks), and the spec resolved once (sweep: Sweep; resolved:
a cell's configs), which every layer past this one receives."""

from services.spec.base import Problem, SpecError
from services.spec.checks import check_sweep, load_spec, parse_spec, spec_text
from services.spec.modes import SEARCH_MODES, Mode, PilotRun
from services.spec.resolved import ResolvedCell, TrialSweep
from services.spec.schema import DEFAULT_FAMILY, FAMILIES, SweepSpec, json_schema, refresh, spec_class, spec_from_dict
from services.spec.sweep import Sweep
from services.spec.tuning import DIMENSIONS, Setting, Tuning

refresh()  # every installed family's spec, with every installed search mode (a mode's package may import this one)

__all__ = [
    "DEFAULT_FAMILY",
    "DIMENSIONS",
    "FAMILIES",
    "SEARCH_MODES",
    "Mode",
    "PilotRun",
    "Problem",
    "ResolvedCell",
    "Setting",
    "SpecError",
    "Sweep",
    "SweepSpec",
    "TrialSweep",
    "Tuning",
    "check_sweep",
    "json_schema",
    "load_spec",
    "parse_spec",
    "spec_class",
    "spec_from_dict",
    "spec_text",
]
