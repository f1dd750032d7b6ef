"""A search mode and a fit of one's own, installed as a package: the mode one strategy class (a Mode:
its schema, budget and ``make_planner``) and its planner, found through an entry point of group
vitsweep.search_modes, as the built-in modes are; the fit a Statistic found through an entry point
of group vitsweep.statistics, as the built-in fits are units. `vitsweep validate`, `plan` and `run`
find both with no code of the user's calling anything: the spec validates, the plan plays the
planner out, and the sweep runs through Ray Tune into MLflow and the report as the built-in ones do,
the fit beside the built-in fits."""

import json
import subprocess
import sys
import textwrap
import warnings
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from services.spec import SEARCH_MODES, parse_spec
from services.spec import modes as spec_modes

VITSWEEP = Path(sys.executable).parent / "vitsweep"
PACKAGE = "vitsweep-smallest-mode"
SPEC = """
name: smallest-n
models: [vit, cnn]
n_train: [8, 32, 128]
seeds: 3
data: {n_tokens: 10, dim: 20, n_patterns: 4}
axes: {alpha_star: [0.2, 0.4]}
model: {width: 8}
training: {max_steps: 20, n_test: 50}
search: {mode: smallest, skip: 1}
resources: {cpus_per_trial: 1, models_per_pack: 8}
"""
MODULE = '''
"""smallest: every cell at one N of n_train only (the ``skip``-th smallest)."""

from typing import ClassVar, Literal

from functools import partial

from services.search.packs import Pack, pack_cost
from services.search.rounds import RoundPlanner
from services.spec import Mode
from services.stats import fitting
from services.stats.base import Statistic


class SmallestMode(Mode):
    """smallest: every cell at one N of n_train only (the ``skip``-th smallest)."""

    mode: Literal["smallest"]
    skip: int = 0
    planned: ClassVar[bool] = False

    def first_trainings(self, sweep, cell) -> int:
        return sweep.seeds

    def make_planner(self, sweep, slots=None) -> "SmallestPlanner":
        return SmallestPlanner(sweep, slots)


class SmallestPlanner(RoundPlanner):
    """One round per cell: its seeds at that one N."""

    def __init__(self, sweep, slots=None):
        super().__init__(len(sweep.cells), pack_cost(sweep))
        n_of = {i: sorted(sweep.resolved_cell(c).n_values)[sweep.search.skip] for i, c in enumerate(sweep.cells)}
        self.rounds = {i: [Pack(i, (n,) * sweep.seeds, tuple(range(sweep.seeds)))] for i, n in n_of.items()}

    def next_round(self, cell: int) -> list[Pack]:
        return self.rounds.pop(cell, [])

    def learn(self, pack: Pack, records: list) -> None:
        """Nothing more to plan."""


class StepsAtOneN(Statistic):
    """The median steps to zero training error at the one N trained, its exponent along 1/alpha*."""

    name = "smallest_steps_exponent"

    def applies(self, sweep) -> bool:
        return fitting.scaled(sweep)

    def compute(self, sweep, cells) -> dict:
        x, flagged = partial(fitting.x, sweep), fitting.flagged(sweep, cells)
        fits = fitting.fits(cells, flagged, "alpha_star", x, lambda outcomes, seeds: outcomes.steps(seeds))
        return {self.name: {group: fit.value for group, fit in fits.items()}}

    def lines(self, summary) -> list[str]:
        return [f"steps at the one N, {g}: exponent {k:.3f}" for g, k in summary.stats[self.name].items()]

    def metrics(self, summary) -> dict[str, float]:
        return {f"smallest_steps_exponent.{g}": k for g, k in summary.stats[self.name].items()}
'''
PYPROJECT = f"""
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "{PACKAGE}"
version = "0.1.0"

[tool.setuptools]
py-modules = ["smallest_mode"]

[project.entry-points."vitsweep.search_modes"]
smallest = "smallest_mode:SmallestMode"

[project.entry-points."vitsweep.statistics"]
smallest_steps_exponent = "smallest_mode:StepsAtOneN"
"""


