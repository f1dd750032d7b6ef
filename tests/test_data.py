import dataclasses
import hashlib
import math

import numpy as np
import pytest
import torch

from vit_core import ConfigError, TokenDataConfig, TokenKind, make_patterns, sample_tokens
from vit_core.jelassi2022.configs import SpatialDataConfig
from vit_core.jelassi2022.spatial import sample_patches
from vit_core.li2023.configs import binomial_kept
from vit_core.li2023.oracle import oracle_rules
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


@pytest.mark.parametrize("counts", ["fixed", "binomial", "premised"])
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


# Digests of samples made before the noisy-token, teacher and spurious-set options existed (99b5b27):
# labels, kinds, keep masks, Paper A's noise norms (all numpy-made, exact) and the sign bit of every
# token coordinate (the torch noise directions, robust to a last-bit difference between CPUs).
BEFORE_OPTIONS = {
    "a_default": (lambda: sample_tokens(TokenDataConfig(), 300, 3), "a7f02a1c734695fb"),
    "a_binomial_noisiest": (
        lambda: sample_tokens(
            TokenDataConfig(
                counts="binomial",
                tau=1.0,
                sparsify="noisiest",
                sparsify_k=5,
                dim=40,
                n_patterns=10,
                n_tokens=120,
                alpha_star=0.1,
            ),
            300,
            5,
            start=70,
        ),
        "1dc3a9beb9bca9a2",
    ),
    "a_random": (lambda: sample_tokens(TokenDataConfig(sparsify="random", sparsify_k=7), 200, 1), "de4a07272a8895ed"),
    "b_threshold": (lambda: sample_patches(SpatialDataConfig(), 300, 3), "606c9aebcb3f89ec"),
    "b_cnn": (
        lambda: sample_patches(
            SpatialDataConfig(labels="cnn", n_patches=16, set_size=4, partition="blocks", dim=8, teacher_width=1),
            300,
            3,
        ),
        "0c3ecdb869ae3efc",
    ),
}


@pytest.mark.parametrize("name", BEFORE_OPTIONS)
def test_default_options_leave_the_samples_as_they_were(name):
    make, expected = BEFORE_OPTIONS[name]
    batch = make()
    digest = hashlib.sha256()
    parts = [batch.labels, batch.kinds, batch.keep] + ([batch.noise_norm] if name.startswith("a") else [])
    for part in parts:
        digest.update(part.numpy().tobytes())
    digest.update(np.signbit(batch.tokens.numpy()).tobytes())
    assert digest.hexdigest()[:16] == expected


@pytest.mark.parametrize("kind", ["any", "irrelevant", "relevant", "confusion"])
def test_noisy_tokens_carry_noise_of_norm_tau_big_among_their_kind(kind):
    cfg = TokenDataConfig(n_tokens=60, alpha_star=0.2, tau=0.3, noisy_fraction=0.25, tau_big=2.0, noisy_kind=kind)
    b = sample_tokens(cfg, 2000, seed=4)
    P = torch.as_tensor(make_patterns(cfg), dtype=torch.float32)
    own = torch.where(b.labels > 0, 0, 1).unsqueeze(1)
    pattern_of = {TokenKind.RELEVANT: own, TokenKind.CONFUSION: 1 - own}
    irrelevant = (b.kinds == TokenKind.IRRELEVANT).numpy()
    noise = b.tokens.clone()
    for token_kind, index in pattern_of.items():  # subtract each token's own pattern (noise can exceed 1/sqrt(2))
        mask = b.kinds == token_kind
        noise[mask] -= P[index.expand_as(mask)[mask]]
    noisy = (b.noise_norm == 2.0).numpy()
    measured = noise.norm(dim=-1).numpy()
    assert np.allclose(measured[noisy & ~irrelevant], 2.0, atol=1e-5)  # the norm is the tokens' own
    square_norms = (b.tokens.numpy()[noisy & irrelevant] ** 2).sum(-1)  # 1 + tau_big^2 on average: noise of a uniform
    if kind in ("any", "irrelevant"):  # direction is orthogonal to the pattern in expectation
        assert square_norms.mean() == pytest.approx(5.0, abs=0.05)
    assert (b.noise_norm.numpy()[~noisy] <= 0.3 + 1e-6).all()
    kinds = b.kinds.numpy()
    per_kind = {"relevant": 12, "confusion": 2, "irrelevant": 46}  # fixed counts at L = 60, alpha* = 0.2
    assert (noisy.sum(1) == (15 if kind == "any" else min(15, per_kind[kind]))).all()
    if kind == "any":  # chosen uniformly: each kind is noisy in proportion to its count
        for token_kind, count in zip(TokenKind, (46, 12, 2)):
            assert (noisy & (kinds == token_kind)).sum() / noisy.sum() == pytest.approx(count / 60, abs=0.01)
    else:
        assert (kinds[noisy] == TokenKind[kind.upper()]).all()
    removed = sample_tokens(dataclasses.replace(cfg, sparsify="noisiest", sparsify_k=noisy.sum(1)[0]), 2000, 4)
    assert np.array_equal(~removed.keep.numpy(), noisy)  # noisiest sparsification removes exactly them


