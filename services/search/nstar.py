"""Adaptive N* search (strategy ``sample_complexity``): which packs to train next, from the results so far.

A one_pass cell needs no search: its one round (each seed trained to its sample budget) gives its
success at every evaluated N, so its Bracket is not adaptive and plans nothing after it.

Per cell, the first round trains the spec's N grid (geometric, e.g. 5, 10, 20, ...). The search
then finds the stable N* (analysis.stable_n_star): it extends the grid by ``search.factor`` past
an end that does not bracket N*, and bisects the bracket (largest failing N, N*] on a log scale
until hi/lo <= 1 + ``search.precision``. Where the success rate does not rise with N (a failing N
above one that succeeded: sample-wise double descent), every interval of that region is refined
as well, so the curve's shape is resolved rather than bisected past. Each round is a set of new
packs (new Tune trials); cells run their rounds independently and in parallel. Pure: no Ray here
(services.execution.ray_tune adapts NStarSearch to Ray Tune's Searcher).
"""

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import Field

from services import legacy
from services.analysis import counted_success, full_grid_size, stable_n_star
from services.results import Cell, ModelRecord
from services.search.packs import Pack, cut, pack_cost
from services.search.rounds import RoundPlanner
from services.spec import Problem, Strategy
from services.spec.resolved import SweepView
from services.spec.strategies import AdaptiveSearch, renamed
from vit_core.outcomes import Outcome

if TYPE_CHECKING:
    from services.spec import Sweep


@dataclass
class Bracket:
    """The search state of one cell: success per seed at every N trained so far."""

    grid: list[int]
    p: float
    precision: float
    factor: float
    n_max: int
    outcomes: dict[int, list[float | None]] = field(
        default_factory=dict
    )  # per seed: 1 succeeded, 0 failed, None not counted
    rounds: int = 0
    adaptive: bool = True  # False for a one_pass cell: its one round gives every N
    retries: list[list[int]] = field(
        default_factory=list
    )  # [N, seed, max_steps] of models to train again with a larger budget

    def rates(self) -> tuple[np.ndarray, np.ndarray]:
        """The trained N and their success rates over the counted models (NaN where none counts)."""
        ns = np.array(sorted(self.outcomes))
        counted = [[v for v in self.outcomes[n] if v is not None] for n in ns]
        return ns, np.array([np.mean(c) if c else np.nan for c in counted])

    def next_round(self) -> list[int]:
        """The N values to train next; [] when N* is known to the precision, or cannot be."""
        if self.outcomes and not self.adaptive:
            return []
        if not self.outcomes:
            return sorted(self.grid)
        ns, rates = self.rates()
        star = stable_n_star(ns, rates, self.p)
        if star is None:  # even the largest N misses p: extend up, until n_max
            up = min(self.n_max, math.ceil(ns[-1] * self.factor))
            return [up] if up > ns[-1] else []
        i = int(np.searchsorted(ns, star))
        if i == 0:  # the smallest N already reaches p: extend down, until N = 1
            down = max(1, math.floor(ns[0] / self.factor))
            return [down] if down < ns[0] else []
        if ns[i] <= ns[i - 1] * (1 + self.precision):
            return []
        reached = np.nonzero(rates[: i - 1] >= self.p)[0]
        first = max(int(reached[0]) - 1, 0) if len(reached) else i - 1  # non-monotone: refine from there
        return sorted({m for lo, hi in zip(ns[first:i], ns[first + 1 : i + 1]) if (m := self._midpoint(lo, hi))})

    def _midpoint(self, lo: int, hi: int) -> int | None:
        """The geometric midpoint of (lo, hi), if the interval is wider than the precision."""
        if hi <= lo * (1 + self.precision):
            return None
        mid = round(math.sqrt(lo * hi))
        return mid if lo < mid < hi else None

    def record(self, n: int, seed: int, value: float | None, n_seeds: int) -> None:
        self.outcomes.setdefault(n, [None] * n_seeds)[seed] = value

    def state(self) -> dict:
        """Its state as plain JSON values (from_state reads it)."""
        return vars(self) | {"outcomes": {str(n): v for n, v in self.outcomes.items()}}

    @classmethod
    def from_state(cls, state: dict) -> "Bracket":
        return cls(**(state | {"outcomes": {int(n): v for n, v in state["outcomes"].items()}}))


def bracket_round(index: int, bracket: Bracket, seeds: list[int], size: int) -> list[Pack]:
    """The packs of cell ``index``'s next round of one bracket, over ``seeds``: its models that
    did not converge, again with a larger step budget, before its next N values; [] when done."""
    if bracket.retries:
        packs = [
            pack
            for budget in sorted({b for _, _, b in bracket.retries})
            for pack in cut(index, [(n, s) for n, s, b in bracket.retries if b == budget], size, max_steps=budget)
        ]
        bracket.retries = []
        return packs
    pairs = [(n, s) for n in bracket.next_round() for s in seeds]
    bracket.rounds += bool(pairs)
    return cut(index, pairs, size)


