"""The science of vitsweep: both papers' data and models and one packed trainer (torch and numpy only).

Names load with the module that defines them (PEP 562): the configs (``vit_core.configs``,
``vit_core.train_config``) and the outcome classes (``vit_core.outcomes``) need no torch, so a
spec is validated and results are read without loading it; ``from vit_core import train_pack`` loads the trainer."""

from importlib import import_module

_HOME = {
    "vit_core.configs": (
        "ModelConfig",
        "PositionalConfig",
        "SpatialDataConfig",
        "TokenDataConfig",
    ),
    "vit_core.image_config": ("ImageDataConfig",),
    "vit_core.train_config": ("TrainConfig",),
    "vit_core.data": ("TokenBatch", "sample_tokens"),
    "vit_core.family": ("Family", "Scaling", "Theory", "families", "family_of"),
    "vit_core.fields": ("ConfigError",),
    "vit_core.layout": ("TokenKind", "make_patterns"),
    "vit_core.models": ("PackedModel", "ShallowCNN", "ShallowViT", "build_model"),
    "vit_core.linear": ("LinearPatches",),
    "vit_core.positional": ("PositionalAttention",),
    "vit_core.sparsify": ("keep_mask",),
    "vit_core.spatial": ("sample_patches",),
    "vit_core.training": ("PackResult", "build", "evaluate", "hinge_loss", "sample", "steps_per_draw", "train_pack"),
}
_MODULE_OF = {name: module for module, names in _HOME.items() for name in names}
__all__ = sorted(_MODULE_OF)


def __getattr__(name: str):
    if name not in _MODULE_OF:
        raise AttributeError(f"module 'vit_core' has no attribute {name!r}")
    return getattr(import_module(_MODULE_OF[name]), name)


def __dir__() -> list[str]:
    return __all__
