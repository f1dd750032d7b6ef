"""Two recorded sweeps side by side (`vitsweep compare A B`): N* per cell of both and B's over A's,
each sweep's exponents of N* in its family's variable (Paper A: 1/alpha*) with their CIs, and B's
exponent minus A's, each difference with a bootstrap CI and a verdict (agree: the CI holds no
difference). This is how the one-pass and the multi-pass protocols are compared, and how a sweep
replicated on fresh seeds (`vitsweep run --seed-start`) is checked against the first: whether
their measurement seeds are disjoint, and whether their specs differ elsewhere.
No I/O: the caller reads the sweeps and logs or prints what this returns.
"""

import bisect
import math
from dataclasses import asdict, dataclass

from services.analysis import Estimate, Fit, Outcomes, slope_difference
from services.ratios import n_star_ratio
from services.report.text import span
from services.results import CellResult
from services.spec import Sweep
from services.stats import paper
from services.stats.fitting import NStar, fit_inputs, flagged
from services.stats.rows import Summary
from services.stats.summarize import summarize
from vit_core.family import Scaling, families

AGREE, DIFFER, UNDETERMINED = "agree", "differ", "undetermined"
# what a replication's spec may set otherwise: its seeds, and fields no model's result depends on
MAY_DIFFER = ("seed_start", "tracking", "resources", "max_trainings")


def verdict(ci95: list[float | None] | None, null: float) -> str:
    """Whether two sweeps agree on a value: its difference's 95% CI holds ``null`` (no difference: 0,
    or a ratio's 1); an end None is infinite (n_star_ratio: B's N* censored); undetermined without a CI."""
    if ci95 is None:
        return UNDETERMINED
    lo, hi = (math.inf if end is None else end for end in ci95)
    return AGREE if lo <= null <= hi else DIFFER


@dataclass
class CellPair:
    """One cell (by its label) in both sweeps: N* and its 95% CI (None where it has no such cell),
    and where both measured it, B's N* over A's with its CI and its verdict (ratios.n_star_ratio)."""

    label: str
    n_star_a: int | None
    ci95_a: list[int | None] | None
    n_star_b: int | None
    ci95_b: list[int | None] | None
    ratio: Estimate | None = None
    verdict: str | None = None


@dataclass
class Contract:
    """Whether two sweeps of one spec give the same answer (the contract a change that moves bits is
    judged by: docs/performance.md): every primary N* of each inside the other's 95% CI, every
    statement of the primary decided the same, and at least CELLS_WITHIN of the (cell, criterion)
    N* within one step of the evaluation grid."""

    inside: list[int]  # primary N* inside the other sweep's CI (both directions), primary N* compared
    statements: list[str]  # the primary's claims decided otherwise (empty: all the same)
    within_step: list[int]  # (cell, criterion) N* equal or one grid step apart, of those both have
    holds: bool

    CELLS_WITHIN = 0.9


def contract(a: "Summary", b: "Summary") -> Contract | None:
    """The contract between two summaries of one spec; None where either has no answer."""
    if a.answer is None or b.answer is None:
        return None
    primary = [
        {(p.value, m): row for p in s.answer.primary.points for m, row in p.n_star.items() if row} for s in (a, b)
    ]
    pairs = [(primary[0][key], primary[1][key]) for key in primary[0] if key in primary[1]]
    inside = sum(
        2 if x.n_star is None and y.n_star is None else _inside(x.n_star, y.ci95) + _inside(y.n_star, x.ci95)
        for x, y in pairs
    )  # both above their grids (or failed): the same
    compared = 2 * len(pairs)
    decisions = [a.answer.primary.decisions(), b.answer.primary.decisions()]
    differing = [claim for claim in decisions[0] if decisions[0][claim] != decisions[1].get(claim)]
    rows_a, rows_b = ({r.label: r for r in s.cells} for s in (a, b))
    within = total = 0
    for label in (label for label in rows_a if label in rows_b):
        grid = min(
            (sorted(int(n) for n in row.rates) for row in (rows_a[label], rows_b[label])), key=len
        )  # the coarser
        for criterion, row in rows_a[label].criteria.items():
            other = rows_b[label].criteria.get(criterion)
            if other is None:
                continue
            total += 1
            within += _steps_apart(grid, row.n_star, other.n_star) <= 1
    holds = inside == compared and not differing and within >= Contract.CELLS_WITHIN * total
    return Contract([inside, compared], differing, [within, total], holds)


