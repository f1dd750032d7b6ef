"""The search strategy's shape: how a sweep chooses the N (and, tuned, the settings) its cells train
at. A strategy (``Strategy``, shaped like Optuna's ``BaseSampler``) is one class: its spec section
(its fields; ``search: {mode: <its name>}``), its budget (trainings and steps a cell may take), its
problems, its words, how its cells are piloted for `vitsweep plan` (``pilots``) and its round
planner (``make_planner``). What the rest of the code asks of a strategy is this class's interface,
never a concrete strategy's: a wrapper (the ``tuning`` strategy) uses it alone. Strategies are
found by entry points of group ``vitsweep.search_modes``, the built-in ones too (pyproject.toml:
each beside its planner in services.search), so this layer imports none of them. ``Sweep.strategy``
is the sweep's strategy: its search section's, or the ``tuning`` strategy wrapping it where a
tuning section searches every cell (``tuned``)."""

import dataclasses
import functools
import operator
import typing
import warnings
from collections.abc import Callable, Iterable
from importlib.metadata import EntryPoint, entry_points
from typing import Annotated, Any, ClassVar, Protocol

from pydantic import BaseModel, Discriminator, Tag

from services.results import Cell
from services.spec.base import FORBID, Problem
from services.spec.resolved import SweepView
from services.spec.tuning import Tuning
from vit_core.train_config import TrainConfig

SPEC_ONLY = {"kind"}  # set by `models`, never inside `model:` or as an axis
GROUP = "vitsweep.search_modes"


@dataclasses.dataclass(frozen=True)
class PilotRun:
    """One pilot run of a cell (services.estimate.pilot): its training config, its models, each one's
    step size (None: the config's) and, multi-pass, its N (None: the grid's largest, the slowest)."""

    training: TrainConfig
    models: int
    lr: tuple[float, ...] | None = None
    n: tuple[int, ...] | None = None


def spread(values, models: int) -> tuple:
    """``models`` of ``values`` evenly spaced from the smallest to the largest."""
    ordered = sorted(values)
    return tuple(ordered[round(k * (len(ordered) - 1) / max(1, models - 1))] for k in range(models))


class Planner(Protocol):
    """What a strategy's round planner answers the executor and the plan (services.search.rounds.RoundPlanner)."""

    def suggest(self, trial_id: str) -> Any: ...
    def complete(self, trial_id: str, records: list | None, metrics: dict | None = None) -> None: ...
    def get_state(self) -> dict: ...
    def set_state(self, state: dict) -> None: ...


class AdaptiveSearch(Protocol):
    """What a strategy that searches a multi-pass cell's N* round by round holds (sample_complexity):
    a tuning section's multi-pass search runs one such search per setting."""

    precision: float  # stop once N* is bracketed within this relative width
    factor: float  # grid step past an end of n_train
    max_steps_cap: int | None  # a model not converged trains again, its budget doubled, up to this (None: never)


class Strategy(BaseModel):
    """A search strategy: its section's fields, and what every strategy has (a grid's budget),
    which each may change; ``make_planner`` is each one's own."""

    model_config = FORBID
    mode: str
    samples: ClassVar[int] = 1  # trainings of a cell's first round per (N, seed)
    fixed: ClassVar[bool] = False  # whether every training is known before the sweep starts
    planned: ClassVar[bool] = True  # whether its first round is the n_train grid's packs (services.search.packs)
    section: ClassVar[bool] = True  # whether a spec's search section may name it (tuning: a tuning section's)

    @property
    def name(self) -> str:
        return self.mode

    def pilots(self, sweep: SweepView, cell: Cell, models: int) -> list[PilotRun]:
        """How `vitsweep plan` pilots a cell: ``models`` models at its own settings; multi-pass at
        Ns spread over its grid, as its grid or N* search trains them (a run to zero training
        loss grows with N: at the largest N alone fig1_grid_multi_pass's ViT pilots counted
        2.2-3.6x the model-steps its sweep took); one pass at its sample budget."""
        resolved = sweep.resolved_cell(cell)
        n = None if resolved.one_pass else spread(resolved.n_values, models)
        return [PilotRun(resolved.training, models, None, n)]

    def problems(self, sweep: SweepView) -> list[Problem]:
        return []

    def first_trainings(self, sweep: SweepView, cell: Cell) -> int:
        """Models a cell trains in its first round."""
        return self.samples * len(sweep.resolved_cell(cell).n_values) * sweep.seeds

    def most_trainings(self, sweep: SweepView, cell: Cell) -> int:
        """The most models a cell can train."""
        return self.first_trainings(sweep, cell)

    def most_n(self, sweep: SweepView, cell: Cell) -> int:
        """The most N one seed of a multi-pass cell trains at: its grid's."""
        return len(sweep.resolved_cell(cell).n_values)

    def adaptive(self) -> AdaptiveSearch | None:
        """Its adaptive N* search's settings where it searches a multi-pass cell's N* round by
        round (a tuning section's multi-pass search runs one per setting); None where it does not."""
        return None

    def most_steps(self, sweep: SweepView, cell: Cell) -> int:
        """The most SGD steps one training of the cell takes."""
        return sweep.resolved_cell(cell).training.max_steps

    def smallest_batch(self, sweep: SweepView, cell: Cell) -> int:
        """The smallest batch size a training of the cell may take."""
        return sweep.resolved_cell(cell).training.batch_size

    def most_rounds(self, sweep: SweepView, cell: Cell) -> int:
        """The longest chain of a cell's rounds, each waiting for the one before (1: no round waits)."""
        return 1

    def n_limit(self, sweep: SweepView) -> int:
        """The largest N the sweep may train."""
        return sweep.largest_n

    def objective(self) -> tuple[str, str] | None:
        """(metric, direction) where trials are samples scored by an objective (the best is reported)."""
        return None

    def typed(self, sampled: dict[str, Any]) -> dict[str, Any]:
        """A trial's sampled values (where it samples a cell's values) as the cell's fields take them."""
        return sampled

    def params(self) -> dict[str, Any]:
        """Its settings as the sweep's tracking params (``search.<name>``): its section's fields."""
        return self.model_dump()

    def trials(self, first_packs: int) -> int | None:
        """Ray Tune trials the sweep runs (given its first round's packs); None where later
        rounds depend on the results."""
        return first_packs if self.fixed else None

    def trainings_text(self, sweep: SweepView, first: int, most: int) -> str:
        """What `vitsweep validate` says of the sweep's size."""
        return f"{first} trainings"

    def make_planner(self, sweep: Any, slots: int | None = None) -> Planner:
        """The sweep's round planner (a services.search.rounds.RoundPlanner for the resolved Sweep),
        its packs sized for ``slots`` trials at once."""
        raise NotImplementedError(f"strategy {self.mode} has no round planner")


