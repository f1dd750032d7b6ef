"""The answer (services.stats.answer): three statements read at the primary a spec names, each from
its 95% CI; the checks from the same runs and from other sweeps, claim by claim; and the screen a
person reads first (services.report.answer_text), on summaries whose fits are set by hand."""

import json
from dataclasses import asdict

import pytest
from conftest import SYNTHETIC_SPEC, record_synthetic_sweep, synthetic_sweep
from matplotlib.patches import Rectangle
from typer.testing import CliRunner

from services.analysis import CRITERIA, Difference, Estimate, Fit
from services.app.cli import app
from services.report.answer_figures import regime_map_figure
from services.report.answer_text import regime_table, screen
from services.report.compare import compare
from services.spec.schema import AnswerSpec
from services.stats.answer import agreement, answer, sweep_check
from services.stats.rows import (
    AGREES,
    DIFFERS,
    EQUAL,
    EXCLUDED,
    LARGER,
    MORE,
    REACHED,
    UNDECIDED,
    Answer,
    CellRow,
    CriterionFits,
    CriterionRow,
    Statements,
    Summary,
)
from vit_core.family import Premise, families

runner = CliRunner()

ALPHAS = (0.05, 0.2, 0.4)
SETTINGS = ("counts=premised", "counts=fixed")
AGREEING = {  # every reading decides every claim as the primary does
    "ratio": Estimate(2.0, [1.5, 2.6]),
    "vit": Fit(1.4, [1.2, 1.6]),
    "cnn": Fit(1.4, [1.3, 1.6]),
    "difference": Estimate(0.0, [-0.2, 0.3]),
}


