"""Training settings searched inside every cell (``tuning``): N* of a model class, not of one optimiser setting.

In one pass N = B·t, so a cell's N* is B times the SGD steps it needs at *that* (B, eta). Per cell,
each setting of the space is trained on the *selection* seeds; the setting with the smallest N*
there is chosen, and the cell's N* and its CI are then measured at that setting on other,
*held-out* seeds (the measurement seeds, ``seeds``), so that the minimum over many noisy
estimates (the winner's curse) never reaches the reported N* (docs/science-choices.md). A best
setting at an edge of the values tried extends the space one geometric step past it (``at_edge:
extend``, up to ``max_extensions`` per direction), or is flagged.

Settings come from a grid (every combination of the listed values) or from Optuna's TPE sampler
(``sampler: optuna``: ``num_samples`` settings per cell, ``parallel`` asked at a time, over the
log range the lists span). Step sizes of one batch size share a pack: models carry their own eta.
Pure: no Ray here (services.execution.ray_tune adapts TuningSearch to Ray Tune's Searcher).
"""

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from services.analysis import Outcomes
from services.nstar import Bracket, bracket_learn, bracket_round
from services.packs import Pack, RoundPlanner, chunks, pack_cost
from services.results import MEASUREMENT, SELECTION, outcomes_of
from services.spec import Setting

if TYPE_CHECKING:
    from services.results import ModelRecord
    from services.spec import SweepSpec

DONE = "done"  # a tuned cell's phase after SELECTION and MEASUREMENT
SMALLEST_BATCH = "batch_size: 1, the smallest possible"  # at_edge's note for B = 1: no edge a search could pass


@dataclass(frozen=True)
class Run:
    """What a one-pass run of one seed says about N*: its stable N (-1: never, or not confirmed
    within its cap), whether it diverged (then it does not count), and its step budget (its cap
    in samples over its batch size)."""

    n_stable: int
    diverged: bool
    budget: int

    @property
    def open(self) -> bool:
        """Whether a larger cap could still give it a stable N (neither confirmed nor diverged)."""
        return self.n_stable < 0 and not self.diverged


def runs_by_setting(records: list["ModelRecord"]) -> dict[Setting, dict[int, Run]]:
    """The selection records of a cell as runs: setting -> seed -> its Run of the largest cap
    (each record of a run carries the run's stable N and step budget)."""
    out: dict[Setting, dict[int, Run]] = {}
    for r in records:
        if r.phase == SELECTION:
            run = Run(r.n_stable, r.diverged, r.max_steps)
            mine = out.setdefault(Setting(r.batch_size, r.lr), {})
            if r.seed not in mine or run.budget > mine[r.seed].budget:
                mine[r.seed] = run
    return out


def n_star_of_runs(runs: dict[int, Run], p: float) -> int | None:
    """The one-pass N* of some seeds: the smallest N from which at least a share p of the seeds
    that count keep zero test error, i.e. the ceil(p·seeds)-th smallest stable N (None: fewer
    than that many seeds have one). Equal to analysis.stable_n_star over their success table."""
    stable = sorted(r.n_stable for r in runs.values() if not r.diverged and r.n_stable >= 0)
    counted = sum(not r.diverged for r in runs.values())
    need = next((k for k in range(1, counted + 1) if k / counted >= p), None) if counted else None
    return stable[need - 1] if need is not None and need <= len(stable) else None


def _rank(runs: dict[int, Run], p: float) -> tuple:
    """How good a setting is, smallest first: its N*, then fewer seeds without a stable N, then
    the mean log stable N of the others (ties of N* are common: N lies on an evaluation grid)."""
    star = n_star_of_runs(runs, p)
    stable = [math.log(r.n_stable) for r in runs.values() if not r.diverged and r.n_stable > 0]
    return (math.inf if star is None else star, len(runs) - len(stable), float(np.mean(stable)) if stable else 0.0)