def _pip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True)


@pytest.fixture(scope="module")
def smallest_installed(tmp_path_factory):
    """The mode's package written out and installed (offline: no build isolation, no dependencies
    to fetch), and uninstalled afterwards."""
    root = tmp_path_factory.mktemp("smallest_mode")
    (root / "smallest_mode.py").write_text(textwrap.dedent(MODULE))
    (root / "pyproject.toml").write_text(PYPROJECT)
    done = _pip("install", "--quiet", "--no-deps", "--no-build-isolation", str(root))
    assert done.returncode == 0, done.stderr[-3000:]
    yield
    assert _pip("uninstall", "--yes", PACKAGE).returncode == 0


def vitsweep(*args: str, cwd: Path) -> dict:
    """`vitsweep ARGS --json` in a fresh interpreter (it finds the modes installed now): its JSON."""
    out = subprocess.run([str(VITSWEEP), *args, "--json"], capture_output=True, text=True, cwd=cwd)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.system
def test_an_installed_search_mode_plans_and_runs_through_ray_into_mlflow(smallest_installed, tmp_path):
    spec = tmp_path / "smallest.yaml"
    spec.write_text(SPEC)
    checked = subprocess.run([str(VITSWEEP), "validate", str(spec)], capture_output=True, text=True, cwd=tmp_path)
    assert checked.returncode == 0 and "12 trainings" in checked.stdout, checked.stdout + checked.stderr
    home = tmp_path / "home"
    planned = vitsweep("plan", str(spec), "--home", str(home), cwd=tmp_path)
    assert planned["trainings"] == 12 and all(c["later_packs"] == 0 for c in planned["cells"])  # its planner, played
    ran = vitsweep("run", str(spec), "--home", str(home), cwd=tmp_path)
    assert ran["trainings"] == 12 and ran["failed_trials"] == []
    assert {c["label"]: sorted(c["rates"]) for c in ran["cells"]} == {
        f"{m} alpha_star={a}": ["32"] for m in ("vit", "cnn") for a in (0.2, 0.4)
    }
    fitted = ran["smallest_steps_exponent"]  # the fit, from the run's records: the built-in steps fit's values
    assert fitted and fitted == {g: f["value"] for g, f in ran["iterations_exponent"].items()}
    group, k = next(iter(fitted.items()))
    report = subprocess.run([str(VITSWEEP), "report", "--home", str(home)], capture_output=True, text=True)
    assert f"steps at the one N, {group}: exponent {k:.3f}" in report.stdout, report.stdout + report.stderr
    logged = MlflowClient(ran["tracking_uri"]).get_run(ran["mlflow_parent_run_id"]).data.metrics
    assert logged[f"smallest_steps_exponent.{group}"] == pytest.approx(k)


def test_an_uninstalled_mode_is_refused_naming_the_modes_there_are():
    with pytest.raises(Exception) as error:
        parse_spec(SPEC)
    (problem,) = error.value.problems
    assert problem.path == "search.mode" and problem.value == "smallest"
    assert f"one of {', '.join(SEARCH_MODES)}" in problem.message and list(SEARCH_MODES)[0] == "grid"


def test_a_mode_that_fails_to_load_is_left_out_with_a_warning_naming_it(monkeypatch):
    builtin = list(spec_modes.entry_points(group=spec_modes.GROUP))
    broken = EntryPoint("broken", "no_such_module:Mode", spec_modes.GROUP)
    monkeypatch.setattr(spec_modes, "entry_points", lambda group: [*builtin, broken])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        found = spec_modes.load_modes()
    assert "broken" not in found and {"grid", "sample_complexity", "optuna"} <= set(found)
    assert any("search mode broken (no_such_module:Mode" in str(w.message) for w in caught)
    monkeypatch.undo()
    spec_modes.load_modes()
