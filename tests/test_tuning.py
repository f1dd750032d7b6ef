"""Tuning (services.search.tuning): training settings searched inside every cell on selection seeds, N*
measured on other seeds at the chosen setting; successive caps; edges extended or flagged."""

import json
import math
import re

import numpy as np
import pytest
from conftest import model_record, run_spec
from mlflow.tracking import MlflowClient
from ray.tune.search import Searcher
from typer.testing import CliRunner

from services.app.cli import app
from services.execution.ray_tune import PlanSearcher
from services.results import MEASUREMENT, SELECTION, Cell, CellResult, ModelRecord
from services.search.packs import Pack, pack_cost
from services.search.selection import Run, n_star_of_runs
from services.search.tuning_multi_pass import MultiPassTuning
from services.search.tuning_one_pass import OnePassTuning
from services.spec import Setting, SpecError, parse_spec
from services.stats.summarize import summarize
from vit_core import TrainConfig

SPEC = """name: tuned
models: [vit, cnn]
data: {n_tokens: 24, dim: 12, n_patterns: 8}
model: {width: 16}
training: {protocol: one_pass, batch_size: 4, max_steps: 400, eval_every: 1, eval_ratio: 1.1, stability_window: 4}
axes: {alpha_star: [0.25, 0.5]}
seeds: 6
tuning: {lr: [0.25, 1, 4], batch_size: [1, 4], selection_seeds: 4}
resources: {models_per_pack: 24}
"""
W = 4


def stable_n(setting: Setting, seed: int) -> int:
    """A made-up world: a cell's stable N is smallest at B = 1, eta = 1, and varies by seed."""
    return round(20 * (1 + abs(math.log2(setting.lr))) * (1 + math.log2(setting.batch_size)) * (1 + 0.1 * (seed % 5)))


def run_records(setting: Setting, seed: int, cap: int, phase: str, truth=stable_n) -> list[dict]:
    """A one-pass run's records as vit_core makes them with a stability window W: evaluated on
    the grid of steps, stopped once zero error held from its stable N to W times it, censored
    when its sample cap comes first."""
    B, steps = setting.batch_size, cap // setting.batch_size
    grid = TrainConfig(protocol="one_pass", eval_every=1, eval_ratio=1.1).evaluation_steps(steps)[1:]
    target = truth(setting, seed)
    stable = next((B * t for t in grid if B * t >= target), None)
    confirmed = stable is not None and W * stable <= B * steps
    last = next(B * t for t in grid if B * t >= W * stable) if confirmed else B * steps
    return [
        model_record(
            B * t,
            seed,
            "succeeded" if confirmed and B * t >= stable else "failed",
            lr=setting.lr,
            batch_size=B,
            n_stable=stable if confirmed else -1,
            n_first_zero=stable if stable else -1,
            censored=not confirmed,
            max_steps=steps,
            phase=phase,
        )
        for t in grid
        if B * t <= last
    ]


def drive(search, truth=stable_n, until: int | None = None) -> list:
    """Run a tuning planner against the made-up world: every suggested pack answered with its
    models' records (one pass: its runs' records; multi-pass: N reaches the threshold ``truth``
    or not); ``until``: stop after that many trials. Returns every pack suggested."""
    suggested, trial = [], 0
    while until is None or trial < until:
        pack = search.suggest(f"t{trial}")
        if pack in (None, search.FINISHED):
            assert pack == search.FINISHED or not search.in_flight
            break
        suggested.append(pack)
        if isinstance(search, MultiPassTuning):
            records = [_multi_pass_record(pack, *m, _reached(pack, *m, truth)) for m in _models(pack)]
        else:
            records = [ModelRecord.from_dict(r) for r in _records(pack, truth)]
        search.complete(f"t{trial}", records)
        trial += 1
        assert trial < 2000, "the planner does not finish"
    return suggested


def test_selection_and_measurement_seeds_never_overlap_and_n_star_is_measured_at_the_best_setting():
    spec = parse_spec(SPEC)
    search = OnePassTuning(spec)
    packs = drive(search)
    selection = {s for p in packs if p.phase == SELECTION for s in p.seeds}
    measurement = {s for p in packs if p.phase == MEASUREMENT for s in p.seeds}
    assert selection == set(range(1000, 1004)) and measurement == set(range(6))
    assert not selection & measurement
    for index in range(len(spec.cells)):
        measured = [p for p in packs if p.cell == index and p.phase == MEASUREMENT]
        assert len(measured) == 1 and set(measured[0].lr) == {1.0} and measured[0].batch_size == 1
        assert (
            measured[0].n_train == (spec.resolved_cell(spec.cells[index]).training.max_steps * 4,) * 6
        )  # the whole budget


