import math

import pytest
import torch

from vit_core import (
    ModelConfig,
    ShallowViT,
    TokenDataConfig,
    TrainConfig,
    build_model,
    hinge_loss,
    make_patterns,
    sample_tokens,
    train_pack,
)
from vit_core.fields import ConfigError
from vit_core.li2023.family import Li2023
from vit_core.li2023.kinds import KINDS, Kind
from vit_core.li2023.models import PACKS, HiddenReadout, initial_errors
from vit_core.packed import attention_mass
from vit_core.training import sample

DATA = TokenDataConfig(dim=12, n_patterns=8, n_tokens=20, alpha_star=0.3)
CONFIGS = [
    ModelConfig(kind="vit", width=16),
    ModelConfig(kind="vit", width=16, init="random", attn_dim=6, output_matrix=False),
    ModelConfig(kind="vit", width=16, value_dim=10, readout="per_token"),
    ModelConfig(kind="cnn", width=16),
]


def _inputs(K, B=5, sparsify="all"):
    data = TokenDataConfig(**{**vars(DATA), "sparsify": sparsify, "sparsify_k": 4 if sparsify != "all" else 0})
    b = sample_tokens(data, K * B, seed=0)
    return b.tokens.view(K, B, *b.tokens.shape[1:]), b.labels.view(K, B), b.keep.view(K, B, -1)


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"{c.kind}-{c.init}-{c.output_matrix}-{c.attn_dim}-{c.readout}")
@pytest.mark.parametrize("sparsify", ["all", "noisiest"])
def test_pack_equals_separate_models_in_outputs_and_gradients(cfg, sparsify):
    seeds = [3, 11, 5, 8]
    X, y, keep = _inputs(len(seeds), sparsify=sparsify)
    keep = None if sparsify == "all" else keep
    pack = build_model(cfg, make_patterns(DATA), seeds, DATA.n_tokens)
    F, _ = pack(X, keep)
    hinge_loss(F, y).mean(-1).sum().backward()
    for k, seed in enumerate(seeds):
        alone = build_model(cfg, make_patterns(DATA), [seed], DATA.n_tokens)
        f, _ = alone(X[k : k + 1], None if keep is None else keep[k : k + 1])
        hinge_loss(f, y[k : k + 1]).mean().backward()
        torch.testing.assert_close(F[k], f[0], atol=1e-5, rtol=1e-5)
        for (name, p), (_, q) in zip(pack.named_parameters(), alone.named_parameters()):
            torch.testing.assert_close(p.grad[k], q.grad[0], atol=1e-5, rtol=1e-5, msg=f"grad of {name}")


@pytest.mark.parametrize("cfg", CONFIGS[:1] + CONFIGS[3:], ids=["vit", "cnn"])
def test_shared_inputs_equal_per_model_copies(cfg):
    pack = build_model(cfg, make_patterns(DATA), [0, 1, 2], DATA.n_tokens)
    X, _, keep = _inputs(1, B=7, sparsify="random")
    shared, _ = pack(X[0], keep[0])
    copied, _ = pack(X.expand(3, -1, -1, -1), keep.expand(3, -1, -1))
    torch.testing.assert_close(shared, copied, atol=1e-6, rtol=1e-6)


def test_vit_matches_equation_1_written_out():
    """Without W_O: F(X) = 1/L sum_l a^T ReLU(W_V X softmax(X^T W_K^T W_Q x_l)), one sample, the paper's layout."""
    cfg = ModelConfig(kind="vit", width=16, init="random", qk_gain=2.0, output_matrix=False)
    model = build_model(cfg, make_patterns(DATA), [4], DATA.n_tokens)
    X, _, _ = _inputs(1, B=1)
    F, _ = model(X)
    Xp = X[0, 0].T.double()  # d x L, the paper's layout
    WQ, WK, WV, a = (t[0].double() for t in (model.W_Q, model.W_K, model.W_V, model.a))
    terms = [a @ torch.relu(WV @ Xp @ torch.softmax(Xp.T @ WK.T @ WQ @ Xp[:, col], 0)) for col in range(Xp.shape[1])]
    torch.testing.assert_close(F[0, 0].double(), torch.stack(terms).mean(), atol=1e-5, rtol=1e-5)


