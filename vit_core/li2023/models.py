"""Paper A's shallow ViT (eq. 1) and the CNN of about the same size, packed over K models.

    F(X) = 1/|S| sum_{l in S} a_(l)^T ReLU( W_O W_V X softmax(X^T W_K^T W_Q x_l) )

Every parameter carries a leading dimension K: model k is an independent network with its own
initialisation. Inputs are (K, B, L, d), or (B, L, d) shared by all K models. The CNN is the same
network with attention removed: each token alone through ReLU(W_O W_V x_l), averaged over S.
Trained: W_Q, W_K (ViT), W_V and W_O (``output_matrix``). The readouts a_(l) in
{+1/sqrt(m), -1/sqrt(m)}^m, one per token position l (``readout: per_token``) or one for every
token (``shared``), are drawn once and fixed (a buffer).
"""

import math

import numpy as np
import torch
from torch import Tensor, nn

from vit_core.li2023.configs import ModelConfig, check_fits_data
from vit_core.packed import PackedModels
from vit_core.seeding import Stream, stream_seed


def _orthonormal_columns(rows: int, cols: int, gen: torch.Generator) -> Tensor:
    """A (rows, cols) matrix with orthonormal columns, drawn at random (rows >= cols)."""
    q, r = torch.linalg.qr(torch.randn(rows, cols, generator=gen, dtype=torch.float64))
    return q * torch.sign(torch.diagonal(r))


def _init_one(cfg: ModelConfig, patterns: Tensor, seed: int, n_tokens: int) -> dict[str, Tensor]:
    """Parameters and readouts of one model, from its seed alone (``n_tokens``: L, the positions
    that per-token readouts a_(l) cover).

    ``random``: Gaussian matrices scaled so that W x has norm about gain for a unit token x.
    ``aligned`` (the theory's initial model close to the patterns): W_Q = W_K = qk_gain U P^T and
    W_V = v_gain R P^T, with P the (d, M) patterns and U, R random orthonormal embeddings of the
    pattern space, plus init_error times a Gaussian matrix. Attention then starts on tokens of
    the query's own pattern and every pattern maps to its own direction of the value space.
    """
    gen = torch.Generator().manual_seed(stream_seed(seed, Stream.INIT))
    P = patterns.double().T  # (d, M)
    d, M = P.shape
    a_rows, attention = cfg.attn_dim or d, cfg.declared.attention

    def gauss(rows: int, cols: int, scale: float) -> Tensor:
        return scale * torch.randn(rows, cols, generator=gen, dtype=torch.float64) / math.sqrt(cols)

    params: dict[str, Tensor] = {}
    if cfg.init == "aligned":
        if attention:
            U = _orthonormal_columns(a_rows, M, gen)
            params["W_Q"] = cfg.qk_gain * U @ P.T + gauss(a_rows, d, cfg.init_error)
            params["W_K"] = cfg.qk_gain * U @ P.T + gauss(a_rows, d, cfg.init_error)
        R = _orthonormal_columns(cfg.v_rows(), M, gen)
        params["W_V"] = cfg.v_gain * R @ P.T + gauss(cfg.v_rows(), d, cfg.init_error)
    else:
        if attention:
            params["W_Q"] = gauss(a_rows, d, cfg.qk_gain)
            params["W_K"] = gauss(a_rows, d, cfg.qk_gain)
        params["W_V"] = gauss(cfg.v_rows(), d, cfg.v_gain)
    if cfg.output_matrix:
        params["W_O"] = gauss(cfg.width, cfg.v_rows(), 1.0)
    shape = (n_tokens, cfg.width) if cfg.readout == "per_token" else (cfg.width,)
    signs = torch.randint(0, 2, shape, generator=gen, dtype=torch.float64) * 2 - 1
    params["a"] = signs / math.sqrt(cfg.width)
    return params


def _per_token(X: Tensor, W: Tensor) -> Tensor:
    """x -> W x for every token: X (K, n, d) or (n, d), W (K, r, d) -> (K, n, r)."""
    return X @ W.transpose(-1, -2)