def test_settings_go_on_to_a_larger_cap_only_while_they_could_still_win():
    """Under cap C a run not yet confirmed has a stable N above C/W. At the first cap no setting's
    N* is known yet, so all go on; at the second the best one's is, every other is known or ruled
    out, and none needs the whole budget: the choice is the one the whole budget would give."""

    def slower(setting: Setting, seed: int) -> int:
        return 2 * stable_n(setting, seed)

    spec = parse_spec(SPEC)
    search = OnePassTuning(spec)
    packs = drive(search, slower)
    assert spec.tuning.caps(4 * 400) == [100, 400, 1600]
    caps: dict[tuple, set[int]] = {}
    for p in packs:
        if p.phase == SELECTION and p.cell == 0:
            for lr, n in zip(p.lr, p.n_train):
                caps.setdefault((p.batch_size, lr), set()).add(n)
    assert W * n_star_of_runs(search.cells[0].table()[Setting(1, 1.0)], 0.5) > 100  # not known at the first cap
    assert all(used == {100, 400} for used in caps.values())  # none went on to 1600
    full = OnePassTuning(parse_spec(SPEC.replace("selection_seeds: 4}", "selection_seeds: 4, cap_rounds: 1}")))
    drive(full, slower)
    assert search.cells[0].chosen == full.cells[0].chosen == [1, 1.0]


def test_a_best_setting_at_an_edge_is_extended_then_flagged():
    """The best eta is the largest tried: the search steps past it (x4 each time) up to
    max_extensions, and the report says the choice still sits at that edge."""

    def rising(setting: Setting, seed: int) -> int:  # the larger the step, the fewer samples
        return round(400 * setting.batch_size / setting.lr) + seed % 3

    spec = parse_spec(SPEC.replace("selection_seeds: 4}", "selection_seeds: 4, max_extensions: 2}"))
    search = OnePassTuning(spec)
    packs = drive(search, rising)
    tried = {lr for p in packs if p.phase == SELECTION and p.cell == 0 for lr in p.lr}
    assert tried == {0.25, 1.0, 4.0, 16.0, 64.0}
    assert search.cells[0].chosen == [1, 64.0] and search.cells[0].extensions == {"lr high": 2}
    records = [ModelRecord.from_dict(r) for p in packs if p.cell == 0 for r in _records(p, rising)]
    result = CellResult(spec.cells[0], records)
    row = summarize(spec, "s", [result]).cells[0]
    assert row.tuning.chosen == {"batch_size": 1, "lr": 64.0}
    assert row.tuning.at_edge == ["batch_size: 1, the smallest possible", "lr: the largest value tried (64)"]
    assert row.tuning.selection_seeds == [1000, 1001, 1002, 1003] and row.tuning.measurement_seeds == list(range(6))
    flag = parse_spec(SPEC.replace("selection_seeds: 4}", "selection_seeds: 4, at_edge: flag}"))
    search = OnePassTuning(flag)
    drive(search, rising)
    assert search.cells[0].chosen == [1, 4.0] and search.cells[0].extensions == {}


def _records(pack, truth) -> list[dict]:
    return [
        r
        for n, seed, lr in zip(pack.n_train, pack.seeds, pack.lr)
        for r in run_records(Setting(pack.batch_size, lr), seed, n, pack.phase, truth)
    ]


def test_the_search_resumes_from_its_saved_state_as_if_never_stopped():
    spec = parse_spec(SPEC)
    whole = [p.config() for p in drive(OnePassTuning(spec))]
    first = PlanSearcher(spec.strategy.make_planner(spec))
    head = [p.config() for p in drive(first.planner, until=7)]
    state = json.loads(json.dumps(first.planner.get_state()))
    again = PlanSearcher(spec.strategy.make_planner(spec))
    again.planner.set_state(state)
    rest = [p.config() for p in drive(again.planner)]
    assert head + rest == whole
    assert again.suggest("late") == Searcher.FINISHED


MULTI_PASS = SPEC.replace(
    SPEC.split("\n")[4],
    "training: {protocol: multi_pass, batch_size: 4, max_steps: 400}\nn_train: [10, 20, 40, 80, 160]\n"
    "search: {mode: sample_complexity}",
)


