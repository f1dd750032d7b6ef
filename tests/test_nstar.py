"""The adaptive N* search on synthetic success functions with a known N* (no training)."""

import json

import numpy as np
import pytest
from conftest import ended, model_record, searching
from ray.tune.search import Searcher

from services.analysis import full_grid_size
from services.execution.ray_tune import PlanSearcher
from services.search.nstar import Bracket
from services.search.packs import TrialConfig
from services.spec import SpecError, parse_spec
from services.sweep_run import SweepRun

SEEDS = 20


def thresholds(n_star: int, seed: int = 0) -> np.ndarray:
    """Per seed, the smallest N at which that seed succeeds; the median-ish one is N* for p = 0.5."""
    rng = np.random.default_rng(seed)
    t = np.exp(rng.normal(np.log(n_star), 0.3, SEEDS)).round().astype(int).clip(1)
    return t


def true_n_star(t: np.ndarray, p: float) -> int:
    """The smallest N at which a fraction >= p of the seeds succeed."""
    return int(np.sort(t)[int(np.ceil(p * len(t))) - 1])


def drive(bracket: Bracket, success) -> int:
    """Run a cell's rounds to the end with success(n, seed) -> bool; return the trainings used."""
    trainings = 0
    while ns := bracket.next_round():
        bracket.rounds += 1
        for n in ns:
            for s in range(SEEDS):
                bracket.record(n, s, success(n, s), SEEDS)
                trainings += 1
    return trainings


def test_finds_a_known_n_star_to_the_precision_with_fewer_trainings_than_the_grid():
    for target in (7, 45, 137, 900):
        t = thresholds(target, seed=target)
        star = true_n_star(t, 0.5)
        bracket = Bracket([5, 10, 20, 40, 80, 160, 320, 640], 0.5, 0.1, 2.0, 10_000)
        used = drive(bracket, lambda n, s, t=t: n >= t[s])
        ns, rates = bracket.rates()
        found = ns[np.argmax(rates >= 0.5)]
        lo = ns[np.argmax(rates >= 0.5) - 1]
        assert lo < star <= found  # the bracket holds the true N*...
        assert found <= lo * 1.1 or found == lo + 1  # ...to the precision asked
        grid = full_grid_size(int(ns[0]), int(ns[-1]), 0.1) * SEEDS
        assert used * 3 <= grid, (target, used, grid)


def test_extends_below_and_above_the_grid_and_stops_at_n_max():
    low = Bracket([40, 80], 0.5, 0.1, 2.0, 1000)
    drive(low, lambda n, s: n >= 3)
    ns, rates = low.rates()
    assert ns[0] <= 2 and ns[np.argmax(rates >= 0.5)] == 3
    high = Bracket([5, 10], 0.5, 0.1, 2.0, 300)
    drive(high, lambda n, s: n >= 10_000)
    assert max(high.outcomes) == 300 and not any(np.mean(v) >= 0.5 for v in high.outcomes.values())


def test_non_monotone_success_refines_the_whole_dip_and_keeps_the_stable_n_star():
    # succeeds for N in [12, 40) (an early win), fails in [40, 100), succeeds from 100 on
    bracket = Bracket([5, 10, 20, 40, 80, 160], 0.5, 0.1, 2.0, 1000)
    drive(bracket, lambda n, s: 12 <= n < 40 or n >= 100)
    ns, rates = bracket.rates()
    below = ns[(rates < 0.5)]
    assert ns[np.argmax(rates >= 0.5)] < 20  # the early crossing was refined too...
    star = min(n for n in ns if n > below.max())  # ...and the stable N* is the last crossing, to 10%
    assert below.max() < 100 <= star <= below.max() * 1.1
    assert sum((ns > 10) & (ns < 80)) > 3  # more than plain bisection of (80, 160) would train


def _searcher(cells: int) -> tuple[PlanSearcher, SweepRun]:
    axes = ", ".join(str(a) for a in np.linspace(0.1, 0.5, cells).round(3))
    spec = parse_spec(
        f"name: s\nmodels: [vit]\naxes: {{alpha_star: [{axes}]}}\nn_train: [10, 20, 40, 80]\nseeds: {SEEDS}\n"
        "search: {mode: sample_complexity, precision: 0.1}\nresources: {models_per_pack: 80}\n"
    )
    return searching(spec)


def _pack(config: dict) -> dict:
    """The pack of a trial's config, as Pack.config writes it."""
    return TrialConfig.of(config).pack.config()


def _report(run: SweepRun, trial: str, config: dict, t: np.ndarray) -> None:
    pack = _pack(config)
    records = [
        model_record(n, s, "succeeded" if n >= t[pack["cell"]][s] else "failed_converged")
        for n, s in zip(pack["n_train"], pack["seeds"])
    ]
    ended(run, trial, config, records)


def test_searcher_runs_cells_in_parallel_and_finishes():
    searcher, run = _searcher(cells=3)
    t = [thresholds(n, seed=n) for n in (15, 50, 200)]
    first = [searcher.suggest(f"t{i}") for i in range(5)]
    assert {_pack(c)["cell"] for c in first if isinstance(c, dict)} == {0, 1, 2}  # every cell starts at once
    assert all(len(_pack(c)["n_train"]) <= 80 for c in first if isinstance(c, dict))
    pending = {f"t{i}": c for i, c in enumerate(first) if isinstance(c, dict)}
    count = len(pending)
    while pending:
        trial, config = pending.popitem()
        _report(run, trial, config, t)
        while (config := searcher.suggest(f"t{count}")) not in (None, Searcher.FINISHED):
            pending[f"t{count}"] = config
            count += 1
    assert searcher.suggest("last") == Searcher.FINISHED
    for cell, target in zip(searcher.planner.cells, t):
        ns, rates = cell.rates()
        i = np.argmax(rates >= 0.5)
        assert ns[i - 1] < true_n_star(target, 0.5) <= ns[i] <= max(ns[i - 1] * 1.1, ns[i - 1] + 1)


