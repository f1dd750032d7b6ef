"""The packed trainer, by concern: the loop (train_pack: batches, steps, when a model leaves),
its samples (batches), how a pack is scored (scoring), what it records (records), and Paper B's
pre-training (pretrain)."""

from vit_core.training.batches import sample, steps_per_draw
from vit_core.training.loop import build, train_pack
from vit_core.training.records import PackResult
from vit_core.training.scoring import errors, evaluate, hinge_loss

__all__ = ["PackResult", "build", "errors", "evaluate", "hinge_loss", "sample", "steps_per_draw", "train_pack"]
