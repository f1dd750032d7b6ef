"""A tuned one-pass cell's search played out before it runs, for `vitsweep plan`'s expectation.

The search (services.search.tuning) is driven round by round, as Ray Tune drives it, in a world
where each (setting, seed)'s run stops where one of the cell's pilot models stopped (in samples,
drawn with replacement): so the plan counts the rounds only results decide (later caps, settings
past an edge, the measurement's seeds that run to the budget) the way the search takes them. What
the plan cannot know, which setting wins, the draws make even: every setting stops like every
other, so a field of two values always extends and ties go to the smaller setting, as the search
breaks them. Counting the grid's first round and the measurement at the soonest stop alone put
sample_complexity_arms 3.9x under its sweep, its runs past the grid a third of it
(docs/performance.md).
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


def rehearse(spec: SweepSpec, index: int, stops: Sequence[float], draws: int = DRAWS) -> list[list[Trained]]:
    """Each world's packs of cell ``index``: the search played out where every run stops after
    ``stops[k]`` samples for a k drawn per (setting, seed) (a run confirms its window there when
    its sample cap allows it; else it trains to the cap and stays open)."""
    window = spec.resolved_cell(spec.cells[index]).training.stability_window
    return [_played(TuningSearch(spec), index, stops, window, np.random.default_rng(draw)) for draw in range(draws)]


def _played(search: TuningSearch, index: int, stops: Sequence[float], window: float, rng) -> list[Trained]:
    """One world: the cell's rounds until its search is done, each round's runs learnt at once."""
    world: dict[tuple[Setting, int], float] = {}
    trained = []
    while packs := search.next_round(index):
        table: dict[Setting, dict[int, Run]] = {}
        for pack in packs:
            steps = []
            for lr, cap, seed in zip(pack.lr, pack.n_train, pack.seeds):
                setting = Setting(pack.batch_size, lr)
                stop = world.setdefault((setting, seed), stops[rng.integers(len(stops))])
                budget, confirmed = cap // pack.batch_size, stop <= cap
                steps.append(min(math.ceil(stop / pack.batch_size), budget))
                run = Run(math.ceil(stop / window) if confirmed else -1, False, budget)
                table.setdefault(setting, {})[seed] = run
            trained.append(Trained(pack.batch_size, tuple(steps)))
        search.learn_runs(index, table)
    return trained
