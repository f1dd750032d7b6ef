"""A sweep's statistics: the summary's rows and fits (rows, summarize) and the registered units
beside them (base.Statistic), each a module here that holds its STATISTIC, or an entry point of
group ``vitsweep.statistics`` from another package."""

import pkgutil
import warnings
from functools import cache
from importlib import import_module
from importlib.metadata import entry_points

GROUP = "vitsweep.statistics"


@cache
def statistics() -> tuple:
    """Every registered statistic (base.Statistic), in their ``order``; one that fails to load is
    left out with a warning that names it, and the others still work."""
    found = []
    for module in pkgutil.iter_modules(__path__):
        unit = getattr(import_module(f"{__name__}.{module.name}"), "STATISTIC", None)
        if unit is not None:
            found.append(unit)
    for point in entry_points(group=GROUP):
        try:
            found.append(point.load()())
        except Exception as error:  # someone else's package: say which, and go on
            warnings.warn(f"statistic {point.name} ({point.value}) not loaded: {error}", stacklevel=2)
    return tuple(sorted(found, key=lambda unit: unit.order))
