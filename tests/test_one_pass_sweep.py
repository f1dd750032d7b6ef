"""One-pass cells through the sweep service: the spec, the searcher, a tiny sweep through Ray into
MLflow and back through `vitsweep report`, and censoring."""

import json

import pytest
from conftest import ended, model_record, run_spec, searching
from mlflow.tracking import MlflowClient
from ray.tune.search import Searcher
from typer.testing import CliRunner

from services.app.cli import app
from services.report.text import table_rows
from services.results import CellResult, ModelRecord
from services.search.packs import TrialConfig, packs
from services.spec import SpecError, parse_spec, spec_from_dict
from services.stats.summarize import summarize
from vit_core import train_pack

BOTH = """name: both
models: [vit, cnn]
data: {n_tokens: 24, dim: 12, n_patterns: 8}
model: {width: 16}
training: {n_test: 200, eval_subset: 50, batch_size: 8, max_steps: 150, eval_every: 5, eval_ratio: 1.2}
axes: {alpha_star: [0.2, 0.4], protocol: [one_pass, multi_pass]}
n_train: [4, 16]
seeds: 4
search: {mode: sample_complexity, precision: 0.5}
resources: {models_per_pack: 16}
"""


def test_a_one_pass_cell_trains_each_seed_once_at_its_sample_budget():
    spec = parse_spec(BOTH)
    one_pass = [i for i, c in enumerate(spec.cells) if spec.resolved_cell(c).one_pass]
    assert [spec.cells[i].values["protocol"] for i in one_pass] == ["one_pass"] * 4
    grid = parse_spec(BOTH.replace("{mode: sample_complexity, precision: 0.5}", "{mode: grid}"))
    for pack in packs(grid):
        expected = [8 * 150] if pack.cell in one_pass else [4, 16]
        assert set(pack.n_train) == set(expected)
    assert grid.trainings == 4 * 4 + 4 * 2 * 4  # one run per seed for one-pass cells, one per (N, seed) otherwise


def test_one_pass_needs_no_n_train_and_multi_pass_says_it_does():
    text = BOTH.replace("n_train: [4, 16]\n", "").replace(", protocol: [one_pass, multi_pass]", "")
    spec = parse_spec(text.replace("training: {", "training: {protocol: one_pass, "))  # no n_train: fine
    assert spec_from_dict(spec.spec.model_dump(mode="json")) == spec.spec  # as every trial reads it
    with pytest.raises(SpecError) as error:
        parse_spec(text)
    assert [p.path for p in error.value.problems] == ["n_train"] and "multi_pass" in str(error.value)


def test_the_searcher_plans_nothing_after_a_one_pass_cells_first_round():
    spec = parse_spec(BOTH)
    searcher, run = searching(spec)
    suggested, configs = {}, {}
    while isinstance(config := searcher.suggest(f"t{len(suggested)}"), dict):
        configs[f"t{len(suggested)}"] = config
        suggested[f"t{len(suggested)}"] = TrialConfig.of(config).pack.config()
    one_pass = {i for i, c in enumerate(spec.cells) if spec.resolved_cell(c).one_pass}
    for trial, pack in suggested.items():
        if pack["cell"] in one_pass:  # every evaluated N of the run: the seeds fail below 600 and succeed from it
            records = [
                model_record(n, s, "succeeded" if n >= 600 else "failed")
                for s in pack["seeds"]
                for n in range(40, 1201, 40)
            ]
            ended(run, trial, configs[trial], records)
    assert all(searcher.planner.cells[i].rounds == 1 and searcher.planner.cells[i].next_round() == [] for i in one_pass)
    assert not any(p.cell in one_pass for p in searcher.planner.queue)
    assert searcher.suggest("more") is None  # multi-pass cells still in flight
    for trial, pack in suggested.items():
        if pack["cell"] not in one_pass:
            records = [model_record(n, s, "succeeded") for n, s in zip(pack["n_train"], pack["seeds"])]
            ended(run, trial, configs[trial], records)
    while isinstance(
        config := searcher.suggest("next"), dict
    ):  # multi-pass cells extend down; one-pass cells never return
        pack = TrialConfig.of(config).pack
        assert pack.cell not in one_pass
        records = [model_record(n, s, "succeeded") for n, s in zip(pack.n_train, pack.seeds)]
        ended(run, "next", config, records)
    assert searcher.suggest("last") == Searcher.FINISHED


