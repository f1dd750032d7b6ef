"""Paper B through the sweep service: a tiny Fig 4 sweep into MLflow, read back by the report; the
report of Fig 4's two label rules."""

import json

import numpy as np
import pytest
from conftest import model_record, run_spec
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

from services.app.cli import app
from services.report import figures
from services.report import text as report
from services.results import CellResult, ModelRecord
from services.spec import parse_spec
from services.stats import structure
from services.stats.summarize import summarize
from services.store.cache import curve_sums
from vit_core.jelassi2022.configs import SpatialDataConfig, bayes_error

runner = CliRunner()
TINY = """name: tiny_b
family: jelassi2022
models: [positional, vanilla]
data: {n_patches: 6, set_size: 2, dim: 12}
training: {loss: logistic, lr: 0.01, batch_size: 32, max_steps: 600, eval_every: 100, n_test: 200}
n_train: [400]
seeds: 3
resources: {models_per_pack: 3}
"""


def test_a_paper_b_sweep_reports_patch_association_and_the_learned_scores(local_ray, tmp_path):
    summary, _ = run_spec(TINY, tmp_path)
    assert set(summary["patch_association"]) == {"positional", "vanilla"}
    assert all(0 <= v <= 1 for v in summary["patch_association"].values())
    assert summary["patch_association"]["positional"] == 1.0  # 600 steps suffice for 3 pairs
    assert summary["cos_v_wstar"]["positional"] > 0.9
    assert summary["bayes_error"] == {"positional": 0.0, "vanilla": 0.0}  # spurious sets redrawn
    client = MlflowClient(summary["tracking_uri"])
    logged = {a.path for a in client.list_artifacts(summary["mlflow_parent_run_id"])}
    assert {"structure.png", "learned_attention.png", "summary.json"} <= logged
    reported = runner.invoke(
        app, ["report", "--home", str(tmp_path / "home"), "--out", str(tmp_path / "report"), "--json"]
    )
    assert reported.exit_code == 0, reported.output
    rebuilt = json.loads(reported.stdout.strip().splitlines()[-1])
    assert rebuilt["patch_association"] == summary["patch_association"]
    assert rebuilt["cos_v_wstar"] == pytest.approx(summary["cos_v_wstar"], rel=1e-8)  # MLflow's table keeps 10 digits
    assert (tmp_path / "report" / "learned_attention.png").is_file()


def test_the_report_gives_and_draws_the_lowest_error_that_kept_spurious_sets_allow():
    spec = parse_spec(TINY.replace("n_patches: 6", "n_patches: 10") + "axes: {spurious_sets: [redraw, keep]}\n")
    curve = {"test_error": {"400": {"steps": [0, 100, 600], "sum": [1.5, 0.3, 0.15], "count": [3, 3, 3]}}}
    cells = [
        CellResult(
            cell,
            [
                ModelRecord.from_dict(
                    model_record(400, s, "failed", test_error=0.05, patch_association=1.0, cos_v_wstar=0.9)
                )
                for s in range(3)
            ],
            curve_parts=[curve],
        )
        for cell in spec.cells
    ]
    summary = summarize(spec, "b-1", cells)
    floor = bayes_error(SpatialDataConfig(n_patches=10, set_size=2, dim=12, spurious_sets="keep"))
    keep, redraw = "positional spurious_sets=keep", "positional spurious_sets=redraw"
    assert summary.stats["bayes_error"][keep] == floor and summary.stats["bayes_error"][redraw] == 0.0 and floor > 0.03
    lines = {line.split(":")[0]: line for line in report.notes(summary) if line.startswith("test error")}
    assert f"lowest any classifier can reach on these data: {floor:.4f}" in lines[f"test error, {keep}"]
    assert "lowest" not in lines[f"test error, {redraw}"]
    drawn = figures.figures(spec, summary, cells)["structure.png"].axes[0]
    labels = [line.get_label() for line in drawn.get_lines()]
    assert labels.count(f"Bayes error of its data {floor:.3f}") == 2  # the positional and vanilla keep cells
    assert {"paper Fig 4: plateau 0.07", "paper Fig 4: near 10^4 steps 0.027"} <= set(labels)


def test_the_report_gives_training_error_and_names_a_model_that_cannot_fit_its_training_data():
    spec = parse_spec(TINY + "axes: {spurious_sets: [redraw, keep]}\n")
    fits, underfits = spec.cells[0], spec.cells[1]  # positional redraw, positional keep
    errors = {fits.label: (0.05, 0.01), underfits.label: (0.27, 0.26)}  # (test, training) error
    cells = [
        CellResult(
            cell,
            [
                ModelRecord.from_dict(model_record(400, s, "failed", test_error=test, train_error=train))
                for s in range(3)
            ],
        )
        for cell, (test, train) in ((c, errors[c.label]) for c in spec.cells if c.label in errors)
    ]
    summary = summarize(spec, "b-2", cells)
    assert summary.stats["train_error"][underfits.label].mean == pytest.approx(0.26)
    lines = {line.split(":")[0]: line for line in report.notes(summary) if line.startswith("test error")}
    assert "training error 0.2600" in lines[f"test error, {underfits.label}"]
    assert "does not fit its own training data" in lines[f"test error, {underfits.label}"]
    assert "training error 0.0100" in lines[f"test error, {fits.label}"]
    assert "does not fit" not in lines[f"test error, {fits.label}"]