def _by_hand(kind: str):
    """A model of two tokens in R^2 and width 2 with the parameters set by hand: W_Q = W_K = W_V = I,
    W_O = [[2, -1], [0, 1]], readouts a_(1) = (1, -1)/sqrt(2), a_(2) = (1, 1)/sqrt(2)."""
    cfg = ModelConfig(kind=kind, width=2, init="random", readout="per_token")
    model = build_model(cfg, torch.eye(2), [0], n_tokens=2).double()
    with torch.no_grad():
        for name, value in model.named_parameters():
            value.copy_(torch.tensor([[[2.0, -1.0], [0.0, 1.0]]]) if name == "W_O" else torch.eye(2).unsqueeze(0))
        model.a.copy_(torch.tensor([[[1.0, -1.0], [1.0, 1.0]]], dtype=torch.float64) / 2**0.5)
    return model


def test_equation_1_with_output_matrix_and_per_token_readouts_by_hand():
    """Tokens x_1 = e_1, x_2 = e_2: scores x_l . x_j = [l = j], so query l puts p = e/(e+1) on itself and
    q = 1/(e+1) on the other token. ViT: z_1 = (p, q), W_O z_1 = (2p - q, q), a_(1) reads (2p - 2q)/sqrt(2);
    z_2 = (q, p), W_O z_2 = (2q - p, p) whose first entry is negative (ReLU: 0), a_(2) reads p/sqrt(2);
    F = (3p - 2q) / (2 sqrt(2)) = 0.5852. CNN (no attention): W_O e_1 = (2, 0), a_(1) reads 2/sqrt(2); W_O e_2 =
    (-1, 1) -> (0, 1), a_(2) reads 1/sqrt(2); F = 3 / (2 sqrt(2)) = 1.0607."""
    X = torch.eye(2, dtype=torch.float64).view(1, 1, 2, 2)
    p, q = math.e / (math.e + 1), 1 / (math.e + 1)
    vit, _ = _by_hand("vit")(X)
    cnn, _ = _by_hand("cnn")(X)
    assert vit.item() == pytest.approx((3 * p - 2 * q) / (2 * math.sqrt(2)), abs=1e-12)
    assert vit.item() == pytest.approx(0.58523, abs=1e-5)
    assert cnn.item() == pytest.approx(3 / (2 * math.sqrt(2)), abs=1e-12)


def test_per_token_readouts_differ_by_position_and_shared_ones_do_not():
    shared = build_model(ModelConfig(readout="shared"), make_patterns(DATA), [0, 1], DATA.n_tokens)
    per_token = build_model(ModelConfig(readout="per_token"), make_patterns(DATA), [0, 1], DATA.n_tokens)
    assert shared.a.shape == (2, ModelConfig().width)
    assert per_token.a.shape == (2, DATA.n_tokens, ModelConfig().width)
    assert not torch.equal(per_token.a[0, 0], per_token.a[0, 1])
    torch.testing.assert_close(per_token.a.abs(), torch.full_like(per_token.a, ModelConfig().width ** -0.5))


def test_removed_tokens_are_neither_queries_nor_keys():
    cfg = ModelConfig(kind="vit", width=16)
    model = build_model(cfg, make_patterns(DATA), [0], DATA.n_tokens)
    X, _, keep = _inputs(1, B=3, sparsify="random")
    F, _ = model(X, keep)
    for b in range(3):
        kept = X[:, b : b + 1, keep[0, b]]
        f, _ = model(kept)
        torch.testing.assert_close(F[0, b], f[0, 0], atol=1e-5, rtol=1e-5)


