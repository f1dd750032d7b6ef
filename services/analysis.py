"""Statistics over trained models: N*, power-law exponents with bootstrap CIs, iterations to zero
error and paired effects, all from per-model outcome tables (``Outcomes``; services.results builds
them from its records).

Every confidence interval resamples *seeds*: a seed fixes a model's data at every N (the sets are
nested) and its initialisation, so the seeds are the independent units. Cells of one sweep that
hold the same seeds share them (a seed's data streams, initialisation and the test set), so a fit
over several cells draws one resample of seeds for all of them (``joint_resamples``): a paired
bootstrap, which keeps the cells' correlation in the CI of a slope and of a difference of slopes.
Pure numpy: the same functions serve ``vitsweep run``, ``vitsweep report`` and the tests.
"""

from dataclasses import dataclass, field

import numpy as np

from vit_core.outcomes import COUNTED, Outcome

BOOTSTRAP = 1000  # resamples per CI
CI = (2.5, 97.5)

# What "zero error from N on" means, three ways, read from the same one-pass records:
# - iterate: the model at N (after N/B steps) has zero test error; N* the smallest N from which the
#   share of such seeds, fitted monotone in N, is >= p. Theorem 1's notion (the iterate at T, N = B·T)
#   and the paper's Fig 1 (the share of trials whose model at N has zero test error).
# - first_zero: the seed had zero test error at N or before (reached, not necessarily kept).
# - stable: the seed's test error is zero at N and at every later evaluation (over its window).
CRITERIA = ("iterate", "first_zero", "stable")


def stable_n_star(ns: np.ndarray, rates: np.ndarray, p: float) -> int | None:
    """The smallest N from which every larger evaluated N reaches success rate ``p`` (so a dip
    above the first success does not count), or None when the largest N does not reach it. A
    NaN rate (no model of that N converged) counts as not reaching p."""
    below = np.nonzero(~(rates >= p))[0]  # an N with no counted model (NaN rate) does not reach p
    if len(below) == 0:
        return int(ns[0])
    last = below[-1]
    return None if last == len(ns) - 1 else int(ns[last + 1])


def monotone_n_star(ns: np.ndarray, table: np.ndarray, p: float) -> int | None:
    """The smallest N at which the monotone (non-decreasing, least-squares, seeds as weights) fit
    of the success share over N reaches ``p``; None where it never does. ``table`` is (N, seed) of
    1/0, NaN where a model does not count. The fit at N is >= p exactly when, with S the running
    sum of (successes - p·counted) over N, no later partial sum falls below the smallest earlier
    one: the isotonic regression's max-min formula, without fitting it."""
    counted = np.isfinite(table)
    first = int(monotone_first(np.where(counted, table, 0.0).sum(1), counted.sum(1), p))
    return int(ns[first]) if first >= 0 else None


def monotone_first(hits: np.ndarray, counted: np.ndarray, p: float) -> np.ndarray:
    """monotone_n_star's row index (-1: none) from the successes and counted models per N (N, ...),
    along the first axis, for every column of the others at once."""
    total = np.concatenate([np.zeros((1, *hits.shape[1:])), np.cumsum(hits - p * counted, 0)])
    later = np.minimum.accumulate(total[1:][::-1], 0)[::-1]  # min over k >= i of S_k
    earlier = np.minimum.accumulate(total[:-1], 0)  # min over j <= i of S_(j-1)
    reached = (later >= earlier - 1e-9) & (counted > 0)
    return np.where(reached.any(0), reached.argmax(0), -1)


def counted_success(outcome: Outcome | str) -> float | None:
    """What a model adds to its N's success rate: 1 succeeded, 0 failed_converged or failed (one
    pass), None (not counted) for not_converged and diverged models, whose outcome says nothing
    about N."""
    return COUNTED.get(outcome)


