"""Paper B's data and model configs (Jelassi, Sander, Li, NeurIPS 2022): its spatially structured
data with the sets its config fixes (their geometry and the Bayes error of keeping spurious sets)
and the positional-attention model, and the check across them. Plain dataclasses and numpy, no
torch, as Paper A's (vit_core.li2023.configs).

Each field carries its default and a one-line help text (``param``), read by the CLI's flags and
the sweep specs' fields. A value that is not allowed raises ConfigError naming the field.
"""

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

from vit_core.fields import ConfigError, check_choices, param
from vit_core.seeding import Stream, numpy_rng

if TYPE_CHECKING:
    from vit_core.image_config import ImageDataConfig


@dataclass(frozen=True)
class SpatialDataConfig:
    """Everything that defines Paper B's data distribution."""

    n_patches: int = param(10, "D, patches per sample")
    set_size: int = param(2, "C, patches per set (D must be a multiple of C)")
    dim: int = param(30, "d, the patch dimension")
    partition: Literal["random", "blocks"] = param(
        "random", "sets: random (non-contiguous) groups, or contiguous blocks of a square grid"
    )
    q: float = param(0.3, "probability that a patch outside the signal set carries +-w* (q/2 each sign)")
    sigma2: float | None = param(None, "variance of the noise xi (default: 1/d)")
    spurious_sets: Literal["redraw", "keep"] = param(
        "redraw",
        "a sample in which a non-signal set has C patches of one sign (a set f* counts): redraw it, so the label y "
        "always equals sign(f*); or keep it with label y (the paper's Fig 4: f* and y can disagree)",
    )
    labels: Literal["threshold", "cnn"] = param(
        "threshold",
        "threshold: the paper's rule f*; cnn: Gaussian patches labelled by a random cubic CNN (negative control)",
    )
    teacher: Literal["concatenated", "shared"] = param(
        "concatenated",
        "labels=cnn: each hidden unit's filter reads a set's C concatenated patches (one sub-filter per position), "
        "or one filter shared by every patch (a convolution over patches, which model T can represent)",
    )
    teacher_width: int = param(8, "hidden units of the labelling CNN (labels=cnn)")
    structure_seed: int = param(0, "seed of the sets and of the labelling CNN, shared by every model")
    feature_seed: int = param(0, "seed of the feature w* (transfer: a new feature, the same sets)")

    def __post_init__(self) -> None:
        check_choices(self)
        for field in ("n_patches", "set_size", "dim", "teacher_width"):
            if getattr(self, field) < 1:
                raise ConfigError(field, getattr(self, field), "must be a positive integer")
        if self.n_patches % self.set_size:
            raise ConfigError("set_size", self.set_size, f"must divide n_patches={self.n_patches}")
        if self.partition == "blocks" and grid_block(self.n_patches, self.set_size) is None:
            raise ConfigError(
                "partition",
                self.partition,
                f"blocks need square n_patches={self.n_patches} and set_size={self.set_size} whose side divides the "
                "grid's",
            )
        if not 0 <= self.q <= 1:
            raise ConfigError("q", self.q, "must lie in [0, 1]")
        if self.sigma2 is not None and self.sigma2 < 0:
            raise ConfigError("sigma2", self.sigma2, "must be >= 0")

    @property
    def n_sets(self) -> int:
        """L, the number of sets."""
        return self.n_patches // self.set_size

    @property
    def noise_variance(self) -> float:
        return 1 / self.dim if self.sigma2 is None else self.sigma2


def grid_block(D: int, C: int) -> int | None:
    """The side of a square block when D patches form a square grid tiled by square C-blocks."""
    side, block = math.isqrt(D), math.isqrt(C)
    return block if side * side == D and block * block == C and side % block == 0 else None


