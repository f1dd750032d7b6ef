"""Two recorded sweeps side by side (`vitsweep compare A B`): N* per cell of both, each sweep's
exponents of N* in its family's variable (Paper A: 1/alpha*) with their CIs, and B's exponent
minus A's with a bootstrap CI. This is how the one-pass and the multi-pass protocols are compared.
No I/O: the caller reads the sweeps and logs or prints what this returns.
"""

from dataclasses import asdict, dataclass

from services.analysis import Estimate, Fit, slope_difference
from services.results import CellResult
from services.spec import SweepSpec
from services.summary import n_star_fit_inputs, n_star_statistic, summarize
from vit_core.family import Scaling, families


@dataclass
class CellPair:
    """One cell (by its label) in both sweeps: N* and its 95% CI (None where it has no such cell)."""

    label: str
    n_star_a: int | None
    ci95_a: list[int | None] | None
    n_star_b: int | None
    ci95_b: list[int | None] | None


@dataclass
class Comparison:
    """Sweep B against sweep A: cells of either, and per fitted group each exponent (value, CI)
    and B's minus A's."""

    sweep_a: str
    sweep_b: str
    cells: list[CellPair]
    exponent_a: dict[str, Fit]
    exponent_b: dict[str, Fit]
    difference: dict[str, Estimate]  # group -> B's exponent minus A's
    family: str  # A's experiment family: what N* is fitted against

    @property
    def scaling(self) -> Scaling | None:
        return families()[self.family].scaling

    @property
    def groups(self) -> list[str]:
        """The fitted groups of either sweep, A's first."""
        return [*self.exponent_a, *(g for g in self.exponent_b if g not in self.exponent_a)]

    def to_dict(self) -> dict:
        """JSON-ready; an exponent as its value, CI and what a figure draws (points, intercept)."""
        keys = ("value", "ci95", "intercept", "points")
        out = asdict(self)
        for side in ("exponent_a", "exponent_b"):
            out[side] = {group: {k: fit[k] for k in keys} for group, fit in out[side].items()}
        return out


def compare(a: tuple[SweepSpec, str, list[CellResult]], b: tuple[SweepSpec, str, list[CellResult]]) -> Comparison:
    """Compare two sweeps given as (spec, sweep id, cells), as tracking.load_sweep returns them."""
    summaries = [summarize(*sweep) for sweep in (a, b)]
    rows = [{r.label: r for r in s.cells} for s in summaries]
    labels = [*rows[0], *(label for label in rows[1] if label not in rows[0])]
    pairs = [
        CellPair(
            label,
            *(
                value
                for row in (rows[0].get(label), rows[1].get(label))
                for value in ((row.n_star, row.n_star_ci95) if row else (None, None))
            ),
        )
        for label in labels
    ]
    inputs = [n_star_fit_inputs(sweep[0], summary, sweep[2]) for sweep, summary in zip((a, b), summaries)]
    p = [sweep[0].success_rate for sweep in (a, b)]
    difference = {
        group: slope_difference(inputs[0][group], inputs[1][group], n_star_statistic(p[0]), n_star_statistic(p[1]))
        for group in inputs[0]
        if group in inputs[1]
    }
    return Comparison(a[1], b[1], pairs, summaries[0].exponent, summaries[1].exponent, difference, a[0].family)
