"""Fits and intervals on synthetic outcomes whose exponents and effects are known."""

import numpy as np
import pytest
from conftest import model_record

from services.analysis import (
    Estimate,
    Outcomes,
    bootstrap_slopes,
    fit_exponent,
    full_grid_size,
    local_slopes,
    paired_difference,
    paired_slope_difference,
    stable_n_star,
)
from services.ratios import steps_ratio
from services.results import ModelRecord, outcomes_of
from services.stats import paper
from services.stats.rows import error_bound
from vit_core.family import families

SEEDS = 20
NS = np.unique(np.round(np.geomspace(1, 1e5, 300)).astype(int))


def synthetic(x: float, k: float, rng: np.random.Generator, steps_k: float = 1.0) -> Outcomes:
    """A cell where seed s succeeds from N = 3 x^k e_s on (e_s lognormal), and reaches zero
    error after 50 x^steps_k e'_s steps."""
    thresholds = 3 * x**k * np.exp(rng.normal(0, 0.4, SEEDS))
    success = (NS[:, None] >= thresholds[None, :]).astype(float)
    steps = np.tile(50 * x**steps_k * np.exp(rng.normal(0, 0.3, SEEDS)), (len(NS), 1))
    return Outcomes(NS, np.arange(SEEDS), success, steps, np.zeros_like(success))


@pytest.mark.parametrize("k", [1.0, 2.0, 4.0])
def test_exponent_of_a_known_power_law_is_recovered_within_its_ci(k):
    rng = np.random.default_rng(int(k))
    x = np.geomspace(2, 10, 6)  # 1/alpha* from 0.5 to 0.1
    cells = [synthetic(v, k, rng) for v in x]
    fit = fit_exponent(x, cells, lambda o, cols: o.n_star(0.5, cols))
    assert fit.ci95[0] <= k <= fit.ci95[1]
    assert abs(fit.value - k) < 0.3 and fit.ci95[1] - fit.ci95[0] < 1.0
    steps = fit_exponent(x, cells, lambda o, cols: o.steps(cols))
    assert steps.ci95[0] <= 1.0 <= steps.ci95[1]


def test_a_steeper_law_has_a_ci_above_a_shallower_one():
    rng = np.random.default_rng(7)
    x = np.geomspace(2, 10, 6)
    vit = fit_exponent(x, [synthetic(v, 2, rng) for v in x], lambda o, cols: o.n_star(0.5, cols))
    cnn = fit_exponent(x, [synthetic(v, 4, rng) for v in x], lambda o, cols: o.n_star(0.5, cols))
    assert cnn.ci95[0] > vit.ci95[1]


def test_censored_cells_are_left_out_of_the_fit():
    rng = np.random.default_rng(3)
    x = np.array([2.0, 4.0, 8.0, 1e4])  # the last cell needs N far beyond the grid
    cells = [synthetic(v, 2, rng) for v in x]
    fit = fit_exponent(x, cells, lambda o, cols: o.n_star(0.5, cols))
    assert [p[0] for p in fit.points] == [2.0, 4.0, 8.0]
    assert fit.ci95[0] <= 2 <= fit.ci95[1]


def test_stable_n_star_ignores_an_early_success_below_a_dip():
    ns = np.array([5, 10, 20, 40, 80])
    assert stable_n_star(ns, np.array([0.0, 0.6, 0.3, 0.7, 0.9]), 0.5) == 40
    assert stable_n_star(ns, np.array([0.6, 0.6, 0.6, 0.7, 0.9]), 0.5) == 5
    assert stable_n_star(ns, np.array([0.0, 0.6, 0.7, 0.8, 0.4]), 0.5) is None


def test_outcomes_from_records_bracket_and_monotonicity():
    records = [
        _converged(
            {
                "n_train": n,
                "seed": s,
                "success": (n >= 20) or (n == 5 and s < 3),
                "iterations_to_zero": 40 if n >= 20 else -1,
                "test_loss": 0.1,
            }
        )
        for n in (5, 10, 20, 40)
        for s in range(4)
    ]
    o = _outcomes(records)
    assert o.n_star(0.5) == 20 and o.bracket(0.5) == (10, 20)
    assert not o.monotone(0.5)  # N = 5 reached p (3 of 4 seeds), N = 10 did not
    assert o.steps() == 40


def test_paired_difference_finds_a_known_shift():
    rng = np.random.default_rng(0)
    before = rng.normal(1.0, 0.2, 40)
    result = paired_difference(before - 0.1 + rng.normal(0, 0.01, 40), before)
    assert result.ci95[0] < -0.1 < result.ci95[1] < 0


def test_full_grid_size_counts_distinct_integers():
    assert full_grid_size(10, 10, 0.1) == 1
    assert full_grid_size(100, 200, 0.1) == 9  # 100, 110, 121, ..., 195, then 200
    assert full_grid_size(1, 4, 0.1) == 4  # 1, 2, 3, 4: rounding merges the small ratios


def test_paper_values_load_and_their_n_star_rises_as_alpha_falls():
    for model in ("vit", "cnn"):
        points = paper.n_star(families()["li2023"], model, 0.5)
        assert len(points) >= 5
        alphas, stars = zip(*points)
        assert stars[np.argmin(alphas)] > stars[np.argmax(alphas)]
        assert paper.exponent(families()["li2023"], model, 0.5) > 0


def _converged(record: dict) -> dict:
    """A record of a model that converged: succeeded or failed_converged by its success."""
    return (
        model_record(record["n_train"], record["seed"], "succeeded" if record["success"] else "failed_converged")
        | record
    )


def _outcomes(records: list[dict]) -> Outcomes:
    return outcomes_of([ModelRecord.from_dict(r) for r in records])


