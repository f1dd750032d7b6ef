"""A search mode of one's own, added in this one file: its schema and budget (a Mode), its round
planner, and one call to register them; its spec then validates and runs through Ray Tune into
MLflow as the built-in modes do. Trials receive the spec resolved into plain configs, so the
module that defines the mode need not be importable where they run (this one is not)."""

from typing import ClassVar, Literal

import pytest
from conftest import run_spec

from services.search.packs import Pack, pack_cost
from services.search.planners import PLANNERS, register
from services.search.rounds import RoundPlanner
from services.spec import SEARCH_MODES, Mode, parse_spec
from services.spec import schema as spec_schema

SPEC = """
name: smallest-n
models: [vit, cnn]
n_train: [8, 32, 128]
seeds: 3
data: {n_tokens: 10, dim: 20, n_patterns: 4, alpha_star: 0.3}
model: {width: 8}
training: {max_steps: 20, n_test: 50}
search: {mode: smallest, skip: 1}
resources: {cpus_per_trial: 1, models_per_pack: 8}
"""


class SmallestMode(Mode):
    """smallest: every cell at one N of n_train only (the ``skip``-th smallest)."""

    mode: Literal["smallest"]
    skip: int = 0
    planned: ClassVar[bool] = False

    def first_trainings(self, spec, cell) -> int:
        return spec.seeds


class SmallestPlanner(RoundPlanner):
    """One round per cell: its seeds at that one N."""

    def __init__(self, spec, slots):
        super().__init__(len(spec.cells), pack_cost(spec))
        n_of = {i: sorted(spec.resolved_cell(c).n_values)[spec.search.skip] for i, c in enumerate(spec.cells)}
        self.rounds = {i: [Pack(i, (n,) * spec.seeds, tuple(range(spec.seeds)))] for i, n in n_of.items()}

    def next_round(self, cell: int) -> list[Pack]:
        return self.rounds.pop(cell, [])

    def learn(self, pack: Pack, records: list) -> None:
        """Nothing more to plan."""


@pytest.fixture
def smallest():
    register(SmallestMode, SmallestPlanner)
    yield
    SEARCH_MODES.pop("smallest"), PLANNERS.pop("smallest")
    spec_schema.refresh()


def test_a_search_mode_of_ones_own_validates_and_runs_through_ray_into_mlflow(smallest, local_ray, tmp_path):
    spec = parse_spec(SPEC)
    assert spec.mode.name == "smallest" and spec.trainings == spec.max_trainings_bound == 2 * 3
    summary, _ = run_spec(SPEC, tmp_path)
    assert summary["trainings"] == 6 and summary["failed_trials"] == []
    assert {c["label"]: sorted(c["rates"]) for c in summary["cells"]} == {"vit": ["32"], "cnn": ["32"]}


def test_an_unregistered_mode_is_refused_naming_the_modes_there_are():
    with pytest.raises(Exception) as error:
        parse_spec(SPEC)
    (problem,) = error.value.problems
    assert problem.path == "search.mode" and problem.value == "smallest"
    assert "grid, sample_complexity, optuna" in problem.message