def test_multi_pass_tuning_searches_each_settings_n_star_then_measures_the_best_on_other_seeds():
    """Every setting gets an adaptive N* search on the selection seeds; the best one's N* is
    then searched on the measurement seeds, bracketed to the precision; the summary reads the
    same choice back from the records; a stopped search resumes as if never stopped."""
    spec = parse_spec(MULTI_PASS)
    search = spec.strategy.make_planner(spec)
    assert isinstance(search, MultiPassTuning)
    packs = drive(search)
    selection = {s for p in packs if p.phase == SELECTION for s in p.seeds}
    assert selection == set(range(1000, 1004)) and {s for p in packs if p.phase == MEASUREMENT for s in p.seeds} == set(
        range(6)
    )
    for index in range(len(spec.cells)):
        assert search.cells[index].chosen == [1, 1.0]
        measured = [p for p in packs if p.cell == index and p.phase == MEASUREMENT]
        assert {(p.batch_size, lr) for p in measured for lr in p.lr} == {(1, 1.0)}
        tried = {(p.batch_size, lr) for p in packs if p.cell == index and p.phase == SELECTION for lr in p.lr}
        assert tried == {(b, lr) for b in (1, 4) for lr in (0.25, 1.0, 4.0)}  # the best is inside: no extension
        bracket = search.cells[index].measurement
        ns, rates = bracket.rates()
        truth = sorted(stable_n(Setting(1, 1.0), s) for s in range(6))[2]  # the 3rd of 6 seeds: p = 0.5
        star = int(ns[np.argmax(rates >= 0.5)])
        assert star >= truth and star <= ns[np.argmax(rates >= 0.5) - 1] * 1.1 + 1
    records = [_multi_pass_record(p, *m, _reached(p, *m, stable_n)) for p in packs if p.cell == 0 for m in _models(p)]
    row = summarize(spec, "s", [CellResult(spec.cells[0], records)]).cells[0]
    assert row.tuning.chosen == {"batch_size": 1, "lr": 1.0} and row.n_star == star
    assert row.t_star is None  # steps are not N / B in multi-pass
    chosen = next(s for s in row.tuning.selection if (s["batch_size"], s["lr"]) == (1, 1.0))
    assert chosen["n_star"] == min(s["n_star"] for s in row.tuning.selection) and chosen["seeds"] == 4
    first = MultiPassTuning(spec)
    head = [p.config() for p in drive(first, until=9)]
    again = MultiPassTuning(spec)
    again.set_state(json.loads(json.dumps(first.get_state())))
    assert head + [p.config() for p in drive(again)] == [p.config() for p in packs]


