"""The sample_complexity search through a real local Ray Tune: first with a trainable whose
success is a known function of N (no training), then a tiny real sweep and its report."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import ray
from conftest import model_record, run_spec
from mlflow.tracking import MlflowClient
from ray import tune
from typer.testing import CliRunner

from services.analysis import full_grid_size
from services.app.cli import app
from services.execution.ray_tune import run_sweep
from services.report.figures import figures
from services.report.text import notes, table_rows
from services.results import Cell, CellResult, ModelRecord
from services.search.packs import TrialConfig
from services.spec import parse_spec
from services.stats.summarize import summarize
from services.store.cache import vit_core_hash
from services.sweep_run import SweepRun

ROOT = Path(__file__).resolve().parents[1]
runner = CliRunner()
SYNTHETIC = """name: synthetic
models: [vit, cnn]
axes: {alpha_star: [0.1, 0.2, 0.4]}
n_train: [4, 8, 16, 32, 64]
seeds: 10
search: {mode: sample_complexity, precision: 0.1}
resources: {models_per_pack: 50}
"""


def known_threshold(model: str, alpha: float, seed: int) -> float:
    """The N from which a seed succeeds: 0.5 alpha^-2 (ViT) or 0.05 alpha^-4 (CNN), jittered per seed."""
    base = 0.5 * alpha**-2 if model == "vit" else 0.05 * alpha**-4
    return base * np.exp(np.random.default_rng(seed).normal(0, 0.3))


def _synthetic_trainable(config: dict, sweep, cache) -> None:
    """Reports what train_pack_trial reports, with success decided by known_threshold."""
    trial = TrialConfig.of(config)
    cell, pack = trial.resolved_cell(sweep).cell, trial.pack
    alpha = cell.values["alpha_star"]
    records = [
        model_record(
            n,
            s,
            "succeeded" if n >= known_threshold(cell.model, alpha, s) else "failed_converged",
            iterations_to_zero=10,
            test_error=0.0,
        )
        for n, s in zip(pack.n_train, pack.seeds)
    ]
    tune.report(
        {
            "trainings": len(records),
            "success_rate": float(np.mean([r["success"] for r in records])),
            "records": json.dumps(records),
            "curves": "{}",
        }
    )


def test_adaptive_search_through_ray_tune_finds_known_n_star(local_ray, tmp_path):
    spec = parse_spec(SYNTHETIC)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ray.cloudpickle.register_pickle_by_value(sys.modules["conftest"])  # model_record: the workers cannot import tests/
    run = SweepRun(spec, "synthetic", tmp_path)
    result = run_sweep(run, _synthetic_trainable)
    assert len(result.cells) == 6 and not any(c.failures for c in result.cells)
    # every trial Tune ran decoded once, into the outcome its planner learnt from and its cell holds
    trials = tune.ExperimentAnalysis(str(tmp_path / "ray" / "synthetic")).trials
    assert sorted(o.trial_id for o in run.outcomes) == sorted(t.trial_id for t in trials)
    decoded = {id(r) for o in run.outcomes for r in o.records}
    assert all(id(r) in decoded for c in result.cells for r in c.records)
    assert sum(len(o.records) for o in run.outcomes) == sum(len(c.records) for c in result.cells)
    for cell in result.cells:
        t = sorted(known_threshold(cell.cell.model, cell.cell.values["alpha_star"], s) for s in range(10))
        true_star = int(np.ceil(t[4]))  # 5 of 10 seeds succeed from here
        o = cell.outcomes()
        lo, star = o.bracket(0.5)
        assert lo < true_star <= star and (star <= 1.1 * lo or star == lo + 1), (cell.cell.label, lo, star, true_star)
    summary = summarize(spec, "synthetic", result.cells)
    assert summary.stats["adaptive"]["ratio"] > 2
    assert summary.stats["adaptive"]["trainings"] == result.trainings
    exponent = summary.exponent
    assert exponent["vit"].ci95[0] <= 2 <= exponent["vit"].ci95[1]
    assert exponent["cnn"].ci95[0] <= 4 <= exponent["cnn"].ci95[1]
    grid = sum(full_grid_size(int(c.outcomes().ns[0]), int(c.outcomes().ns[-1]), 0.1) * 10 for c in result.cells)
    assert summary.stats["adaptive"]["full_grid_trainings"] == grid


TINY = """# tiny: a sample-complexity sweep small enough for a test.
#   Its run carries this comment as its description.
name: tiny
models: [vit, cnn]
data: {n_tokens: 30, dim: 12, n_patterns: 12}
model: {width: 16}
training: {n_test: 300, max_steps: 3000}
axes: {alpha_star: [0.1, 0.3]}
n_train: [2, 8]
seeds: 4
search: {mode: sample_complexity, precision: 0.5}
resources: {models_per_pack: 16}
"""


def test_a_tiny_sample_complexity_sweep_and_its_report(local_ray, tmp_path):
    summary, _ = run_spec(TINY, tmp_path)
    home = tmp_path / "home"
    assert set(summary["exponent"]) == {"vit", "cnn"} and summary["adaptive"]["trainings"] == summary["trainings"]
    labels = {f"{m} alpha_star={a}" for m in ("vit", "cnn") for a in (0.1, 0.3)}
    premises = {r["label"]: r["premises"] for r in summary["cells"]}
    difficulty = {r["label"]: r["difficulty"] for r in summary["cells"]}
    assert set(premises) == set(difficulty) == labels
    width = {p["name"]: p for p in premises["vit alpha_star=0.1"]}["width"]
    assert not width["met"] and width["value"] == 16 and width["bound"] > 144  # m = 16 < M^2 log N, M = 12
    assert difficulty["cnn alpha_star=0.3"]["mean_token_error"] == 0  # fixed counts: the mean separates
    floors = {r["label"]: r["floor"] for r in summary["cells"]}  # the plug-in rule on the same seeds' samples
    assert all(f["n_max"] == 2048 and f["seeds"] == 4 and 0 <= f["both_labels"] <= 4 for f in floors.values())
    easy, hard = floors["vit alpha_star=0.3"]["n_star"], floors["vit alpha_star=0.1"]["n_star"]
    assert hard is None or easy <= hard
    assert summary["forms"] == {}  # two values of alpha*: no shifted form (it needs three)
    client = MlflowClient(summary["tracking_uri"])
    tags = client.get_run(summary["mlflow_parent_run_id"]).data.tags
    head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    assert tags["mlflow.source.git.commit"] == head and tags["vitsweep.git_dirty"] in ("true", "false")
    assert tags["vitsweep.vit_core_hash"] == vit_core_hash()  # what keys the result cache
    assert tags["mlflow.note.content"] == "tiny: a sample-complexity sweep small enough for a test.\n" + (
        "  Its run carries this comment as its description."
    )
    logged = {a.path for a in client.list_artifacts(summary["mlflow_parent_run_id"])}
    assert {
        "phase_diagram.png",
        "n_star_fit.png",
        "iterations.png",
        "attention_mass.png",
        "summary.md",
        "summary.json",
    } <= logged

    out = tmp_path / "report"
    reported = runner.invoke(app, ["report", "--home", str(home), "--out", str(out), "--json"])
    assert reported.exit_code == 0, reported.output
    rebuilt = json.loads(reported.stdout.strip().splitlines()[-1])
    assert rebuilt["sweep_id"] == summary["sweep_id"]
    assert set(rebuilt["iteration_gap"]) == {
        "alpha_star=0.1",
        "alpha_star=0.3",
    }  # one CNN/ViT ratio of steps per alpha*
    assert all(gap["value"] > 0 for gap in rebuilt["iteration_gap"].values())
    shown = {k: v for k, v in rebuilt.items() if k != "folder"}
    # run --json is report --json to the last digit (records keep what MLflow's tables keep), and the
    # rest is the run's own
    assert json.dumps({k: summary[k] for k in shown}, sort_keys=True) == json.dumps(shown, sort_keys=True)
    assert {r["label"]: r["n_star"] for r in rebuilt["cells"]} == summary["n_star"]
    assert {"phase_diagram.png", "n_star_fit.png", "summary.md", "summary.html", "summary.json"} <= {
        p.name for p in out.iterdir()
    }
    assert "| vit alpha_star=0.1 |" in (out / "summary.md").read_text()
    assert "vit alpha_star=0.1" in reported.stdout  # the table is printed too
    by_id = runner.invoke(app, ["report", summary["sweep_id"], "--home", str(home), "--out", str(tmp_path / "again")])
    assert by_id.exit_code == 0, by_id.output
    missing = runner.invoke(app, ["report", "no-such-sweep", "--home", str(home)])
    assert missing.exit_code == 2 and "no sweep no-such-sweep" in missing.output


def test_report_without_a_store_says_what_to_do(tmp_path):
    result = runner.invoke(app, ["report", "--home", str(tmp_path)])
    assert result.exit_code == 2 and "no MLflow store yet" in result.output
    assert not Path(tmp_path / "mlflow.db").exists()


def test_a_cell_with_too_many_unconverged_models_is_flagged_shown_and_left_out_of_the_fits():
    spec = parse_spec(
        "name: f\nmodels: [vit]\naxes: {alpha_star: [0.1, 0.2, 0.4]}\nn_train: [4, 8, 16, 32, 64]\nseeds: 4\n", "spec"
    )
    cells = []
    for cell in spec.cells:
        stars = {0.1: 32, 0.2: 16, 0.4: 8}[cell.values["alpha_star"]]
        records = [
            model_record(n, s, "succeeded" if n >= stars else "failed_converged", test_error=0.0, attention_mass=0.5)
            for n in spec.spec.n_train
            for s in range(4)
        ]
        if cell.values["alpha_star"] == 0.1:
            for r in records[:2]:  # N = 4: two of four models ran out of steps (50% > max_not_converged = 10%)
                r |= {"outcome": "not_converged", "settled": False}
        cells.append(CellResult(cell, [ModelRecord.from_dict(r) for r in records]))
    summary = summarize(spec, "f-1", cells)
    flagged = [r.flagged for r in summary.cells]
    assert flagged == [True, False, False] and summary.cells[0].not_converged_share == 0.5
    assert summary.cells[0].outcomes["4"] == {
        "succeeded": 0,
        "failed_converged": 2,
        "failed": 0,
        "not_converged": 2,
        "diverged": 0,
    }
    assert summary.exponent["vit"].cells == [
        "vit alpha_star=0.2",
        "vit alpha_star=0.4",
    ]  # the flagged cell is not fitted
    assert "(FLAGGED)" in table_rows(summary)[0][0] and table_rows(summary)[0][-1] == "8/10/0/2/0"
    assert "outcomes.png" in figures(spec, summary, cells)


def test_notes_print_no_fit_that_restates_another_and_label_the_papers_range():
    """At one batch size T* = N*/B has N*'s exponent: no separate line for it. The paper's Fig 1
    slope names the narrow alpha* range it comes from."""
    spec = parse_spec(
        "name: n\nmodels: [vit]\ndata: {n_tokens: 40}\ntraining: {protocol: one_pass, batch_size: 8, max_steps: 100}\n"
        "axes: {alpha_star: [0.1, 0.2, 0.4]}\nseeds: 4\n"
    )
    cells = []
    for cell, stable in zip(spec.cells, (400, 160, 80)):
        records = [
            model_record(n, s, "succeeded" if n >= stable + 8 * s else "failed", batch_size=8)
            | {"n_stable": stable + 8 * s, "n_first_zero": stable}
            for s in range(4)
            for n in range(8, 801, 8)
        ]
        cells.append(CellResult(Cell(cell.model, cell.values), [ModelRecord.from_dict(r) for r in records]))
    lines = notes(summarize(spec, "n-1", cells))
    assert any(line.startswith("N* (iterate) ~ (1/alpha*)^k, vit: k = ") for line in lines)
    assert not any(line.startswith("T* = N*/B ~") for line in lines)
    paper = [line for line in lines if line.startswith("the paper's own Fig 1, vit")]
    assert len(paper) == 1 and "over alpha* 0.27-0.50 only" in paper[0]