def test_output_vector_is_fixed_plus_minus_one_over_sqrt_m():
    model = build_model(ModelConfig(width=64), make_patterns(DATA), [0, 1], DATA.n_tokens)
    assert torch.allclose(model.a.abs(), torch.full_like(model.a, 64**-0.5))
    assert "a" not in dict(model.named_parameters())
    assert 0 < (model.a > 0).float().mean() < 1


def test_aligned_init_attends_to_the_querys_own_pattern():
    """With W_Q = W_K close to a projector on the patterns, a token's top key shares its pattern."""
    model = build_model(ModelConfig(qk_gain=2.0, init_error=0.01), make_patterns(DATA), [0], DATA.n_tokens)
    b = sample_tokens(TokenDataConfig(**{**vars(DATA), "tau": 0.05}), 4, seed=0)
    _, attn = model(b.tokens)
    P = torch.as_tensor(make_patterns(DATA), dtype=torch.float32)
    pattern = (b.tokens @ P.T).argmax(-1)  # (4, L)
    top = attn[0].argmax(-1)  # (4, L) index of each query's heaviest key
    assert (torch.gather(pattern, 1, top) == pattern).float().mean() > 0.99


def test_hinge_loss_gradient_is_the_subgradient():
    F = torch.tensor([2.0, 0.5, -1.0, 0.99], requires_grad=True)
    y = torch.tensor([1.0, 1.0, 1.0, -1.0])
    hinge_loss(F, y).sum().backward()
    expected = torch.where(y * F.detach() < 1, -y, torch.zeros_like(y))
    torch.testing.assert_close(F.grad, expected)


@pytest.mark.parametrize("cfg", [CONFIGS[0], CONFIGS[2], CONFIGS[3]], ids=["vit", "vit-WO", "cnn"])
def test_autograd_gradients_against_finite_differences(cfg):
    model = build_model(cfg, make_patterns(DATA), [0, 1], DATA.n_tokens).double()
    X, y, keep = _inputs(2, B=3, sparsify="label_irrelevant")
    X, y = X.double(), y.double()
    names = [name for name, _ in model.named_parameters()]

    def loss(*values):
        F, _ = torch.func.functional_call(model, dict(zip(names, values)), (X, keep))
        return hinge_loss(F, y + 10.0)  # margin far from the kink, so the loss is smooth here

    assert torch.autograd.gradcheck(loss, [p.detach().clone().requires_grad_() for p in model.parameters()])