def _inside(n_star: int | None, ci95: list | None) -> bool:
    """Whether an N* lies inside a CI (None: above the grid; an open end infinite)."""
    if not ci95:
        return False
    lo, hi = (-math.inf if ci95[0] is None else ci95[0]), (math.inf if ci95[1] is None else ci95[1])
    return lo <= (math.inf if n_star is None else n_star) <= hi


def _steps_apart(grid: list[int], a: int | None, b: int | None) -> int:
    """How many steps of an evaluation grid lie between two N* (each placed at the first grid N at or
    above it; an N* above the grid past its end): two sweeps of one spec share their grid, and where a
    change made it coarser, its steps are the coarser grid's."""
    at = [len(grid) if n is None else bisect.bisect_left(grid, n) for n in (a, b)]
    return abs(at[0] - at[1])


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
    verdicts: dict[str, str]  # group -> whether the exponents agree (B - A's CI holds 0)
    seeds_a: list[int]  # each sweep's measurement seeds
    seeds_b: list[int]
    spec_differences: list[str]  # the spec fields B sets otherwise than A, bar MAY_DIFFER's
    contract: Contract | None = None  # whether both give the same answer (None: either has none)

    @property
    def shared_seeds(self) -> list[int]:
        """The measurement seeds both sweeps trained: none where B replicates A on fresh seeds."""
        return sorted(set(self.seeds_a) & set(self.seeds_b))

    def seed_words(self) -> str:
        """Both sweeps' measurement seeds, and whether they are disjoint."""
        shared = self.shared_seeds
        both = f"measurement seeds: A {span(self.seeds_a)}, B {span(self.seeds_b)}"
        return f"{both}: disjoint" if not shared else f"{both}: {len(shared)} shared ({span(shared)})"

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
        out = asdict(self) | {"shared_seeds": self.shared_seeds, "disjoint": not self.shared_seeds}
        for side in ("exponent_a", "exponent_b"):
            out[side] = {group: {k: fit[k] for k in keys} for group, fit in out[side].items()}
        return out


def compare(a: tuple[Sweep, str, list[CellResult]], b: tuple[Sweep, str, list[CellResult]]) -> Comparison:
    """Compare two sweeps given as (sweep, sweep id, cells), as tracking.load_sweep returns them."""
    summaries = [summarize(*sweep) for sweep in (a, b)]
    rows = [{r.label: r for r in s.cells} for s in summaries]
    labels = [*rows[0], *(label for label in rows[1] if label not in rows[0])]
    p = [sweep[0].success_rate for sweep in (a, b)]
    measured = [_measured(sweep[2]) for sweep in (a, b)]
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
    criteria = [s.criterion for s in summaries]
    for pair in pairs:
        if pair.label in measured[0] and pair.label in measured[1]:
            outcomes = measured[0][pair.label], measured[1][pair.label]
            mine = tuple(o.as_defined(c) for c, o in zip(criteria, outcomes))
            pair.ratio = n_star_ratio(*outcomes, *p, criteria=mine)
            pair.verdict = verdict(pair.ratio.ci95, 1.0)
    inputs = [fit_inputs(sweep[0], sweep[2], flagged(sweep[0], sweep[2])) for sweep in (a, b)]
    difference = {
        group: slope_difference(inputs[0][group], inputs[1][group], NStar(p[0], criteria[0]), NStar(p[1], criteria[1]))
        for group in inputs[0]
        if group in inputs[1]
    }
    return Comparison(
        a[1],
        b[1],
        pairs,
        summaries[0].exponent,
        summaries[1].exponent,
        difference,
        a[0].family.name,
        {group: verdict(d.ci95, 0.0) for group, d in difference.items()},
        summaries[0].seeds,
        summaries[1].seeds,
        spec_differences(a[0], b[0]),
        contract(*summaries),
    )


def _measured(cells: list[CellResult]) -> dict[str, Outcomes]:
    """Cell label -> its measured outcomes, for the cells whose N* a summary gives (every pack trained)."""
    return {c.cell.label: c.outcomes() for c in cells if c.measured() and not c.failures}