def test_multi_pass_tuning_retrains_a_model_that_did_not_converge_with_a_larger_budget():
    """A model that did not reach zero training loss trains again with twice its steps (at its own
    batch size's budget), up to search.max_steps_cap, as in the untuned N* search."""
    spec = parse_spec(MULTI_PASS.replace("mode: sample_complexity}", "mode: sample_complexity, max_steps_cap: 3000}"))
    search = MultiPassTuning(spec)
    first = search.suggest("t0")
    assert first.phase == SELECTION and first.max_steps is None
    retries, trial = [], 1
    search.complete("t0", [_multi_pass_record(first, n, s, lr, "not_converged") for n, s, lr in _models(first)])
    while (pack := search.suggest(f"t{trial}")) not in (None, MultiPassTuning.FINISHED) and not retries:
        if pack.max_steps:
            retries.append(pack)
        search.complete(f"t{trial}", [_multi_pass_record(pack, n, s, lr, "succeeded") for n, s, lr in _models(pack)])
        trial += 1
    assert retries and (retries[0].batch_size, retries[0].lr, retries[0].seeds) == (
        first.batch_size,
        first.lr,
        first.seeds,
    )
    assert retries[0].max_steps == min(2 * 1600 // first.batch_size, 3000)


def _reached(pack, n: int, seed: int, lr: float, truth) -> str:
    """A multi-pass model's outcome in the made-up world: N reaches its setting's threshold or not."""
    return "succeeded" if n >= truth(Setting(pack.batch_size, lr), seed) else "failed_converged"


def _models(pack) -> list[tuple]:
    return list(zip(pack.n_train, pack.seeds, pack.lr))


def _multi_pass_record(pack, n: int, seed: int, lr: float, outcome: str) -> ModelRecord:
    return ModelRecord.from_dict(
        model_record(n, seed, outcome) | {"lr": lr, "batch_size": pack.batch_size, "phase": pack.phase}
    )


def test_n_star_of_runs_is_the_stable_n_star_of_their_success_table():
    runs = {s: Run(n, False, 100) for s, n in enumerate([30, 10, -1, 20])}
    assert n_star_of_runs(runs, 0.5) == 20 and n_star_of_runs(runs, 0.75) == 30 and n_star_of_runs(runs, 1.0) is None
    records = [
        ModelRecord.from_dict(
            model_record(n, s, "succeeded" if 0 <= r.n_stable <= n else "failed", n_stable=r.n_stable)
        )
        for s, r in runs.items()
        for n in (10, 20, 30, 40)
    ]
    outcomes = CellResult(Cell("vit", {}), records).outcomes()
    assert [outcomes.n_star(p) for p in (0.5, 0.75, 1.0)] == [20, 30, None]


@pytest.mark.parametrize(
    "change, path",
    [
        ("axes: {alpha_star: [0.25, 0.5], lr: [0.5, 1]}", "tuning.lr"),
        ("stability_window: 4}", "training.stability_window"),
        ("seeds: 6", "tuning.selection_seed_start"),
        ("protocol: one_pass", "search.mode"),
        ("sampler", "tuning.sampler"),
        ("per_model", "tuning"),
    ],
)
def test_a_tuned_spec_that_cannot_run_says_where(change, path):
    text = {
        "tuning.lr": SPEC.replace("axes: {alpha_star: [0.25, 0.5]}", change),
        "training.stability_window": SPEC.replace("stability_window: 4}", "stability_window: 0}"),
        "tuning.selection_seed_start": SPEC.replace("seeds: 6", "seeds: 2000"),
        "search.mode": MULTI_PASS.replace("search: {mode: sample_complexity}\n", ""),
        "tuning.sampler": MULTI_PASS.replace("selection_seeds: 4}", "selection_seeds: 4, sampler: optuna}"),
        "tuning": MULTI_PASS + "per_model: {cnn: {training: {protocol: one_pass, stability_window: 4}}}\n",
    }[path]
    with pytest.raises(SpecError) as error:
        parse_spec(text)
    assert path in [p.path for p in error.value.problems], str(error.value)


def test_a_model_can_search_values_of_its_own():
    """per_model.cnn.tuning replaces the sweep's lists for the CNN alone; a batch size below the
    low edge steps to 1 when the geometric step would round to 0."""
    text = SPEC.replace(
        "tuning: {lr: [0.25, 1, 4], batch_size: [1, 4],", "tuning: {lr: [0.25, 1, 4], batch_size: [2, 8],"
    )
    spec = parse_spec(text + "per_model: {cnn: {tuning: {lr: [16, 64]}}}\n")
    assert spec.tuning_of("cnn").lr == [16.0, 64.0] and spec.tuning_of("vit").lr == [0.25, 1.0, 4.0]
    packs = drive(OnePassTuning(spec))
    first = {(spec.cells[p.cell].model, lr) for p in packs if p.phase == SELECTION for lr in p.lr}
    assert {lr for m, lr in first if m == "cnn"} == {16.0, 64.0, 4.0, 1.0}  # best at 16: two steps down past it
    assert {lr for m, lr in first if m == "vit"} >= {0.25, 1.0, 4.0}
    assert {p.batch_size for p in packs if p.phase == SELECTION} >= {1, 2, 8}  # 2 is best here: B = 1 tried past it
    with pytest.raises(SpecError, match="needs a sweep tuning"):
        parse_spec(text.split("tuning:")[0] + "per_model: {cnn: {tuning: {lr: [16]}}}\n")


TINY = """name: tuned_tiny
models: [vit, cnn]
data: {n_tokens: 24, dim: 12, n_patterns: 8}
model: {width: 16}
training: {protocol: one_pass, n_test: 200, eval_subset: 50, batch_size: 8, max_steps: 150, eval_every: 1,
  eval_ratio: 1.2, stability_window: 3}
axes: {alpha_star: [0.25, 0.5]}
seeds: 4
tuning: {lr: [0.25, 1], batch_size: [2, 8], selection_seeds: 3}
resources: {models_per_pack: 16}
"""


def test_a_tuned_sweep_runs_through_ray_into_mlflow_and_back(local_ray, tmp_path, monkeypatch):
    """run --json carries the tuned exponents, local slopes, the paired difference and per cell
    what was chosen on which seeds over which window; MLflow holds the same, and `vitsweep report`
    rebuilds it from MLflow alone. Its output, not a terminal's, has progress lines as trials end."""
    monkeypatch.setenv("VITSWEEP_PROGRESS_S", "0")  # a line at every trial's end
    summary, output = run_spec(TINY, tmp_path)
    progress = [line for line in output.splitlines() if line.startswith(f"[{summary['sweep_id']}] ")]
    done = [int(line.split("] ")[1].split(" trials")[0]) for line in progress]
    assert done == sorted(done) and set(range(1, max(done) + 1)) <= set(done) and max(done) >= 8  # every trial's end
    *trials, last = progress  # the trials' lines, then what follows them
    assert all(" models trained, " in line and " elapsed, ETA " in line and "% busy so far" in line for line in trials)
    ended = r".* models trained in \d+:\d\d; summarizing its 4 cells and logging them to MLflow"
    assert re.fullmatch(ended, last), last
    for key in ("exponent", "exponent_difference"):
        assert all({"value", "ci95"} <= set(fit) for fit in summary[key].values()), key
    assert set(summary["criteria"]) == {"iterate", "first_zero", "stable"} and summary["criterion"] == "iterate"
    for criterion, fits in summary["criteria"].items():
        assert all({"value", "ci95"} <= set(fit) for fit in fits["exponent"].values()), criterion
    assert set(summary["exponent_difference"]) == {"cnn - vit"}
    assert all(
        len(slopes) == 1 and slopes[0]["alpha_star"] == [0.5, 0.25] for slopes in summary["local_exponent"].values()
    )
    assert summary["error_bound"] == {"200": pytest.approx(0.01487, abs=1e-5)}
    tuned = {r["label"]: r["tuning"] | {"window": r["window"]} for r in summary["cells"] if r["tuning"]}
    assert set(tuned) == {f"{m} alpha_star={a}" for m in ("vit", "cnn") for a in (0.25, 0.5)}
    for cell in tuned.values():
        assert cell["selection_seeds"] == [1000, 1001, 1002] and cell["measurement_seeds"] == [0, 1, 2, 3]
        assert {(s["batch_size"], s["lr"]) for s in cell["selection"]} >= {(2, 0.25), (2, 1.0), (8, 0.25), (8, 1.0)}
        assert (cell["chosen"]["batch_size"], cell["chosen"]["lr"]) in {
            (s["batch_size"], s["lr"]) for s in cell["selection"]
        }
        assert cell["window"]["stability_window"] == 3 and cell["window"]["runs"] == 4
        assert cell["window"]["checked"] is None or cell["window"]["checked"] >= 3
    report = (tmp_path / "home" / "reports" / summary["sweep_id"] / "summary.md").read_text()  # run writes it whole
    assert "chosen on seeds 1000-1002" in report and "measured on seeds 0-3" in report
    # stdout is not a terminal: tables as whole Markdown rows, lines unwrapped, no colour codes
    assert "…" not in output and "\x1b[" not in output
    assert "| alpha* | ViT N* [95% CI] | CNN N* [95% CI] | CNN / ViT [95% CI] |" in output  # the answer's table
    assert any(line.startswith("| 0.25 | ") for line in output.splitlines())
    client = MlflowClient(summary["tracking_uri"])
    parent = client.get_run(summary["mlflow_parent_run_id"])
    children = client.search_runs([parent.info.experiment_id], f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    for child in children:
        chosen = tuned[Cell.from_key(child.data.tags["vitsweep.cell"]).label]["chosen"]  # a run's name is short
        assert float(child.data.params["tuned.lr"]) == chosen["lr"]
        assert int(child.data.params["tuned.batch_size"]) == chosen["batch_size"]
        assert "tuning.json" in {a.path for a in client.list_artifacts(child.info.run_id)}
    assert {a.path for a in client.list_artifacts(parent.info.run_id)} >= {"tuning.png", "local_exponent.png"}
    reported = CliRunner().invoke(app, ["report", "--home", str(tmp_path / "home"), "--json"])
    assert reported.exit_code == 0, reported.output
    rebuilt = json.loads(reported.stdout.strip().splitlines()[-1])
    assert {r["label"]: r["tuning"]["chosen"] for r in rebuilt["cells"]} == {
        label: cell["chosen"] for label, cell in tuned.items()
    }
    assert rebuilt["exponent_difference"] == summary["exponent_difference"]


def test_a_cells_next_round_is_planned_as_soon_as_its_round_reports_and_long_packs_go_first():
    """The ViT's packs (attention: a larger cost per sample) come before the CNN's; once a ViT
    cell's round has reported, its next round is queued ahead of the CNN packs still waiting,
    so that a slow cell's last round does not run alone at the end."""
    spec = parse_spec(SPEC)
    search = OnePassTuning(spec)
    first = search.suggest("t0")
    assert spec.cells[first.cell].model == "vit"
    waiting = [spec.cells[p.cell].model for p in search.queue]
    assert waiting == sorted(waiting, key=lambda m: m != "vit")  # every ViT pack before every CNN pack
    cell0 = [first] + [p for p in search.queue if p.cell == first.cell]
    search.queue = [p for p in search.queue if p.cell != first.cell]
    for i, pack in enumerate(cell0):
        search.in_flight[f"c{i}"] = pack
        records = [
            ModelRecord.from_dict(r)
            for n, seed, lr in zip(pack.n_train, pack.seeds, pack.lr)
            for r in run_records(Setting(pack.batch_size, lr), seed, n, pack.phase)
        ]
        search.complete(f"c{i}", records)
    search.in_flight.pop("t0", None)
    order = [search.suggest("t1").cell] + [p.cell for p in search.queue]
    cnn = [i for i, c in enumerate(order) if spec.cells[c].model == "cnn"]
    assert first.cell in order and order.index(first.cell) < min(cnn)  # its next round, ahead of the CNN's packs


def test_a_small_selection_round_goes_before_a_larger_measurement_it_holds_up():
    """A tuning round's pack counts the measurement its cell still has to run (``seeds`` models):
    a late, small round of one cell goes ahead of another cell's measurement of as many or more
    models, so that its own measurement does not start last and run alone at the end."""
    spec = parse_spec(SPEC)
    cost = pack_cost(spec)
    small_round = Pack(0, (100,) * 2, (1000, 1001), lr=(4.0, 4.0), batch_size=1, phase=SELECTION)
    measurement = Pack(1, (100,) * 6, tuple(range(6)), lr=(1.0,) * 6, batch_size=1, phase=MEASUREMENT)
    assert spec.cells[0].model == spec.cells[1].model  # the same cost per sample
    assert cost(small_round) > cost(measurement)


@pytest.mark.parametrize("truth", ["never", "rising"])
def test_the_settings_and_steps_a_cell_may_take_bound_what_its_search_trains(truth):
    """`plan`'s "at most" counts what a cell's search may reach: its grid's values and the
    extensions past each end, in every combination (a chosen setting's neighbours pair a new value
    with the other field's), each run at most its sample budget at the smallest batch reached.
    Counting the grid and one setting per extension, sample_complexity_arms' never-confirming
    cell tried 15 settings where 14 were counted, down to B = 1 where B = 8 was."""
    worlds = {
        "never": lambda setting, seed: 10**9,  # no run ever stops: nothing rules a setting out
        "rising": lambda setting, seed: (
            round(40 * setting.batch_size / setting.lr) + seed % 3
        ),  # extended upwards in eta
    }
    spec = parse_spec(
        SPEC.replace("batch_size: [1, 4]", "batch_size: [8, 32]").replace("seeds: 4}", "seeds: 4, max_extensions: 2}")
    )
    search = OnePassTuning(spec)
    packs = [p for p in drive(search, worlds[truth]) if p.cell == 0]
    cell = spec.cells[0]
    tried = {Setting(p.batch_size, lr) for p in packs if p.phase == SELECTION for lr in p.lr}
    trainings = sum(len(p.seeds) for p in packs)
    steps = max(n // p.batch_size for p in packs for n in p.n_train)
    assert len(tried) <= spec.tuning.most_settings(Setting(4, 1.0))
    assert trainings <= spec.strategy.most_trainings(spec, cell) and steps <= spec.strategy.most_steps(spec, cell)
    if truth == "never":
        grid_and_extensions = 2 * 3 + 2 * 2 * 2
        assert len(tried) > grid_and_extensions and min(s.batch_size for s in tried) == 1 < 8
