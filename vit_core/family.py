"""Experiment families: what one learning-theory experiment is to vitsweep, and where the installed
ones are found.

A family names its data and model configs (frozen dataclasses made with ``fields.param``; the
model config's ``kind`` field lists the model kinds it compares, as a Literal or a registry of
``param(choices=...)``), samples data and builds packs of models for the trainer, and says what
its theory claims: the variable N* scales with and each kind's exponent. The service asks a
family for all of this and names none of them itself.

Families are found through the entry points of group ``vitsweep.families`` (each names a
``Family`` subclass), Paper A's and Paper B's as any other package's: see README "Add your own
experiment". A family's module must load without torch (a spec is validated without it):
``sample`` and ``build`` import what trains where they run.
"""

import warnings
from dataclasses import dataclass
from functools import cache
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from vit_core.fields import choices_of
from vit_core.seeding import Stream

GROUP = "vitsweep.families"


@dataclass(frozen=True)
class Scaling:
    """The data field N* is fitted against: N* ~ x^k with x the field's effective value, or its
    inverse (Paper A: x = 1/alpha*). ``rule`` names the spec section of training values that grow
    with x (Paper A's alpha_scaling); None where the family has none. ``shifted``: the theory's
    bound is N ~ (value - c)^-k, so N* is also fitted in that form (services.stats.forms)."""

    field: str  # the data config's field ("alpha_star")
    name: str  # the field for people ("alpha*")
    inverse: bool = False
    axis: str = ""  # x on a figure's axis ("1 / alpha* (effective)"); "": the symbol (x_label)
    column: str = ""  # the field's effective value in a table ("alpha* (effective)"); "": the name (value_label)
    rule: str | None = None
    format: str = ".4g"  # how a table prints the field's value
    shifted: bool = False  # the theory's bound is a power of the field less an unknown shift c (Paper A: alpha* - c)

    @property
    def symbol(self) -> str:
        """x in a formula: "1/alpha*", or the name."""
        return f"1/{self.name}" if self.inverse else self.name

    @property
    def x_label(self) -> str:
        """x on a figure's axis."""
        return self.axis or self.symbol

    @property
    def value_label(self) -> str:
        """The field's effective value as a table's column names it."""
        return self.column or self.name

    def x(self, value: float) -> float:
        return 1 / value if self.inverse else value

    def growth(self, reference: float, value: float) -> float:
        """How far x has moved from the reference value of the field to ``value`` (a factor > 0)."""
        return reference / value if self.inverse else value / reference


@dataclass(frozen=True)
class Curve:
    """A curve of a paper's figure, drawn beside ours: its name, x and y."""

    label: str
    x: np.ndarray
    y: np.ndarray


def reference_rows(path: Path) -> list[list[str]]:
    """The rows of a reference CSV shipped with a family, comment lines (#) left out."""
    lines = path.read_text().splitlines()
    return [line.split(",") for line in lines if line and not line.startswith("#")]


@dataclass(frozen=True)
class Theory:
    """What a family's theory says of one model kind's N*: N* ~ x^exponent, in words."""

    exponent: float
    claim: str
    source: str = ""  # where the theory says it ("Theorem 1"): a statement's name for it


@dataclass(frozen=True)
class Premise:
    """One premise of a family's theorem, checked on a cell: ``value`` against ``bound`` (``met``
    where the cell satisfies it), and the premise in words with where it comes from."""

    name: str
    met: bool
    value: float
    bound: float
    statement: str


@dataclass(frozen=True)
class FloorTable:
    """A plug-in rule fitted on each seed's first N = 1..n_max training samples (Family.information_floor)."""

    zero_error: np.ndarray  # (n_max, seeds) of 1.0/0.0: no error on the test set
    both_labels_from: np.ndarray  # (seeds,): the smallest N whose samples hold both labels (0: none by n_max)


