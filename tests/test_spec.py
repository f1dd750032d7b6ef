import itertools
import json
from pathlib import Path

import pytest
from conftest import bundled_specs
from pydantic import ValidationError
from typer.testing import CliRunner

from services.app.cli import app
from services.search.nstar import NStarSearch
from services.search.packs import Pack, TrialConfig, packs
from services.search.planners import trial_count
from services.spec import SpecError, Sweep, json_schema, load_spec, parse_spec, spec_from_dict, spec_text
from services.stats.paper import success_table
from vit_core.family import families

HERE = Path(__file__).parent
BAD = sorted((HERE / "bad_specs").glob("*.yaml"))

runner = CliRunner()

# where each bad spec's (first) problem must point
EXPECTED_PATH = {
    "alpha_star_one": "axes.alpha_star[1]",
    "alpha_star_zero": "data.alpha_star",
    "axis_and_section": "axes.alpha_star",
    "bad_name": "name",
    "confusion_not_below_alpha": "data.alpha_confusion",
    "dim_below_patterns": "data.dim",
    "duplicate_n": "n_train",
    "empty": "",
    "empty_axis": "axes.alpha_star",
    "lr_zero": "axes.lr[1]",
    "missing_name": "name",
    "n_train_empty": "n_train",
    "n_train_zero": "n_train[0]",
    "negative_gpus": "resources.gpus_per_trial",
    "negative_tau": "data.tau",
    "not_a_mapping": "",
    "not_yaml_binary": "",
    "p_above_one": "success_rate",
    "sparsify_unknown": "data.sparsify",
    "too_many_trainings": "max_trainings",
    "tracking_unknown_key": "tracking.uri",
    "unknown_axis": "axes.alpha",
    "unknown_data_key": "data.alpha",
    "unknown_family": "family",
    "unknown_model": "models[1]",
    "unknown_top_key": "colour",
    "width_below_patterns": "model.width (with model vit)",
    "wrong_type_seeds": "seeds",
    "wrong_type_string_number": "data.alpha_star",
    "yaml_syntax": "",
    "zero_pack": "resources.models_per_pack",
    "optuna_two_cells": "models",
    "optuna_without_space": "search.space",
    "grid_with_space": "search.space",
    "space_unknown_field": "search.space.speed",
    "space_low_not_below_high": "search.space.lr",
    "space_invalid_low": "search.space.lr.low",
    "jelassi_paper_a_model": "models[1]",
    "jelassi_paper_a_field": "data.alpha_star",
    "jelassi_set_size": "data.set_size",
    "sample_complexity_n_max": "search.n_max",
    "images_transfer": "model.transfer (with model positional)",
    "per_model_not_in_models": "per_model.cnn",
    "per_model_axis_value": "per_model.cnn.axes.alpha_star[1]",
    "answer_primary_axis": "answer.primary.readings",
    "answer_primary_value": "answer.primary.counts",
    "extends_missing": "extends",
}


def test_the_corpus_is_complete():
    assert len(BAD) >= 30 and {p.stem for p in BAD} == set(EXPECTED_PATH)


@pytest.mark.parametrize("path", BAD, ids=lambda p: p.stem)
def test_bad_spec_names_its_field(path):
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    assert caught.value.problems[0].path == EXPECTED_PATH[path.stem]


@pytest.mark.parametrize("path", BAD, ids=lambda p: p.stem)
def test_validate_exits_2_with_one_line_per_problem(path):
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    assert len(lines) == len(caught.value.problems)
    assert all(line.startswith(f"{path}: ") for line in lines)


def test_all_problems_are_reported_at_once():
    text = "name: x\nmodels: [vit, mlp]\nn_train: [0]\nseeds: 0\nresources: {models_per_pack: 0}"
    with pytest.raises(SpecError) as caught:
        parse_spec(text)
    assert {p.path for p in caught.value.problems} == {"models[1]", "n_train[0]", "seeds", "resources.models_per_pack"}


@pytest.mark.parametrize("path", bundled_specs())
def test_bundled_sweeps_validate_and_open_with_a_header(path):
    spec = load_spec(path)
    assert spec.trainings > 0
    # a sweep opens with what it reproduces, the result to expect, how long it takes and its command
    header = [
        line.removeprefix("# ")
        for line in itertools.takewhile(lambda line: line.startswith("#"), path.read_text().splitlines())
    ]
    assert header[0].startswith(f"{spec.name}: ")
    assert any(line.startswith("Expect") for line in header) and any(line.startswith("Takes") for line in header)
    assert any(line.startswith(f"Run: .venv/bin/vitsweep run sweeps/{path.name}") for line in header)
    assert runner.invoke(app, ["validate", str(path)]).exit_code == 0


def test_cells_are_models_times_the_axes_product_with_overrides_applied():
    spec = parse_spec(
        "name: x\nmodels: [vit, cnn]\nn_train: [5, 10]\nseeds: 3\n"
        "data: {n_tokens: 40}\naxes: {alpha_star: [0.1, 0.2], lr: [0.1, 0.5, 1.0]}"
    )
    assert len(spec.cells) == 12 and spec.trainings == 12 * 2 * 3
    data, model, training = spec.resolved_cell(spec.cells[-1]).configs
    assert (model.kind, data.alpha_star, training.lr, data.n_tokens) == ("cnn", 0.2, 1.0, 40)


