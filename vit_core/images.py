"""Real images cut into patches, for Paper B's positional-vs-vanilla comparison, offline.

``digits``: scikit-learn's 8x8 handwritten digits (1,797 images, shipped inside the package as a
CSV: read with numpy, scikit-learn is never imported). ``cifar10``: CIFAR-10's *binary* version
from a local folder (``data_batch_1.bin`` ... ``data_batch_5.bin``, ``test_batch.bin``: one label
byte then 3,072 pixel bytes per image), never downloaded and never unpickled. ``fashion_mnist``:
Fashion-MNIST's 60,000 training and 10,000 test images of 28x28, from the gzipped idx files that
Debian's dataset-fashion-mnist installs. Labels are binary, as the models' are: +1 for the classes
in ``positive`` (default: even class indices), -1 for those in ``negative`` (default: the rest);
images of other classes are left out. ``permute_pixels`` applies one fixed random permutation to
every image's pixels before cutting patches (patches stop being local).

Digits are split once (``structure_seed``) into 70% training pool and 30% test images (the other
sources ship their own split); a model's training set is the first N of its seed's permutation of
the pool, so sets are nested in N. Images stay in their stored bytes until a batch is cut.
"""

import gzip
import importlib.util
import math
from functools import cache
from pathlib import Path

import numpy as np
import torch

from vit_core.fields import ConfigError
from vit_core.image_config import CIFAR_TRAIN, IDX_RANKS, ImageDataConfig, fashion_file
from vit_core.seeding import Stream, numpy_rng
from vit_core.tokens import TokenBatch, TokenKind


def _patches(cfg: ImageDataConfig, images: np.ndarray) -> np.ndarray:
    """(n, H, W, c) images in [0, 1] -> (n, D, p*p*c) patches in row-major grid order."""
    n, H, W, c = images.shape
    if cfg.permute_pixels:
        order = numpy_rng(cfg.structure_seed, Stream.PATTERNS, 3).permutation(H * W)
        images = images.reshape(n, H * W, c)[:, order].reshape(n, H, W, c)
    p = cfg.patch
    grid = images.reshape(n, H // p, p, W // p, p, c).transpose(0, 1, 3, 2, 4, 5)
    return np.ascontiguousarray(grid.reshape(n, (H // p) * (W // p), p * p * c), dtype=np.float32)


Split = tuple[np.ndarray, np.ndarray]  # images (n, H, W, c) as stored, labels +-1


@cache
def _split(cfg: ImageDataConfig) -> tuple[Split, Split, float]:
    """(training pool, test images, the pixel value that stands for 1), the task's classes only."""
    if cfg.source == "digits":
        images, classes = _digits()
        order = numpy_rng(cfg.structure_seed, Stream.PATTERNS, 4).permutation(len(images))
        cut = math.floor(0.7 * len(images))
        train, test = order[:cut], order[cut:]
        parts, white = ((images[train], classes[train]), (images[test], classes[test])), 16.0
    elif cfg.source == "cifar10":
        folder = Path(cfg.path)
        parts = tuple(_cifar([folder / f for f in files]) for files in (CIFAR_TRAIN, ["test_batch.bin"]))
        white = 255.0
    else:
        parts, white = tuple(_fashion(cfg.folder, part) for part in ("train", "t10k")), 255.0
    return (*(_binary(cfg, x, y) for x, y in parts), white)


def _binary(cfg: ImageDataConfig, images: np.ndarray, classes: np.ndarray) -> Split:
    """The task's images and their +-1 labels: ``positive`` against ``negative`` (see the module)."""
    if not cfg.positive:
        return images, np.where(classes % 2 == 0, 1.0, -1.0).astype(np.float32)
    plus = np.isin(classes, cfg.positive)
    kept = plus | (np.isin(classes, cfg.negative) if cfg.negative else True)
    return images[kept], np.where(plus[kept], 1.0, -1.0).astype(np.float32)


def _digits() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's digits CSV: 64 pixel values in 0..16 and the class, per line."""
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("source", "digits", "needs scikit-learn installed (its 8x8 digits ship inside it)")
    csv = Path(spec.submodule_search_locations[0]) / "datasets" / "data" / "digits.csv.gz"
    with gzip.open(csv, "rt") as f:
        table = np.loadtxt(f, delimiter=",")
    return table[:, :64].reshape(-1, 8, 8, 1), table[:, 64].astype(np.int64)


def _cifar(files: list[Path]) -> tuple[np.ndarray, np.ndarray]:
    """CIFAR-10 binary records: label byte, then 1,024 red, 1,024 green and 1,024 blue bytes."""
    raw = np.concatenate([np.fromfile(f, dtype=np.uint8) for f in files]).reshape(-1, 3073)
    return raw[:, 1:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1), raw[:, 0].astype(np.int64)


def _fashion(folder: Path, part: str) -> tuple[np.ndarray, np.ndarray]:
    """Fashion-MNIST's ``part`` (train or t10k): gzipped idx files, a big-endian header (a magic
    number whose last byte is the rank, then each dimension's size) and unsigned bytes."""
    images, labels = (_idx(folder / fashion_file(part, kind), IDX_RANKS[kind]) for kind in ("images", "labels"))
    return images[..., None], labels.astype(np.int64)


def _idx(file: Path, rank: int) -> np.ndarray:
    """An idx file of unsigned bytes of the given rank (its header is checked)."""
    with gzip.open(file, "rb") as f:
        raw = f.read()
    magic = int.from_bytes(raw[:4], "big")
    if magic != 0x0800 + rank:
        raise ValueError(f"{file}: not an idx file of unsigned bytes of rank {rank} (magic {magic:#x})")
    shape = [int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(rank)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * rank).reshape(shape)


def sample_images(
    cfg: ImageDataConfig, n: int, seed: int, stream: Stream = Stream.TRAIN_DATA, start: int = 0
) -> TokenBatch:
    """Training stream: images [start, start + n) of the seed's permutation of the training
    pool (one pass over it at most); test stream: the first n test images (the seed is ignored)."""
    train, test, white = _split(cfg)
    images, labels = train if stream == Stream.TRAIN_DATA else test
    if start + n > len(images):
        raise ValueError(
            f"n={start + n}: {cfg.source} has {len(images)} "
            f"{'training' if stream == Stream.TRAIN_DATA else 'test'} images"
        )
    order = numpy_rng(seed, stream).permutation(len(images)) if stream == Stream.TRAIN_DATA else np.arange(len(images))
    index = order[start : start + n]
    X = _patches(cfg, images[index] / white)
    shape = X.shape[:2]
    return TokenBatch(
        tokens=torch.from_numpy(X),
        labels=torch.from_numpy(labels[index]),
        kinds=torch.full(shape, int(TokenKind.IRRELEVANT), dtype=torch.int8),
        noise_norm=torch.zeros(shape),
        keep=torch.ones(shape, dtype=torch.bool),
    )
