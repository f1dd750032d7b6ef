"""Effects between cells as ratios with bootstrap CIs: one cell's N* over another's (two runs on their
own seeds, or two models on shared seeds, paired), and their steps to zero test error. Pure numpy,
like services.analysis, whose outcome tables and resampling they use."""

import numpy as np

from services.analysis import BOOTSTRAP, CI, Estimate, Outcomes, _round, n_star_resamples, resample


def n_star_ratio(
    a: Outcomes, b: Outcomes, p_a: float, p_b: float, boot: int = BOOTSTRAP, criteria: tuple[str, str] = ("stable",) * 2
) -> Estimate:
    """N* of cell ``b`` over N* of cell ``a`` (each at its own p and criterion), two runs on their own seeds, with a
    bootstrap 95% CI: each cell's seeds resampled on its own, a's draws those of its n_star_ci. A
    censored N* counts as infinite: a's gives the ratio 0, b's an infinite one, which an end of the
    CI gives as None; resamples where both are censored say nothing and are left out (value: None
    where either N* is censored)."""
    star_a, star_b = a.n_star(p_a, criterion=criteria[0]), b.n_star(p_b, criterion=criteria[1])
    with np.errstate(invalid="ignore"):  # inf / inf: both censored
        ratios = n_star_resamples(b, p_b, boot, 1, criteria[1]) / n_star_resamples(a, p_a, boot, 0, criteria[0])
    ratios = ratios[~np.isnan(ratios)]
    value = _round(star_b / star_a) if star_a and star_b else None
    if not len(ratios):
        return Estimate(value, None)
    ends = np.percentile(ratios, CI, method="nearest")  # a ratio that was drawn, never inf - inf
    return Estimate(value, [_round(end) if np.isfinite(end) else None for end in ends])


def paired_n_star_ratio(a: Outcomes, b: Outcomes, p: float, criterion: str, boot: int = BOOTSTRAP) -> Estimate:
    """N* of cell ``b`` over N* of cell ``a`` under one criterion, two models measured on the same
    seeds (their data and test set): the seeds resampled together (paired). A censored N* counts as
    infinite (a CI end of None); resamples where both are censored are left out."""
    star_a, star_b = a.n_star(p, criterion=criterion), b.n_star(p, criterion=criterion)
    value = _round(star_b / star_a) if star_a and star_b else None
    if not np.array_equal(a.seeds, b.seeds):
        return Estimate(value, None)
    rng = np.random.default_rng(0)
    draws = np.stack([resample(len(a.seeds), rng) for _ in range(boot)])
    sa, sb = (cell.n_star_draws(p, draws, criterion) for cell in (a, b))
    either = ~(np.isnan(sa) & np.isnan(sb))
    with np.errstate(divide="ignore"):
        ratios = np.where(np.isnan(sa), np.inf, np.where(np.isnan(sb), 0.0, sb / sa))[either]
    if not len(ratios):
        return Estimate(value, None)
    ends = np.percentile(ratios, CI, method="nearest")
    return Estimate(value, [_round(end) if np.isfinite(end) else None for end in ends])


def steps_ratio(slow: Outcomes, fast: Outcomes, boot: int = BOOTSTRAP, seed: int = 0) -> Estimate:
    """T(slow) / T(fast): the ratio of two cells' median steps to zero test error at their largest
    N, with a bootstrap 95% CI resampling each cell's seeds on its own (the cells' models are
    different networks)."""
    a, b = slow.steps(), fast.steps()
    if not a or not b:
        return Estimate(None, None)
    rng = np.random.default_rng(seed)
    ratios = [
        r
        for _ in range(boot)
        if (r := _ratio(slow.steps(resample(len(slow.seeds), rng)), fast.steps(resample(len(fast.seeds), rng))))
        is not None
    ]
    return Estimate(a / b, [float(v) for v in np.percentile(ratios, CI)] if ratios else None)


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None
