"""A test set per seed (TrainConfig.test_sets "per_seed"): each model is scored on its own seed's test
set, so that a CI over seeds carries the test set too; near-tie test samples (vote margin 1) decide
zero error, and the CI of N* from one draw of test sets covers the N* another draw gives."""

import dataclasses

import numpy as np
import pytest
import torch

from services.analysis import n_star_ci
from services.results import ModelRecord, confirmed_onwards, outcomes_of
from vit_core import ModelConfig, TokenDataConfig, TrainConfig, train_pack
from vit_core.data import sample_tokens
from vit_core.family import family_of
from vit_core.layout import TokenKind
from vit_core.seeding import Stream

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
    """The same 8 ViTs (seeds 0-7, the same training) scored on two draws of per-seed test sets."""
    torch.set_num_threads(1)
    runs = []
    for test_seed in (1_000_003, 2_000_003):
        train = dataclasses.replace(ONE_PASS, test_sets="per_seed", test_seed=test_seed)
        result = train_pack(NEAR_TIES, VIT, train, [8 * ONE_PASS.max_steps] * 8, list(range(8)))
        records = confirmed_onwards([ModelRecord.from_dict(r) for r in result.records()])
        runs.append((train, result, outcomes_of(records)))
    return runs


def test_near_ties_in_the_test_sets_decide_where_a_model_first_has_zero_error(two_draws):
    (train_a, a, _), (train_b, b, _) = two_draws
    for train in (train_a, train_b):
        assert min(vote_margins(NEAR_TIES, train.n_test, s).min() for s in train.test_seeds(list(range(8)))) == 1
    assert not np.array_equal(a.iterations_to_zero, b.iterations_to_zero)  # the test set decides zero error


@pytest.mark.parametrize("criterion", ["iterate", "first_zero"])
def test_the_ci_of_n_star_covers_the_n_star_another_draw_of_test_sets_gives(two_draws, criterion):
    (_, _, a), (_, _, b) = two_draws
    for mine, other in ((a, b), (b, a)):
        lo, hi = n_star_ci(mine, 0.5, criterion=criterion)
        star = other.n_star(0.5, criterion=criterion)
        assert star is not None and lo <= star <= hi, (criterion, lo, star, hi)
