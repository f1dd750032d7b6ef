"""Paper B's transformer with positional attention (Jelassi, Sander, Li, NeurIPS 2022, model T),
packed over K models like Paper A's.

    F(X) = sum_i sigma( D * sum_j S_ij <v, X_j> ),   S = row-softmax(A)

The scores A (D x D) depend on positions only. Its off-diagonal entries and the value vector v
are trained; the diagonal is fixed (``diag``). Choices the paper leaves open, made here: A is
used directly as logits (no 1/sqrt(d)), A's step size is ``a_lr_scale`` times v's, and sigma is
cubic by default. Patch association (Def. 2.2): the top-C entries of row i of A are exactly the
set of patch i.
"""

from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from torch import Tensor, nn

from vit_core.fields import ConfigError, param
from vit_core.seeding import Stream, torch_generator
from vit_core.spatial import SpatialDataConfig, feature, set_matrix

ACTIVATIONS = {"cubic": lambda z: z**3, "relu": torch.relu, "identity": lambda z: z}


@dataclass(frozen=True)
class PositionalConfig:
    """Architecture, initialisation and relative step size of one positional-attention model."""

    kind: Literal["positional"] = param("positional", "positional: attention scores A that depend on positions only (model T)")
    activation: Literal["cubic", "relu", "identity"] = param("cubic", "sigma, applied to each patch's mixed value")
    diag: float = param(4.0, "the fixed diagonal of A (each patch's score for itself)")
    a_init: float = param(0.0, "standard deviation of A's off-diagonal entries at initialisation")
    v_init: float = param(0.01, "norm of v at initialisation (a uniformly random direction)")
    a_lr_scale: float = param(1000.0, "A's step size is a_lr_scale times the training lr (v's)")

    def __post_init__(self) -> None:
        for field in ("a_init", "v_init"):
            if getattr(self, field) < 0:
                raise ConfigError(field, getattr(self, field), "must be >= 0")
        if not self.a_lr_scale > 0:
            raise ConfigError("a_lr_scale", self.a_lr_scale, "must be > 0")

    def build(self, data: SpatialDataConfig, seeds: list[int], device: str | torch.device = "cpu") -> "PositionalAttention":
        """A pack of len(seeds) models, model k initialised from seeds[k] alone."""
        D, d = data.n_patches, data.dim
        A, v = [], []
        for seed in seeds:
            gen = torch_generator(seed, Stream.INIT)
            A.append(self.a_init * torch.randn(D, D, generator=gen))
            direction = torch.randn(d, generator=gen)
            v.append(self.v_init * direction / direction.norm())
        truth = torch.from_numpy(set_matrix(data))
        w_star = torch.from_numpy(feature(data).astype(np.float32))
        return PositionalAttention(self, torch.stack(A).to(device), torch.stack(v).to(device), truth.to(device), w_star.to(device))


class PositionalAttention(nn.Module):
    """K independent models T: parameters A (K, D, D) and v (K, d)."""

    metric_names = ("patch_association", "cos_v_wstar")

    def __init__(self, cfg: PositionalConfig, A: Tensor, v: Tensor, same_set: Tensor, w_star: Tensor):
        super().__init__()
        self.cfg = cfg
        self.A, self.v = nn.Parameter(A), nn.Parameter(v)
        self.register_buffer("same_set", same_set)
        self.register_buffer("w_star", w_star)
        self.lr_scales = {"A": cfg.a_lr_scale}

    @property
    def K(self) -> int:
        return self.v.shape[0]

    def scores(self) -> Tensor:
        """A with its fixed diagonal, (K, D, D)."""
        eye = torch.eye(self.A.shape[-1], dtype=torch.bool, device=self.A.device)
        return torch.where(eye, torch.full_like(self.A, self.cfg.diag), self.A)

    def forward(self, X: Tensor, keep: Tensor | None = None) -> tuple[Tensor, None]:
        """Outputs F (K, B) for patches X (K, B, D, d) or shared (B, D, d); keep: patches each
        sample keeps (removed ones are never attended to)."""
        values = X @ self.v.unsqueeze(-1).unsqueeze(1) if X.dim() == 4 else torch.einsum("bid,kd->kbi", X, self.v).unsqueeze(-1)
        S = self.scores().unsqueeze(1)  # (K, 1, D, D)
        if keep is not None:
            S = S.masked_fill(~keep.unsqueeze(-2), float("-inf"))
        mixed = (torch.softmax(S, dim=-1) @ values).squeeze(-1)  # (K, B, D)
        out = ACTIVATIONS[self.cfg.activation](self.A.shape[-1] * mixed)
        if keep is not None:
            out = out * keep
        return out.sum(-1), None

    def metrics(self) -> dict[str, Tensor]:
        """Per model: the fraction of rows of A whose top-C entries are exactly their patch's set,
        and cos(v, w*)."""
        with torch.no_grad():
            C = int(self.same_set[0].sum())
            top = torch.zeros_like(self.A, dtype=torch.bool).scatter_(-1, self.scores().topk(C, dim=-1).indices, True)
            rows = (top == self.same_set).all(-1).float().mean(-1)
            cos = (self.v @ self.w_star) / self.v.norm(dim=-1).clamp_min(1e-12)
        return {"patch_association": rows, "cos_v_wstar": cos}

    def select(self, index: Tensor) -> "PositionalAttention":
        """A pack of the models at ``index`` (copies; gradients do not flow back)."""
        return PositionalAttention(self.cfg, self.A.detach()[index].clone(), self.v.detach()[index].clone(), self.same_set, self.w_star)
