"""The public API for experiment families: every name a family from outside vitsweep may import,
in this one module (docs/extending.md, "Public API"). A name here keeps working for at least one
release after it moves: its old place stays as a deprecation alias that warns and names this one.
Anything else in vit_core is internal and may move without notice.

    from vit_core.api import Family, param            # the family's module (no torch: see below)
    from vit_core.api import PackedModels, TokenBatch  # the sampler's and the pack's module

Names load with the module that defines them (PEP 562): ``PackedModels`` (a torch ``nn.Module``)
loads torch when it is first asked for, the rest need none, so a family's module that imports
from here still loads without torch, as a spec is validated."""

from importlib import import_module
from typing import TYPE_CHECKING

from vit_core.family import Curve, Family, FloorTable, Premise, Scaling, Theory
from vit_core.fields import ConfigError, param
from vit_core.seeding import Stream, numpy_rng, stream_seed
from vit_core.tokens import BLOCK, TokenBatch, TokenKind, blocks_of

if TYPE_CHECKING:
    from vit_core.packed import PackedModels

_LAZY = {"PackedModels": "vit_core.packed"}  # name -> its module, loaded when first asked for

__all__ = [
    # a family: its class, what its hooks return, its configs' fields and errors
    "Family",
    "Scaling",
    "Theory",
    "Premise",
    "Curve",
    "FloorTable",
    "param",
    "ConfigError",
    # its samples: a batch of tokens made in blocks from per-block seeded streams
    "TokenBatch",
    "TokenKind",
    "BLOCK",
    "blocks_of",
    "Stream",
    "numpy_rng",
    "stream_seed",
    # its models: a pack of K of them (a torch nn.Module)
    "PackedModels",
]


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
