# The README's smallest family as of 50fb26e^, written against the public names
# of then, verbatim: tests/test_family_plugin.py installs and trains it through the aliases.
from dataclasses import dataclass
from typing import Literal

from vit_core.family import Family
from vit_core.fields import param


@dataclass(frozen=True)
class SignData:
    n_tokens: int = param(8, "L, tokens per sample")
    dim: int = param(4, "d, the token dimension")


@dataclass(frozen=True)
class LinearConfig:
    kind: Literal["linear"] = param("linear", "linear: a linear score of the mean token")


class SignOfMean(Family):
    name = "sign_of_mean"
    description = "sign_of_mean: the sign of the mean token's first coordinate, by a linear score"
    data = SignData
    model = LinearConfig

    def sample(self, data, n, seed, stream, start):
        from my_family.model import sample_signs

        return sample_signs(data, n, seed, stream, start)

    def build(self, model, data, seeds, device):
        from my_family.model import LinearPack

        return LinearPack.build(model, data, seeds, device)
