"""Paper B's transformer with positional attention (Jelassi, Sander, Li, NeurIPS 2022, model T),
and a vanilla-attention variant beside it, packed over K models like Paper A's.

    F(X) = sum_i sigma( D * sum_j S_ij <v, X_j> ),   S = row-softmax(A)

The scores A (D x D) depend on positions only. Its off-diagonal entries and the value vector v
are trained; the diagonal is fixed (``diag``). Choices the paper leaves open, made here: A is
used directly as logits (``scaled_logits``: A / sqrt(d)), A's step size is ``a_lr_scale`` times v's, and sigma is
cubic by default. Patch association (Def. 2.2): the top-C entries of row i of A are exactly the
set of patch i. ``vanilla`` computes S from the patches plus learned positional encodings P;
``width`` > 0 replaces v by a ReLU layer (for real images); ``transfer`` pre-trains the
attention on another feature and freezes it (Thm 5.1).
"""

import numpy as np
import torch
from torch import Tensor, nn

from vit_core.image_config import ImageDataConfig
from vit_core.jelassi2022.configs import PositionalConfig, SpatialDataConfig, check_positional_fits, set_matrix
from vit_core.jelassi2022.spatial import feature
from vit_core.packed import PackedModels
from vit_core.seeding import Stream, stream_seed

ATTENTION = ("A", "P", "W_Q", "W_K")  # what transfer freezes; v is always trained
PRETRAIN_SEEDS = 1_000_000  # offset: pre-training samples and init never coincide with a model's own
ACTIVATIONS = {"cubic": lambda z: z**3, "relu": torch.relu, "identity": lambda z: z}


def build_positional(
    cfg: PositionalConfig,
    data: SpatialDataConfig | ImageDataConfig,
    seeds: list[int],
    device: str | torch.device = "cpu",
    attention: dict[str, Tensor] | None = None,
) -> "PositionalAttention":
    """A pack of len(seeds) models, model k initialised from seeds[k] alone; ``attention``: the
    pre-trained attention parameters that transfer starts from (train.pretrained_attention)."""
    D, d = data.n_patches, data.dim
    params: dict[str, list[Tensor]] = {}
    H = cfg.heads  # heads are stacked along the first axis of A, W_Q, W_K and v: one head keeps their shapes
    for seed in seeds:
        gen = torch.Generator().manual_seed(stream_seed(seed, Stream.INIT))
        if cfg.kind == "positional":
            params.setdefault("A", []).append(cfg.a_init * torch.randn(H * D, D, generator=gen))
        else:  # W_Q = W_K = I at first: scores <x_i + p_i, x_j + p_j> / sqrt(d)
            params.setdefault("P", []).append(cfg.a_init * torch.randn(D, d, generator=gen))
            params.setdefault("W_Q", []).append(torch.eye(d).repeat(H, 1))
            params.setdefault("W_K", []).append(torch.eye(d).repeat(H, 1))
        if cfg.width:
            params.setdefault("W_V", []).append(torch.randn(cfg.width, d, generator=gen) / d**0.5)
            shape = (D, cfg.width) if cfg.readout == "per_position" else (cfg.width,)
            params.setdefault("a", []).append((torch.randint(0, 2, shape, generator=gen) * 2 - 1) / cfg.width**0.5)
        else:
            direction = torch.randn(H, d, generator=gen)
            params.setdefault("v", []).append((cfg.v_init * direction / direction.norm(dim=-1, keepdim=True)).view(-1))
    stacked = {name: torch.stack(values) for name, values in params.items()}
    check_positional_fits(cfg, data)
    synthetic = isinstance(data, SpatialDataConfig)  # images have no true sets or feature
    if attention is not None:
        stacked |= attention
    truth = torch.from_numpy(set_matrix(data)) if synthetic else None
    w_star = torch.from_numpy(feature(data).astype(np.float32)) if synthetic else None
    near = None if synthetic else torch.from_numpy(data.neighbours)
    return PositionalAttention(cfg, {k: t.to(device) for k, t in stacked.items()}, truth, w_star, near)


