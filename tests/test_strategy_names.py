"""One strategy, one class, one word: every caller asks a strategy through Strategy's interface, never
its concrete class, and the previous release's names still answer, warning, for one release."""

import inspect
import re
from pathlib import Path

import pytest

import services.spec
from services.search import api as search_api
from services.search import grid, nstar, optuna, tuning
from services.spec import STRATEGIES, Strategy, parse_spec, search_strategies
from services.spec import modes as old_modes

ROOT = Path(__file__).parents[1]


def test_no_module_asks_a_strategy_its_class_outside_its_own():
    """No isinstance on a concrete strategy, nor a getattr for a field only some have, outside the
    module that defines it: the callers (and the tuning strategy) use Strategy's interface."""
    own = {cls.__name__: Path(inspect.getfile(cls)).resolve() for cls in STRATEGIES.values()}
    found = [
        f"{path.relative_to(ROOT)}: {line.strip()}"
        for path in sorted((ROOT / "services").rglob("*.py"))
        for line in path.read_text().splitlines()
        for name, home in own.items()
        if path.resolve() != home and re.search(rf"isinstance\(.*\b{name}\b", line)
    ]
    found += [
        f"{path.relative_to(ROOT)}: {line.strip()}"
        for path in sorted((ROOT / "services").rglob("*.py"))
        for line in path.read_text().splitlines()
        if re.search(r"getattr\([^)]*search[^)]*\"max_steps_cap\"", line)
    ]
    assert found == []


def test_the_base_interface_answers_what_a_wrapper_asks():
    """A strategy with none of a sample_complexity search's fields answers the tuning strategy too."""
    sweep = parse_spec((ROOT / "sweeps" / "smoke.yaml").read_text())
    base, cell = sweep.search, sweep.cells[0]
    assert base.adaptive() is None and base.objective() is None
    assert base.most_n(sweep, cell) == len(sweep.resolved_cell(cell).n_values)
    assert base.typed({"lr": 0.1}) == {"lr": 0.1} and base.params()["mode"] == base.mode
    assert sweep.strategy is sweep.search


def test_the_previous_names_warn_and_answer_the_new_ones():
    with pytest.warns(DeprecationWarning, match="use services.spec.Strategy"):
        assert services.spec.Mode is Strategy
    with pytest.warns(DeprecationWarning, match="search_strategies"):
        assert search_strategies() == services.spec.SEARCH_MODES
    with pytest.warns(DeprecationWarning, match="services.spec.strategies.Strategy"):
        assert old_modes.Mode is Strategy
    with pytest.warns(DeprecationWarning, match="services.search.api.Strategy"):
        assert search_api.Mode is Strategy
    pairs = [
        (grid, "GridMode", grid.GridStrategy),
        (nstar, "SampleComplexityMode", nstar.SampleComplexityStrategy),
        (optuna, "OptunaMode", optuna.OptunaStrategy),
        (tuning, "Tuned", tuning.TuningStrategy),
    ]
    for module, old, new in pairs:
        with pytest.warns(DeprecationWarning, match=new.__name__):
            assert getattr(module, old) is new
    assert set(search_strategies()) == set(STRATEGIES) - {"tuning"} and list(STRATEGIES)[0] == "grid"
