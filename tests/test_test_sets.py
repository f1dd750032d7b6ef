"""A test set per seed (TrainConfig.test_sets "per_seed"): each model is scored on its own seed's test
set, so that a CI over seeds carries the test set too; near-tie test samples (vote margin 1) decide
zero error, and the CI of N* from one draw of test sets covers the N* another draw gives."""

import dataclasses

import numpy as np
import pytest
import torch

from services.analysis import n_star_ci
from services.results import Cell, CellResult, ModelRecord, confirmed_onwards, outcomes_of
from services.stats.margins import STATISTIC, losing_evaluations
from vit_core import ModelConfig, TokenDataConfig, TrainConfig, train_pack
from vit_core.family import family_of
from vit_core.li2023.data import sample_tokens
from vit_core.li2023.models import PackedModel
from vit_core.seeding import Stream
from vit_core.tokens import MARGIN_ERRORS, TokenKind
from vit_core.training.scoring import _TestScores

NEAR_TIES = TokenDataConfig(n_tokens=60, dim=8, n_patterns=4, tau=0.02, counts="binomial", alpha_star=0.1)
VIT = ModelConfig(kind="vit", width=32, value_dim=8, init_error=0.02)
ONE_PASS = TrainConfig(
    protocol="one_pass", batch_size=8, lr=0.5, max_steps=400, eval_every=1, n_test=1000, stability_window=4
)


def test_each_model_is_scored_on_its_own_seeds_test_set():
    train = dataclasses.replace(ONE_PASS, max_steps=40, n_test=300, eval_subset=100, test_sets="per_seed")
    seeds = [0, 1, 2]
    pack = train_pack(NEAR_TIES, VIT, train, [320] * 3, seeds)
    assert train.test_seeds(seeds) == [train.test_seed + s for s in seeds]
    for k, seed in enumerate(seeds):
        alone = train_pack(
            NEAR_TIES,
            VIT,
            dataclasses.replace(train, test_seed=train.test_seed + seed, test_sets="shared"),
            [320],
            [seed],
        )
        assert np.array_equal(pack.curves["test_error"][:, k], alone.curves["test_error"][:, 0], equal_nan=True)
    shared = train_pack(NEAR_TIES, VIT, dataclasses.replace(train, test_sets="shared"), [320] * 3, seeds)
    assert not np.array_equal(shared.curves["test_error"], pack.curves["test_error"])  # the sets differ


def vote_margins(data: TokenDataConfig, n: int, seed: int) -> np.ndarray:
    return family_of(data).vote_margins(data, n, seed)


def test_vote_margins_and_per_sample_premises_are_read_from_the_samples_tokens():
    batch = sample_tokens(NEAR_TIES, 500, 7, Stream.TEST_DATA)
    relevant, confusion = ((batch.kinds == kind).sum(1).numpy() for kind in (TokenKind.RELEVANT, TokenKind.CONFUSION))
    margins = vote_margins(NEAR_TIES, 500, 7)
    assert np.array_equal(margins, relevant - confusion) and margins.min() >= 1  # losing draws are redrawn
    met = family_of(NEAR_TIES).sample_premises(NEAR_TIES, 500, 7, Stream.TEST_DATA)
    assert np.array_equal(met["tokens"], relevant >= 4) and np.array_equal(met["margin >= 2"], margins >= 2)
    assert np.array_equal(met["confusion"], confusion < relevant / (2 * np.e))
    assert 0 < met["confusion"].mean() < 1  # binomial counts: the average meets it, not every sample
    fixed = dataclasses.replace(NEAR_TIES, counts="fixed")
    assert all(v.all() for v in family_of(fixed).sample_premises(fixed, 500, 7, Stream.TEST_DATA).values())


@pytest.fixture(scope="module")
def two_draws() -> list:
    """The same 8 ViTs (seeds 0-7, the same training) scored on two draws of per-seed test sets:
    per draw its config, the pack's result, its outcomes and its records."""
    torch.set_num_threads(1)
    runs = []
    for test_seed in (1_000_003, 2_000_003):
        train = dataclasses.replace(ONE_PASS, test_sets="per_seed", test_seed=test_seed)
        result = train_pack(NEAR_TIES, VIT, train, [8 * ONE_PASS.max_steps] * 8, list(range(8)))
        records = confirmed_onwards([ModelRecord.from_dict(r) for r in result.records()])
        runs.append((train, result, outcomes_of(records), records))
    return runs


def test_near_ties_in_the_test_sets_decide_where_a_model_first_has_zero_error(two_draws):
    (train_a, a, *_), (train_b, b, *_) = two_draws
    for train in (train_a, train_b):
        assert min(vote_margins(NEAR_TIES, train.n_test, s).min() for s in train.test_seeds(list(range(8)))) == 1
    assert not np.array_equal(a.iterations_to_zero, b.iterations_to_zero)  # the test set decides zero error


