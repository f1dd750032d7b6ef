"""The resolved sweep (Sweep): a checked spec resolved once into its cells, each cell's configs
and N, its strategy and the settings every layer past the spec reads. `vitsweep` resolves a
spec here once (services.spec.parse_spec); planners, trials, statistics, the store and the
reports receive a Sweep, never the schema, which stays with the spec layer and the record."""

import dataclasses
from functools import cached_property

from services.results import Cell
from services.spec.resolved import ResolvedCell, TrialSweep
from services.spec.schema import AnswerSpec, Resources, SweepSpec, Tracking
from services.spec.strategies import Strategy, tuned
from services.spec.tuning import Tuning
from vit_core.family import Family


@dataclasses.dataclass(frozen=True, eq=False, kw_only=True)
class Sweep:
    """A checked spec resolved once: models x the product of their axes, each cell resolved into
    vit_core's configs and the N it trains at, with ``seeds`` seeds from ``seed_start``."""

    spec: SweepSpec  # as written and checked: what the record keeps and compares, not read for what is below
    family: Family
    name: str
    models: tuple[str, ...]
    cells: tuple[Cell, ...]  # in a stable order: a pack's cell is an index into it
    strategy: Strategy  # the search section's, or the tuning strategy wrapping it where a tuning section is
    search: Strategy  # the search section's strategy
    tuning: Tuning | None
    swept: dict[str, list]  # every axis some model sweeps, in spec order, with its first model's values
    seeds: int
    seed_start: int
    success_rate: float
    criterion: str  # one pass: the headline N*'s success criterion (services.analysis.CRITERIA)
    answer: AnswerSpec  # the setting the answer is read at, its equivalence margin and its checks
    max_not_converged: float
    resources: Resources
    tracking: Tracking
    _resolved: dict[str, ResolvedCell] = dataclasses.field(repr=False)
    _tunings: dict[str, Tuning | None] = dataclasses.field(repr=False)

    @classmethod
    def of(cls, spec: SweepSpec) -> "Sweep":
        """``spec`` resolved: every cell's configs (ConfigError where vit_core refuses one: parse_spec checks first)."""
        cells = tuple(spec.cells)
        return cls(
            spec=spec,
            family=spec.FAMILY,
            name=spec.name,
            models=tuple(spec.models),
            cells=cells,
            strategy=spec.search if spec.tuning is None else tuned(spec.search, spec.tuning),
            search=spec.search,
            tuning=spec.tuning,
            swept=spec.swept,
            seeds=spec.seeds,
            seed_start=spec.seed_start,
            success_rate=spec.success_rate,
            criterion=spec.criterion,
            answer=spec.answer,
            max_not_converged=spec.max_not_converged,
            resources=spec.resources,
            tracking=spec.tracking,
            _resolved={c.key: spec.resolve(c) for c in cells},
            _tunings={m: spec.tuning_of(m) for m in spec.models},
        )

    @property
    def measurement_seeds(self) -> list[int]:
        """The seeds every cell trains at every N (N* is measured on them): ``seeds`` of them from ``seed_start``."""
        return list(range(self.seed_start, self.seed_start + self.seeds))

    def resolved_cell(self, cell: Cell) -> ResolvedCell:
        """A cell's configs and N, resolved once: the sweep's own, or one of values a searcher
        sampled (a ConfigError is raised again each time)."""
        if cell.key not in self._resolved:
            self._resolved[cell.key] = self.resolve(cell)
        return self._resolved[cell.key]

    def resolve(self, cell: Cell) -> ResolvedCell:
        """One cell resolved afresh from the spec: a probe of values the cells do not hold."""
        return self.spec.resolve(cell)

    def tuning_of(self, model: str) -> Tuning | None:
        """A model's tuning: the sweep's, with the value lists of its own (per_model) replacing."""
        return self._tunings[model]

    def sample_cost(self, cell: Cell) -> float:
        """Multiply-adds of one model's forward pass on one sample, as the family counts them: what
        orders packs longest first (services.search.packs.pack_cost)."""
        resolved = self.resolved_cell(cell)
        return self.family.sample_cost(resolved.data, resolved.model)

    @cached_property
    def trainings(self) -> int:
        """Models the sweep trains in its first round (sample_complexity: later rounds add more;
        tuning: its grid on the selection seeds and the measurement, before any extension)."""
        return sum(self.strategy.first_trainings(self, c) for c in self.cells)

    @cached_property
    def max_trainings_bound(self) -> int:
        """The most models the sweep can train (its strategy's bound, summed over its cells)."""
        return sum(self.strategy.most_trainings(self, c) for c in self.cells)

    @cached_property
    def largest_n(self) -> int:
        """The largest N any multi_pass cell starts from (any cell's, when all are one_pass)."""
        searched = [c for c in self.cells if not self.resolved_cell(c).one_pass] or self.cells
        return max(max(self.resolved_cell(c).n_values) for c in searched)

    @property
    def n_max(self) -> int:
        """The largest N the sweep may train."""
        return self.strategy.n_limit(self)

    def for_trials(self) -> TrialSweep:
        """What trials receive: every cell resolved, and what a trial asks of its node."""
        r = self.resources
        cells = tuple(self.resolved_cell(c) for c in self.cells)
        return TrialSweep(self.name, cells, r.cpus_per_trial, r.gpus_per_trial)