class PositionalAttention(PackedModels):
    """K independent models of one kind: positional (A, v) or vanilla (P, W_Q, W_K, v).

    ``same_set`` (D, D) and ``w_star`` (d,) are the data's truth where it has one (synthetic
    data): then the models report patch association and cos(v, w*) at every evaluation. ``near``
    (D, D), images' grid neighbours (ImageDataConfig.neighbours): then ``local_attention``."""

    def __init__(
        self,
        cfg: PositionalConfig,
        params: dict[str, Tensor],
        same_set: Tensor | None,
        w_star: Tensor | None,
        near: Tensor | None = None,
    ):
        super().__init__()
        self.cfg = cfg
        for name, value in params.items():  # transfer: the attention stays as pre-trained
            if name == "a" and cfg.readout == "mean":  # the fixed readout signs
                self.register_buffer("a", value)
            else:
                setattr(self, name, nn.Parameter(value, requires_grad=not (cfg.transfer and name in ATTENTION)))
        self.register_buffer("same_set", same_set)
        self.register_buffer("w_star", w_star)
        self.register_buffer("near", near)
        self.lr_scales = {name: cfg.a_lr_scale for name in ATTENTION}
        names = []
        if same_set is not None:  # synthetic data: the true sets (and the feature w*) are known
            names.append("patch_association")
            if not cfg.width and cfg.heads == 1:  # a value vector v to compare with w*
                names.append("cos_v_wstar")
            if cfg.kind == "vanilla":
                names.append("patch_association_gram")
        if near is not None:
            names.append("local_attention")
        self.metric_names = tuple(names)

    @property
    def K(self) -> int:
        return (self.W_V if self.cfg.width else self.v).shape[0]

    def logits(self) -> Tensor:
        """The positional part of each head's attention logits, (K, H, D, D): A with its fixed
        diagonal, or for vanilla attention (P W_Q^T)(P W_K^T)^T / sqrt(d)."""
        if self.cfg.kind == "vanilla":
            return _qk(self.P.unsqueeze(1), *self._per_head(self.W_Q, self.W_K))
        (A,) = self._per_head(self.A)
        eye = torch.eye(A.shape[-1], dtype=torch.bool, device=A.device)
        logits = torch.where(eye, torch.full_like(A, self.cfg.diag), A)
        return logits / self._dim**0.5 if self.cfg.scaled_logits else logits

    def scores(self) -> Tensor:
        """(K, D, D): where each patch reads from. One head's logits; several heads': the log of
        their mean attention, so that a row's order says which patches the heads read together."""
        logits = self.logits()
        if self.cfg.heads == 1:
            return logits.squeeze(1)
        return torch.logsumexp(torch.log_softmax(logits, dim=-1), dim=1) - np.log(self.cfg.heads)

    @property
    def _dim(self) -> int:
        """d, the patches' dimension: the width of v (one per head) or of W_V."""
        return self.W_V.shape[-1] if self.cfg.width else self.v.shape[-1] // self.cfg.heads

    def _per_head(self, *stacked: Tensor) -> tuple[Tensor, ...]:
        """Parameters stacked over heads along their first axis, (K, H r, c), as (K, H, r, c)."""
        return tuple(t.view(t.shape[0], self.cfg.heads, -1, t.shape[-1]) for t in stacked)

    def forward(self, X: Tensor, keep: Tensor | None = None) -> tuple[Tensor, None]:
        """Outputs F (K, B) for patches X (K, B, D, d) or shared (B, D, d); keep: patches each
        sample keeps (removed ones are never attended to)."""
        W = self.W_V if self.cfg.width else self.v.view(self.K, self.cfg.heads, -1)  # (K, m, d) or v: (K, H, d)
        values = X @ W.transpose(-1, -2).unsqueeze(1) if X.dim() == 4 else torch.einsum("bid,kmd->kbim", X, W)
        # per head (K, B, H, D, m): the ReLU layer's m values under one head, or head h's value <v_h, X_j>
        values = values.unsqueeze(2) if self.cfg.width else values.transpose(-1, -2).unsqueeze(-1)
        if self.cfg.kind == "vanilla":  # (K, B, H, D, D) from patches plus encodings
            Z = (X + self.P.unsqueeze(1)).unsqueeze(2)
            S = _qk(Z, *(w.unsqueeze(1) for w in self._per_head(self.W_Q, self.W_K)))
        else:
            S = self.logits().unsqueeze(1)  # (K, 1, H, D, D)
        if keep is not None:
            S = S.masked_fill(~keep[..., None, None, :], float("-inf"))
        mixed = (torch.softmax(S, dim=-1) @ values).sum(2)  # (K, B, D, m): the heads' outputs summed
        if self.cfg.readout == "per_position":  # (K, B, D, 1): each position's own weights, mean over patches
            out = (torch.relu(mixed) * self.a.unsqueeze(1)).sum(-1, keepdim=True) / mixed.shape[-2]
        elif self.cfg.width:
            out = torch.relu(mixed) @ self.a.view(self.K, 1, -1, 1) / mixed.shape[-2]  # (K, B, D, 1): mean over patches
        else:
            out = ACTIVATIONS[self.cfg.activation](mixed.shape[-2] * mixed)
        out = out.squeeze(-1)
        if keep is not None:
            out = out * keep
        return out.sum(-1), None

    def metrics(self) -> dict[str, Tensor]:
        """Per model, those of ``metric_names``: the fraction of rows of the positional scores whose
        top-C entries are exactly their patch's set (Def. 2.2); cos(v, w*); vanilla: the same
        fraction on the encodings' Gram matrix P P^T (the paper's Fig 2 draws P^T P, P being d x D);
        images: the mean attention mass the positional scores (``scores``; vanilla: of the encodings
        alone) put on a patch's grid neighbours (spatial locality; uniform attention puts the mean
        neighbour count / D there: ImageDataConfig.local_chance)."""
        out = {}
        with torch.no_grad():
            if "patch_association" in self.metric_names:
                out["patch_association"] = associated_rows(self.scores(), self.same_set).float().mean(-1)
            if "cos_v_wstar" in self.metric_names:
                out["cos_v_wstar"] = (self.v @ self.w_star) / self.v.norm(dim=-1).clamp_min(1e-12)
            if "patch_association_gram" in self.metric_names:
                gram = self.P @ self.P.transpose(-1, -2)
                out["patch_association_gram"] = associated_rows(gram, self.same_set).float().mean(-1)
            if "local_attention" in self.metric_names:
                out["local_attention"] = (torch.softmax(self.scores(), -1) * self.near).sum(-1).mean(-1)
        return out

    def snapshot(self) -> dict[str, Tensor]:
        """The attention's parameters (what transfer starts from) and its positional scores."""
        return {name: p.detach() for name, p in self.named_parameters() if name in ATTENTION} | {
            "scores": self.scores().detach()
        }

    def select(self, index: Tensor) -> "PositionalAttention":
        """A pack of the models at ``index`` (copies; gradients do not flow back)."""
        params = {name: p.detach()[index].clone() for name, p in self.named_parameters()}
        if self.cfg.width and self.cfg.readout == "mean":
            params["a"] = self.a[index].clone()
        return PositionalAttention(self.cfg, params, self.same_set, self.w_star, self.near)


def associated_rows(scores: Tensor, same_set: Tensor) -> Tensor:
    """(..., D) bool: row i's C largest scores are exactly the entries of patch i's set, each
    strictly above every other entry of the row (Def. 2.2). A tie across that boundary counts as
    not associated: topk would break it by position, and A = 0 off the diagonal at initialisation
    would then count ~10% of rows as associated by chance of index order."""
    inside = scores.masked_fill(~same_set, float("inf")).amin(-1)  # the set's smallest score
    outside = scores.masked_fill(same_set, float("-inf")).amax(-1)  # the largest outside it (-inf: none)
    return inside > outside


def _qk(Z: Tensor, W_Q: Tensor, W_K: Tensor) -> Tensor:
    """(Z W_Q^T)(Z W_K^T)^T / sqrt(d) over the last two dimensions of Z (..., D, d)."""
    return (Z @ W_Q.transpose(-1, -2)) @ (Z @ W_K.transpose(-1, -2)).transpose(-1, -2) / Z.shape[-1] ** 0.5