def test_per_model_grids_replace_the_sweeps_n_train_and_axes_for_that_model():
    spec = parse_spec(
        "name: x\nmodels: [vit, cnn]\nn_train: [5, 10]\nseeds: 2\naxes: {alpha_star: [0.3, 0.4], tau: [0.1, 0.3]}\n"
        "per_model: {cnn: {n_train: [20, 40, 80], axes: {alpha_star: [0.25]}}}"
    )
    assert [c.label for c in spec.cells] == [
        "vit alpha_star=0.3 tau=0.1",
        "vit alpha_star=0.3 tau=0.3",
        "vit alpha_star=0.4 tau=0.1",
        "vit alpha_star=0.4 tau=0.3",
        "cnn alpha_star=0.25 tau=0.1",
        "cnn alpha_star=0.25 tau=0.3",
    ]
    assert spec.trainings == (4 * 2 + 2 * 3) * 2 and spec.largest_n == 80
    trained = {(p.cell, n, s) for p in packs(spec, slots=2) for n, s in zip(p.n_train, p.seeds)}
    assert trained == {(c, n, s) for c in range(6) for n in ((5, 10) if c < 4 else (20, 40, 80)) for s in (0, 1)}
    assert spec.resolved_cell(spec.cells[-1]).data.alpha_star == 0.25

    adaptive = parse_spec(
        "name: x\nmodels: [vit, cnn]\nn_train: [5, 10]\nsearch: {mode: sample_complexity}\n"
        "per_model: {cnn: {n_train: [20, 40]}}"
    )
    assert [c.next_round() for c in NStarSearch(adaptive).cells] == [[5, 10], [20, 40]]
    assert adaptive.n_max == 16 * 40


def test_fig1_spec_is_the_papers_grid():
    spec = load_spec(HERE.parent / "sweeps" / "fig1.yaml")
    for model in ("vit", "cnn"):
        alphas, ns, _ = success_table(families()["li2023"], model)
        assert spec.spec.axes_of(model) == {"alpha_star": [round(float(a), 4) for a in alphas]}
        assert spec.spec.n_train_of(model) == [int(n) for n in ns]
    assert spec.trainings == 4000


def test_schema_is_json_schema_with_every_section():
    result = runner.invoke(app, ["schema"])
    schema = json.loads(result.stdout)
    assert schema["discriminator"]["propertyName"] == "family"
    for family in ("Li2023Sweep", "Jelassi2022Sweep", "Jelassi2022ImagesSweep"):
        properties = schema["$defs"][family]["properties"]
        assert set(properties) >= {
            "name",
            "family",
            "models",
            "data",
            "model",
            "training",
            "axes",
            "n_train",
            "seeds",
            "resources",
            "tracking",
        }
        assert schema["$defs"][family]["additionalProperties"] is False
    assert json_schema() == schema


def test_trial_count_is_packs_for_grid_and_samples_for_optuna():
    grid = parse_spec("name: x\nmodels: [vit, cnn]\nn_train: [5, 10, 20]\nseeds: 5\nresources: {models_per_pack: 4}")
    assert trial_count(grid) == len(packs(grid)) == 2 * 4  # 15 pairs per cell in packs of 4
    assert sorted(
        (p.n_train[i], p.seeds[i]) for p in packs(grid) if p.cell == 1 for i in range(len(p.seeds))
    ) == sorted((n, s) for n in (5, 10, 20) for s in range(5))
    optuna = parse_spec(
        "name: x\nmodels: [vit]\nn_train: [5]\nseeds: 2\n"
        "search: {mode: optuna, num_samples: 7, space: {lr: {low: 0.1, high: 1.0}}}"
    )
    assert trial_count(optuna) == 7 and len(packs(optuna)) == 1


