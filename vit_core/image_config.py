"""The config of real images (vit_core.images samples them): which image set, its binary task and
how images become patches, for Paper B's models (ImageDataConfig) and for Paper A's, with the token
sparsification measured on the test images (ImageTokenConfig). Plain dataclasses and numpy, as
vit_core.li2023.configs."""

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from vit_core.fields import ConfigError, check_choices, param
from vit_core.sparsify import ImageRule, TokenSetRule

CIFAR_TRAIN = [f"data_batch_{i}.bin" for i in range(1, 6)]
# Debian's dataset-fashion-mnist installs the four idx files here (`make system-tools`)
FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")
IDX_RANKS = {"images": 3, "labels": 1}  # Fashion-MNIST's two kinds of idx file, and their ranks


def fashion_file(part: str, kind: str) -> str:
    """The name of Fashion-MNIST's idx file of ``part`` (train or t10k) and ``kind`` (IDX_RANKS)."""
    return f"{part}-{kind}-idx{IDX_RANKS[kind]}-ubyte.gz"


FASHION_FILES = [fashion_file(part, kind) for part in ("train", "t10k") for kind in IDX_RANKS]
IMAGE_SHAPES = {"digits": (8, 1), "cifar10": (32, 3), "fashion_mnist": (28, 1)}  # source -> (side, channels)


@dataclass(frozen=True)
class ImageDataConfig:
    """An image dataset, its binary task and how images become patches."""

    source: Literal["digits", "cifar10", "fashion_mnist"] = param(
        "digits",
        "digits: scikit-learn's 8x8 digits (offline); cifar10: the binary CIFAR-10 at path; fashion_mnist: "
        "Fashion-MNIST's 28x28 images from Debian's dataset-fashion-mnist (or the idx files at path)",
    )
    path: str | None = param(
        None,
        "cifar10: the folder holding data_batch_1.bin ... test_batch.bin; fashion_mnist: the folder of its four "
        f"gzipped idx files (default {FASHION_MNIST})",
    )
    patch: int = param(2, "patch side in pixels (it must divide the image side)")
    positive: tuple[int, ...] = param((), "classes labelled +1 (empty: every even class index, against the odd ones)")
    negative: tuple[int, ...] = param(
        (), "classes labelled -1 (empty: every class not in positive); images of other classes are left out"
    )
    permute_pixels: bool = param(False, "shuffle every image's pixels by one fixed permutation before cutting patches")
    structure_seed: int = param(0, "seed of the train/test split and of the pixel permutation")

    def __post_init__(self) -> None:
        check_choices(self)
        if self.patch < 1 or self.side % self.patch:
            raise ConfigError("patch", self.patch, f"must divide the image side {self.side}")
        if self.negative and not self.positive:
            raise ConfigError("negative", self.negative, "needs positive too (empty: even classes against odd ones)")
        if set(self.positive) & set(self.negative) or not set(self.positive) | set(self.negative) <= set(range(10)):
            raise ConfigError("positive", self.positive, "class indices 0-9, none of them also in negative")
        if self.source == "cifar10" and not (
            self.path and all((Path(self.path) / f).is_file() for f in [*CIFAR_TRAIN, "test_batch.bin"])
        ):
            raise ConfigError(
                "path",
                self.path,
                "a folder with CIFAR-10's binary files data_batch_1.bin ... data_batch_5.bin and test_batch.bin",
            )
        if self.source == "fashion_mnist" and not all((self.folder / f).is_file() for f in FASHION_FILES):
            raise ConfigError(
                "source",
                self.source,
                f"needs Fashion-MNIST's idx files ({', '.join(FASHION_FILES)}) in {self.folder}: install Debian's "
                "dataset-fashion-mnist (make system-tools), or give path",
            )

    @property
    def folder(self) -> Path:
        """Where the source's files are (fashion_mnist: the Debian package's folder unless path says)."""
        return Path(self.path) if self.path else FASHION_MNIST

    @property
    def side(self) -> int:
        return IMAGE_SHAPES[self.source][0]

    @property
    def n_patches(self) -> int:
        return (self.side // self.patch) ** 2

    @property
    def dim(self) -> int:
        return self.patch**2 * IMAGE_SHAPES[self.source][1]

    @property
    def neighbours(self) -> np.ndarray:
        """(D, D) bool over the grid of patches, row-major: j is one of i's up to eight neighbours
        (at most one row and one column away), not i itself."""
        g = self.side // self.patch
        row, col = np.divmod(np.arange(g * g), g)
        near = (np.abs(row[:, None] - row) <= 1) & (np.abs(col[:, None] - col) <= 1)
        return near & ~np.eye(g * g, dtype=bool)

    @property
    def local_chance(self) -> float:
        """The attention mass on a patch's grid neighbours that uniform attention gives: their mean
        count / D (0.328 on a 4 x 4 grid), what ``local_attention`` is read against."""
        return float(self.neighbours.mean())


@dataclass(frozen=True)
class ImageTokenConfig(ImageDataConfig):
    """Real images as Paper A's tokens (one patch a token, L = n_patches) and the test-time token
    sparsification measured on the trained models (vit_core.sparsify.image_keep)."""

    test_sparsify: tuple[ImageRule, ...] = param(
        ("least_attended", "background", "random"),
        "rules that remove patches from the test images: least_attended (the patches the trained attention "
        "weighs least, averaged over queries), background (least pixel mass), random",
    )
    test_sparsify_k: tuple[int, ...] = param(
        (), "patches removed per test image, each measured by every rule (empty: none; k = 0 is the test error)"
    )
    sparsify: TokenSetRule = param(
        "all",
        "token set S^n of every image, training and test (Paper A's sparsification): all, or remove sparsify_k "
        "patches of least pixel mass (background) or at random",
    )
    sparsify_k: int = param(0, "patches every image, training and test, loses by sparsify")

    def __post_init__(self) -> None:
        super().__post_init__()
        rules = ImageRule.__args__
        if not set(self.test_sparsify) <= set(rules) or len(set(self.test_sparsify)) < len(self.test_sparsify):
            raise ConfigError("test_sparsify", self.test_sparsify, f"distinct rules among {', '.join(rules)}")
        if not all(0 < k < self.n_patches for k in self.test_sparsify_k):
            raise ConfigError("test_sparsify_k", self.test_sparsify_k, f"each in [1, n_patches={self.n_patches})")
        if self.sparsify not in TokenSetRule.__args__:
            raise ConfigError("sparsify", self.sparsify, f"one of {', '.join(TokenSetRule.__args__)}")
        if not 0 <= self.sparsify_k < self.n_patches or (self.sparsify == "all" and self.sparsify_k):
            raise ConfigError("sparsify_k", self.sparsify_k, f"in [0, n_patches={self.n_patches}), 0 for sparsify=all")
        if self.sparsify_k and self.test_sparsify_k:
            raise ConfigError("test_sparsify_k", self.test_sparsify_k, "empty where sparsify_k removes patches")

    @property
    def n_tokens(self) -> int:
        """L: a patch is a token."""
        return self.n_patches