class Family:
    """One experiment family. Subclasses set the class attributes and implement ``sample`` and
    ``build``; the rest has defaults that say nothing (no checks, unit cost, no theory)."""

    name: ClassVar[str]
    description: ClassVar[str]
    data: ClassVar[type]  # the data config (a frozen dataclass of ``param`` fields)
    model: ClassVar[type]  # the model config; its ``kind`` field's Literal (or choices) lists the model kinds
    scaling: ClassVar[Scaling | None] = None
    theory: ClassVar[dict[str, Theory]] = {}  # model kind -> its claimed exponent of N* in x
    difference_claims: ClassVar[dict[str, str]] = {}  # "b - a" -> what the theory says of b's exponent minus a's
    iterations_exponent: ClassVar[float | None] = None  # T, the steps to zero error, ~ x^this (and ~ (1/eta)^this)
    favoured: ClassVar[tuple[str, str] | None] = None  # (the kind the theory favours, the kind it beats)
    question: ClassVar[str] = ""  # what a sweep of its scaling field answers, in a line (a report opens with it)
    reference: ClassVar[dict[str, Path]] = {}  # model kind -> the paper's success table (N x x^exponent, CSV)
    names: ClassVar[dict[str, str]] = {}  # model kind -> how people write it ("vit" -> "ViT"); default: the kind
    sparsification_quantity: ClassVar[str] = "test_loss"  # the final test metric a swept sparsify_k is read by

    def sample(self, data: Any, n: int, seed: int, stream: Stream, start: int) -> Any:
        """Samples [start, start + n) of a seed's ``stream`` as a ``vit_core.tokens.TokenBatch``."""
        raise NotImplementedError

    def sample_on(self, data: Any, n: int, seed: int, stream: Stream, start: int, device: Any) -> Any:
        """The same samples as ``sample``, or other draws of their distribution, on ``device``: what
        one-pass training reads there. By default made on the host and moved; a family that draws
        on the device overrides it (Paper A: its noise, from the device's generator)."""
        return self.sample(data, n, seed, stream, start).to(device)

    def build(self, model: Any, data: Any, seeds: list[int], device: Any) -> Any:
        """A pack of len(seeds) models for ``data`` (``vit_core.packed.PackedModels``), model k from seeds[k]."""
        raise NotImplementedError

    def check(self, data: Any, model: Any) -> None:
        """Raise ``ConfigError`` where ``model`` cannot be built for ``data``."""

    def test_set_metric_names(self, data: Any) -> tuple[str, ...]:
        """The names of the values ``test_set_metrics`` measures on ``data``: () where it measures none."""
        return ()

    def test_set_metrics(self, data: Any, pack: Any, test: Any, seeds: list[int], train: Any) -> dict[str, Any]:
        """Per-model values (K,) of ``pack`` (its models of ``seeds``) on the shared ``test`` set
        (a TokenBatch), recorded beside the test error at every evaluation (Paper A on images:
        the test error after removing patches; TrainConfig ``train`` for the loss and eval_batch)."""
        return {}

    def sample_cost(self, data: Any, model: Any) -> float:
        """Multiply-adds of one model's forward pass on one sample: what orders packs longest first."""
        return 1.0

    def scaling_value(self, data: Any) -> float:
        """The scaling field's value the samples really have (Paper A: alpha* after rounding)."""
        return getattr(data, self.scaling.field)

    def premises(self, data: Any, model: Any, batch_size: int, lr: float, n: int, seeds: list[int]) -> list[Premise]:
        """The premises of the theory's claim about ``model``, checked on a cell trained at
        ``batch_size`` and step ``lr`` with ``n`` samples, on the models of ``seeds`` as built
        where a premise is about the initial model: a fitted exponent is compared with the claim
        only where every one is met. None known: []."""
        return []

    def information_floor(
        self, data: Any, seeds: list[int], n_max: int, n_test: int, test_seeds: list[int]
    ) -> FloorTable | None:
        """Whether a plug-in rule that knows the data's form, fitted on seed s's first N = 1..n_max
        training samples, makes no error on its test set (n_test samples of s's test seed in
        ``test_seeds``): how few samples the data allow, beside what SGD needs, an upper bound on
        what such a rule needs. None: no such rule known."""
        return None

    def vote_margins(self, data: Any, n: int, seed: int) -> Any:
        """The vote margin (n,) of each of the first ``n`` samples of ``seed``'s test stream: how many
        more label-relevant tokens than confusion tokens it holds (a margin of 1 is a near tie that
        one token decides). None: the data have no vote."""
        return None

    def sample_premises(self, data: Any, n: int, seed: int, stream: Stream) -> dict[str, Any]:
        """Per premise that the theory states on averages, whether each of the first ``n`` samples of
        (seed, stream) meets it on its own (name -> (n,) bool). None known: {}."""
        return {}

    def difficulty(self, data: Any) -> dict[str, float]:
        """How hard ``data`` are for simple rules that know the truth (name -> value): a regime
        such a rule already solves says little about the models. None known: {}."""
        return {}

    def bayes_error(self, data: Any) -> float | None:
        """The lowest test error any classifier can reach on ``data``, where the family knows it."""
        return None

    def attention_reference(self) -> Curve | None:
        """The paper's attention mass on label-relevant tokens against the step, where it shows one."""
        return None

    def sparsification_reference(self) -> list[tuple[str, str, list[tuple[int, float]]]]:
        """The paper's test loss against tokens removed: (its strategy, our sparsify value, points)."""
        return []

    def test_error_reference(self, data: Any) -> dict[str, float]:
        """The paper's test errors for data like ``data``: name -> error."""
        return {}

    def true_sets(self, data: Any) -> np.ndarray | None:
        """(D, D) bool: which patches belong together, where the data have such a truth (Paper B)."""
        return None

    def name_of(self, kind: str) -> str:
        return self.names.get(kind, kind)

    @classmethod
    def kinds(cls) -> tuple[str, ...]:
        """The model kinds: the values the model config's ``kind`` field allows (its Literal, or
        the registry its ``param`` names: Paper A's vit_core.li2023.kinds.KINDS)."""
        return choices_of(cls.model, "kind")


@cache
def families() -> dict[str, Family]:
    """The installed families by name, in the order their names sort. A family that fails to load
    is left out with a warning that names its entry point and why: the others still work."""
    found = {}
    for point in entry_points(group=GROUP):
        try:
            family = point.load()()
            if family.name != point.name:
                raise ValueError(f"it loads a family named {family.name!r}")
        except Exception as error:  # a broken package must not take the installed families down with it
            warnings.warn(f"family {point.name} ({point.value}, group {GROUP}) left out: {error}", stacklevel=2)
            continue
        found[family.name] = family
    return dict(sorted(found.items()))


def family_of(data: Any) -> Family:
    """The family whose data config ``data`` is."""
    for family in families().values():
        if type(data) is family.data:
            return family
    raise TypeError(f"no installed family has data config {type(data).__name__} (entry points of {GROUP})")