def test_a_failed_pack_ends_its_cell_only():
    searcher, run = _searcher(cells=2)
    configs = {f"t{i}": searcher.suggest(f"t{i}") for i in range(2)}
    ended(run, "t0", configs["t0"], None)
    assert _pack(configs["t0"])["cell"] in searcher.planner.failed
    assert searcher.suggest("t2") is None  # the other cell is still in flight
    _report(run, "t1", configs["t1"], [thresholds(30)] * 2)
    assert _pack(searcher.suggest("t3"))["cell"] == _pack(configs["t1"])["cell"]


def test_state_survives_save_and_restore(tmp_path):
    searcher, run = _searcher(cells=2)
    config = searcher.suggest("t0")
    _report(run, "t0", config, [thresholds(30)] * 2)
    searcher.suggest("t1")
    searcher.save(str(tmp_path / "state.json"))
    restored, _ = _searcher(cells=2)
    restored.restore(str(tmp_path / "state.json"))
    assert restored.planner.get_state() == searcher.planner.get_state()
    assert restored.planner.cells[0].outcomes == searcher.planner.cells[0].outcomes


def test_a_search_stopped_between_rounds_is_not_taken_for_one_that_ended(tmp_path):
    """Ctrl-C when every trial in flight has reported but the next round is not planned yet left no
    trial unfinished, and such a sweep was recorded as whole (test_live_record's first run, once
    in four): whether the search ended is the searcher's to say, saved with its state."""
    searcher, run = _searcher(cells=1)
    config = searcher.suggest("t0")
    _report(run, "t0", config, [thresholds(30)])  # its first round reported: nothing in flight
    searcher.save(str(tmp_path / "between.json"))
    assert not searcher.finished
    count = 1
    while (config := searcher.suggest(f"t{count}")) != Searcher.FINISHED:
        _report(run, f"t{count}", config, [thresholds(30)])
        count += 1
    assert searcher.finished and not run.result(0, searcher.finished, 1, tmp_path, 0.0).search_stopped
    searcher.save(str(tmp_path / "ended.json"))
    for saved, done in (("between.json", False), ("ended.json", True)):
        restored, _ = _searcher(cells=1)
        restored.restore(str(tmp_path / saved))
        assert restored.finished is done
    legacy = json.loads((tmp_path / "between.json").read_text())
    del legacy["search_finished"]  # a state saved before the searcher said: as those versions read it
    (tmp_path / "legacy.json").write_text(json.dumps(legacy))
    restored, _ = _searcher(cells=1)
    restored.restore(str(tmp_path / "legacy.json"))
    assert restored.finished


@pytest.mark.parametrize(
    "text, path",
    [
        ("search: {mode: sample_complexity, n_max: 20}", "search.n_max"),
        ("search: {mode: sample_complexity, precision: 0}", "search.precision"),
        ("search: {mode: sample_complexity, factor: 1}", "search.factor"),
        ("search: {mode: sample_complexity, space: {lr: {low: 0.1, high: 1}}}", "search.space"),
    ],
)
def test_bad_search_settings_name_their_field(text, path):
    with pytest.raises(SpecError) as error:
        parse_spec(f"name: s\nmodels: [vit]\nn_train: [10, 40]\n{text}\n")
    assert [p.path for p in error.value.problems] == [path]


def test_models_that_did_not_converge_train_again_with_twice_the_steps_up_to_the_cap():
    spec = parse_spec(
        "name: s\nmodels: [vit]\nn_train: [10, 20]\nseeds: 2\ntraining: {max_steps: 100}\n"
        "search: {mode: sample_complexity, max_steps_cap: 300}\n",
        "spec",
    )
    searcher, run = searching(spec)
    first = searcher.suggest("t0")
    config = _pack(first)
    assert searcher.suggest("t1") is None and "max_steps" not in config
    stuck = lambda n, s, pack: [model_record(n, s, "not_converged" if (n, s) == (10, 1) else "succeeded")]  # noqa: E731
    records = [r for n, s in zip(config["n_train"], config["seeds"]) for r in stuck(n, s, config)]
    ended(run, "t0", first, records)
    assert searcher.planner.cells[0].outcomes[10] == [1.0, None]  # not counted while it waits for its retry
    suggested = searcher.suggest("t2")
    retry = _pack(suggested)
    assert (retry["n_train"], retry["seeds"], retry["max_steps"]) == ([10], [1], 200)
    ended(run, "t2", suggested, stuck(10, 1, retry))
    suggested = searcher.suggest("t3")
    retry = _pack(suggested)
    assert retry["max_steps"] == 300  # capped
    ended(run, "t3", suggested, stuck(10, 1, retry))
    assert searcher.planner.cells[0].outcomes[10] == [1.0, None]  # still stuck at the cap: left out
    assert "max_steps" not in _pack(searcher.suggest("t4"))  # no more retries: the search goes on