def _records(ns, success, steps=40):
    return [
        _converged({"n_train": n, "seed": s, "success": success(n), "iterations_to_zero": steps, "test_loss": 0.0})
        for n in ns
        for s in range(4)
    ]


def test_an_n_star_at_the_smallest_n_tried_is_known_only_at_n_1():
    assert _outcomes(_records([8, 16], lambda n: True)).n_star(0.5) == 8
    assert _outcomes(_records([8, 16], lambda n: True)).n_star_known(0.5) is None  # could be anything <= 8
    assert _outcomes(_records([1, 2], lambda n: True)).n_star_known(0.5) == 1
    assert _outcomes(_records([8, 16], lambda n: n > 8)).n_star_known(0.5) == 16


def test_cells_with_zero_steps_to_zero_error_leave_the_log_fit():
    cells = [_outcomes(_records([64], lambda n: True, steps=t)) for t in (0, 40, 80, 160)]
    fit = fit_exponent([1.0, 2.0, 4.0, 8.0], cells, lambda o, cols: o.steps(cols))
    assert [p[0] for p in fit.points] == [2.0, 4.0, 8.0]
    assert fit.value == pytest.approx(1.0) and np.allclose(fit.ci95, 1.0)


def test_models_that_did_not_converge_or_diverged_do_not_count_towards_success_rates():
    records = _records([8, 16], lambda n: n == 16)
    for r in records[:3]:  # N = 8: three of four seeds ran out of steps; the fourth failed having converged
        r |= {"outcome": "not_converged"}
    o = _outcomes(records)
    assert np.isnan(o.success[0, :3]).all() and o.rates().tolist() == [0.0, 1.0]
    for r in records[3:4]:
        r |= {"outcome": "diverged"}
    o = _outcomes(records)
    assert np.isnan(o.rates()[0]) and o.rates()[1] == 1.0
    assert o.n_star(0.5) == 16  # an N with no counted model never reaches p
    assert stable_n_star(np.array([8, 16]), np.array([np.nan, np.nan]), 0.5) is None


def test_steps_ratio_of_two_cells_with_a_ci():
    slow = _outcomes(_records([16], lambda n: True, steps=400))
    fast = _outcomes(_records([16], lambda n: True, steps=50))
    gap = steps_ratio(slow, fast)
    assert gap.value == 8.0 and gap.ci95 == [8.0, 8.0]
    never = _outcomes(_records([16], lambda n: False, steps=-1))
    assert steps_ratio(never, fast) == Estimate(None, None)


def cells_of(scales: list[float], effects: np.ndarray, rng: np.random.Generator) -> list[Outcomes]:
    """Cells where seed s succeeds from N = 3 scale e[s] f_s on: effects (seeds,) or (cells,
    seeds) given, f_s a small noise of the cell's own."""
    effects = np.broadcast_to(effects, (len(scales), SEEDS))
    cells = []
    for scale, effect in zip(scales, effects):
        thresholds = 3 * scale * effect * np.exp(rng.normal(0, 0.05, SEEDS))
        success = (NS[:, None] >= thresholds[None, :]).astype(float)
        cells.append(Outcomes(NS, np.arange(SEEDS), success, np.ones_like(success), np.zeros_like(success)))
    return cells


def test_the_paired_difference_of_two_exponents_finds_a_known_difference_and_pairing_narrows_it():
    """The CNN's N* grows as x^3 and the ViT's as x^2, and at each x a seed's data make it harder
    or easier for both models alike (one effect per seed and x, shared): the paired bootstrap's CI
    holds the true difference 1 and is much narrower than resampling the two models' seeds apart,
    which ignores that their N* move together."""
    rng = np.random.default_rng(11)
    x = np.geomspace(2, 10, 5)
    effects = np.exp(rng.normal(0, 0.8, (len(x), SEEDS)))
    vit, cnn = cells_of(list(x**2), effects, rng), cells_of(list(x**3), effects, rng)
    statistic = lambda o, cols: o.n_star(0.5, cols)  # noqa: E731
    paired = paired_slope_difference((list(x), vit), (list(x), cnn), statistic)
    assert paired.ci95[0] <= 1.0 <= paired.ci95[1] and abs(paired.value - 1.0) < 0.2
    apart = bootstrap_slopes(x, cnn, statistic, seed=1) - bootstrap_slopes(x, vit, statistic, seed=2)
    width_apart = np.subtract(*np.percentile(apart[np.isfinite(apart)], [97.5, 2.5]))
    assert paired.ci95[1] - paired.ci95[0] < 0.5 * width_apart


def test_local_slopes_show_a_curve_that_steepens():
    """N* = x^2 up to x = 4, then x^4: the slopes between neighbours say so, each within its CI."""
    rng = np.random.default_rng(5)
    x = np.array([2.0, 4.0, 8.0, 16.0])
    scales = [v**2 if v <= 4 else 16 * (v / 4) ** 4 for v in x]
    cells = cells_of(scales, np.exp(rng.normal(0, 0.5, SEEDS)), rng)
    slopes = local_slopes(list(x), cells, lambda o, cols: o.n_star(0.5, cols))
    assert [s.between for s in slopes] == [[2.0, 4.0], [4.0, 8.0], [8.0, 16.0]]
    for slope, truth in zip(slopes, (2, 4, 4)):
        assert slope.ci95[0] <= truth <= slope.ci95[1] and abs(slope.value - truth) < 0.3


def test_zero_errors_in_n_bound_the_error_by_the_rule_of_three():
    assert error_bound(1000) == pytest.approx(3 / 1000, rel=0.01)
    assert error_bound(10_000) == pytest.approx(3e-4, rel=0.01)
    assert (1 - error_bound(300)) ** 300 == pytest.approx(0.05)  # the chance of 0 errors at that error rate
