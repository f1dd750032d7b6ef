"""Deprecated: the token batch and its blocks moved to vit_core.tokens (Paper A's
sampler to vit_core.li2023.data); import them from vit_core.api, the families' public API. This
alias keeps a family written against the README of before that working, with a DeprecationWarning,
for one release (docs/extending.md, "Public API"), after which it goes."""

import warnings
from importlib import import_module
from typing import TYPE_CHECKING

from vit_core.tokens import BLOCK, TokenBatch, TokenKind, blocks_of

if TYPE_CHECKING:
    from vit_core.li2023.data import sample_tokens

warnings.warn(
    "vit_core.data is deprecated and goes in the next release: import BLOCK, TokenBatch, TokenKind and "
    "blocks_of from vit_core.api (the families' public API)",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = ["BLOCK", "TokenBatch", "TokenKind", "blocks_of", "sample_tokens"]


def __getattr__(name: str):
    if name == "sample_tokens":  # Paper A's sampler (torch), loaded when asked for
        return import_module("vit_core.li2023.data").sample_tokens
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
