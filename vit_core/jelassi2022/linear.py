"""Paper B's Theorem 3.1 model class, linear models over the patches, packed over K models:

    F(X) = sum_i <w_i, X_i>

one weight vector per patch position (D x d in all), no attention and no activation: every
function linear in the patches is one of these. No bias: the data are symmetric under
(X, y) -> (-X, -y), so the best linear rule needs none. Theorem 3.1 says such models err
at least 1/8 on the paper's data (under its scalings), where model T reaches zero.
"""

import torch
from torch import Tensor, nn

from vit_core.image_config import ImageDataConfig
from vit_core.jelassi2022.configs import PositionalConfig, SpatialDataConfig
from vit_core.packed import PackedModels
from vit_core.seeding import Stream, stream_seed


def build_linear(
    cfg: PositionalConfig,
    data: SpatialDataConfig | ImageDataConfig,
    seeds: list[int],
    device: str | torch.device = "cpu",
) -> "LinearPatches":
    """A pack of len(seeds) models, model k's weights of norm ``v_init`` in a direction drawn from seeds[k] alone."""
    shape = (data.n_patches, data.dim)
    weights = []
    for seed in seeds:
        direction = torch.randn(shape, generator=torch.Generator().manual_seed(stream_seed(seed, Stream.INIT)))
        weights.append(cfg.v_init * direction / direction.norm())
    return LinearPatches(cfg, torch.stack(weights).to(device))


class LinearPatches(PackedModels):
    """K independent linear models over the patches: weights W (K, D, d), F = sum_i <W_i, X_i>."""

    def __init__(self, cfg: PositionalConfig, W: Tensor):
        super().__init__()
        self.cfg = cfg
        self.W = nn.Parameter(W)

    def forward(self, X: Tensor, keep: Tensor | None = None) -> tuple[Tensor, None]:
        """Outputs F (K, B) for patches X (K, B, D, d) or shared (B, D, d); a removed patch (keep) adds nothing."""
        per_patch = (X * self.W.unsqueeze(1)).sum(-1) if X.dim() == 4 else torch.einsum("bid,kid->kbi", X, self.W)
        if keep is not None:
            per_patch = per_patch * keep
        return per_patch.sum(-1), None

    def select(self, index: Tensor) -> "LinearPatches":
        """A pack of the models at ``index`` (copies; gradients do not flow back)."""
        return LinearPatches(self.cfg, self.W.detach()[index].clone())