def bracket_learn(bracket: Bracket, records: list[ModelRecord], seeds: list[int], budget: int, cap: int | None) -> None:
    """Record a pack's models, trained with step ``budget``, in their bracket (``seeds``: the
    bracket's seeds, in its column order); a model that did not converge trains again with twice
    the budget, up to ``cap`` (search.max_steps_cap; None: never)."""
    more = min(2 * budget, cap or 0)
    for r in records:
        if r.outcome == Outcome.NOT_CONVERGED and more > budget:
            bracket.retries.append([r.n_train, r.seed, more])
        bracket.record(r.n_train, seeds.index(r.seed), counted_success(r.outcome), len(seeds))


class NStarSearch(RoundPlanner):
    """Plans the adaptive search's packs round by round for every cell (packs.RoundPlanner)."""

    def __init__(self, sweep: "Sweep", slots: int | None = None):
        super().__init__(len(sweep.cells), pack_cost(sweep))
        search = sweep.search
        self.seeds, self.pack_size = sweep.measurement_seeds, sweep.resources.models_per_pack
        self.budgets = [sweep.resolved_cell(c).training.max_steps for c in sweep.cells]  # each cell's step budget
        self.max_steps_cap = search.max_steps_cap
        self.cells = [
            Bracket(
                list(sweep.resolved_cell(c).n_values),
                sweep.success_rate,
                search.precision,
                search.factor,
                sweep.n_max,
                adaptive=not sweep.resolved_cell(c).one_pass,
            )
            for c in sweep.cells
        ]

    def next_round(self, index: int) -> list[Pack]:
        return bracket_round(index, self.cells[index], self.seeds, self.pack_size)

    def learn(self, pack: Pack, records: list[ModelRecord]) -> None:
        budget = pack.max_steps or self.budgets[pack.cell]
        bracket_learn(self.cells[pack.cell], records, self.seeds, budget, self.max_steps_cap)

    def get_state(self) -> dict:
        return super().get_state() | {"cells": [c.state() for c in self.cells]}

    def set_state(self, state: dict) -> None:
        super().set_state(state)
        cells, failed = legacy.bracket_states(state["cells"])
        self.failed |= failed
        self.cells = [Bracket.from_state(c) for c in cells]


class SampleComplexityStrategy(Strategy):
    """sample_complexity: per cell, find N* adaptively, starting from n_train (services.search.nstar)."""

    mode: Literal["sample_complexity"]
    precision: float = Field(0.1, gt=0, le=1, description="stop once N* is bracketed within this relative width")
    factor: float = Field(2.0, gt=1, description="grid step when N* lies beyond an end of n_train")
    n_max: int | None = Field(None, ge=1, description="never train above this N (default: 16x the largest n_train)")
    max_steps_cap: int | None = Field(
        None,
        ge=1,
        description="a model whose training error is not 0 when its step budget runs out trains again with twice "
        "the budget, up to this many steps (None: never)",
    )

    def problems(self, sweep: SweepView) -> list[Problem]:
        if self.n_max is not None and self.n_max < sweep.largest_n:
            return [Problem("search.n_max", self.n_max, f"must be at least the largest n_train ({sweep.largest_n})")]
        return []

    def adaptive(self) -> AdaptiveSearch:
        return self

    def most_n(self, sweep: SweepView, cell: Cell) -> int:
        """The most N one seed of a multi-pass cell trains at: its grid and every N of ratio
        1 + precision up to n_max."""
        return len(sweep.resolved_cell(cell).n_values) + full_grid_size(1, self.n_limit(sweep), self.precision)

    def most_trainings(self, sweep: SweepView, cell: Cell) -> int:
        """Multi-pass: every N of a geometric grid of ratio 1 + precision up to n_max (it trains far fewer)."""
        return (
            super().most_trainings(sweep, cell)
            if sweep.resolved_cell(cell).one_pass
            else self.most_n(sweep, cell) * sweep.seeds
        )

    def most_steps(self, sweep: SweepView, cell: Cell) -> int:
        """Multi-pass: a model that did not converge may train again, up to max_steps_cap."""
        searched = not sweep.resolved_cell(cell).one_pass
        return (searched and self.max_steps_cap) or sweep.resolved_cell(cell).training.max_steps

    def most_rounds(self, sweep: SweepView, cell: Cell) -> int:
        """Multi-pass: a round per N it may try, each maybe followed by retries that double the
        step budget up to max_steps_cap (one pass: its one round)."""
        if sweep.resolved_cell(cell).one_pass:
            return 1
        budget, cap = sweep.resolved_cell(cell).training.max_steps, self.max_steps_cap or 0
        return self.most_n(sweep, cell) * (1 + max(0, math.ceil(math.log2(cap / budget))) if cap > budget else 1)

    def n_limit(self, sweep: SweepView) -> int:
        return self.n_max or 16 * sweep.largest_n

    def trainings_text(self, sweep: SweepView, first: int, most: int) -> str:
        return f"{first} trainings in the first round of the adaptive N* search (at most {most})"

    def make_planner(self, sweep: "Sweep", slots: int | None = None) -> "NStarSearch":
        return NStarSearch(sweep, slots)


__getattr__ = renamed(__name__, {"SampleComplexityMode": ("SampleComplexityStrategy", SampleComplexityStrategy)})