@pytest.mark.parametrize("sparse", [False, True], ids=["all tokens", "sparsified"])
@pytest.mark.parametrize(
    "model_cfg",
    [
        ModelConfig(kind="vit"),
        ModelConfig(kind="vit", width=10),
        ModelConfig(kind="vit", output_matrix=True, value_dim=8),
    ],
    ids=["values wider than tokens", "values narrower", "output matrix"],
)
def test_the_vits_test_path_gives_its_forward_outputs_and_attention_mass(sparse, model_cfg):
    """ShallowViT.test_outputs (one fused attention, the values projected first where they are
    narrower than the tokens, the mass from a value column) agrees with forward and the full
    attention map to float32 rounding, with and without a token set S^n."""
    data = TokenDataConfig(
        dim=12,
        n_patterns=8,
        n_tokens=40,
        alpha_star=0.2,
        counts="binomial",
        **({"sparsify": "random", "sparsify_k": 5} if sparse else {}),
    )
    test = sample(data, 64, 3)
    model = build_model(model_cfg, make_patterns(data), [0, 1, 2], data.n_tokens)
    keep = test.keep if sparse else None
    relevant = (test.kinds == 1).float() * (1 if keep is None else keep)
    F, attn = model(test.tokens, keep)
    fast, mass = model.test_outputs(test.tokens, keep, relevant)
    torch.testing.assert_close(fast, F, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(mass, attention_mass(attn, relevant), rtol=1e-5, atol=1e-6)


def test_an_unknown_model_kind_is_an_error_naming_the_field_not_another_model():
    with pytest.raises(ConfigError) as error:
        ModelConfig(kind="mlp")
    assert (error.value.field, error.value.value) == ("kind", "mlp") and "vit, cnn" in error.value.allowed


class _RenamedViT(ShallowViT):
    """A model kind only the test below declares: the ViT's network under a class of its own."""


def test_a_kind_declared_once_with_attention_is_built_checked_costed_and_recorded_as_the_vit(monkeypatch):
    """A kind with attention declared in vit_core.li2023.kinds.KINDS, its class in models.PACKS (here, by
    the test), is allowed by ModelConfig and the family, gets W_Q and W_K, the aligned init's check of attn_dim, delta
    and the ViT's cost, and train_pack records its attention mass: the ViT's numbers, as its network is."""
    monkeypatch.setitem(KINDS, "renamed_vit", Kind("the ViT, declared by a test", attention=True))
    monkeypatch.setitem(PACKS, "renamed_vit", _RenamedViT)
    new, vit = ModelConfig(kind="renamed_vit", width=16), ModelConfig(kind="vit", width=16)
    patterns = make_patterns(DATA)
    assert Li2023.kinds() == ("vit", "cnn", "renamed_vit")
    pack = build_model(new, patterns, [0, 1], DATA.n_tokens)
    assert type(pack) is _RenamedViT and {"W_Q", "W_K"} <= dict(pack.named_parameters()).keys()
    with pytest.raises(ConfigError) as error:
        build_model(ModelConfig(kind="renamed_vit", attn_dim=4), patterns, [0], DATA.n_tokens)
    assert error.value.field == "attn_dim"
    errors = initial_errors(new, patterns, [0, 1], DATA.n_tokens)
    assert "delta" in errors and errors == initial_errors(vit, patterns, [0, 1], DATA.n_tokens)
    assert (
        Li2023().sample_cost(DATA, new)
        == Li2023().sample_cost(DATA, vit)
        > Li2023().sample_cost(DATA, ModelConfig(kind="cnn", width=16))
    )
    train = TrainConfig(max_steps=40, eval_every=10, n_test=60, eval_subset=30)
    ours, vits = (train_pack(DATA, cfg, train, [16, 32], [0, 1]) for cfg in (new, vit))
    assert all(math.isfinite(r["attention_mass"]) for r in ours.records())
    assert ours.records() == vits.records()
    torch.testing.assert_close(ours.curves["attention_mass"], vits.curves["attention_mass"], equal_nan=True)


@pytest.mark.parametrize("cfg", [c for c in CONFIGS if c.output_matrix], ids=lambda c: f"{c.kind}-{c.readout}")
def test_the_hidden_layer_made_model_by_model_gives_the_batched_numbers(cfg):
    """HiddenReadout (a CPU's head) against the batched hidden layer: outputs and both gradients
    equal to float32's rounding. Bits may differ between the two forms (a layout, a BLAS); whether a
    change that moves them keeps the answer is the contract's to say (`vitsweep compare`,
    `make bench-main-job`), not this test's."""
    pack = build_model(cfg, make_patterns(DATA), [3, 11, 5, 8], DATA.n_tokens)
    values = torch.randn(pack.K, 7 * DATA.n_tokens, pack.W_O.shape[-1], generator=torch.Generator().manual_seed(0))
    grad_out = torch.randn(pack.K, 7 * DATA.n_tokens, generator=torch.Generator().manual_seed(1))
    got = []
    for readout in (lambda v: HiddenReadout.apply(v, pack.W_O, pack.a), pack.hidden_readout):
        v = values.clone().requires_grad_()
        pack.zero_grad(set_to_none=True)
        out = readout(v)
        out.backward(grad_out)
        got.append((out.detach(), v.grad, pack.W_O.grad.clone()))
    for fused, batched, name in zip(*got, ("outputs", "gradient of the values", "gradient of W_O")):
        torch.testing.assert_close(fused, batched, rtol=1e-5, atol=1e-6, msg=name)
    assert got[0][2].abs().sum() > 0  # a gradient that flows, not two zeros