def spec_differences(a: Sweep, b: Sweep) -> list[str]:
    """The top-level spec fields B sets otherwise than A, bar what changes no result but the seeds
    (MAY_DIFFER): none where B is A's spec on other seeds, a replication."""
    dumped = [sweep.spec.model_dump(mode="json", exclude=set(MAY_DIFFER)) for sweep in (a, b)]
    names = [*dumped[0], *(name for name in dumped[1] if name not in dumped[0])]
    return [name for name in names if dumped[0].get(name) != dumped[1].get(name)]


@dataclass
class Measured:
    """One sweep's N* at one grid point: with its 95% CI, the (B, eta) it was measured at, whether
    tuning chose them, its protocol, and the largest N it trained (N* above it where None)."""

    n_star: int | None
    ci95: list[int | None] | None
    batch_size: int
    lr: float
    tuned: bool
    protocol: str
    largest_n: int

    @property
    def setting(self) -> str:
        """How it was trained, for a legend: its protocol, and "tuned" or its fixed (B, eta)."""
        return f"{self.protocol}, " + ("tuned" if self.tuned else f"B = {self.batch_size}, eta = {self.lr:g}")

    def text(self) -> str:
        """N* and its CI for a table ("> N": above its largest N); a tuned cell's (B, eta) after it."""
        star = str(self.n_star) if self.n_star is not None else f"> {self.largest_n}"
        ci = f" [{', '.join('-' if v is None else str(v) for v in self.ci95)}]" if self.ci95 else ""
        return star + ci + (f" ({self.batch_size}, {self.lr:g})" if self.tuned else "")


@dataclass
class GridPoint:
    """One column of the paper's figure (or a cell of ours off it): the model, alpha*, the paper's
    N* there (None: above its largest N, or no column), the smallest and largest N the paper
    trained (None: no column) and each sweep's N*."""

    model: str
    value: float
    paper_n_star: int | None
    paper_ns: tuple[int, int] | None
    ours: dict[str, Measured]  # sweep id -> its N* here (absent: no such cell)

    def paper_text(self) -> str:
        """The paper's N* for people: "<= N" at its smallest N, "> N" above its largest, "-" off its figure."""
        if self.paper_ns is None:
            return "-"
        if self.paper_n_star is None:
            return f"> {self.paper_ns[1]}"
        return f"<= {self.paper_n_star}" if self.paper_n_star == self.paper_ns[0] else str(self.paper_n_star)


@dataclass
class PaperGrid:
    """`vitsweep paper A [B ...]`: the paper's figure of N* per (model, scaling value) beside every
    given sweep's, at p (the first sweep's success rate). ``x_power``: per model, the power of x the
    paper's figure plots against (Paper A's Fig 1: alpha*^-2 for the ViT, alpha*^-4 for the CNN)."""

    family: str
    p: float
    sweeps: list[str]
    points: list[GridPoint]
    x_power: dict[str, float]

    @property
    def scaling(self) -> Scaling:
        return families()[self.family].scaling

    def to_dict(self) -> dict:
        return asdict(self)


def paper_grid(sweeps: list[tuple[Sweep, str, list[CellResult]]]) -> PaperGrid:
    """Every sweep's N* per (model, scaling value) beside the paper's on its own figure's grid, a
    cell matched to a column within 0.1% of its value (specs give alpha* to 4 digits); sweeps as
    tracking.load_sweep returns them."""
    family, p = sweeps[0][0].family, sweeps[0][0].success_rate
    field = family.scaling.field
    points = {
        (model, value): GridPoint(model, value, star, ns, {})
        for model in family.reference
        for value, star, ns in paper.columns(family, model, p)
    }
    for sweep, sweep_id, cells in sweeps:
        for row in summarize(sweep, sweep_id, cells).cells:
            value = float(row.values.get(field, getattr(sweep.resolved_cell(sweep.cells[0]).configs[0], field)))
            key = next((k for k in points if k[0] == row.model and abs(k[1] - value) <= 1e-3 * value), None)
            point = points.setdefault(key or (row.model, value), GridPoint(row.model, value, None, None, {}))
            point.ours[sweep_id] = Measured(
                row.n_star,
                row.n_star_ci95,
                row.batch_size,
                row.lr,
                row.tuning is not None,
                row.protocol,
                max((int(n) for n in row.rates), default=0),
            )
    ordered = sorted(points.values(), key=lambda g: (g.model, -g.value))
    power = {m: family.theory[m].exponent for m in family.reference}
    return PaperGrid(family.name, p, [s[1] for s in sweeps], ordered, power)