@dataclass
class Outcomes:
    """One cell's per-model outcomes on a common (N x seed) table. Missing pairs are NaN."""

    ns: np.ndarray  # ascending training-set sizes
    seeds: np.ndarray
    success: np.ndarray  # (N, seed): 1.0 succeeded, 0.0 failed (converged, or one pass); NaN: not counted
    # (not trained, not converged, diverged)
    steps_to_zero: np.ndarray  # (N, seed): first evaluated step with zero test error; NaN if never
    test_loss: np.ndarray  # (N, seed): final test hinge loss
    batch_size: int | None = None  # one_pass: B, so that N = B·t (None: multi_pass records)
    first_zero: np.ndarray | None = None  # one pass (N, seed): 1 where the seed had zero test error at N or
    # before, 0 where not yet, NaN where it does not count (diverged); None: multi_pass records
    iterate: np.ndarray | None = None  # one pass (N, seed): 1 where the model at N had zero test error, 0
    # where not, NaN where it does not count (diverged); None: multi_pass records

    def rates(self, columns: np.ndarray | None = None, table: np.ndarray | None = None) -> np.ndarray:
        """Success rate per N over the given seed columns (all by default), over the models that
        count (succeeded, failed_converged or failed); NaN where none does. ``table``: another
        (N, seed) table of 1/0/NaN than ``success`` (first_zero)."""
        table = self.success if table is None else table
        table = table if columns is None else table[:, columns]
        counted = np.isfinite(table).sum(1)
        return np.where(counted > 0, np.nansum(table, 1) / np.maximum(counted, 1), np.nan)

    @property
    def criteria(self) -> tuple[str, ...]:
        """The success criteria these outcomes define: all three one pass, the stable one multi-pass
        (one final model per N and seed)."""
        return CRITERIA if self.iterate is not None else ("stable",)

    def as_defined(self, criterion: str) -> str:
        """``criterion`` where these outcomes define it (one pass), else the stable one (multi-pass)."""
        return criterion if criterion in self.criteria else "stable"

    def table(self, criterion: str = "stable") -> np.ndarray:
        """The (N, seed) table of 1/0/NaN a criterion reads (CRITERIA)."""
        if criterion not in self.criteria:
            raise ValueError(f"criterion {criterion!r}: these outcomes define {', '.join(self.criteria)}")
        return {"stable": self.success, "first_zero": self.first_zero, "iterate": self.iterate}[criterion]

    def n_star(self, p: float, columns: np.ndarray | None = None, criterion: str = "stable") -> int | None:
        """N* under ``criterion`` (CRITERIA); None where the largest N misses p."""
        table = self.table(criterion)
        if criterion == "iterate":
            return monotone_n_star(self.ns, table if columns is None else table[:, columns], p)
        return stable_n_star(self.ns, self.rates(columns, table), p)

    def n_star_known(self, p: float, columns: np.ndarray | None = None, criterion: str = "stable") -> int | None:
        """N* where the outcomes pin it down: None when the largest N misses p, or when the
        smallest N (above 1) already reaches it, so that N* could lie anywhere below."""
        star = self.n_star(p, columns, criterion)
        return None if star is None or (star == self.ns[0] > 1) else star

    def n_star_draws(self, p: float, draws: np.ndarray, criterion: str = "stable", known: bool = False) -> np.ndarray:
        """n_star (n_star_known where ``known``) over each row of ``draws`` (resamples x seed columns)
        at once: a float array, NaN where N* is None. The same values as one call per row."""
        table = self.table(criterion)[:, draws]  # (N, draws, seeds)
        counted = np.isfinite(table).sum(-1)
        hits = np.where(np.isfinite(table), table, 0.0).sum(-1)
        if criterion == "iterate":
            first = monotone_first(hits, counted, p)
        else:
            below = ~(np.where(counted > 0, hits / np.maximum(counted, 1), np.nan) >= p)
            last = np.where(below.any(0), len(self.ns) - 1 - below[::-1].argmax(0), -1)
            first = np.where(last == len(self.ns) - 1, -1, last + 1)
        stars = np.where(first >= 0, self.ns[np.maximum(first, 0)], np.nan).astype(float)
        if known and self.ns[0] > 1:
            stars[stars == self.ns[0]] = np.nan
        return stars

    def t_star(self, p: float, columns: np.ndarray | None = None, criterion: str = "stable") -> float | None:
        """One pass: T* = N*/B, the steps the known N* takes (None: multi_pass, or N* not known)."""
        star = self.n_star_known(p, columns, criterion)
        return star / self.batch_size if star is not None and self.batch_size else None

    def bracket(self, p: float, criterion: str = "stable") -> tuple[int | None, int | None]:
        """(largest evaluated N below N* that misses p, N*): N* lies in (lo, N*]."""
        star = self.n_star(p, criterion=criterion)
        if star is None:
            return int(self.ns[-1]), None
        i = int(np.searchsorted(self.ns, star))
        return (int(self.ns[i - 1]) if i else None), star

    def monotone(self, p: float, criterion: str = "stable") -> bool:
        """Whether no N below N*'s bracket already reached p (no sample-wise dip)."""
        lo, _ = self.bracket(p, criterion)
        return lo is None or bool(np.all(self.rates(table=self.table(criterion))[self.ns < lo] < p))

    def steps(self, columns: np.ndarray | None = None) -> float | None:
        """T: median over seeds of the steps to zero test error at the largest N, over the
        models that reached it."""
        row = self.steps_to_zero[-1] if columns is None else self.steps_to_zero[-1, columns]
        row = row[np.isfinite(row)]
        return float(np.median(row)) if len(row) else None