STRATEGIES: dict[str, type[Strategy]] = {}  # every installed strategy by name, grid first (load_strategies)


def strategy_name(strategy: type[Strategy]) -> str:
    """A strategy's name (what ``search.mode`` names it by): the value of its ``mode`` Literal."""
    return typing.get_args(strategy.model_fields["mode"].annotation)[0]


def load_strategies(points: Iterable[EntryPoint] | None = None) -> dict[str, type[Strategy]]:
    """The installed strategies (STRATEGIES, filled again from the entry points of group GROUP, or
    from ``points``), grid first, the others by name: a strategy that fails to load is left out
    with a warning that names its entry point and why."""
    found = {}
    for point in entry_points(group=GROUP) if points is None else points:
        try:
            strategy = point.load()
            if strategy_name(strategy) != point.name:
                raise ValueError(f"its mode field is {strategy_name(strategy)!r}")
        except Exception as error:  # a broken package must not take the installed strategies down with it
            warnings.warn(
                f"search mode {point.name} ({point.value}, group {GROUP}) left out: its strategy failed to load: "
                f"{error}",
                stacklevel=2,
            )
            continue
        found[point.name] = strategy
    STRATEGIES.clear()
    STRATEGIES.update(sorted(found.items(), key=lambda item: (item[0] != "grid", item[0])))
    return STRATEGIES


def search_strategies() -> dict[str, type[Strategy]]:
    """The strategies a search section may name (every installed one but those only a section of
    their own makes, as tuning's), grid first."""
    return {name: strategy for name, strategy in STRATEGIES.items() if strategy.section}


def default_search() -> Strategy:
    """A spec's search where it names none: the grid."""
    return STRATEGIES["grid"](mode="grid")


def tuned(search: Strategy, tuning: Tuning) -> Strategy:
    """The strategy of a sweep whose tuning section searches every cell: the installed ``tuning``
    strategy, each cell's settings chosen before its N* is measured with ``search``."""
    return STRATEGIES["tuning"](mode="tuning", tuning=tuning, search=search)


def renamed(module: str, aliases: dict[str, tuple[str, Any]]) -> Callable[[str], Any]:
    """A module's ``__getattr__`` that answers each old name of ``aliases`` (old -> (new, value))
    with a DeprecationWarning naming the new one: the previous release's names, kept for one more."""

    def __getattr__(name: str) -> Any:
        if name not in aliases:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        new, value = aliases[name]
        warnings.warn(f"{module}.{name} is deprecated: use {new}", DeprecationWarning, stacklevel=2)
        return value

    return __getattr__


def _search_mode(value: Any) -> str | None:
    """The strategy a search section names (grid where it names none; None where it is not a section)."""
    if isinstance(value, dict):
        return value.get("mode", "grid")
    return value.mode if isinstance(value, BaseModel) else None


def search_union() -> Any:
    """The search section's type: one of the search strategies by its ``mode``."""
    named = search_strategies()
    strategies = [Annotated[cls, Tag(name)] for name, cls in named.items()]
    tag = Discriminator(
        _search_mode, custom_error_type="search_mode", custom_error_message=f"one of {', '.join(named)}"
    )
    return Annotated[functools.reduce(operator.or_, strategies), tag]
