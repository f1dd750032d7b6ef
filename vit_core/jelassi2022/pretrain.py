"""Transfer (Paper B, Thm 5.1): the attention of models pre-trained on a feature of their own."""

import dataclasses
import functools

import torch
from torch import Tensor

from vit_core.jelassi2022.configs import PositionalConfig, SpatialDataConfig
from vit_core.jelassi2022.positional import ATTENTION, PRETRAIN_SEEDS
from vit_core.train_config import TrainConfig
from vit_core.training.loop import train_pack


def pretrained_attention(cfg: PositionalConfig, data: SpatialDataConfig, seeds: list[int], device) -> dict[str, Tensor]:
    """Transfer (Paper B, Thm 5.1): the attention's parameters after pre-training each model from
    scratch on the same sets with the feature of ``pretrain_feature_seed``, on samples of its own
    (seed + PRETRAIN_SEEDS). Kept for the process's next pack of the same models (each a copy): a
    pack's set-up was its pre-training, 6.9 s of transfer's at every one of a plan's seven tries."""
    return {name: value.clone() for name, value in _pretrained(cfg, data, tuple(seeds), str(device)).items()}


@functools.lru_cache(maxsize=8)
def _pretrained(
    cfg: PositionalConfig, data: SpatialDataConfig, seeds: tuple[int, ...], device: str
) -> dict[str, Tensor]:
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