class PackedModel(PackedModels):
    """K independent copies of Paper A's network; subclasses decide how tokens are mixed."""

    def __init__(self, cfg: ModelConfig, params: dict[str, Tensor]):
        super().__init__()
        self.cfg = cfg
        for name, value in params.items():
            if name == "a":
                self.register_buffer("a", value)
            else:
                setattr(self, name, nn.Parameter(value))

    @property
    def K(self) -> int:
        return self.a.shape[0]

    def mix(self, X: Tensor, keep: Tensor | None) -> tuple[Tensor, Tensor | None]:
        """Tokens after mixing, (K, B, L, d) or shared (B, L, d), and the attention map or None."""
        raise NotImplementedError

    def forward(self, X: Tensor, keep: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
        """Outputs F (K, B) and the attention map; ``keep`` (bool, like X without d) is S^n."""
        Z, attn = self.mix(X, keep)
        return self.readout(Z, keep), attn

    def readout(self, Z: Tensor, keep: Tensor | None) -> Tensor:
        """F (K, B) from mixed tokens Z: a_(l)^T ReLU(W_O W_V z_l) averaged over the tokens kept."""
        return self.head(_per_token(Z.flatten(-3, -2), self.W_V), keep, Z.shape[-3:-1])

    def head(self, H: Tensor, keep: Tensor | None, shape: tuple[int, int]) -> Tensor:
        """F (K, B) from the tokens' value vectors H = W_V z (K, B·L, rows), ``shape`` = (B, L)."""
        K, (B, L) = self.K, shape
        if self.cfg.output_matrix and H.device.type == "cpu":
            out = HiddenReadout.apply(H, self.W_O, self.a).view(K, B, L)
        else:
            out = self.hidden_readout(H).view(K, B, L)
        if keep is None:
            return out.mean(-1)
        keep = keep.to(out.dtype).expand(K, B, L)
        return (out * keep).sum(-1) / keep.sum(-1)

    def hidden_readout(self, H: Tensor) -> Tensor:
        """Each token's a_(l)^T ReLU(W_O h) (K, B·L) from its value vector h, the K models batched:
        the hidden layer (K, B·L, m) whole, in memory (HiddenReadout on a CPU: the same numbers)."""
        K = self.K
        if self.cfg.output_matrix:
            H = _per_token(H, self.W_O)
        if self.a.dim() == 3:  # per-token readouts a_(l): (K, L, m)
            return (torch.relu(H).view(K, -1, *self.a.shape[1:]) * self.a.unsqueeze(1)).sum(-1).view(K, -1)
        return (torch.relu(H) * self.a.unsqueeze(-2)).sum(-1)  # a product and sum beat a batched mat-vec

    def select(self, index: Tensor) -> "PackedModel":
        """A pack of the models at ``index`` (copies; gradients do not flow back)."""
        params = {name: t.detach()[index].clone() for name, t in [*self.named_parameters(), ("a", self.a)]}
        return type(self)(self.cfg, params)


class HiddenReadout(torch.autograd.Function):
    """Each token's a^T ReLU(W_O v) (K, N) from its value vector v (K, N, rows), model by model, the
    hidden layer made in place and remade in backward instead of kept: on a CPU one model's (N, m)
    stays in cache where the pack's (K, N, m) did not (the head 1.5x faster at K = 16, B·L = 960,
    m = 256; docs/performance.md). Every number is the batched path's, bit for bit (the same products and
    sums in the same order; tests/test_models.py): an SGD run, its first zero and its N* are as before.
    ``a``: (K, m) shared or (K, L, m) per-token readouts."""

    @staticmethod
    def forward(ctx, v: Tensor, W_O: Tensor, a: Tensor) -> Tensor:
        out = v.new_empty(v.shape[:2])
        for k in range(v.shape[0]):
            hidden = (v[k] @ W_O[k].T).view(-1, *a.shape[1:])
            torch.sum(hidden.relu_().mul_(a[k]), -1, out=out[k].view(hidden.shape[:-1]))
        ctx.save_for_backward(v, W_O, a)
        return out

    @staticmethod
    def backward(ctx, grad_out: Tensor) -> tuple[Tensor, Tensor, None]:
        v, W_O, a = ctx.saved_tensors
        grad_v, grad_W = torch.empty_like(v), v.new_empty(W_O.transpose(-1, -2).shape)
        for k in range(v.shape[0]):
            hidden = v[k] @ W_O[k].T
            on_hidden = grad_out[k].reshape(-1, *a.shape[1:-1], 1) * a[k]  # d out / d ReLU(hidden)
            grad_hidden = torch.ops.aten.threshold_backward(on_hidden.view(hidden.shape), hidden, 0)
            torch.mm(grad_hidden, W_O[k], out=grad_v[k])
            torch.mm(v[k].T, grad_hidden, out=grad_W[k])
        return grad_v, grad_W.transpose(-1, -2), None


class ShallowViT(PackedModel):
    """One single-head self-attention layer before the two-layer perceptron (eq. 1)."""

    def _query_side(self, X: Tensor) -> Tensor:
        """X W_Q^T W_K (K, ..., L, d): scores[.., l, j] = x_l^T W_Q^T W_K x_j = (query side of l) . x_j."""
        *lead, L, d = X.shape
        XA = _per_token(X.reshape(*lead[:-1], -1, d), self.W_K.transpose(-1, -2) @ self.W_Q)
        return XA.view(self.K, -1, L, d)

    def mix(self, X: Tensor, keep: Tensor | None) -> tuple[Tensor, Tensor]:
        scores = self._query_side(X) @ X.transpose(-1, -2)
        if keep is not None:
            scores = scores.masked_fill(~keep.unsqueeze(-2), float("-inf"))
        attn = torch.softmax(scores, dim=-1)
        return attn @ X, attn

    @torch.no_grad()
    def test_outputs(self, X: Tensor, keep: Tensor | None, relevant: Tensor | None) -> tuple[Tensor, Tensor | None]:
        """Outputs F (K, n) on test samples X (n, L, d) shared by every model, and each sample's
        attention_mass (K, n) where ``relevant`` (n, L, float, 0 where not kept) marks the
        label-relevant tokens (None: not asked), in one pass of torch's fused attention (the
        L x L map is never stored; 2x faster here on a CPU core).

        Attention is linear in its values, so they carry what is read from them: W_V x when that
        is narrower than x (the value product moves before the attention), and the relevant flag
        as one more column, whose attention-weighted sum is each query's mass on relevant keys.
        Test scoring only: training keeps mix's exact path, so every SGD step is as before;
        outputs agree with forward's to float32 rounding (test_models)."""
        K, (n, L, d) = self.K, X.shape
        rows = self.W_V.shape[1]
        projected = rows < d
        values = _per_token(X.reshape(n * L, d), self.W_V).view(K, n, L, rows) if projected else X.expand(K, n, L, d)
        width = values.shape[-1]
        if relevant is not None:
            values = torch.cat([values, relevant.expand(K, n, L).unsqueeze(-1)], -1)
        size = max(d, values.shape[-1])  # the fused kernel wants one width for queries, keys and values
        query, keys = _widen(self._query_side(X), size), _widen(X, size).expand(K, n, L, size)
        mask = None if keep is None else keep.unsqueeze(-2)
        out = torch.nn.functional.scaled_dot_product_attention(
            query, keys, _widen(values, size), attn_mask=mask, scale=1.0
        )
        mixed = out[..., :width]
        F = self.head(mixed.flatten(-3, -2), keep, (n, L)) if projected else self.readout(mixed, keep)
        if relevant is None:
            return F, None
        return F, (out[..., width] * relevant).sum(-1) / relevant.sum(-1)


def _widen(t: Tensor, size: int) -> Tensor:
    """t with zero columns appended up to ``size`` (products with them add nothing)."""
    return torch.nn.functional.pad(t, (0, size - t.shape[-1])) if t.shape[-1] < size else t


class ShallowCNN(PackedModel):
    """The same network with attention removed: each token through the perceptron alone."""

    def mix(self, X: Tensor, keep: Tensor | None) -> tuple[Tensor, None]:
        return X, None


PACKS: dict[str, type[PackedModel]] = {"vit": ShallowViT, "cnn": ShallowCNN}  # ModelConfig.kind -> its pack class


def alignment_error(maps: list[Tensor], patterns: Tensor, gain: float) -> Tensor:
    """The initial model error of Theorem 1 measured on weights: per model (K,), the largest
    ||W mu_j - gain u_j|| over the patterns mu_j and the matrices W in ``maps`` (each (K, rows, d)),
    where the u_j are the orthonormal directions nearest to where the matrices send the patterns
    (one set shared by the maps: W_Q and W_K must send a pattern the same way for attention to
    pick tokens of the query's own pattern). Nearest in the Frobenius sense: the polar factor of
    the maps' mean image of the patterns (orthogonal Procrustes)."""
    images = [W.double() @ patterns.double().T for W in maps]  # (K, rows, M): column j is W mu_j
    U, _, Vh = torch.linalg.svd(sum(images) / len(images), full_matrices=False)
    target = gain * (U @ Vh)
    return torch.stack([torch.linalg.vector_norm(image - target, dim=-2).amax(-1) for image in images]).amax(0)


@torch.no_grad()
def initial_errors(
    cfg: ModelConfig, patterns: Tensor | np.ndarray, seeds: list[int], n_tokens: int
) -> dict[str, float]:
    """The initial model errors of the models of ``seeds`` as built (the largest over the seeds):
    sigma, W_V's (the values), and for a kind with attention (the ViT) delta, W_Q's and W_K's (one
    set of directions for both); what Theorem 1's premises and its shift of alpha* are read from."""
    patterns = torch.as_tensor(patterns)
    pack = build_model(cfg, patterns, seeds, n_tokens)
    errors = {"sigma": alignment_error([pack.W_V], patterns, cfg.v_gain)}
    if cfg.declared.attention:
        errors["delta"] = alignment_error([pack.W_Q, pack.W_K], patterns, cfg.qk_gain)
    return {name: float(value.max()) for name, value in errors.items()}


def build_model(
    cfg: ModelConfig,
    patterns: Tensor | np.ndarray,
    seeds: list[int],
    n_tokens: int,
    device: str | torch.device = "cpu",
) -> PackedModel:
    """A pack of len(seeds) models for samples of ``n_tokens`` tokens, model k initialised from
    seeds[k] alone (float32), of its kind's class (PACKS)."""
    patterns = torch.as_tensor(patterns)
    check_fits_data(cfg, patterns.shape[1], patterns.shape[0])
    per_model = [_init_one(cfg, patterns, s, n_tokens) for s in seeds]
    stacked = {name: torch.stack([p[name] for p in per_model]).float().to(device) for name in per_model[0]}
    return PACKS[cfg.kind](cfg, stacked)
