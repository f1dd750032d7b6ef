"""The three success criteria (iterate, first zero, stable) on one-pass outcomes whose answer is known,
the monotone fit behind the iterate N*, and the form a fit prefers only where its held-out
advantage is decided (the answer read across criteria: tests/test_answer.py)."""

import numpy as np
import pytest
from test_forms import ALPHA, cells_on

from services.analysis import CRITERIA, Estimate, Outcomes, monotone_n_star, n_star_ci
from services.ratios import paired_n_star_ratio
from services.report.fits import fit_table, form_table
from services.stats.forms import Forms, fit_forms
from services.stats.rows import CriterionFits, Difference, Summary


def isotonic(rates: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The weighted least-squares non-decreasing fit, by pool-adjacent-violators: the reference."""
    blocks: list[list[float]] = []  # [mean, weight, length]
    for r, w in zip(rates, weights):
        blocks.append([r, w, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            (m1, w1, n1), (m2, w2, n2) = blocks.pop(-2), blocks.pop()
            blocks.append([(m1 * w1 + m2 * w2) / (w1 + w2), w1 + w2, n1 + n2])
    return np.concatenate([[m] * n for m, _, n in blocks])


@pytest.mark.parametrize("seed", range(40))
def test_the_iterate_n_star_is_where_the_isotonic_fit_first_reaches_p(seed):
    rng = np.random.default_rng(seed)
    ns = np.arange(1, 31) * 8
    table = (rng.random((30, 8)) < np.linspace(0.1, 0.9, 30)[:, None]).astype(float)
    table[rng.random(table.shape) < 0.1] = np.nan  # diverged models: not counted
    p = float(rng.choice([0.5, 0.75]))
    counted = np.isfinite(table).sum(1)
    fit = isotonic(np.nansum(table, 1) / np.maximum(counted, 1), counted)
    reached = np.nonzero(fit >= p - 1e-12)[0]
    assert monotone_n_star(ns, table, p) == (int(ns[reached[0]]) if len(reached) else None)


def flicker_cell() -> Outcomes:
    """8 seeds on N = 8 .. 160: every seed first reaches zero error at N = 40 and keeps it from
    N = 120 on, but half of them lose it from N = 64 to 112 (a near-tie sample flipping)."""
    ns = np.arange(1, 21) * 8
    iterate = np.zeros((20, 8))
    iterate[ns >= 40] = 1
    iterate[(ns >= 64) & (ns < 120), :4] = 0
    first_zero = (ns[:, None] >= 40).astype(float) * np.ones((1, 8))
    stable = np.zeros((20, 8))
    stable[ns >= 120, :4] = 1
    stable[ns >= 40, 4:] = 1
    nan = np.full((20, 8), np.nan)
    return Outcomes(ns, np.arange(8), stable, nan, nan, batch_size=8, first_zero=first_zero, iterate=iterate)


def test_the_three_criteria_read_one_run_three_ways():
    cell = flicker_cell()
    assert cell.criteria == CRITERIA
    assert cell.n_star(0.5, criterion="first_zero") == 40
    assert cell.n_star(0.5, criterion="stable") == 40  # half the seeds keep it from 40: p = 0.5 is met
    assert cell.n_star(0.75, criterion="stable") == 120
    assert cell.n_star(0.75, criterion="iterate") == 120  # the dip to 0.5 at 64-112 pools 40-112 to 0.65
    assert cell.n_star(0.5, criterion="iterate") == 40
    lo, hi = n_star_ci(cell, 0.75, criterion="iterate")
    assert lo <= 120 <= hi
    with pytest.raises(ValueError, match="iterate"):
        Outcomes(cell.ns, cell.seeds, cell.success, cell.steps_to_zero, cell.test_loss).n_star(0.5, criterion="iterate")


def test_a_paired_ratio_of_n_star_says_which_model_needs_more():
    slow = flicker_cell()

    def sooner(table: np.ndarray) -> np.ndarray:  # two evaluations earlier, the last row kept
        return np.concatenate([table[2:], table[-1:], table[-1:]])

    fast = Outcomes(
        slow.ns,
        slow.seeds,
        sooner(slow.success),
        slow.steps_to_zero,
        slow.test_loss,
        batch_size=8,
        first_zero=sooner(slow.first_zero),
        iterate=sooner(slow.iterate),
    )
    assert fast.n_star(0.75, criterion="iterate") == 104
    ratio = paired_n_star_ratio(fast, slow, 0.75, "iterate")
    assert ratio.value == pytest.approx(round(120 / 104, 4)) and ratio.ci95[0] >= 1


def _summary(differences: dict[str, dict[str, Estimate]], forms: dict[str, dict[str, Forms]] | None = None) -> Summary:
    criteria = {
        c: CriterionFits(
            exponent_difference={
                name: Difference(e.value, e.ci95, pair="cnn - vit") for name, e in differences.get(c, {}).items()
            },
            forms=(forms or {}).get(c, {}),
        )
        for c in CRITERIA
    }
    empty: dict = {}
    return Summary(
        **dict.fromkeys(("sweep_id", "name", "family"), "li2023"),
        models=["vit", "cnn"],
        success_rate=0.5,
        max_not_converged=0.1,
        cells=[],
        **{key: empty for key in ("exponent", "iterations_exponent", "t_star_exponent", "forms", "local_exponent")},
        **{key: empty for key in ("exponent_difference", "n_star_ratio", "lr_exponent", "theory", "paper", "stats")},
        n_star=empty,
        protocol="one_pass",
        criteria=criteria,
    )


def test_a_form_is_preferred_only_where_its_held_out_advantage_excludes_zero():
    decided = Forms([], "shifted, k = 2", runner_up="power, k free", advantage=Estimate(0.2, [0.05, 0.3]), decided=True)
    close = Forms([], "shifted, k = 2", runner_up="power, k free", advantage=Estimate(0.02, [-0.1, 0.2]))
    assert decided.verdict == "shifted, k = 2" and close.verdict == "undecided"


@pytest.mark.parametrize("criterion", CRITERIA)
def test_n_star_over_many_resamples_at_once_equals_one_resample_at_a_time(criterion):
    rng = np.random.default_rng(5)
    ns = np.arange(1, 41) * 8
    tables = [(rng.random((40, 6)) < np.linspace(0, 1, 40)[:, None]).astype(float) for _ in range(3)]
    tables[1][rng.random(tables[1].shape) < 0.2] = np.nan
    cell = Outcomes(ns, np.arange(6), *tables[:2], tables[2], batch_size=8, first_zero=tables[0], iterate=tables[2])
    draws = rng.integers(0, 6, (300, 6))
    for known, one in ((False, cell.n_star), (True, cell.n_star_known)):
        expected = [np.nan if (s := one(0.5, row, criterion)) is None else s for row in draws]
        assert np.array_equal(cell.n_star_draws(0.5, draws, criterion, known), expected, equal_nan=True)


def test_the_fits_are_one_table_the_headline_criterion_first():
    differences = {c: {"cnn - vit": Estimate(0.1 * i, [0.1 * i - 1, 0.1 * i + 1])} for i, c in enumerate(CRITERIA)}
    summary = _summary(differences)
    summary.criterion = "stable"
    header, rows = fit_table(summary)
    assert header[:2] == ["criterion", "group"] and [r[0] for r in rows] == ["stable", "iterate", "first_zero"]
    assert rows[0][1:] == ["cnn - vit", "+0.20 [-0.80, +1.20]", "-"]


def test_the_forms_are_one_table_per_criterion_the_headline_first_each_fit_a_row():
    """Each fitted form a row (its k and c with CIs, log-rms, held-out error), not a sentence per group."""
    fitted = fit_forms(
        list(ALPHA),
        cells_on(lambda a: 20 * (a - 0.03) ** -2, np.random.default_rng(3)),
        lambda o, c: o.n_star(0.5, c),
        2.0,
    )
    summary = _summary({}, {"first_zero": {"vit": fitted}})
    summary.criterion, summary.forms = "iterate", {"vit": fitted}
    header, rows = form_table(summary)
    assert header[:2] == ["criterion", "group"] and header[3:] == ["k [95% CI]", "c [95% CI]", "log-rms", "held out"]
    assert [r[0] for r in rows] == ["iterate"] * 4 + ["first_zero"] * 4
    assert {r[2] for r in rows} == {f.form for f in fitted.fits} and all(len(r) == len(header) for r in rows)
    free = next(f for f in fitted.fits if f.form == "shifted, k free")
    row = next(r for r in rows if r[2] == "shifted, k free")
    assert row[3].startswith(f"{free.k.value:.2f} [") and row[4].startswith(f"{free.c.value:.3f} [")
