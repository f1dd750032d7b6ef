"""A tuned cell's settings compared (services.search.tuning_one_pass, tuning_multi_pass): each
setting's runs on the selection seeds, its N*, the best setting, its neighbours past an edge of
the values tried, and where the chosen one still sits at an edge. Read by the planners and by the
statistics of a tuned sweep."""

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from services.analysis import Outcomes
from services.results import SELECTION, outcomes_of
from services.spec import Setting
from services.spec.tuning import beyond

if TYPE_CHECKING:
    from services.results import ModelRecord

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