def setting_n_star(result: "dict[int, Run] | Outcomes", p: float) -> int | None:
    """A setting's N* on the selection seeds: from its one-pass runs, or its multi-pass outcomes."""
    return result.n_star(p) if isinstance(result, Outcomes) else n_star_of_runs(result, p)


def _rank_outcomes(outcomes: Outcomes, p: float) -> tuple:
    """How good a multi-pass setting is, smallest first: its N*, then the higher mean success
    rate over the N it trained (every setting trains the cell's grid; N lies on it or between)."""
    star = outcomes.n_star(p)
    rates = outcomes.rates()
    return (math.inf if star is None else star, -float(np.nanmean(rates)) if np.isfinite(rates).any() else 0.0)


def best(table: "dict[Setting, dict[int, Run]] | dict[Setting, Outcomes]", p: float) -> Setting:
    """The setting with the smallest selection N* (ties: _rank, then the smaller setting)."""

    def rank(s: Setting) -> tuple:
        return _rank_outcomes(table[s], p) if isinstance(table[s], Outcomes) else _rank(table[s], p)

    return min(table, key=lambda s: (rank(s), s))


def neighbours(extensions: dict[str, int], chosen: Setting, tried: set[Setting], tuning) -> list[Setting]:
    """The chosen setting's neighbours not tried yet, so that it ends a local minimum: along each
    searched field, the next value on either side among all values tried, or one geometric step
    past an end (at most ``max_extensions`` per end, counted in ``extensions``; none with
    ``at_edge: flag``)."""
    new: list[Setting] = []
    for dimension in tuning.searched:
        values = sorted({s.value(dimension) for s in tried})
        i = values.index(chosen.value(dimension))
        for side, j in (("low", i - 1), ("high", i + 1)):
            name = f"{dimension} {side}"
            if 0 <= j < len(values):
                candidate = chosen.replace(dimension, values[j])
            elif (
                len(values) < 2
                or tuning.at_edge != "extend"
                or extensions.get(name, 0) >= tuning.max_extensions
                or (value := beyond(values, side, dimension)) is None
            ):
                continue
            else:
                candidate = chosen.replace(dimension, value)
                extensions[name] = extensions.get(name, 0) + 1
            if candidate not in tried and candidate not in new:
                new.append(candidate)
    return new


def edges(chosen: Setting, tried: set[Setting], searched: tuple[str, ...]) -> list[tuple[str, str]]:
    """Where the chosen setting holds the smallest or largest value of a searched dimension among
    all the settings tried: [(dimension, "low" | "high")]."""
    out = []
    for d in searched:
        values = sorted({s.value(d) for s in tried})
        if len(values) >= 2 and chosen.value(d) in (values[0], values[-1]):
            out.append((d, "low" if chosen.value(d) == values[0] else "high"))
    return out


def beyond(values: list[float], side: str, dimension: str) -> float | None:
    """One geometric step past an end of the sorted ``values``: the end times its ratio to its
    neighbour (a batch size rounded, and at least 1; None where that gives nothing new)."""
    edge, neighbour = (values[0], values[1]) if side == "low" else (values[-1], values[-2])
    value = edge * edge / neighbour
    if dimension == "batch_size":
        value = max(1, round(value))
    return None if value == edge else value


@dataclass
class CellTuning:
    """The tuning state of one cell: every seed's run at every setting tried, the extensions made
    past each edge, and the phase (selection, then the measurement of the chosen setting)."""

    runs: dict[str, dict[str, list]] = field(default_factory=dict)  # setting -> seed -> [n_stable, diverged, budget]
    settings: dict[str, list] = field(default_factory=dict)  # setting label -> [B, lr]
    extensions: dict[str, int] = field(default_factory=dict)  # "lr high" -> steps past that edge
    phase: str = SELECTION
    chosen: list | None = None  # [B, lr] once selection ended
    asked: int = 0  # optuna: settings asked so far

    def table(self) -> dict[Setting, dict[int, Run]]:
        return {
            Setting(*self.settings[label]): {int(s): Run(*v) for s, v in seeds.items()}
            for label, seeds in self.runs.items()
        }

    def add(self, setting: Setting, seed: int, run: Run) -> None:
        """Keep a seed's run, unless a run of it with a larger budget is kept already."""
        self.settings[setting.label] = [setting.batch_size, setting.lr]
        mine = self.runs.setdefault(setting.label, {})
        if str(seed) not in mine or run.budget > mine[str(seed)][2]:
            mine[str(seed)] = [run.n_stable, run.diverged, run.budget]