def _cell(model: str, alpha: float, setting: str, n_star: int) -> CellRow:
    values = {"alpha_star": alpha, "counts": setting.split("=")[1]}
    label = f"{model} alpha_star={alpha} {setting}"
    row = CellRow(label, model, values, alpha, 0.5, 16, False, protocol="one_pass", batch_size=8)
    row.criteria = {c: CriterionRow(n_star, True, [n_star // 2, n_star * 2], n_star // 2) for c in CRITERIA}
    return row


def _summary(changed: dict[tuple[str, str], dict] | None = None, alphas: tuple = ALPHAS) -> Summary:
    """A summary of ViT and CNN cells at ALPHAS x SETTINGS whose fits are AGREEING's, but for the
    (criterion, setting) readings in ``changed`` (keys of AGREEING, or ("ratio", alpha))."""
    cells = [
        _cell(m, a, s, (40 if m == "vit" else 96) * int(0.4 / a))
        for m in ("vit", "cnn")
        for s in SETTINGS
        for a in alphas
    ]
    criteria = {}
    for c in CRITERIA:
        fits = CriterionFits()
        for s in SETTINGS:
            mine = AGREEING | (changed or {}).get((c, s), {})
            for m in ("vit", "cnn"):
                fits.exponent[f"{m} {s}"] = mine[m]
            d = mine["difference"]
            fits.exponent_difference[f"cnn - vit {s}"] = Difference(d.value, d.ci95, pair="cnn - vit")
            for a in alphas:
                fits.n_star_ratio.setdefault("cnn / vit", {})[f"alpha_star={a} {s}"] = mine.get(
                    ("ratio", a), mine["ratio"]
                )
        criteria[c] = fits
    empty: dict = {}
    return Summary(
        "sc-1",
        "sc",
        ["vit", "cnn"],
        0.5,
        0.1,
        cells,
        **{key: empty for key in ("exponent", "iterations_exponent", "t_star_exponent", "forms", "local_exponent")},
        **{key: empty for key in ("exponent_difference", "n_star_ratio", "lr_exponent", "theory", "paper", "stats")},
        n_star=empty,
        protocol="one_pass",
        family="li2023",
        seeds=list(range(16)),
        criterion="iterate",
        criteria=criteria,
    )


PRIMARY = AnswerSpec(primary={"counts": "premised"}, margin=0.5)


def test_the_primary_decides_each_statement_from_its_ci():
    found = answer(_summary(), PRIMARY)
    p = found.primary
    assert (p.name, p.setting, p.criterion, p.models) == ("primary", "counts=premised", "iterate", ["vit", "cnn"])
    assert [(r.value, r.decision) for r in p.ratios] == [(a, MORE) for a in ALPHAS]
    assert (p.against_zero, p.against_excess, p.bound) == (EQUAL, EXCLUDED, "below")
    assert (found.excess, found.bound, found.margin) == (2.0, 2.0, 0.5)
    # the checks from the same runs: the other two criteria at the primary setting, the other setting at its criterion
    assert [(c.statements.name, c.source) for c in found.checks] == [
        ("first_zero", "same runs"),
        ("stable", "same runs"),
        ("counts=fixed", "same runs"),
    ]
    assert all(set(c.agreement.values()) == {AGREES} for c in found.checks)


def test_a_sweep_so_far_without_its_primary_setting_has_no_answer_yet():
    """The live record summarizes the cells measured so far: the primary may not be among them."""
    fixed_only = _summary()
    fixed_only.cells = [c for c in fixed_only.cells if c.values["counts"] == "fixed"]
    assert answer(fixed_only, PRIMARY) is None


@pytest.mark.parametrize(
    "ci, against_zero, against_excess",
    [
        ([-0.4, 0.4], EQUAL, EXCLUDED),  # inside the margin
        ([0.2, 0.9], LARGER, EXCLUDED),  # above 0, reaching past the margin
        ([-0.3, 0.8], UNDECIDED, EXCLUDED),  # holds 0 and reaches past the margin
        ([1.5, 2.5], LARGER, UNDECIDED),  # holds Proposition 1's +2
        ([2.1, 2.5], LARGER, REACHED),
    ],
)
def test_the_difference_is_read_against_zero_with_the_margin_and_against_the_excess(ci, against_zero, against_excess):
    changed = {("iterate", "counts=premised"): {"difference": Estimate(sum(ci) / 2, ci)}}
    p = answer(_summary(changed), PRIMARY).primary
    assert (p.against_zero, p.against_excess) == (against_zero, against_excess)


def test_a_check_that_reverses_the_ratio_differs_and_the_verdict_says_which():
    reversed_ratio = {("iterate", "counts=fixed"): {("ratio", 0.05): Estimate(0.5, [0.3, 0.8])}}
    found = answer(_summary(reversed_ratio), PRIMARY)
    fixed = next(c for c in found.checks if c.statements.name == "counts=fixed")
    assert fixed.agreement["ratio at 0.05"] == DIFFERS and fixed.agreement["ratio at 0.2"] == AGREES
    shown = screen(found, families()["li2023"])
    row = next(r for r in shown.checks.rows if r[0] == "counts=fixed")
    assert row[2] == "2 of 3 agree; differs at 0.05"
    assert "verdict, (a): agrees: first_zero, stable; differs: counts=fixed" in shown.notes
    assert shown.notes[0] == "verdict: every check agrees on (b) vs 0, (b) vs +2, (c)"


def test_an_undecided_check_is_undecided_not_agreeing():
    wide = {("stable", "counts=premised"): {"difference": Estimate(0.3, [-0.4, 1.0])}}
    found = answer(_summary(wide), PRIMARY)
    stable = next(c for c in found.checks if c.statements.name == "stable")
    assert stable.agreement["difference against 0"] == UNDECIDED
    assert stable.agreement["difference against excess"] == AGREES


def test_an_answer_reads_back_from_its_json_and_checks_another_sweep():
    found = answer(_summary(), PRIMARY)
    document = _summary().to_dict() | {"answer": asdict(found)}
    assert Answer.from_dict(document["answer"]) == found
    other = _summary({("iterate", "counts=premised"): {"vit": Fit(2.4, [2.1, 2.7])}}).to_dict()
    other["answer"] = asdict(answer(_summary({("iterate", "counts=premised"): {"vit": Fit(2.4, [2.1, 2.7])}}), PRIMARY))
    other["cells"][0]["criteria"]["iterate"]["n_star"] = 10_000  # far outside the primary's CI
    check = sweep_check(found, document["cells"], other, "sc_fresh-1", "sc_fresh")
    assert (check.statements.name, check.source) == ("sc_fresh", "sc_fresh-1")
    assert check.agreement["bound"] == DIFFERS  # the ViT's exponent above 2 there
    assert check.inside_ci == [len(document["cells"]) - 1, len(document["cells"])]


def test_the_screen_of_the_main_jobs_shape_fits_forty_lines():
    """7 values of alpha*, three checks from the same runs and five named ones not run: the opening a
    person reads (question, primary, the N* table, three statements, the checks, the verdict)."""
    found = answer(_summary(alphas=(0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4)), PRIMARY)
    missing = [(f"check_{k}", "not run in this home") for k in range(5)]
    shown = screen(found, families()["li2023"], [], missing)
    lines = len(shown.lines) + len(shown.statements) + len(shown.notes)
    lines += sum(4 + len(t.rows) for t in (shown.table, shown.checks))  # title, blank, header, rule and rows
    assert len(shown.table.rows) == 7 and len(shown.checks.rows) == 8
    assert lines <= 40


MAIN = SYNTHETIC_SPEC + "answer: {checks: [synthetic_check]}\n"
CHECK = SYNTHETIC_SPEC.replace("name: synthetic", "name: synthetic_check")


def test_the_report_reads_a_named_check_from_its_sweep_in_the_home_or_says_how_to_run_it(tmp_path):
    """A sweep whose spec names a check: its report lists the check's recorded sweep with its agreement
    claim by claim, or, where the home holds none, the command that runs it; --json carries both."""
    record_synthetic_sweep(tmp_path, "synthetic-1", text=MAIN)
    alone = runner.invoke(app, ["report", "synthetic-1", "--home", str(tmp_path), "--json"])
    assert alone.exit_code == 0, alone.output
    assert "| synthetic_check | not run here: vitsweep run sweeps/synthetic_check.yaml |" in alone.stdout
    assert json.loads(alone.stdout.strip().splitlines()[-1])["sweep_checks_missing"][0]["name"] == "synthetic_check"

    record_synthetic_sweep(tmp_path, "synthetic_check-1", hard=8, text=CHECK)  # the ViT's N* at 0.1 doubles
    both = runner.invoke(app, ["report", "synthetic-1", "--home", str(tmp_path), "--json"])
    assert both.exit_code == 0, both.output
    document = json.loads(both.stdout.strip().splitlines()[-1])
    (check,) = document["sweep_checks"]
    assert (check["source"], check["statements"]["name"]) == ("synthetic_check-1", "synthetic_check")
    assert check["agreement"] == agreement(
        Answer.from_dict(document["answer"]).primary, Statements.from_dict(check["statements"])
    )
    assert "| synthetic_check | synthetic_check-1" in both.stdout and "not run here" not in both.stdout
    assert "vitsweep compare synthetic-1 synthetic_check-1" in both.stdout
    page = (tmp_path / "reports" / "synthetic-1" / "summary.html").read_text()
    assert page.index("synthetic_check-1") < page.index("<h2>Details</h2>")  # the screen opens the report


def test_the_contract_holds_for_the_same_answer_and_fails_for_another():
    """`vitsweep compare`'s contract (a change that moves bits is judged by the answer): two sweeps
    with the same outcomes hold it; where the ViT needs four times the samples at alpha* = 0.1 its
    N* leaves the other's CI and a statement changes."""
    sweeps = {name: synthetic_sweep(name, hard, easy) for name, hard, easy in (("a", 2, 1), ("b", 2, 1), ("c", 8, 1))}
    same = compare(*((spec, name, result.cells) for name, (spec, result) in sweeps.items() if name in "ab")).contract
    assert same.holds and same.inside[0] == same.inside[1] > 0 and same.statements == []
    other = compare(*((spec, name, result.cells) for name, (spec, result) in sweeps.items() if name in "ac")).contract
    assert not other.holds and other.inside[0] < other.inside[1]
    assert other.within_step[0] < other.within_step[1]


def test_a_regime_map_reads_the_statements_in_every_regime_and_draws_each():
    """answer.regimes: each value of a regime axis is a regime of its own with its three statements and
    its premises; the map's table and figure hold every regime (one where the CNN's exponent exceeds
    the ViT's by more than Proposition 1's +2, one whose premises fail), none dropped."""
    above = {("iterate", "counts=fixed"): {"difference": Estimate(2.3, [2.1, 2.5])}}
    summary = _summary(above)
    broken = Premise("shift", False, 0.3, 0.05, "alpha* - (sigma + tau) > 0")
    next(r for r in summary.cells if r.values["counts"] == "fixed").premises = [broken]
    summary.answer = answer(summary, AnswerSpec(primary={"counts": "premised"}, regimes=["counts"]))
    regimes = {r.label: r for r in summary.answer.regimes}
    assert set(regimes) == {"counts=premised", "counts=fixed"}
    assert [c.statements.name for c in summary.answer.checks] == ["first_zero", "stable"]  # regimes are not checks
    assert regimes["counts=fixed"].statements.against_excess == REACHED and regimes["counts=fixed"].violated == [
        "shift"
    ]
    assert regimes["counts=premised"].statements.against_zero == EQUAL and regimes["counts=premised"].violated == []
    table = regime_table(summary.answer, families()["li2023"])
    assert [row[:2] for row in table.rows] == [["premised", "met"], ["fixed", "fail: shift"]]
    fig = regime_map_figure(summary)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert len(texts) == 2 and any(t.startswith("+2.30") and "premises fail" in t for t in texts)
    assert sum(isinstance(p, Rectangle) and p.get_hatch() == "//" for p in fig.axes[0].patches) == 1
