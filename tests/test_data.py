import numpy as np
import pytest
import torch

from vit_core import TokenDataConfig, TokenKind, make_patterns, sample_tokens
from vit_core.seeding import Stream


def _nearest_pattern(cfg, batch):
    P = torch.as_tensor(make_patterns(cfg), dtype=torch.float32)
    return (batch.tokens @ P.T).argmax(-1)


@pytest.mark.parametrize("counts", ["fixed", "binomial"])
def test_statistics_match_alpha_star_alpha_confusion_and_tau(counts):
    cfg = TokenDataConfig(n_tokens=100, alpha_star=0.2, confusion_ratio=1 / 6, tau=0.3, counts=counts)
    b = sample_tokens(cfg, 4000, seed=3)
    rel = (b.kinds == TokenKind.RELEVANT).float().mean().item()
    conf = (b.kinds == TokenKind.CONFUSION).float().mean().item()
    assert rel == pytest.approx(0.2, abs=0.01)
    # fixed: round(0.0333 * 100) = 3 tokens; binomial: mean 3.33 less the few draws rejected for a tie
    assert conf == pytest.approx(0.03 if counts == "fixed" else cfg.confusion, abs=0.004)
    assert b.noise_norm.max().item() <= 0.3 + 1e-6
    assert b.noise_norm.mean().item() == pytest.approx(0.15, abs=0.005)  # uniform on [0, tau]
    assert (b.labels == 1).float().mean().item() == pytest.approx(0.5, abs=0.03)


@pytest.mark.parametrize("counts", ["fixed", "binomial"])
def test_labels_are_the_majority_vote_and_kinds_match_patterns(counts):
    cfg = TokenDataConfig(alpha_star=0.25, counts=counts, tau=0.3)
    b = sample_tokens(cfg, 500, seed=1)
    pattern = _nearest_pattern(cfg, b)  # tau < 1/sqrt(2): the nearest pattern is the token's own
    n_plus = (pattern == 0).sum(-1)
    n_minus = (pattern == 1).sum(-1)
    assert torch.equal(b.labels, torch.where(n_plus > n_minus, 1.0, -1.0))
    own = torch.where(b.labels > 0, 0, 1).unsqueeze(1)
    assert torch.equal(b.kinds == TokenKind.RELEVANT, pattern == own)
    assert torch.equal(b.kinds == TokenKind.CONFUSION, pattern == 1 - own)
    assert torch.equal(b.kinds == TokenKind.IRRELEVANT, pattern >= 2)


def test_noise_is_tokens_minus_their_pattern():
    cfg = TokenDataConfig(tau=0.5)
    b = sample_tokens(cfg, 50, seed=2)
    P = torch.as_tensor(make_patterns(cfg), dtype=torch.float32)
    noise = b.tokens - P[_nearest_pattern(cfg, b)]
    torch.testing.assert_close(noise.norm(dim=-1), b.noise_norm, atol=1e-5, rtol=0)


def test_orthonormal_patterns():
    P = make_patterns(TokenDataConfig(dim=30, n_patterns=12))
    np.testing.assert_allclose(P @ P.T, np.eye(12), atol=1e-12)


def test_deterministic_per_seed_nested_in_n_and_distinct_across_seeds_and_streams():
    cfg = TokenDataConfig()
    a, b = sample_tokens(cfg, 150, seed=7), sample_tokens(cfg, 150, seed=7)
    for name in vars(a):
        assert torch.equal(getattr(a, name), getattr(b, name))
    small = sample_tokens(cfg, 40, seed=7)
    assert torch.equal(small.tokens, a.tokens[:40])
    assert not torch.equal(sample_tokens(cfg, 40, seed=8).tokens, small.tokens)
    assert not torch.equal(sample_tokens(cfg, 40, seed=7, stream=Stream.TEST_DATA).tokens, small.tokens)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"alpha_star": 0.0}, "alpha_star"),
        ({"alpha_star": 1.0}, "alpha_star"),
        ({"alpha_star": 0.6, "alpha_confusion": 0.5}, "alpha_confusion"),
        ({"alpha_star": 0.3, "alpha_confusion": 0.3}, "alpha_confusion"),
        ({"alpha_star": 0.005, "n_tokens": 60}, "alpha_star"),
        ({"alpha_star": 0.025, "alpha_confusion": 0.02, "n_tokens": 100}, "alpha_confusion"),
        ({"dim": 10, "n_patterns": 20}, "dim"),
        ({"n_patterns": 2}, "n_patterns"),
        ({"tau": -0.1}, "tau"),
        ({"sparsify": "random", "sparsify_k": 60}, "sparsify_k"),
        ({"sparsify": "all", "sparsify_k": 3}, "sparsify_k"),
    ],
)
def test_invalid_parameters_name_the_field(kwargs, field):
    with pytest.raises(ValueError, match=rf"^{field}="):
        TokenDataConfig(**kwargs)


def test_effective_alpha_star_follows_rounding():
    assert TokenDataConfig(alpha_star=0.27, n_tokens=30).effective_alpha_star == pytest.approx(8 / 30)