class TuningSearch(RoundPlanner):
    """Plans packs round by round for every cell of a tuned spec (packs.RoundPlanner): the
    selection rounds, then one measurement round at the chosen setting.

    Selection runs under growing sample caps (``Tuning.caps``): a run not confirmed stable by cap C
    has a stable N above C/W (its window W·N must fit under C), so once some setting's N* is b, a
    setting whose runs reached C >= W·b without N* cannot beat it and is not run further. Only the
    settings that still could go on, at the next cap; every setting's sample budget is the cell's
    (training.batch_size × max_steps), whatever its own batch size."""

    def __init__(self, spec: "SweepSpec"):
        super().__init__(len(spec.cells), pack_cost(spec))
        self.spec, self.tuning, self.p = spec, spec.tuning, spec.success_rate
        self.tunings = [spec.tuning_of(c.model) for c in spec.cells]  # each cell's model's value lists
        trainings = [spec.plan(c).training for c in spec.cells]
        self.window = trainings[0].stability_window
        self.caps = [t.caps(c.batch_size * c.max_steps) for t, c in zip(self.tunings, trainings)]  # ascending
        self.bases = [Setting(t.batch_size, t.lr) for t in trainings]  # the values a dimension not searched keeps
        self.cells = [CellTuning() for _ in spec.cells]
        self.samplers = [self._sampler(i) for i in range(len(spec.cells))]
        self.planned: dict[int, list[Setting]] = {}  # cell -> the settings of its selection round in flight

    def _sampler(self, cell: int) -> "OptunaSettings | None":
        if self.tuning.sampler != "optuna":
            return None
        return OptunaSettings(self.tunings[cell], self.p, self.bases[cell], self.caps[cell][-1], self.cells[cell])

    def next_round(self, index: int) -> list[Pack]:
        """A selection round, the measurement round once selection is over, or nothing (done)."""
        cell = self.cells[index]
        if index in self.planned and self.samplers[index] is not None:
            self.samplers[index].tell(self.planned[index])
        self.planned.pop(index, None)
        if cell.phase == DONE:
            return []
        if cell.phase == MEASUREMENT:
            cell.phase = DONE
            return []
        new = self._selection_round(index, cell)
        if new:
            self.planned[index] = [s for s, _ in new]
            return self._packs(index, new, self.tuning.selection_seed_list(), SELECTION)
        chosen = best(cell.table(), self.p)
        cell.chosen, cell.phase = [chosen.batch_size, chosen.lr], MEASUREMENT
        return self._packs(index, [(chosen, self.caps[index][-1])], list(range(self.spec.seeds)), MEASUREMENT)

    def _selection_round(self, index: int, cell: CellTuning) -> list[tuple[Setting, int]]:
        """The (setting, sample cap) pairs to train next on the selection seeds; [] once
        selection is over: Optuna's next settings; else the grid, then the settings that could
        still win at the next cap, then the best setting's untried neighbours."""
        caps = self.caps[index]
        if self.samplers[index] is not None:
            return [(s, caps[-1]) for s in self.samplers[index].ask()]
        if not cell.runs:
            return [(s, caps[0]) for s in self.tunings[index].settings(self.bases[index])]
        table = cell.table()
        further = [(s, nxt) for s, runs in table.items() if (nxt := self._further(s, runs, table, caps)) is not None]
        if further:
            return further
        return [(s, caps[0]) for s in neighbours(cell.extensions, best(table, self.p), set(table), self.tunings[index])]

    def _further(
        self, setting: Setting, runs: dict[int, Run], table: dict[Setting, dict[int, Run]], caps: list[int]
    ) -> int | None:
        """The next cap for a setting whose N* is not known yet and could still be the smallest
        (None: it is known, cannot win, or had the last cap)."""
        budget = max(r.budget for r in runs.values())
        stars = [star for r in table.values() if (star := n_star_of_runs(r, self.p)) is not None]
        if n_star_of_runs(runs, self.p) is not None or not any(r.open for r in runs.values()):
            return None
        if stars and budget * setting.batch_size >= self.window * min(stars):  # its N* > its cap / W >= the best's
            return None
        return next((c for c in caps if c // setting.batch_size > budget), None)

    def _packs(self, index: int, settings: list[tuple[Setting, int]], seeds: list[int], phase: str) -> list[Pack]:
        """The packs of one round: per batch size, its (eta, seed) models, each with its setting's
        sample cap, cut into packs."""
        packs = []
        for batch_size in sorted({s.batch_size for s, _ in settings}):
            models = [(s.lr, cap, seed) for s, cap in settings if s.batch_size == batch_size for seed in seeds]
            packs += [
                Pack(
                    index,
                    tuple(cap for _, cap, _ in chunk),
                    tuple(seed for _, _, seed in chunk),
                    lr=tuple(lr for lr, _, _ in chunk),
                    batch_size=batch_size,
                    phase=phase,
                )
                for chunk in chunks(models, self.spec.resources.models_per_pack)
            ]
        return packs

    def learn(self, pack: Pack, records: list["ModelRecord"]) -> None:
        cell = self.cells[pack.cell]
        for setting, runs in runs_by_setting(records).items():
            for seed, run in runs.items():
                cell.add(setting, seed, run)

    def get_state(self) -> dict:
        return super().get_state() | {
            "cells": [vars(c) for c in self.cells],
            "planned": {str(i): [[s.batch_size, s.lr] for s in v] for i, v in self.planned.items()},
        }

    def set_state(self, state: dict) -> None:
        super().set_state(state)
        self.cells = [CellTuning(**c) for c in state["cells"]]
        self.samplers = [self._sampler(i) for i in range(len(self.cells))]
        self.planned = {int(i): [Setting(*s) for s in v] for i, v in state["planned"].items()}


@dataclass
class MultiPassCell:
    """The tuning state of one multi-pass cell: an adaptive N* search (nstar.Bracket) per setting
    on the selection seeds, then one at the chosen setting on the measurement seeds."""

    settings: dict[str, list] = field(default_factory=dict)  # setting label -> [B, lr]
    brackets: dict[str, Bracket] = field(default_factory=dict)  # setting label -> its selection search
    extensions: dict[str, int] = field(default_factory=dict)  # "lr high" -> steps past that edge
    phase: str = SELECTION
    chosen: list | None = None  # [B, lr] once selection ended
    measurement: Bracket | None = None

    def state(self) -> dict:
        return vars(self) | {
            "brackets": {k: b.state() for k, b in self.brackets.items()},
            "measurement": self.measurement.state() if self.measurement else None,
        }

    @classmethod
    def from_state(cls, state: dict) -> "MultiPassCell":
        measurement = state["measurement"]
        return cls(
            **state
            | {
                "brackets": {k: Bracket.from_state(b) for k, b in state["brackets"].items()},
                "measurement": Bracket.from_state(measurement) if measurement else None,
            }
        )


class MultiPassTuning(RoundPlanner):
    """Tuning of multi-pass cells (services.tuning's TuningSearch is one pass's): every setting of
    the grid gets the adaptive N* search of search mode sample_complexity (a fixed N trained to
    zero training loss, N bracketed to ``search.precision``) on the selection seeds, all settings'
    rounds in step; once every search ended, the best setting's untried neighbours join (or the
    edges are extended), and the chosen setting's N* is then searched again on the measurement
    seeds. Every setting trains the cell's sample budget (training.batch_size x max_steps)."""

    def __init__(self, spec: "SweepSpec"):
        super().__init__(len(spec.cells), pack_cost(spec))
        self.spec, self.p = spec, spec.success_rate
        self.tunings = [spec.tuning_of(c.model) for c in spec.cells]
        trainings = [spec.plan(c).training for c in spec.cells]
        self.samples = [t.batch_size * t.max_steps for t in trainings]  # each cell's sample budget
        self.bases = [Setting(t.batch_size, t.lr) for t in trainings]
        self.selection_seeds = spec.tuning.selection_seed_list()
        self.cells = [MultiPassCell() for _ in spec.cells]

    def _bracket(self, index: int) -> Bracket:
        search, cell = self.spec.search, self.spec.cells[index]
        n_values = list(self.spec.plan(cell).n_values)
        return Bracket(n_values, self.p, search.precision, search.factor, self.spec.n_max)

    def _add(self, index: int, settings: list[Setting]) -> None:
        cell = self.cells[index]
        for s in settings:
            cell.settings[s.label], cell.brackets[s.label] = [s.batch_size, s.lr], self._bracket(index)

    def table(self, index: int) -> dict[Setting, Outcomes]:
        """Each setting's selection outcomes so far, as N x seed tables."""
        cell = self.cells[index]
        return {Setting(*cell.settings[label]): _bracket_outcomes(b) for label, b in cell.brackets.items()}

    def next_round(self, index: int) -> list[Pack]:
        """Every selection search's next round; the chosen setting's measurement rounds once all
        of them (and the neighbours') ended; [] when the measurement ended too."""
        cell = self.cells[index]
        if cell.phase == SELECTION:
            if not cell.brackets:
                self._add(index, self.tunings[index].settings(self.bases[index]))
            packs = self._selection_packs(index)
            if packs:
                return packs
            table = self.table(index)
            chosen = best(table, self.p)
            self._add(index, neighbours(cell.extensions, chosen, set(table), self.tunings[index]))
            packs = self._selection_packs(index)
            if packs:
                return packs
            cell.phase, cell.chosen = MEASUREMENT, [chosen.batch_size, chosen.lr]
            cell.measurement = self._bracket(index)
        if cell.phase == MEASUREMENT:
            chosen = Setting(*cell.chosen)
            packs = self._setting_packs(index, chosen, cell.measurement, list(range(self.spec.seeds)), MEASUREMENT)
            if packs:
                return packs
            cell.phase = DONE
        return []

    def _selection_packs(self, index: int) -> list[Pack]:
        cell, seeds = self.cells[index], self.selection_seeds
        return [
            pack
            for label, bracket in cell.brackets.items()
            for pack in self._setting_packs(index, Setting(*cell.settings[label]), bracket, seeds, SELECTION)
        ]

    def _setting_packs(self, index: int, setting: Setting, bracket: Bracket, seeds: list[int], phase: str):
        """One bracket's next packs, each model at ``setting``."""
        size = self.spec.resources.models_per_pack
        return [
            replace(pack, lr=(setting.lr,) * len(pack.seeds), batch_size=setting.batch_size, phase=phase)
            for pack in bracket_round(index, bracket, seeds, size)
        ]

    def learn(self, pack: Pack, records: list["ModelRecord"]) -> None:
        cell = self.cells[pack.cell]
        setting = Setting(pack.batch_size, pack.lr[0])
        if pack.phase == SELECTION:
            bracket, seeds = cell.brackets[setting.label], self.selection_seeds
        else:
            bracket, seeds = cell.measurement, list(range(self.spec.seeds))
        budget = pack.max_steps or self.samples[pack.cell] // setting.batch_size
        bracket_learn(bracket, records, seeds, budget, self.spec.search.max_steps_cap)

    def get_state(self) -> dict:
        return super().get_state() | {"cells": [c.state() for c in self.cells]}

    def set_state(self, state: dict) -> None:
        super().set_state(state)
        self.cells = [MultiPassCell.from_state(c) for c in state["cells"]]


def _bracket_outcomes(bracket: Bracket) -> Outcomes:
    """A bracket's success table as Outcomes (only success is known to the planner)."""
    ns = np.array(sorted(bracket.outcomes))
    success = np.array([[np.nan if v is None else v for v in bracket.outcomes[n]] for n in ns]).reshape(len(ns), -1)
    blank = np.full(success.shape, np.nan)
    return Outcomes(ns, np.arange(success.shape[1]), success, blank, blank)


def tuning_search(spec: "SweepSpec") -> "TuningSearch | MultiPassTuning":
    """The planner of a tuned spec: one pass's (successive caps) or multi-pass's (an N* search per setting)."""
    return TuningSearch(spec) if spec.plan(spec.cells[0]).one_pass else MultiPassTuning(spec)


def selection_table(records: list["ModelRecord"]) -> "dict[Setting, dict[int, Run]] | dict[Setting, Outcomes]":
    """A tuned cell's selection records by setting: one-pass runs per seed, or multi-pass outcomes."""
    if any(r.n_stable is not None for r in records):
        return runs_by_setting(records)
    mine: dict[Setting, list] = {}
    for r in records:
        if r.phase == SELECTION:
            mine.setdefault(Setting(r.batch_size, r.lr), []).append(r)
    return {s: outcomes_of(rs) for s, rs in mine.items()}


def at_edge(chosen: Setting, tried: set[Setting], searched: tuple[str, ...]) -> list[str]:
    """Where a cell's chosen setting still sits at an edge of the values tried, for people (after
    any extension; Optuna's settings: its outermost values)."""
    found = edges(chosen, tried, searched)
    return [
        SMALLEST_BATCH
        if (d, side, chosen.batch_size) == ("batch_size", "low", 1)
        else f"{d}: the {'smallest' if side == 'low' else 'largest'} value tried ({chosen.value(d):g})"
        for d, side in found
    ]


class OptunaSettings:
    """Optuna's TPE sampler over one cell's settings (``sampler: optuna``), asked ``parallel``
    settings at a time until ``num_samples``, each run at the cell's whole sample budget ``cap``.
    Its objective is log N* on the selection seeds; a setting without one scores as twice the cap.
    Rebuilt from the cell's runs on restore (Optuna's add_trial), so a resumed search asks what it
    would have asked."""

    def __init__(self, tuning, p: float, base: Setting, cap: int, cell: CellTuning):
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.tuning, self.p, self.base, self.cap, self.cell = tuning, p, base, cap, cell
        self.distributions = tuning.distributions()
        self.study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=tuning.seed))
        self.pending: dict[Setting, list] = {}
        for setting, runs in cell.table().items():
            self.study.add_trial(
                optuna.trial.create_trial(
                    params={d: setting.value(d) for d in self.distributions},
                    distributions=self.distributions,
                    value=self._value(setting, runs),
                )
            )

    def _value(self, setting: Setting, runs: dict[int, Run]) -> float:
        star = n_star_of_runs(runs, self.p)
        return math.log(star if star is not None else 2 * self.cap)

    def ask(self) -> list[Setting]:
        """The next round's settings (fewer when Optuna repeats one); [] after num_samples."""
        asked = []
        for _ in range(min(self.tuning.parallel, self.tuning.num_samples - self.cell.asked)):
            trial = self.study.ask(self.distributions)
            setting = self.base
            for dimension, value in trial.params.items():
                setting = setting.replace(dimension, value)
            self.pending.setdefault(setting, []).append(trial)
            asked.append(setting)
        self.cell.asked += len(asked)
        return sorted(set(asked))

    def tell(self, settings: list[Setting]) -> None:
        """Give Optuna the selection N* of a round's settings."""
        import optuna

        table = self.cell.table()
        for setting in settings:
            value = self._value(setting, table.get(setting, {}))
            asked = self.pending.pop(setting, [])
            for trial in asked:
                self.study.tell(trial, value)
            if not asked:  # asked before a restore: Optuna learns it as a finished trial
                params = {d: setting.value(d) for d in self.distributions}
                self.study.add_trial(
                    optuna.trial.create_trial(params=params, distributions=self.distributions, value=value)
                )
