"""The science of vitsweep: both papers' data and models and one packed trainer (torch and numpy only).

Names load with the module that defines them (PEP 562), so that a reader of results
(``vit_core.outcomes``) or of configs does not load torch; ``from vit_core import train_pack`` works
as before."""

from importlib import import_module

_HOME = {
    "vit_core.data": ("TokenBatch", "TokenDataConfig", "TokenKind", "make_patterns", "sample_tokens"),
    "vit_core.fields": ("ConfigError",),
    "vit_core.images": ("ImageDataConfig",),
    "vit_core.models": ("ModelConfig", "PackedModel", "ShallowCNN", "ShallowViT", "build_model"),
    "vit_core.positional": ("PositionalAttention", "PositionalConfig"),
    "vit_core.sparsify": ("keep_mask",),
    "vit_core.spatial": ("SpatialDataConfig", "sample_patches"),
    "vit_core.train": ("PackResult", "TrainConfig", "evaluate", "hinge_loss", "train_pack"),
}
_MODULE_OF = {name: module for module, names in _HOME.items() for name in names}
__all__ = sorted(_MODULE_OF)


def __getattr__(name: str):
    if name not in _MODULE_OF:
        raise AttributeError(f"module 'vit_core' has no attribute {name!r}")
    return getattr(import_module(_MODULE_OF[name]), name)


def __dir__() -> list[str]:
    return __all__