def test_noisy_options_are_checked():
    with pytest.raises(ConfigError) as error:
        TokenDataConfig(tau=0.5, tau_big=0.4, noisy_fraction=0.1)
    assert error.value.field == "tau_big"
    with pytest.raises(ConfigError) as error:
        TokenDataConfig(noisy_fraction=1.5)
    assert error.value.field == "noisy_fraction"
    assert TokenDataConfig(tau=4.0).tau_big < 4.0  # without noisy tokens, tau_big is not used or checked


def _noise_directions(cfg: TokenDataConfig, batch) -> torch.Tensor:
    """Each token's noise direction (tokens minus their pattern, made unit), on the CPU: (n·L, d)."""
    batch = batch.to("cpu")
    P = torch.as_tensor(make_patterns(cfg), dtype=torch.float32)
    noise = (batch.tokens - P[_nearest_pattern(cfg, batch)]).flatten(0, 1)
    return noise / noise.norm(dim=-1, keepdim=True)


def _same_uniform_directions(a: torch.Tensor, b: torch.Tensor) -> None:
    """Both sets of unit vectors look uniform on the sphere, alike: per coordinate a mean of 0 and
    a second moment of 1/d (within 5 standard errors), and no direction shared."""
    n, d = a.shape
    for u in (a, b):
        assert u.mean(0).abs().max() < 5 / math.sqrt(n * d)
        second = (u * u).mean(0)  # each coordinate's u_i^2: mean 1/d, variance ~2/d^2
        assert (second - 1 / d).abs().max() < 5 * math.sqrt(2 / n) / d
    assert not torch.isclose(a, b, atol=1e-4).all(-1).any()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_samples_made_on_a_gpu_are_the_hosts_but_for_their_noise_directions():
    """Off the CPU the noise comes from the device's generator: the tokens are made there, their
    labels, kinds, keep masks and noise norms are the host's, their noise directions other draws
    of the same uniform distribution."""
    cfg = TokenDataConfig(n_tokens=120, dim=40, n_patterns=10, alpha_star=0.1, counts="binomial")
    host, gpu = sample_tokens(cfg, 2000, 3), sample_tokens(cfg, 2000, 3, device="cuda")
    assert gpu.tokens.device.type == "cuda"
    for name in ("labels", "kinds", "keep", "noise_norm"):
        assert torch.equal(getattr(host, name), getattr(gpu, name).cpu()), name
    _same_uniform_directions(_noise_directions(cfg, host), _noise_directions(cfg, gpu))


