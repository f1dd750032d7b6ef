"""Training settings searched inside every cell (``tuning``), one pass cells' round planner (OnePassTuning; the
strategy is services.search.tuning's): N* of a model class, not of one optimiser setting.

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
Pure: no Ray here (services.execution.ray_tune adapts every planner to Ray Tune's Searcher);
multi-pass cells: services.search.tuning_multi_pass.
"""

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from services.results import MEASUREMENT, SELECTION
from services.search.packs import Pack, chunks, pack_cost
from services.search.rounds import RoundPlanner
from services.search.selection import DONE, Run, best, n_star_of_runs, neighbours, runs_by_setting
from services.spec import Setting

if TYPE_CHECKING:
    from services.results import ModelRecord
    from services.spec import Sweep


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


class OnePassTuning(RoundPlanner):
    """Plans packs round by round for every cell of a tuned spec (packs.RoundPlanner): the
    selection rounds, then one measurement round at the chosen setting.

    Selection runs under growing sample caps (``Tuning.caps``): a run not confirmed stable by cap C
    has a stable N above C/W (its window W·N must fit under C), so once some setting's N* is b, a
    setting whose runs reached C >= W·b without N* cannot beat it and is not run further. Only the
    settings that still could go on, at the next cap; every setting's sample budget is the cell's
    (training.batch_size × max_steps), whatever its own batch size."""

    def __init__(self, sweep: "Sweep"):
        super().__init__(len(sweep.cells), pack_cost(sweep))
        self.sweep, self.tuning, self.p = sweep, sweep.tuning, sweep.success_rate
        self.tunings = [sweep.tuning_of(c.model) for c in sweep.cells]  # each cell's model's value lists
        trainings = [sweep.resolved_cell(c).training for c in sweep.cells]
        self.window = trainings[0].stability_window
        self.caps = [t.caps(c.batch_size * c.max_steps) for t, c in zip(self.tunings, trainings)]  # ascending
        self.bases = [Setting(t.batch_size, t.lr) for t in trainings]  # the values a dimension not searched keeps
        self.cells = [CellTuning() for _ in sweep.cells]
        self.samplers = [self._sampler(i) for i in range(len(sweep.cells))]
        self.planned: dict[int, list[Setting]] = {}  # cell -> the settings of its selection round in flight

    def _sampler(self, cell: int) -> "SettingsSampler":
        """How the cell's settings are chosen: the grid's rule, or Optuna's TPE (``tuning.sampler``)."""
        kind = OptunaSettings if self.tuning.sampler == "optuna" else GridSettings
        return kind(self.tunings[cell], self.p, self.bases[cell], self.caps[cell], self.window, self.cells[cell])

    def next_round(self, index: int) -> list[Pack]:
        """A selection round, the measurement round once selection is over, or nothing (done)."""
        cell = self.cells[index]
        if index in self.planned:
            self.samplers[index].tell(self.planned[index])
        self.planned.pop(index, None)
        if cell.phase == DONE:
            return []
        if cell.phase == MEASUREMENT:
            cell.phase = DONE
            return []
        new = self.samplers[index].ask()
        if new:
            self.planned[index] = [s for s, _ in new]
            return self._packs(index, new, self.tuning.selection_seed_list(self.sweep.seed_start), SELECTION)
        chosen = best(cell.table(), self.p)
        cell.chosen, cell.phase = [chosen.batch_size, chosen.lr], MEASUREMENT
        return self._packs(index, [(chosen, self.caps[index][-1])], self.sweep.measurement_seeds, MEASUREMENT)

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
                for chunk in chunks(models, self.sweep.resources.models_per_pack)
            ]
        return packs

    def learn(self, pack: Pack, records: list["ModelRecord"]) -> None:
        """Keep each seed's run of each setting the pack trained."""
        for setting, runs in runs_by_setting(records).items():
            for seed, run in runs.items():
                self.cells[pack.cell].add(setting, seed, run)

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


class SettingsSampler:
    """How a cell's settings are chosen (``tuning.sampler``), shaped as Optuna's ask and tell: ``ask``
    gives the next selection round's (setting, sample cap) pairs ([] once selection is over),
    ``tell`` hands back the settings of a round that ended (their runs are in ``cell``). Built
    from the cell's runs alone, so a restored search asks what it would have asked."""

    def __init__(self, tuning, p: float, base: Setting, caps: list[int], window: float, cell: CellTuning):
        self.tuning, self.p, self.base, self.caps, self.window, self.cell = tuning, p, base, caps, window, cell

    def ask(self) -> list[tuple[Setting, int]]:
        raise NotImplementedError

    def tell(self, settings: list[Setting]) -> None:
        """What a round's settings gave (a grid reads it from the cell's runs when it asks)."""


class GridSettings(SettingsSampler):
    """The grid (``sampler: grid``): every combination of the values under the first cap, then the
    settings that could still win at the next cap, then the best setting's untried neighbours."""

    def ask(self) -> list[tuple[Setting, int]]:
        caps = self.caps
        if not self.cell.runs:
            return [(s, caps[0]) for s in self.tuning.settings(self.base)]
        table = self.cell.table()
        stars = [star for r in table.values() if (star := n_star_of_runs(r, self.p)) is not None]
        best_star = min(stars, default=None)
        further = [(s, nxt) for s, runs in table.items() if (nxt := self._further(s, runs, best_star)) is not None]
        if further:
            return further
        return [(s, caps[0]) for s in neighbours(self.cell.extensions, best(table, self.p), set(table), self.tuning)]

    def _further(self, setting: Setting, runs: dict[int, Run], best_star: int | None) -> int | None:
        """The next cap for a setting whose N* is not known yet and could still be the smallest,
        ``best_star`` being the smallest N* known of the cell's settings (None: it is known,
        cannot win, or had the last cap)."""
        budget = max(r.budget for r in runs.values())
        if n_star_of_runs(runs, self.p) is not None or not any(r.open for r in runs.values()):
            return None
        if best_star is not None and budget * setting.batch_size >= self.window * best_star:  # N* > cap / W >= best
            return None
        return next((c for c in self.caps if c // setting.batch_size > budget), None)


class OptunaSettings(SettingsSampler):
    """Optuna's TPE sampler over one cell's settings (``sampler: optuna``), asked ``parallel``
    settings at a time until ``num_samples``, each run at the cell's whole sample budget (its last
    cap). Its objective is log N* on the selection seeds; a setting without one scores as twice
    that. Rebuilt from the cell's runs on restore (Optuna's add_trial)."""

    def __init__(self, tuning, p: float, base: Setting, caps: list[int], window: float, cell: CellTuning):
        import optuna  # noqa: PLC0415  (Optuna loads on use)

        super().__init__(tuning, p, base, caps, window, cell)
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.cap = caps[-1]
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

    def ask(self) -> list[tuple[Setting, int]]:
        """The next round's settings at the whole budget (fewer when Optuna repeats one); [] after num_samples."""
        asked = []
        for _ in range(min(self.tuning.parallel, self.tuning.num_samples - self.cell.asked)):
            trial = self.study.ask(self.distributions)
            setting = self.base
            for dimension, value in trial.params.items():
                setting = setting.replace(dimension, value)
            self.pending.setdefault(setting, []).append(trial)
            asked.append(setting)
        self.cell.asked += len(asked)
        return [(s, self.cap) for s in sorted(set(asked))]

    def tell(self, settings: list[Setting]) -> None:
        """Give Optuna the selection N* of a round's settings."""
        import optuna  # noqa: PLC0415  (Optuna loads on use)

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
