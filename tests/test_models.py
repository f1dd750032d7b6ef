import pytest
import torch

from vit_core import ModelConfig, TokenDataConfig, build_model, hinge_loss, make_patterns, sample_tokens

DATA = TokenDataConfig(dim=12, n_patterns=8, n_tokens=20, alpha_star=0.3)
CONFIGS = [
    ModelConfig(kind="vit", width=16),
    ModelConfig(kind="vit", width=16, init="random", attn_dim=6),
    ModelConfig(kind="vit", width=16, output_matrix=True, value_dim=10),
    ModelConfig(kind="cnn", width=16),
]


def _inputs(K, B=5, sparsify="all"):
    data = TokenDataConfig(**{**vars(DATA), "sparsify": sparsify, "sparsify_k": 4 if sparsify != "all" else 0})
    b = sample_tokens(data, K * B, seed=0)
    return b.tokens.view(K, B, *b.tokens.shape[1:]), b.labels.view(K, B), b.keep.view(K, B, -1)


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"{c.kind}-{c.init}-{c.output_matrix}-{c.attn_dim}")
@pytest.mark.parametrize("sparsify", ["all", "noisiest"])
def test_pack_equals_separate_models_in_outputs_and_gradients(cfg, sparsify):
    seeds = [3, 11, 5, 8]
    X, y, keep = _inputs(len(seeds), sparsify=sparsify)
    keep = None if sparsify == "all" else keep
    pack = build_model(cfg, make_patterns(DATA), seeds)
    F, _ = pack(X, keep)
    hinge_loss(F, y).mean(-1).sum().backward()
    for k, seed in enumerate(seeds):
        alone = build_model(cfg, make_patterns(DATA), [seed])
        f, _ = alone(X[k : k + 1], None if keep is None else keep[k : k + 1])
        hinge_loss(f, y[k : k + 1]).mean().backward()
        torch.testing.assert_close(F[k], f[0], atol=1e-5, rtol=1e-5)
        for (name, p), (_, q) in zip(pack.named_parameters(), alone.named_parameters()):
            torch.testing.assert_close(p.grad[k], q.grad[0], atol=1e-5, rtol=1e-5, msg=f"grad of {name}")


@pytest.mark.parametrize("cfg", CONFIGS[:1] + CONFIGS[3:], ids=["vit", "cnn"])
def test_shared_inputs_equal_per_model_copies(cfg):
    pack = build_model(cfg, make_patterns(DATA), [0, 1, 2])
    X, _, keep = _inputs(1, B=7, sparsify="random")
    shared, _ = pack(X[0], keep[0])
    copied, _ = pack(X.expand(3, -1, -1, -1), keep.expand(3, -1, -1))
    torch.testing.assert_close(shared, copied, atol=1e-6, rtol=1e-6)


def test_vit_matches_equation_1_written_out():
    """F(X) = 1/L sum_l a^T ReLU(W_V X softmax(X^T W_K^T W_Q x_l)) for one sample, in the paper's layout."""
    cfg = ModelConfig(kind="vit", width=16, init="random", qk_gain=2.0)
    model = build_model(cfg, make_patterns(DATA), [4])
    X, _, _ = _inputs(1, B=1)
    F, _ = model(X)
    Xp = X[0, 0].T.double()  # d x L, the paper's layout
    WQ, WK, WV, a = (t[0].double() for t in (model.W_Q, model.W_K, model.W_V, model.a))
    terms = [a @ torch.relu(WV @ Xp @ torch.softmax(Xp.T @ WK.T @ WQ @ Xp[:, col], 0)) for col in range(Xp.shape[1])]
    torch.testing.assert_close(F[0, 0].double(), torch.stack(terms).mean(), atol=1e-5, rtol=1e-5)


def test_removed_tokens_are_neither_queries_nor_keys():
    cfg = ModelConfig(kind="vit", width=16)
    model = build_model(cfg, make_patterns(DATA), [0])
    X, _, keep = _inputs(1, B=3, sparsify="random")
    F, _ = model(X, keep)
    for b in range(3):
        kept = X[:, b : b + 1, keep[0, b]]
        f, _ = model(kept)
        torch.testing.assert_close(F[0, b], f[0, 0], atol=1e-5, rtol=1e-5)


def test_output_vector_is_fixed_plus_minus_one_over_sqrt_m():
    model = build_model(ModelConfig(width=64), make_patterns(DATA), [0, 1])
    assert torch.allclose(model.a.abs(), torch.full_like(model.a, 64**-0.5))
    assert "a" not in dict(model.named_parameters())
    assert 0 < (model.a > 0).float().mean() < 1


def test_aligned_init_attends_to_the_querys_own_pattern():
    """With W_Q = W_K close to a projector on the patterns, a token's top key shares its pattern."""
    model = build_model(ModelConfig(qk_gain=2.0, init_error=0.01), make_patterns(DATA), [0])
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
    model = build_model(cfg, make_patterns(DATA), [0, 1]).double()
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
    from vit_core.models import attention_mass
    from vit_core.train import sample

    data = TokenDataConfig(
        dim=12,
        n_patterns=8,
        n_tokens=40,
        alpha_star=0.2,
        counts="binomial",
        **({"sparsify": "random", "sparsify_k": 5} if sparse else {}),
    )
    test = sample(data, 64, 3)
    model = build_model(model_cfg, make_patterns(data), [0, 1, 2])
    keep = test.keep if sparse else None
    relevant = (test.kinds == 1).float() * (1 if keep is None else keep)
    F, attn = model(test.tokens, keep)
    fast, mass = model.test_outputs(test.tokens, keep, relevant)
    torch.testing.assert_close(fast, F, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(mass, attention_mass(attn, relevant), rtol=1e-5, atol=1e-6)
