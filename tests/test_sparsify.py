import numpy as np
import pytest

from vit_core import TokenDataConfig, TokenKind, keep_mask, sample_tokens


@pytest.fixture
def facts():
    b = sample_tokens(TokenDataConfig(n_tokens=40, alpha_star=0.25), 300, seed=0)
    return b.kinds.numpy(), b.noise_norm.numpy()


def test_all_keeps_everything(facts):
    kinds, noise = facts
    assert keep_mask(kinds, noise, "all", 0, np.random.default_rng(0)).all()


def test_random_removes_exactly_k_per_sample(facts):
    kinds, noise = facts
    keep = keep_mask(kinds, noise, "random", 7, np.random.default_rng(0))
    assert ((~keep).sum(1) == 7).all()
    removed_kinds = kinds[~keep]
    assert (removed_kinds == TokenKind.RELEVANT).any()  # random removal does not look at kinds


def test_label_irrelevant_removes_only_irrelevant_tokens(facts):
    kinds, noise = facts
    keep = keep_mask(kinds, noise, "label_irrelevant", 12, np.random.default_rng(0))
    assert ((~keep).sum(1) == 12).all()
    assert (kinds[~keep] == TokenKind.IRRELEVANT).all()


def test_label_irrelevant_removes_all_when_fewer_than_k(facts):
    kinds, noise = facts
    n_irr = (kinds == TokenKind.IRRELEVANT).sum(1)
    keep = keep_mask(kinds, noise, "label_irrelevant", 39, np.random.default_rng(0))
    assert ((~keep).sum(1) == n_irr).all()
    assert (kinds[keep] != TokenKind.IRRELEVANT).all()


def test_noisiest_removes_the_k_largest_noise_norms(facts):
    kinds, noise = facts
    keep = keep_mask(kinds, noise, "noisiest", 5, np.random.default_rng(0))
    assert ((~keep).sum(1) == 5).all()
    assert (noise[~keep].reshape(-1, 5).min(1) >= np.where(keep, noise, -1).max(1)).all()


def test_sparsified_data_carries_its_mask():
    b = sample_tokens(TokenDataConfig(n_tokens=40, sparsify="noisiest", sparsify_k=4), 64, seed=0)
    assert ((~b.keep).sum(1) == 4).all()
