"""Sweep specs: the schema (schema), the search modes (modes), a cell resolved (resolved) and the
checks that read a YAML file into a spec or one problem per field (checks)."""

from services.spec.base import Problem, SpecError
from services.spec.checks import check_sweep, load_spec, parse_spec, spec_text
from services.spec.modes import SEARCH_MODES, GridMode, Mode, OptunaMode, PilotRun, Range, SampleComplexityMode
from services.spec.resolved import ResolvedCell, ResolvedSweep
from services.spec.schema import DEFAULT_FAMILY, FAMILIES, SweepSpec, json_schema, refresh, spec_class, spec_from_dict
from services.spec.tuned import Tuned
from services.spec.tuning import DIMENSIONS, Setting, Tuning

refresh()  # every installed family's spec, with every installed search mode (a mode's package may import this one)

__all__ = [
    "DEFAULT_FAMILY",
    "DIMENSIONS",
    "FAMILIES",
    "SEARCH_MODES",
    "GridMode",
    "Mode",
    "OptunaMode",
    "PilotRun",
    "Problem",
    "Range",
    "ResolvedCell",
    "ResolvedSweep",
    "SampleComplexityMode",
    "Setting",
    "SpecError",
    "SweepSpec",
    "Tuned",
    "Tuning",
    "check_sweep",
    "json_schema",
    "load_spec",
    "parse_spec",
    "spec_class",
    "spec_from_dict",
    "spec_text",
]
