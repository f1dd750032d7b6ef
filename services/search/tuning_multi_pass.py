"""Tuning of multi-pass cells: every setting of the grid gets an adaptive N* search (its own
bracket) on the selection seeds, neighbours and extensions past a best edge, then the chosen
setting's N* is searched again on the measurement seeds (services.search.tuning_one_pass is one
pass's; services.search.tuning the strategy that makes either)."""

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from services.analysis import Outcomes
from services.results import MEASUREMENT, SELECTION
from services.search.nstar import Bracket, bracket_learn, bracket_round
from services.search.packs import Pack, pack_cost
from services.search.rounds import RoundPlanner
from services.search.selection import DONE, best, neighbours
from services.spec import Setting

if TYPE_CHECKING:
    from services.results import ModelRecord
    from services.spec import Sweep


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
    """Tuning of multi-pass cells (tuning_one_pass's OnePassTuning is one pass's): every setting of
    the grid gets the adaptive N* search of the search section's strategy (sample_complexity: a
    fixed N trained to zero training loss, N bracketed to ``search.precision``) on the selection seeds, all settings'
    rounds in step; once every search ended, the best setting's untried neighbours join (or the
    edges are extended), and the chosen setting's N* is then searched again on the measurement
    seeds. Every setting trains the cell's sample budget (training.batch_size x max_steps)."""

    def __init__(self, sweep: "Sweep"):
        super().__init__(len(sweep.cells), pack_cost(sweep))
        self.sweep, self.p = sweep, sweep.success_rate
        self.tunings = [sweep.tuning_of(c.model) for c in sweep.cells]
        trainings = [sweep.resolved_cell(c).training for c in sweep.cells]
        self.samples = [t.batch_size * t.max_steps for t in trainings]  # each cell's sample budget
        self.bases = [Setting(t.batch_size, t.lr) for t in trainings]
        self.selection_seeds = sweep.tuning.selection_seed_list(sweep.seed_start)
        self.cells = [MultiPassCell() for _ in sweep.cells]

    def _bracket(self, index: int) -> Bracket:
        search, cell = self.sweep.search.adaptive(), self.sweep.cells[index]
        n_values = list(self.sweep.resolved_cell(cell).n_values)
        return Bracket(n_values, self.p, search.precision, search.factor, self.sweep.n_max)

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
            packs = self._setting_packs(index, chosen, cell.measurement, self.sweep.measurement_seeds, MEASUREMENT)
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
        size = self.sweep.resources.models_per_pack
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
            bracket, seeds = cell.measurement, self.sweep.measurement_seeds
        budget = pack.max_steps or self.samples[pack.cell] // setting.batch_size
        bracket_learn(bracket, records, seeds, budget, self.sweep.search.adaptive().max_steps_cap)

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