def test_a_cell_of_several_n_reports_each_n_and_leaves_diverged_models_out():
    spec = parse_spec(TINY)
    cell = spec.cells[0]
    records = [model_record(400, s, "failed", test_error=0.2, train_error=0.0, patch_association=0.5) for s in range(3)]
    records += [model_record(800, s, "failed", test_error=0.1, train_error=0.09, patch_association=0.0) for s in (0, 1)]
    records.append(
        model_record(
            800, 2, "diverged", test_error=float("nan"), train_error=float("nan"), patch_association=float("nan")
        )
    )
    summary = summarize(spec, "b-3", [CellResult(cell, [ModelRecord.from_dict(r) for r in records])])
    small, large = f"{cell.label} N=400", f"{cell.label} N=800"
    assert set(summary.stats["test_error"]) == {small, large}
    assert summary.stats["test_error"][small].mean == pytest.approx(0.2) and summary.stats["test_error"][
        large
    ].mean == pytest.approx(0.1)
    assert summary.stats["patch_association_rows"] == {
        small: 0.5,
        large: 0.0,
    }  # the diverged model's NaN is not averaged in
    lines = {line.split(":")[0]: line for line in report.notes(summary) if line.startswith("test error")}
    assert "does not fit" in lines[f"test error, {large}"] and "does not fit" not in lines[f"test error, {small}"]
    one_pass = parse_spec(TINY.replace("max_steps: 600,", "max_steps: 600, protocol: one_pass,"))
    assert one_pass.resolved_cell(one_pass.cells[0]).one_pass
    at_evaluations = summarize(
        one_pass, "b-4", [CellResult(one_pass.cells[0], [ModelRecord.from_dict(r) for r in records])]
    )
    assert set(at_evaluations.stats["test_error"]) == {
        cell.label
    }  # a one-pass run's N are its evaluations: the largest only


def test_an_axis_only_one_model_sweeps_is_fitted_over_that_models_cells_alone():
    spec = parse_spec(
        TINY.replace("models: [positional, vanilla]", "models: [linear, positional]").replace("lr: 0.01, ", "")
        + "per_model:\n  linear: {axes: {lr: [0.03, 0.3]}}\n  positional: {training: {lr: 0.01}}\n"
    )
    assert [c.label for c in spec.cells] == ["linear lr=0.03", "linear lr=0.3", "positional"]
    cells = [
        CellResult(
            cell,
            [ModelRecord.from_dict(model_record(400, s, "failed", test_error=0.2, train_error=0.1)) for s in (0, 1)],
        )
        for cell in spec.cells
    ]
    summary = summarize(spec, "b-5", cells)  # raised KeyError 'lr' on the positional cell before
    assert set(summary.stats["test_error"]) == {c.label for c in spec.cells}


def test_on_images_the_report_gives_local_attention_against_chance_and_vanilla_minus_positional_by_seed():
    spec = parse_spec(
        "name: tiny_images\nfamily: jelassi2022_images\nmodels: [positional, vanilla]\ndata: {patch: 2}\n"
        "model: {width: 8, readout: per_position}\nn_train: [400]\nseeds: 4\n"
    )
    errors = {"positional": [0.10, 0.12, 0.08, 0.10], "vanilla": [0.12, 0.15, 0.09, 0.13]}  # vanilla 0.0225 worse
    cells = [
        CellResult(
            cell,
            [
                ModelRecord.from_dict(
                    model_record(400, s, "failed", test_error=e, train_error=e / 10, local_attention=0.5 + s / 100)
                )
                for s, e in enumerate(errors[cell.model])
            ],
        )
        for cell in spec.cells
    ]
    summary = summarize(spec, "b-images", cells)
    difference = summary.stats["attention_difference"]["all"]
    assert difference["test_error"].mean == pytest.approx(0.0225) and difference["n_train"] == 400
    assert difference["test_error"].ci95[0] > 0  # every seed's vanilla model errs more
    assert summary.stats["local_chance"]["positional"] == pytest.approx(84 / 256)
    lines = [line for line in report.notes(summary) if line.startswith(("local attention", "vanilla minus"))]
    assert (
        "local attention, positional: 0.515 of the positional scores' mass" in lines[0]
        and "(uniform attention: 0.328)" in lines[0]
    )
    assert lines[-1].startswith("vanilla minus positional attention, all, N=400: test error +0.0225, 95% CI [+0.0")
    assert "paired by seed over 4 seeds" in lines[-1] and "not a comparison at matched training error" in lines[-1]
    assert json.loads(json.dumps(summary.to_dict()))["attention_difference"]["all"]["test_error"]["seeds"] == 4


def test_the_learned_scores_figure_draws_one_seeds_own_beside_the_mean():
    """A trial keeps its smallest seed's scores beside their sum (store.cache.curve_sums); the cell
    shows the smallest seed over its trials, and learned_attention.png draws it next to the mean."""
    spec = parse_spec(TINY)
    own = {s: [[float(s), 0.0], [0.0, 1.0]] for s in range(4)}
    entries = [
        {"n_train": 400, "records": [{"seed": s}], "eval_steps": [0], "curves": {}, "snapshots": {"scores": own[s]}}
        for s in (3, 1, 2, 0)
    ]
    parts = [curve_sums(entries[:2])[0], curve_sums(entries[2:])[0]]  # two trials: seeds {3, 1} and {2, 0}
    assert [p["scores"]["400"]["seed"] for p in parts] == [1, 0] and parts[0]["scores"]["400"]["one"] == own[1]
    cell = CellResult(spec.cells[0], [], curve_parts=parts)
    seed, scores = cell.one_seed_scores()[400]
    assert seed == 0 and scores.tolist() == own[0]
    np.testing.assert_allclose(cell.mean_scores()[400], [[1.5, 0.0], [0.0, 1.0]])
    titles = [ax.get_title() for ax in structure._scores(spec, [cell]).axes if ax.get_title()]
    drawn = [f"{cell.cell.label}\nlearned scores, N=400, {which}" for which in ("mean over seeds", "seed 0")]
    assert titles == [*drawn, "true sets (same-set pairs)"]