def test_per_model_training_values_and_alpha_scaling_set_each_cells_budget():
    spec = parse_spec(
        "name: x\nmodels: [vit, cnn]\ntraining: {protocol: one_pass, max_steps: 200, batch_size: 16}\n"
        "per_model: {vit: {training: {max_steps: 100}}}\naxes: {alpha_star: [0.05, 0.2], lr: [0.5, 1.0]}\n"
        "alpha_scaling: "
        "{vit: {reference: 0.2, max_steps: 1.5, batch_size: 1}, cnn: {reference: 0.2, max_steps: 2.5}}\nseeds: 2"
    )
    budgets = {c.label: (t.max_steps, t.batch_size, t.lr) for c in spec.cells for t in [spec.resolved_cell(c).training]}
    assert budgets["vit alpha_star=0.2 lr=1.0"] == (
        100,
        16,
        1.0,
    )  # its own max_steps, the axis's lr, no scaling at the reference
    assert budgets["vit alpha_star=0.05 lr=0.5"] == (800, 64, 0.5)  # 100 * 4^1.5 steps, 16 * 4 samples a batch
    assert budgets["cnn alpha_star=0.05 lr=0.5"] == (6400, 16, 0.5)  # 200 * 4^2.5
    assert [c.label.split()[0] for c in spec.cells].count("vit") == 4  # a model's own training values add no axis
    assert spec.resolved_cell(spec.cells[0]).n_values == (800 * 64,)
    rebuilt = Sweep.of(
        spec_from_dict(spec.spec.model_dump(mode="json"))
    )  # as every trial reads it: only what the spec set overrides
    assert [rebuilt.resolved_cell(c).configs for c in rebuilt.cells] == [
        spec.resolved_cell(c).configs for c in spec.cells
    ]
    recorded = spec.spec.model_dump(mode="json")  # as a sweep recorded it before the compiled step was removed
    recorded["training"]["compile"], recorded["axes"]["compile"] = False, None
    assert spec_from_dict(recorded) == spec_from_dict(spec.spec.model_dump(mode="json"))
    with pytest.raises(ValidationError, match="training.compile"):
        spec_from_dict(recorded, strict=True)  # a spec a user writes: refused
    with pytest.raises(SpecError) as error:
        parse_spec("name: x\nmodels: [vit]\nn_train: [5]\nalpha_scaling: {cnn: {reference: 0.2}}")
    assert [p.path for p in error.value.problems] == ["alpha_scaling.cnn"]
    with pytest.raises(SpecError) as error:
        parse_spec("name: x\nmodels: [vit]\nn_train: [5]\nper_model: {vit: {training: {max_steps: 0}}}")
    assert "max_steps" in str(error.value)


def test_a_type_error_does_not_hide_a_range_error():
    """One pass reports every problem: a value of the wrong type and a value out of range."""
    with pytest.raises(SpecError) as error:
        parse_spec('name: two\nmodels: [vit]\nn_train: [4]\nseeds: "ten"\ndata: {alpha_star: 2.0}\n')
    assert [p.path for p in error.value.problems] == ["seeds", "data.alpha_star"]
    assert "must lie in (0, 1)" in str(error.value) and "valid integer" in str(error.value)


def test_a_trial_config_round_trips_and_reads_the_flat_form_older_sweeps_saved():
    """A trial's config is one TrialConfig; Tune's saved state of an older sweep holds
    its pack, sampled values and resolved cell at the top level, which a resumed sweep still reads."""
    pack = Pack(0, (8, 16), (0, 1), lr=(0.25, 0.5))
    sampled = TrialConfig(pack, {"lr": 0.25}, {"values": {"lr": 0.25}, "n_values": [8, 16]})
    for trial in (TrialConfig(pack), sampled):
        assert TrialConfig.of(trial.as_config()) == trial
    flat = {"pack": pack.config(), "sampled": sampled.sampled, "resolved": sampled.resolved}
    assert TrialConfig.of(flat) == sampled and TrialConfig.of({"pack": pack.config()}) == TrialConfig(pack)


def test_a_spec_that_extends_another_is_its_fields_with_its_own_replacing(tmp_path):
    base = tmp_path / "base.yaml"
    base.write_text(
        "name: base\nmodels: [vit, cnn]\nn_train: [5, 20]\nseeds: 4\ndata: {tau: 0.1, n_tokens: 60}\n"
        "axes: {alpha_star: [0.1, 0.3]}\n"
    )
    (tmp_path / "child.yaml").write_text(
        "# a check\nextends: base.yaml\nname: child\ndata: {tau: 0.2}\nseeds: 6\n"
        "n_train: null\ntraining: {protocol: one_pass, batch_size: 8, max_steps: 20}\n"  # null: the base's key removed
    )
    sweep = load_spec(tmp_path / "child.yaml")
    data = sweep.resolved_cell(sweep.cells[0]).data
    assert (sweep.name, sweep.seeds, data.tau, data.n_tokens, sweep.models) == ("child", 6, 0.2, 60, ("vit", "cnn"))
    assert "extends" not in spec_text(tmp_path / "child.yaml")  # the text a sweep keeps stands on its own
    (tmp_path / "loop.yaml").write_text("extends: loop2.yaml\nname: loop\n")
    (tmp_path / "loop2.yaml").write_text("extends: loop.yaml\nname: loop2\n")
    with pytest.raises(SpecError, match="cannot extend itself"):
        load_spec(tmp_path / "loop.yaml")


def test_the_main_jobs_checks_are_bundled_specs_of_those_names():
    """The main job's report names each check's command as sweeps/NAME.yaml: each must exist, be a spec of
    that name and share the main job's family and models."""
    main = load_spec(HERE.parent / "sweeps" / "sample_complexity.yaml")
    assert main.answer.checks and main.answer.primary == {"counts": "premised"}
    for name in main.answer.checks:
        check = load_spec(HERE.parent / "sweeps" / f"{name}.yaml")
        assert (check.name, check.family.name, check.models) == (name, main.family.name, main.models)
        assert not check.answer.checks  # a check names no checks of its own
