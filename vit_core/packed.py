"""What train_pack needs of a pack of K models trained as one, declared in one base class: the two
members every pack must have, and the optional capabilities with the defaults a plain pack gets."""

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from torch import Tensor, nn

REQUIRED = ("forward", "select")  # what a family's pack must define itself


def attention_mass(attn: Tensor, relevant: Tensor) -> Tensor:
    """Per model and sample (K, n): the attention each relevant query (rows of ``attn`` that
    ``relevant`` marks) puts on relevant keys, summed over keys, averaged over those queries."""
    on_relevant = (attn @ relevant.unsqueeze(-1)).squeeze(-1)
    return (on_relevant * relevant).sum(-1) / relevant.sum(-1)


class PackedModels(nn.Module):
    """K independent models trained as one (a family's ``build`` returns one).

    A pack defines ``forward(X, keep)``: outputs F (K, B) and attention (K, B, L, L) or None, of
    inputs X (K, B, L, d), each model's own, or (B, L, d), shared; and ``select(index)``: a pack
    of the models at ``index`` (copies). It keeps its model config as ``cfg``. Optional, with
    these defaults: ``K`` (the first parameter's leading size), ``test_outputs`` (forward, and the
    attention mass on relevant tokens), ``lr_scales`` (parameter name -> step-size factor; none),
    ``metric_names`` with ``metrics()`` (per-model values recorded like the test metrics; none)
    and ``snapshot()`` (per-model arrays kept as the models stop; none)."""

    cfg: Any
    lr_scales: Mapping[str, float] = MappingProxyType({})
    metric_names: tuple[str, ...] = ()

    @property
    def K(self) -> int:
        return next(self.parameters()).shape[0]

    def select(self, index: Tensor) -> "PackedModels":
        raise NotImplementedError

    def test_outputs(self, X: Tensor, keep: Tensor | None, relevant: Tensor | None) -> tuple[Tensor, Tensor | None]:
        """Outputs F and per-sample attention mass on relevant tokens (None without attention) of
        shared test samples X (B, L, d)."""
        F, attn = self(X, keep)
        return F, None if attn is None or relevant is None else attention_mass(attn, relevant)

    def metrics(self) -> dict[str, Tensor]:
        return {}

    def snapshot(self) -> dict[str, Tensor]:
        return {}


def missing_members(pack: object) -> list[str]:
    """What ``pack`` lacks of the contract: the base class, and a forward and select of its own."""
    if not isinstance(pack, PackedModels):
        return ["the base class vit_core.packed.PackedModels"]
    return [name for name in REQUIRED if getattr(type(pack), name) is getattr(PackedModels, name)]
