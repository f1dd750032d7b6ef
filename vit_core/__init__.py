"""The science of vitsweep: both papers' data and models and one packed trainer (torch and numpy only)."""

from vit_core.data import TokenBatch, TokenDataConfig, TokenKind, make_patterns, sample_tokens
from vit_core.fields import ConfigError
from vit_core.images import ImageDataConfig
from vit_core.models import ModelConfig, PackedModel, ShallowCNN, ShallowViT, build_model
from vit_core.positional import PositionalAttention, PositionalConfig
from vit_core.sparsify import keep_mask
from vit_core.spatial import SpatialDataConfig, sample_patches
from vit_core.train import PackResult, TrainConfig, evaluate, hinge_loss, train_pack

__all__ = [
    "ConfigError", "ImageDataConfig", "ModelConfig", "PackResult", "PackedModel", "PositionalAttention", "PositionalConfig", "ShallowCNN",
    "ShallowViT", "SpatialDataConfig", "TokenBatch", "TokenDataConfig", "TokenKind", "TrainConfig", "build_model", "evaluate",
    "hinge_loss", "keep_mask", "make_patterns", "sample_patches", "sample_tokens", "train_pack",
]
