"""A statistic of a sweep as one unit: what it computes from the cells' records, when it applies,
and the lines, figures and metrics it gives the report, the JSON and MLflow."""

from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from services.results import CellResult
    from services.spec import Sweep
    from services.stats.rows import Summary


class Statistic:
    """One finding of a sweep beside N* and its fits. A subclass sets ``name`` and ``order`` (where
    its lines and figures go among the others') and gives its summary entries: ``compute`` where
    it ``applies``, ``empty`` elsewhere (each entry is a key of ``Summary.stats`` and of the
    sweep's JSON). A module of services/stats that holds one as ``STATISTIC`` registers it, and
    so does an entry point of group ``vitsweep.statistics`` (services.stats.statistics)."""

    name: ClassVar[str]
    order: ClassVar[int] = 100

    def empty(self) -> dict[str, Any]:
        """Its entries where it does not apply."""
        return {self.name: {}}

    def applies(self, sweep: "Sweep") -> bool:
        return True

    def compute(self, sweep: "Sweep", cells: "list[CellResult]") -> dict[str, Any]:
        """Its entries, from the cells' records (no I/O)."""
        raise NotImplementedError

    def lines(self, summary: "Summary") -> list[str]:
        """Its lines in the report's notes."""
        return []

    def figures(self, sweep: "Sweep", summary: "Summary", cells: "list[CellResult]") -> dict:
        """Its figures: file name -> matplotlib Figure."""
        return {}

    def metrics(self, summary: "Summary") -> dict[str, float]:
        """Its metrics on the sweep's parent run in MLflow."""
        return {}


def fmt(value, sweep: str = "") -> str:
    """A value for a table or a note: "-" for None, lists in brackets."""
    if value is None:
        return "-"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(fmt(v, sweep) for v in value) + "]"
    return format(value, sweep)
