"""The science of vitsweep: both papers' data and models and one packed trainer (torch and numpy only).

By paper: Paper A's (Li et al., ICLR 2023) data, models, configs and family in vit_core.li2023,
Paper B's (Jelassi et al., NeurIPS 2022) in vit_core.jelassi2022; apart from both, what they share:
the packed trainer (training), the pack's contract (packed), seeding, the token batch (tokens),
real images (images, image_config), sparsification, fields, families and outcomes.

Names load with the module that defines them (PEP 562): the configs (``vit_core.li2023.configs``,
``vit_core.jelassi2022.configs``, ``vit_core.train_config``) and the outcome classes
(``vit_core.outcomes``) need no torch, so a spec is validated and results are read without loading
it; ``from vit_core import train_pack`` loads the trainer."""

from importlib import import_module

_HOME = {
    "vit_core.li2023.configs": ("ModelConfig", "TokenDataConfig"),
    "vit_core.jelassi2022.configs": ("PositionalConfig", "SpatialDataConfig"),
    "vit_core.image_config": ("ImageDataConfig",),
    "vit_core.train_config": ("TrainConfig",),
    "vit_core.tokens": ("TokenBatch", "TokenKind"),
    "vit_core.li2023.data": ("sample_tokens",),
    "vit_core.family": ("Family", "Scaling", "Theory", "families", "family_of"),
    "vit_core.fields": ("ConfigError",),
    "vit_core.li2023.layout": ("make_patterns",),
    "vit_core.li2023.models": ("PackedModel", "ShallowCNN", "ShallowViT", "build_model"),
    "vit_core.jelassi2022.linear": ("LinearPatches",),
    "vit_core.jelassi2022.positional": ("PositionalAttention",),
    "vit_core.sparsify": ("keep_mask",),
    "vit_core.jelassi2022.spatial": ("sample_patches",),
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
