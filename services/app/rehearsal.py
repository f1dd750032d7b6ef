"""A tuned one-pass cell's search played out before it runs, for `vitsweep plan`'s expectation.

The search (services.search.tuning) is driven round by round, as Ray Tune drives it, in a world
where each (setting, seed)'s run stops where the cell's pilot model nearest its setting stopped
(in samples; the pilot trains at the grid's smallest and largest batch sizes, its step sizes
spread over the grid's): so the plan counts the rounds only results decide (later caps, settings
past an edge, the measurement's seeds that run to the budget) the way the search takes them, and
settings that stop late are ruled out as the search rules them out. Ties go to the smaller
setting, as the search breaks them. Counting the grid's first round and the measurement at the
soonest stop alone put sample_complexity_arms 3.9x under its sweep, its runs past the grid a
third of it; drawing every run's stop from every pilot model alike put the main job 2.9x over
once its pilot at B = 8 saw no zero test error where B = 32 stops (docs/performance.md).
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from services.search.selection import Run
from services.search.tuning import TuningSearch
from services.spec import Setting, SweepSpec

DRAWS = 16  # worlds each cell's search is played out in; the expectation is their mean


@dataclass(frozen=True)
class Trained:
    """One pack the search would train: its batch size and each model's steps."""

    batch_size: int
    steps: tuple[int, ...]


@dataclass(frozen=True)
class Seen:
    """One pilot model: the setting it trained at and the samples it took to stop (or is guessed to)."""

    batch_size: int
    lr: float
    samples: float


def rehearse(spec: SweepSpec, index: int, seen: Sequence[Seen], draws: int = DRAWS) -> list[list[Trained]]:
    """Each world's packs of cell ``index``: the search played out where every run stops after
    the samples of the pilot model nearest its setting (on log scales, |log B ratio| + |log eta
    ratio|; ties drawn per (setting, seed)). A run confirms its window there when its sample cap
    allows it; else it trains to the cap and stays open."""
    window = spec.resolved_cell(spec.cells[index]).training.stability_window
    return [_played(TuningSearch(spec), index, seen, window, np.random.default_rng(draw)) for draw in range(draws)]


def _nearest(seen: Sequence[Seen], setting: Setting) -> np.ndarray:
    """The pilot models nearest ``setting``, on log scales of B and eta."""
    gap = np.array([abs(math.log(s.batch_size / setting.batch_size)) + abs(math.log(s.lr / setting.lr)) for s in seen])
    return np.flatnonzero(gap <= gap.min() + 1e-9)


def _played(search: TuningSearch, index: int, seen: Sequence[Seen], window: float, rng) -> list[Trained]:
    """One world: the cell's rounds until its search is done, each round's runs learnt at once."""
    world: dict[tuple[Setting, int], float] = {}
    trained = []
    while packs := search.next_round(index):
        table: dict[Setting, dict[int, Run]] = {}
        for pack in packs:
            steps = []
            for lr, cap, seed in zip(pack.lr, pack.n_train, pack.seeds):
                setting = Setting(pack.batch_size, lr)
                if (setting, seed) not in world:
                    world[setting, seed] = seen[rng.choice(_nearest(seen, setting))].samples
                stop = world[setting, seed]
                budget, confirmed = cap // pack.batch_size, stop <= cap
                steps.append(min(math.ceil(stop / pack.batch_size), budget))
                run = Run(math.ceil(stop / window) if confirmed else -1, False, budget)
                table.setdefault(setting, {})[seed] = run
            trained.append(Trained(pack.batch_size, tuple(steps)))
        search.learn_runs(index, table)
    return trained
