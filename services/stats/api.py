"""The public API for statistics and fits: every name a statistic from outside vitsweep may import,
in this one module (docs/extending.md, "Public API"). A name here keeps working for at least one
release after it moves: its old place stays as a deprecation alias that warns and names this one.
Anything else in services is internal and may move without notice.

    from services.stats.api import Statistic, fitting

A statistic subclasses ``Statistic`` and is registered by an entry point of group ``GROUP``
(``vitsweep.statistics``); a fit uses the pieces the built-in fits share: ``fitting`` (the groups
of cells along an axis, ``fitting.x``: the family's variable, ``NStar``, ``fits``). What its methods
receive: the resolved ``Sweep``, its cells' ``CellResult``s (``Outcomes`` of their records), the
``Summary`` its lines and metrics read; a figure is a matplotlib Figure (``subplots``)."""

from services.analysis import Outcomes
from services.plotting import subplots
from services.results import CellResult
from services.spec import Sweep
from services.stats import GROUP, fitting
from services.stats.base import Statistic, fmt
from services.stats.fitting import NStar, fits, flagged, groups, scaled
from services.stats.rows import Summary

__all__ = [
    "GROUP",
    "Statistic",
    "fmt",
    # the pieces a fit shares with the built-in fits
    "fitting",
    "NStar",
    "fits",
    "flagged",
    "groups",
    "scaled",
    # what a statistic's methods receive, and a figure's axes
    "Sweep",
    "CellResult",
    "Outcomes",
    "Summary",
    "subplots",
]