def test_the_direction_check_tells_two_seeds_apart_from_a_skewed_sample():
    """_same_uniform_directions, run on two host seeds (other draws, the same distribution), passes,
    and fails where one set's noise leans towards a coordinate."""
    cfg = TokenDataConfig(n_tokens=120, dim=40, n_patterns=10, alpha_star=0.1)
    a, b = (_noise_directions(cfg, sample_tokens(cfg, 2000, seed)) for seed in (3, 4))
    _same_uniform_directions(a, b)
    skewed = torch.nn.functional.normalize(b + 0.05 * torch.eye(40)[0], dim=-1)
    with pytest.raises(AssertionError):
        _same_uniform_directions(a, skewed)


def test_binomial_counts_mean_fraction_is_the_effective_alpha_star():
    """Binomial counts keep the draws where label-relevant tokens win the vote, which raises their
    mean above alpha* (by 2% at alpha* = 0.05, L = 120); effective_alpha_star is that mean, exactly."""
    data = TokenDataConfig(n_tokens=120, dim=40, n_patterns=10, alpha_star=0.05, counts="binomial")
    kinds = sample_tokens(data, 20_000, seed=3).kinds
    fraction = (kinds == TokenKind.RELEVANT).float().mean().item()
    sem = (kinds == TokenKind.RELEVANT).float().mean(-1).std().item() / 20_000**0.5
    assert abs(fraction - data.effective_alpha_star) < 4 * sem
    assert data.effective_alpha_star == pytest.approx(0.05113, abs=1e-5)  # draws that lose the vote are redrawn
    wide = TokenDataConfig(n_tokens=120, dim=40, n_patterns=10, alpha_star=0.3, counts="binomial")
    assert wide.effective_alpha_star == pytest.approx(0.3, abs=1e-6)  # it never loses the vote there


def test_premised_counts_keep_only_samples_that_meet_the_premises_on_their_own():
    """Premised counts are binomial draws kept only where the sample itself has at least 4 relevant
    tokens, confusion below 1/(2e) of them and no near tie; effective_alpha_star is their mean."""
    data = TokenDataConfig(n_tokens=120, dim=8, n_patterns=4, tau=0.02, alpha_star=0.05, counts="premised")
    kinds = sample_tokens(data, 20_000, seed=3).kinds
    relevant, confusion = ((kinds == kind).sum(1).numpy() for kind in (TokenKind.RELEVANT, TokenKind.CONFUSION))
    assert (relevant >= 4).all() and (confusion < relevant / (2 * np.e)).all() and (relevant - confusion >= 2).all()
    sem = relevant.std() / 20_000**0.5
    assert abs(relevant.mean() - 120 * data.effective_alpha_star) < 4 * sem
    binomial = dataclasses.replace(data, counts="binomial")
    assert data.effective_alpha_star > binomial.effective_alpha_star  # the kept draws have more relevant tokens
    assert binomial_kept(120, 0.05, data.confusion, "premised")[0] == pytest.approx(0.528, abs=0.001)


def test_a_reading_that_keeps_almost_no_draws_is_refused_by_name():
    with pytest.raises(ConfigError, match="counts"):
        TokenDataConfig(n_tokens=10, n_patterns=4, dim=8, alpha_star=0.02, counts="premised")


def test_the_oracle_mean_token_rule_separates_fixed_counts_widely_and_binomial_ones_barely():
    fixed = oracle_rules(TokenDataConfig(n_tokens=120, dim=40, n_patterns=10, alpha_star=0.05), n=2000)
    binomial = oracle_rules(
        TokenDataConfig(n_tokens=120, dim=40, n_patterns=10, alpha_star=0.05, counts="binomial"), n=2000
    )
    assert fixed["mean_token_error"] == 0 and fixed["mean_token_margin_sigma"] > 5
    assert binomial["mean_token_margin_sigma"] < 1  # a sample with one relevant token more than confusion ones
    for rules in (fixed, binomial):  # one token is relevant with chance 0.05: reading it alone is near chance
        assert 0.4 < rules["single_token_error"] < 0.55