@pytest.mark.parametrize("criterion", ["iterate", "first_zero"])
def test_the_ci_of_n_star_covers_the_n_star_another_draw_of_test_sets_gives(two_draws, criterion):
    (_, _, a, _), (_, _, b, _) = two_draws
    for mine, other in ((a, b), (b, a)):
        lo, hi = n_star_ci(mine, 0.5, criterion=criterion)
        star = other.n_star(0.5, criterion=criterion)
        assert star is not None and lo <= star <= hi, (criterion, lo, star, hi)


def _scored_run(train: TrainConfig, monkeypatch, whole: bool) -> tuple[list[dict], int]:
    """The records of 4 ViTs on NEAR_TIES and the test samples their scoring took; ``whole``: every
    evaluation that goes past the screen scores the whole test set (no model leaves at its first error)."""
    scored, head, rest = [], PackedModel.head, _TestScores._score_rest
    monkeypatch.setattr(
        PackedModel, "head", lambda self, H, keep, shape: scored.append(self.K * shape[0]) or head(self, H, keep, shape)
    )
    if whole:
        monkeypatch.setattr(_TestScores, "_score_rest", lambda self, m, which, exact: rest(self, m, which, which))
    result = train_pack(NEAR_TIES, VIT, train, [8 * train.max_steps] * 4, [0, 1, 2, 3])
    monkeypatch.undo()
    return result.records(), sum(scored)


def test_past_the_screen_the_near_ties_are_scored_first_and_a_model_only_to_its_first_error(monkeypatch):
    """Every evaluation's zero test error or not, and so every N, is that of scoring the whole test set
    (3,000 samples a seed, 200 in the screen), for fewer samples scored: a model that errs
    leaves the scoring at its first error, found among the near ties first. Its test error is then a
    lower bound; where an evaluation covered the whole set, its errors by vote margin add up to it."""
    torch.set_num_threads(1)
    train = dataclasses.replace(ONE_PASS, max_steps=150, n_test=3000, eval_subset=200, test_sets="per_seed")
    cut, cut_scored = _scored_run(train, monkeypatch, whole=False)
    whole, whole_scored = _scored_run(train, monkeypatch, whole=True)
    assert len(cut) == len(whole) and cut_scored < whole_scored, (cut_scored, whole_scored)
    lower = 0
    for a, b in zip(cut, whole):
        for key in ("n_train", "seed", "success", "n_first_zero", "n_stable", "iterations_to_zero", "train_loss"):
            assert a[key] == b[key], key
        assert (a["test_error"] == 0) == (b["test_error"] == 0) and a["test_error"] <= b["test_error"]
        lower += a["test_error"] < b["test_error"]
        counted = [b[name] for name in MARGIN_ERRORS]  # NaN where the screen erred: the rest was not scored
        if not np.isnan(counted[0]):
            assert sum(counted) == round(b["test_error"] * train.n_test)  # the whole set's errors, margin by margin
        if not np.isnan(a[MARGIN_ERRORS[0]]):
            assert [a[name] for name in MARGIN_ERRORS] == counted
    assert lower > 0  # some evaluations were cut short, at a lower bound
    last = [r for r in cut if r["steps"] == max(q["steps"] for q in cut if q["seed"] == r["seed"])]
    assert all(not np.isnan(r[MARGIN_ERRORS[0]]) for r in last)  # a model's last evaluation is always whole
    lost = [
        r
        for before, r in zip(cut, cut[1:])
        if r["seed"] == before["seed"] and before["test_error"] == 0 < r["test_error"]
    ]
    assert lost and all(sum(r[name] for name in MARGIN_ERRORS) == round(r["test_error"] * train.n_test) for r in lost)


def test_the_errors_where_a_seed_lost_zero_error_are_counted_by_vote_margin(two_draws):
    """errors_by_margin: every evaluation that erred right after a zero was counted on the whole test
    set, margin by margin; the report line says how many of those errors sit at near ties."""
    train, _, _, records = two_draws[0]
    lost = losing_evaluations(records)
    assert lost  # NEAR_TIES: seeds reach zero error and lose it
    for r in lost:
        assert sum(r.metrics[name] for name in MARGIN_ERRORS) == round(r.test_error * train.n_test)
    found = STATISTIC.compute(None, [CellResult(Cell("vit", {"alpha_star": 0.1}), records)])[STATISTIC.name]
    entry = found["vit alpha_star=0.1"]
    assert entry.evaluations == len(lost) and entry.seeds == len({r.seed for r in lost})
    assert sum(entry.by_margin.values()) == sum(round(r.test_error * train.n_test) for r in lost)
    assert entry.by_margin["1"] > 0  # near ties are among the errors that lose zero error