def test_a_tiny_sweep_of_both_protocols_through_ray_into_mlflow_and_back(local_ray, tmp_path):
    summary, output = run_spec(BOTH, tmp_path)
    assert summary["protocol"] == {
        f"{m} alpha_star={a} protocol={p}": p
        for m in ("vit", "cnn")
        for a in (0.2, 0.4)
        for p in ("one_pass", "multi_pass")
    }
    assert {"vit protocol=one_pass", "cnn protocol=one_pass", "vit protocol=multi_pass"} <= set(
        summary["exponent"]
    )  # one fit per protocol
    assert set(summary["t_star_exponent"]) == {"vit protocol=one_pass", "cnn protocol=one_pass"}
    client = MlflowClient(summary["tracking_uri"])
    children = {
        r.info.run_name: r
        for r in client.search_runs(
            [client.get_run(summary["mlflow_parent_run_id"]).info.experiment_id],
            f"tags.mlflow.parentRunId = '{summary['mlflow_parent_run_id']}'",
        )
    }
    run = children["vit 0.4 one_pass"]  # the cell's values alone: a name that fits MLflow's table
    curve = client.get_metric_history(run.info.run_id, "success_rate")
    assert len(curve) > 5 and [m.step for m in curve] == sorted(m.step for m in curve)  # the success-rate curve over N
    assert [m.value for m in curve] == sorted(m.value for m in curve)  # stable success only rises
    stable = {m.step: m.value for m in client.get_metric_history(run.info.run_id, "per_seed.n_stable")}
    first = {m.step: m.value for m in client.get_metric_history(run.info.run_id, "per_seed.n_first_zero")}
    assert sorted(stable) == sorted(first) == [0, 1, 2, 3]  # one per seed
    assert all(first[s] <= stable[s] for s in stable if stable[s] >= 0)
    star = summary["n_star"]["vit alpha_star=0.4 protocol=one_pass"]
    logged = client.get_run(run.info.run_id).data.metrics
    assert logged["trainings"] == 4  # one run a seed, each recorded at every N it was evaluated at
    assert star is None or logged["n_star"] == star and logged["n_star.ci95_lo"] <= star <= logged["n_star.ci95_hi"]
    reached = sorted(v for v in stable.values() if v >= 0)
    assert star is None or star == reached[1] or star == 40  # 2 of 4 seeds (p = 0.5), or the first evaluated N

    reported = CliRunner().invoke(
        app, ["report", "--home", str(tmp_path / "home"), "--out", str(tmp_path / "report"), "--json"]
    )
    assert reported.exit_code == 0, reported.output
    rebuilt = json.loads(reported.stdout.strip().splitlines()[-1])
    assert rebuilt["protocol"] == summary["protocol"]
    assert {r["label"]: r["n_star"] for r in rebuilt["cells"]} == summary["n_star"]
    row = next(r for r in rebuilt["cells"] if r["label"] == "vit alpha_star=0.4 protocol=one_pass")
    assert row["per_seed"]["n_stable"] == [stable[s] for s in range(4)]
    assert "T* = N*/B" in reported.stdout


def test_a_cell_whose_n_star_lies_beyond_its_budget_is_censored_and_shown_so():
    spec = parse_spec(
        "name: c\nmodels: [cnn]\ndata: {n_tokens: 24, dim: 12, n_patterns: 8}\n"
        "training: {protocol: one_pass, batch_size: 8, max_steps: 3, eval_every: 1, n_test: 100, lr: 0.0001}\n"
        "axes: {alpha_star: [0.2, 0.4]}\nseeds: 3\n"
    )
    cells = [
        CellResult(
            cell,
            [
                ModelRecord.from_dict(r)
                for r in train_pack(*spec.resolved_cell(cell).configs, [24] * 3, [0, 1, 2]).records()
            ],
        )
        for cell in spec.cells
    ]
    summary = summarize(spec, "c-1", cells)
    assert [r.n_star for r in summary.cells] == [None, None]
    assert [row[3] for row in table_rows(summary)] == [
        "> 24",
        "> 24",
    ]  # beyond the budget B * max_steps, never a silent cap
    assert summary.exponent["cnn"].value is None