def resample(n_seeds: int, rng: np.random.Generator) -> np.ndarray:
    return rng.integers(0, n_seeds, n_seeds)


def loglog_slope(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least-squares (slope, intercept) of log y against log x."""
    slope, intercept = np.polyfit(np.log(x), np.log(y), 1)
    return float(slope), float(intercept)


@dataclass
class Estimate:
    """A value with its bootstrap 95% CI, kept to 4 decimals; None where the data do not define it."""

    value: float | None
    ci95: list[float] | None


@dataclass
class Fit(Estimate):
    """A log-log slope over cells with its bootstrap percentile CI over seeds."""

    intercept: float | None = None
    points: list[list[float]] = field(default_factory=list)  # (x, y) of the cells that entered the fit
    resamples: int = 0  # bootstrap resamples that had >= 2 cells with a defined statistic
    cells: list[str] = field(default_factory=list)  # the cells fitted, where a summary names them


@dataclass
class Difference(Estimate):
    """One model's N* exponent minus another's over the cells both fits used (paired_slope_difference)."""

    pair: str = ""  # "cnn - vit": the later model minus the earlier one, as a family's difference_claims names it
    cells: list[str] = field(default_factory=list)  # the cells of both fits


@dataclass
class LocalSlope(Estimate):
    """The slope between two neighbouring values of x (local_slopes)."""

    between: list[float] = field(default_factory=list)


@dataclass
class Mean:
    """A mean over seeds with its bootstrap 95% CI."""

    mean: float | None
    ci95: list[float] | None
    seeds: int


def fit_exponent(x: list[float], cells: list[Outcomes], statistic, boot: int = BOOTSTRAP, seed: int = 0) -> Fit:
    """Slope of log statistic(cell) against log x, with a CI from resampling the cells' seeds
    (jointly, where they share them: joint_resamples).

    ``statistic(outcomes, columns)`` returns a number or None; None and values <= 0 (a censored
    N*, zero error from the first evaluation on) leave the cell out of that fit or resample."""
    value, intercept, points = point_slope(x, cells, statistic)
    points = [list(p) for p in points]
    if value is None:
        return Fit(None, None, None, points, 0)
    slopes = bootstrap_slopes(x, cells, statistic, boot, seed)
    slopes = slopes[np.isfinite(slopes)]
    ci = _round(np.percentile(slopes, CI)) if len(slopes) else None
    return Fit(_round(value), ci, intercept, points, len(slopes))


def local_slopes(x: list[float], cells: list[Outcomes], statistic, boot: int = BOOTSTRAP) -> list[LocalSlope]:
    """The slope between each two neighbouring x (ascending) with its paired-bootstrap CI: where a
    fit over the whole range is heading. Neighbours whose statistic is undefined give value None."""
    order = np.argsort(x)
    out = []
    for i, j in zip(order[:-1], order[1:]):
        fit = fit_exponent([x[i], x[j]], [cells[i], cells[j]], statistic, boot)
        out.append(LocalSlope(fit.value, fit.ci95, [float(x[i]), float(x[j])]))
    return out


def joint_resamples(cells: list[Outcomes], boot: int, seed: int = 0):
    """``boot`` bootstrap resamples of seeds for all ``cells`` at once, each a list of per-cell
    column arrays. Cells that hold the same seeds get the same drawn seeds (paired); otherwise
    each cell's seeds are drawn on their own."""
    rng = np.random.default_rng(seed)
    shared = all(np.array_equal(c.seeds, cells[0].seeds) for c in cells)
    for _ in range(boot):
        if shared:
            columns = resample(len(cells[0].seeds), rng)
            yield [columns] * len(cells)
        else:
            yield [resample(len(c.seeds), rng) for c in cells]


def statistic_draws(statistic, cells: list[Outcomes], resamples: list[list[np.ndarray]]) -> np.ndarray:
    """statistic(cell, columns) of every cell in every resample: (resamples, cells), NaN where it is
    None or <= 0 (left out of a log fit). A statistic with a ``draws(cell, columns)`` method (NStar)
    is computed for all resamples at once."""
    out = np.full((len(resamples), len(cells)), np.nan)
    for i, cell in enumerate(cells):
        columns = [r[i] for r in resamples]
        if hasattr(statistic, "draws"):
            out[:, i] = statistic.draws(cell, np.stack(columns)) if columns else []
        else:
            out[:, i] = [np.nan if (v := _positive(statistic(cell, c))) is None else v for c in columns]
    out[~(out > 0)] = np.nan
    return out


def bootstrap_slope_sets(
    fits: list[tuple[list[float], list[Outcomes]]], statistic, boot: int = BOOTSTRAP, seed: int = 0
):
    """The log-log slope of every (x, cells) in ``fits`` in each of ``boot`` joint resamples of
    all their cells' seeds: a (boot, len(fits)) array (NaN where fewer than two values of x kept a
    defined statistic)."""
    cells = [c for _, group in fits for c in group]
    xs = [np.asarray(x, dtype=float) for x, _ in fits]
    slopes = np.full((boot, len(fits)), np.nan)
    values = statistic_draws(statistic, cells, list(joint_resamples(cells, boot, seed)))
    for b in range(boot):
        ys = [None if np.isnan(v) else float(v) for v in values[b]]
        start = 0
        for f, x in enumerate(xs):
            mine, start = ys[start : start + len(x)], start + len(x)
            idx = [i for i, v in enumerate(mine) if v is not None]
            if len({x[i] for i in idx}) >= 2:
                slopes[b, f] = loglog_slope(x[idx], np.array([mine[i] for i in idx]))[0]
    return slopes


def paired_slope_difference(
    a: tuple[list[float], list[Outcomes]], b: tuple[list[float], list[Outcomes]], statistic
) -> Estimate:
    """b's log-log slope minus a's, both from one sweep, with a bootstrap 95% CI over joint
    resamples of every seed both use (the paired difference: shared seeds resampled together)."""
    slope_a, slope_b = point_slope(*a, statistic)[0], point_slope(*b, statistic)[0]
    if slope_a is None or slope_b is None:
        return Estimate(None, None)
    sets = bootstrap_slope_sets([a, b], statistic)
    difference = sets[:, 1] - sets[:, 0]
    difference = difference[np.isfinite(difference)]
    return Estimate(_round(slope_b - slope_a), _round(np.percentile(difference, CI)) if len(difference) else None)


def _round(value):
    """Bootstrap noise is far above 1e-4: values and CIs are kept to 4 decimals."""
    if value is None:
        return None
    if isinstance(value, (list, tuple, np.ndarray)):
        return [round(float(v), 4) for v in value]
    return round(float(value), 4)


def point_slope(x, cells: list[Outcomes], statistic) -> tuple[float | None, float | None, list[tuple[float, float]]]:
    """fit_exponent's estimate without its CI: (slope, intercept, the (x, y) points fitted); the
    slope and intercept are None where fewer than two values of x have a defined statistic."""
    x = np.asarray(x, dtype=float)
    y = [_positive(statistic(c, None)) for c in cells]
    keep = [i for i, v in enumerate(y) if v is not None]
    points = [(float(x[i]), float(y[i])) for i in keep]
    if len(keep) < 2 or len({x[i] for i in keep}) < 2:
        return None, None, points
    return (*loglog_slope(x[keep], np.array([y[i] for i in keep])), points)


def bootstrap_slopes(x, cells: list[Outcomes], statistic, boot: int = BOOTSTRAP, seed: int = 0) -> np.ndarray:
    """fit_exponent's slope in each of ``boot`` joint resamples of the cells' seeds (NaN where
    fewer than two values of x kept a defined statistic)."""
    return bootstrap_slope_sets([(x, cells)], statistic, boot, seed)[:, 0]


def slope_difference(
    a: tuple[list[float], list[Outcomes]], b: tuple[list[float], list[Outcomes]], stat_a, stat_b
) -> Estimate:
    """b's log-log slope (of stat_b against x) minus a's, each input (x, cells) as fit_exponent
    takes them, with a bootstrap 95% CI: the two sweeps' seeds resampled independently (different
    runs), resamples where either slope is undefined left out."""
    slope_a, slope_b = point_slope(*a, stat_a)[0], point_slope(*b, stat_b)[0]
    if slope_a is None or slope_b is None:
        return Estimate(None, None)
    difference = bootstrap_slopes(*b, stat_b, seed=1) - bootstrap_slopes(*a, stat_a, seed=0)
    difference = difference[np.isfinite(difference)]
    ci = [round(float(v), 4) for v in np.percentile(difference, CI)] if len(difference) else None
    return Estimate(round(slope_b - slope_a, 4), ci)


def _positive(value: float | None) -> float | None:
    return value if value is not None and value > 0 else None


def n_star_resamples(
    cell: Outcomes, p: float, boot: int = BOOTSTRAP, seed: int = 0, criterion: str = "stable"
) -> np.ndarray:
    """A cell's N* in each of ``boot`` resamples of its seeds; inf where censored (the largest N misses p)."""
    rng = np.random.default_rng(seed)
    draws = np.stack([resample(len(cell.seeds), rng) for _ in range(boot)])
    return np.nan_to_num(cell.n_star_draws(p, draws, criterion), nan=np.inf)


def n_star_ci(
    cell: Outcomes, p: float, boot: int = BOOTSTRAP, seed: int = 0, criterion: str = "stable"
) -> tuple[int | None, int | None]:
    """Bootstrap 95% interval of a cell's N* (None for an end where too many resamples are censored)."""
    values = n_star_resamples(cell, p, boot, seed, criterion)
    lo, hi = np.percentile(values, CI, method="nearest")  # an N* that was trained, never inf - inf
    return (int(lo) if np.isfinite(lo) else None), (int(hi) if np.isfinite(hi) else None)


def paired_difference(after: np.ndarray, before: np.ndarray, boot: int = BOOTSTRAP, seed: int = 0) -> Mean:
    """Mean of (after - before) over seeds present in both, with a bootstrap 95% CI."""
    both = np.isfinite(after) & np.isfinite(before)
    diff = (after - before)[both]
    if len(diff) == 0:
        return Mean(None, None, 0)
    rng = np.random.default_rng(seed)
    means = [diff[resample(len(diff), rng)].mean() for _ in range(boot)]
    return Mean(float(diff.mean()), [float(v) for v in np.percentile(means, CI)], int(len(diff)))


def mean_ci(values: np.ndarray, boot: int = BOOTSTRAP, seed: int = 0) -> Mean:
    """Mean of the finite values with a bootstrap 95% CI."""
    values = values[np.isfinite(values)]
    return paired_difference(values, np.zeros_like(values), boot, seed)


def full_grid_size(n_lo: int, n_hi: int, precision: float) -> int:
    """Distinct integer N on a geometric grid of ratio 1 + precision from n_lo to n_hi: the
    grid a non-adaptive sweep needs to know N* to that precision anywhere in the range."""
    count = int(np.floor(np.log(n_hi / n_lo) / np.log1p(precision))) + 1
    return len(np.unique(np.round(n_lo * (1 + precision) ** np.arange(count + 1)).clip(max=n_hi)))