def patch_sets(cfg: SpatialDataConfig) -> np.ndarray:
    """(L, C) patch indices of each set."""
    D, C = cfg.n_patches, cfg.set_size
    if cfg.partition == "random":
        return numpy_rng(cfg.structure_seed, Stream.PATTERNS).permutation(D).reshape(-1, C)
    block, side = grid_block(D, C), math.isqrt(D)
    rows, cols = np.divmod(np.arange(D), side)
    order = np.lexsort((cols % block, rows % block, cols // block, rows // block))
    return order.reshape(-1, C)


def set_matrix(cfg: SpatialDataConfig) -> np.ndarray:
    """(D, D) bool: True where patches i and j belong to the same set (the diagonal included)."""
    owner = np.empty(cfg.n_patches, dtype=np.int64)
    for index, members in enumerate(patch_sets(cfg)):
        owner[members] = index
    return owner[:, None] == owner[None, :]


def bayes_error(cfg: SpatialDataConfig) -> float:
    """The lowest test error any classifier can reach on these data. 0 unless threshold labels keep
    spurious sets; then a sample's signal set is any of its full sets (C patches of one nonzero
    sign) with equal chance, so the best guess is the sign more full sets carry: exact over the
    multinomial counts of spurious sets of each sign among the L - 1 other sets."""
    if cfg.labels != "threshold" or cfg.spurious_sets == "redraw":
        return 0.0
    full, others = (cfg.q / 2) ** cfg.set_size, cfg.n_sets - 1  # P(a set is full of one given sign)
    error = 0.0
    for same in range(others + 1):
        for opposite in range(others + 1 - same):
            chance = math.comb(others, same) * math.comb(others - same, opposite)
            chance *= full ** (same + opposite) * (1 - 2 * full) ** (others - same - opposite)
            error += chance * min(1 + same, opposite) / (1 + same + opposite)
    return error


@dataclass(frozen=True)
class PositionalConfig:
    """Architecture, initialisation and relative step size of one positional-attention model."""

    kind: Literal["positional", "vanilla", "linear"] = param(
        "positional",
        "positional: attention scores A that depend on positions only (model T); vanilla: scores from patches plus "
        "learned positional encodings; linear: sum_i <w_i, X_i>, no attention (Thm 3.1's class)",
    )
    activation: Literal["cubic", "relu", "identity"] = param("cubic", "sigma, applied to each patch's mixed value")
    diag: float = param(4.0, "positional: the fixed diagonal of A (each patch's score for itself)")
    scaled_logits: bool = param(
        False,
        "positional: the softmax reads A / sqrt(d) (the usual QK^T / sqrt(d) scaling, its fixed diagonal too), not A",
    )
    a_init: float = param(
        0.0, "positional: std of A's off-diagonal entries at initialisation; vanilla: of the encodings P"
    )
    v_init: float = param(
        0.01, "norm of v (linear: of all its weights) at initialisation, in a uniformly random direction"
    )
    width: int = param(
        0,
        "0: the paper's value vector v; m > 0: values W_V x (m rows) read out by ReLU and fixed +-1/sqrt(m) signs, "
        "averaged over patches (for images)",
    )
    readout: Literal["mean", "per_position"] = param(
        "mean",
        "width > 0: mean: fixed +-1/sqrt(m) signs read every patch's ReLU layer alike, averaged over patches; "
        "per_position: readout weights of each patch position, trained (the capacity real images need to be fit)",
    )
    heads: int = param(
        1,
        "attention heads, each with its own scores (A; vanilla: W_Q, W_K) and value vector, their outputs summed "
        "before sigma; > 1 needs width 0. C heads can represent a CNN over each set's concatenated patches",
    )
    a_lr_scale: float = param(
        1000.0, "the attention's step size (A; vanilla: P, W_Q, W_K) is a_lr_scale times the training lr (v's)"
    )
    transfer: bool = param(
        False, "pre-train on the feature of pretrain_feature_seed, then train v only (A frozen) on this data"
    )
    pretrain_feature_seed: int = param(
        1, "transfer: seed of the pre-training feature w* (the data's feature_seed is the new w')"
    )
    pretrain_n: int = param(2000, "transfer: pre-training samples per model")
    pretrain_steps: int = param(2000, "transfer: pre-training SGD steps (logistic loss, batch 64)")
    pretrain_lr: float = param(0.01, "transfer: pre-training step size of v (A's is a_lr_scale times it)")

    def __post_init__(self) -> None:
        check_choices(self)
        for field in ("a_init", "v_init"):
            if getattr(self, field) < 0:
                raise ConfigError(field, getattr(self, field), "must be >= 0")
        for field in ("a_lr_scale", "pretrain_lr"):
            if not getattr(self, field) > 0:
                raise ConfigError(field, getattr(self, field), "must be > 0")
        if self.width < 0:
            raise ConfigError("width", self.width, "must be >= 0")
        if self.readout == "per_position" and not self.width:
            raise ConfigError("readout", self.readout, "per_position needs width > 0 (a ReLU layer to read out)")
        if self.heads < 1 or (self.heads > 1 and self.width):
            raise ConfigError("heads", self.heads, "must be >= 1, and 1 where width > 0 (one head with a ReLU layer)")
        if self.kind == "linear":
            for field, plain in (("width", 0), ("heads", 1), ("transfer", False), ("scaled_logits", False)):
                if getattr(self, field) != plain:
                    raise ConfigError(field, getattr(self, field), f"must be {plain} for kind linear (no attention)")
        for field in ("pretrain_n", "pretrain_steps"):
            if getattr(self, field) < 1:
                raise ConfigError(field, getattr(self, field), "must be a positive integer")


def check_positional_fits(cfg: PositionalConfig, data: "SpatialDataConfig | ImageDataConfig") -> None:
    """Raise ConfigError where the model cannot be built for the data: transfer changes the
    feature of synthetic data, which images do not have."""
    if cfg.transfer and not isinstance(data, SpatialDataConfig):
        raise ConfigError("transfer", True, "needs synthetic data with a feature to change (family jelassi2022)")
