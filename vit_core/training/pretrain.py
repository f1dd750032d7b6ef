"""Transfer (Paper B, Thm 5.1): the attention of models pre-trained on a feature of their own."""

import dataclasses

import torch
from torch import Tensor

from vit_core.configs import PositionalConfig, SpatialDataConfig
from vit_core.positional import ATTENTION, PRETRAIN_SEEDS
from vit_core.train_config import TrainConfig
from vit_core.training.loop import train_pack


def pretrained_attention(cfg: PositionalConfig, data: SpatialDataConfig, seeds: list[int], device) -> dict[str, Tensor]:
    """Transfer (Paper B, Thm 5.1): the attention's parameters after pre-training each model from
    scratch on the same sets with the feature of ``pretrain_feature_seed``, on samples of its own
    (seed + PRETRAIN_SEEDS)."""
    source = dataclasses.replace(data, feature_seed=cfg.pretrain_feature_seed)
    pretrain = TrainConfig(
        lr=cfg.pretrain_lr,
        batch_size=64,
        max_steps=cfg.pretrain_steps,
        eval_every=cfg.pretrain_steps,
        n_test=100,
        eval_subset=100,
        loss="logistic",
    )
    result = train_pack(
        source,
        dataclasses.replace(cfg, transfer=False),
        pretrain,
        [cfg.pretrain_n] * len(seeds),
        [s + PRETRAIN_SEEDS for s in seeds],
        device=device,
    )
    return {name: torch.from_numpy(value).float() for name, value in result.snapshots.items() if name in ATTENTION}
