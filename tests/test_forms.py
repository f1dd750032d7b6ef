"""N* in the theorem's shifted form: a known curve's K, c and k recovered, and the form the data
prefer told apart from a power law (services.stats.forms)."""

import numpy as np
from test_analysis import NS, SEEDS

from services.analysis import Outcomes
from services.stats.forms import Form, fit_form, fit_forms
from services.stats.rows import CellRow, WindowRow

ALPHA = np.array([0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4])  # a decade of alpha*, as the decade spec sweeps


def cells_on(curve, rng: np.random.Generator, spread: float = 0.15) -> list[Outcomes]:
    """A cell per alpha* whose seed s succeeds from N = curve(alpha*) e_s on (e_s lognormal)."""
    cells = []
    for a in ALPHA:
        thresholds = curve(a) * np.exp(rng.normal(0, spread, SEEDS))
        success = (NS[:, None] >= thresholds[None, :]).astype(float)
        cells.append(Outcomes(NS, np.arange(SEEDS), success, np.ones_like(success), np.zeros_like(success)))
    return cells


def by_form(forms):
    return {f.form: f for f in forms.fits}


def test_the_least_squares_of_a_noiseless_shifted_curve_is_that_curve():
    K, c, k, rss = fit_form(ALPHA, 3.0 * (ALPHA - 0.03) ** -2.0, Form(True, None))
    assert abs(K - 3.0) < 0.05 and abs(c - 0.03) < 3e-4 and abs(k - 2.0) < 0.01 and rss < 1e-4
    K, c, k, _ = fit_form(ALPHA, 5.0 * ALPHA**-3.0, Form(False, None))
    assert (round(K, 6), c, round(k, 6)) == (5.0, 0.0, 3.0)


def test_the_shifted_fit_recovers_K_c_and_k_of_a_known_curve_within_its_cis_and_is_preferred():
    """N* = 20 (alpha* - 0.03)^-2 on 20 seeds: both shifted fits hold the truth in their CIs, and held-out
    alpha* prefer a shifted form to either power law, which bends away from the curve at the small end."""
    forms = fit_forms(
        list(ALPHA),
        cells_on(lambda a: 20 * (a - 0.03) ** -2, np.random.default_rng(3)),
        lambda o, cols: o.n_star(0.5, cols),
        theory=2.0,
    )
    fits = by_form(forms)
    free, fixed = fits["shifted, k free"], fits["shifted, k = 2"]
    assert free.c.ci95[0] <= 0.03 <= free.c.ci95[1] and free.k.ci95[0] <= 2.0 <= free.k.ci95[1]
    assert fixed.c.ci95[0] <= 0.03 <= fixed.c.ci95[1] and fixed.K.ci95[0] <= 20 <= fixed.K.ci95[1]
    assert abs(fixed.c.value - 0.03) < 0.006 and abs(free.k.value - 2.0) < 0.4
    assert forms.preferred.startswith("shifted")
    assert fits["power, k free"].held_out > 2 * min(fixed.held_out, free.held_out)
    assert fits["power, k free"].c.value == 0 and fits["power, k = 2"].k.value == 2


def test_a_pure_power_law_is_not_mistaken_for_a_shifted_one():
    """N* = 2 alpha*^-3: the shift comes out near 0 with a CI that holds 0, and k free near 3."""
    forms = fit_forms(
        list(ALPHA),
        cells_on(lambda a: 2 * a**-3.0, np.random.default_rng(5)),
        lambda o, cols: o.n_star(0.5, cols),
        theory=2.0,
    )
    free = by_form(forms)["shifted, k free"]
    assert free.c.ci95[0] == 0.0 and free.c.value < 0.01
    assert by_form(forms)["power, k free"].k.ci95[0] <= 3.0 <= by_form(forms)["power, k free"].k.ci95[1]
    assert forms.preferred != "power, k = 2" and forms.preferred != "shifted, k = 2"


def test_fewer_than_three_values_give_no_form():
    cells = cells_on(lambda a: 10 / a, np.random.default_rng(0))[:2]
    assert fit_forms([0.05, 0.075], cells, lambda o, cols: o.n_star(0.5, cols), theory=2.0) is None


def test_a_cell_without_a_stable_n_under_its_cap_is_bounded_by_the_cap_over_its_window():
    """A stable N needs W times itself under the cap: no stable N under a cap of 32,000 with W = 4 puts
    N* above 8,000, not above 32,000; without a window, above the largest N evaluated."""
    row = CellRow("vit alpha_star=0.1", "vit", {}, 0.1, 0.5, 16, False, bracket_lo=32000)
    row.window = WindowRow(4, 32000, None, 16, 16)
    assert row.n_star_above == 8000
    row.window = None
    assert row.n_star_above == 32000
    row.n_star = 100
    assert row.n_star_above is None
