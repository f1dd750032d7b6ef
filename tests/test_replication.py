"""Replication on fresh seeds (issue 66): the spec's seed_start (and `--seed-start`) moves every
measurement seed and, in a tuned sweep, the selection seeds with it; `vitsweep compare A B` says
per cell and per exponent whether two sweeps agree, and whether their measurement seeds are disjoint."""

import dataclasses
import json

import numpy as np
import pytest
from conftest import SYNTHETIC_SPEC, synthetic_sweep
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

import vitsweep
from services.analysis import Outcomes
from services.app.cli import app
from services.ratios import n_star_ratio
from services.report.compare import AGREE, DIFFER, compare, verdict
from services.spec import Sweep, parse_spec, spec_text
from services.store import state, tracking
from services.store.cache import model_keys
from services.store.uris import embedded_uri

runner = CliRunner()
TUNED = (
    "name: tuned\nmodels: [vit]\ndata: {n_tokens: 24, dim: 12, n_patterns: 8}\nmodel: {width: 16}\n"
    "training: {protocol: one_pass, batch_size: 8, max_steps: 60, stability_window: 3}\n"
    "seeds: 4\ntuning: {lr: [0.25, 1], selection_seeds: 2}\n"
)
MULTI_PASS_TUNED = (
    "name: tuned_mp\nmodels: [vit]\nn_train: [5, 20]\nseeds: 3\nsearch: {mode: sample_complexity}\n"
    "tuning: {lr: [0.25, 1], selection_seeds: 2}\n"
)
TINY = (  # one model at two alpha*: an exponent, in seconds
    "name: tiny\nmodels: [vit]\ndata: {n_tokens: 30, dim: 12, n_patterns: 12}\n"
    "model: {output_matrix: false, width: 16}\ntraining: {n_test: 300, max_steps: 3000}\n"
    "axes: {alpha_star: [0.1, 0.3]}\nn_train: [5, 20]\nseeds: 4\nresources: {models_per_pack: 8}\n"
)


def _first_round_seeds(text: str) -> set[int]:
    """The seeds of every pack the spec's planner plans first."""
    spec = parse_spec(text)
    made = spec.strategy.make_planner(spec)
    return {s for cell in range(len(spec.cells)) for pack in made.next_round(cell) for s in pack.seeds}


@pytest.mark.parametrize(
    ("text", "unshifted"),
    [
        (SYNTHETIC_SPEC, {0, 1, 2, 3}),  # grid
        (SYNTHETIC_SPEC + "search: {mode: sample_complexity}\n", {0, 1, 2, 3}),
        (TUNED, {1000, 1001}),  # one pass, tuned: its first rounds are the selection's
        (MULTI_PASS_TUNED, {1000, 1001}),
    ],
)
def test_seed_start_moves_the_seeds_every_planner_trains(text, unshifted):
    """Each strategy's first round trains its seeds shifted by seed_start; the measurement seeds are
    seed_start .. seed_start + seeds - 1, and a tuned sweep's selection seeds shift as much."""
    assert _first_round_seeds(text) == unshifted
    assert _first_round_seeds(text + "seed_start: 100\n") == {s + 100 for s in unshifted}
    spec = parse_spec(text + "seed_start: 100\n")
    assert spec.measurement_seeds == list(range(100, 100 + spec.seeds))
    if spec.tuning:
        assert set(spec.tuning.selection_seed_list(spec.seed_start)).isdisjoint(spec.measurement_seeds)


def test_a_sweep_on_other_seeds_is_another_sweep_and_trains_other_models():
    """Another seed_start is another spec key (a sweep of its own under the home) and, model by
    model, other cache keys."""
    spec, shifted = parse_spec(SYNTHETIC_SPEC), parse_spec(SYNTHETIC_SPEC + "seed_start: 4\n")
    assert state.spec_key(spec) != state.spec_key(shifted)
    configs = spec.resolved_cell(spec.cells[0]).configs
    keys = [
        model_keys(*configs, [5] * 4, seeds, "cpu") for seeds in (spec.measurement_seeds, shifted.measurement_seeds)
    ]
    assert not set(keys[0]) & set(keys[1])


@pytest.mark.parametrize(
    ("yaml_line", "options", "message"),
    [
        ("", ["--seed-start", "-1"], "seed_start: -1: Input should be greater than or equal to 0"),
        ("seed_start: -1\n", [], "seed_start: -1: Input should be greater than or equal to 0"),
        ("seed_start: one\n", [], "seed_start: 'one': Input should be a valid integer"),
    ],
)
def test_a_bad_seed_start_exits_2_naming_the_field(tmp_path, yaml_line, options, message):
    """From the spec or the command line, one line naming seed_start, the value and what is
    allowed; `run` and `plan` start nothing."""
    path = tmp_path / "spec.yaml"
    path.write_text(SYNTHETIC_SPEC + yaml_line)
    for command in ["run", "plan"] + ([] if options else ["validate"]):
        home = [] if command == "validate" else ["--home", str(tmp_path / "home")]
        result = runner.invoke(app, [command, str(path), *options, *home])
        assert result.exit_code == 2, result.output
        (line,) = result.stderr.strip().splitlines()
        assert message in line, line
    assert not (tmp_path / "home").exists()


def test_the_spec_text_a_sweep_keeps_carries_the_command_lines_seed_start(tmp_path):
    """`--seed-start` is written into the text the sweep keeps (its spec.yaml; `vitsweep sync`
    parses it again): the spec's own line replaced, or one added; comments kept."""
    path = tmp_path / "spec.yaml"
    path.write_text("# a comment\n" + SYNTHETIC_SPEC)
    added = spec_text(path, 7)
    assert added.startswith("# a comment\n") and parse_spec(added).seed_start == 7
    path.write_text(SYNTHETIC_SPEC + "seed_start: 3  # mine\n")
    assert parse_spec(spec_text(path, 9)).seed_start == 9 and spec_text(path, 9).count("seed_start") == 1
    assert spec_text(path) == path.read_text()


def _outcomes(first_success: list[int], ns=(10, 20, 40, 80)) -> Outcomes:
    """A cell whose seed k succeeds from N = first_success[k] on (0: never)."""
    ns = np.array(ns)
    success = np.array([[1.0 if 0 < f <= n else 0.0 for f in first_success] for n in ns])
    nan = np.full(success.shape, np.nan)
    return Outcomes(ns, np.arange(len(first_success)), success, nan, nan)


def test_the_ratio_of_n_star_and_its_verdict():
    """B / A with a CI from resampling each sweep's seeds: 1 where both need the same N (agree),
    4 where B needs four times it (differ); B never reaching p: an infinite upper end (None)."""
    a = _outcomes([20] * 6 + [40, 10])
    same = n_star_ratio(a, _outcomes([40, 10] + [20] * 6), 0.5, 0.5)
    assert same.value == 1.0 and same.ci95[0] <= 1 <= same.ci95[1] and verdict(same.ci95, 1.0) == AGREE
    four = n_star_ratio(_outcomes([20] * 8), _outcomes([80] * 8), 0.5, 0.5)
    assert (four.value, four.ci95, verdict(four.ci95, 1.0)) == (4.0, [4.0, 4.0], DIFFER)
    never = n_star_ratio(a, _outcomes([0] * 8), 0.5, 0.5)
    assert never.value is None and never.ci95 == [None, None] and verdict(never.ci95, 1.0) == DIFFER
    assert verdict([0.5, None], 1.0) == AGREE and verdict(None, 1.0) == "undetermined"


def _shifted(sweep_id: str, offset: int, hard: int = 2):
    """synthetic_sweep's ViT cells (spec, sweep id, cells) with every seed moved by ``offset``, its
    spec's seed_start too: N* is 10 at alpha* = 0.3 and 5 x ``hard`` at 0.1."""
    spec, result = synthetic_sweep(sweep_id, hard, easy=2)
    cells = [
        dataclasses.replace(c, records=[dataclasses.replace(r, seed=r.seed + offset) for r in c.records])
        for c in result.cells
        if c.cell.model == "vit"
    ]
    return Sweep.of(spec.spec.model_copy(update={"models": ["vit"], "seed_start": offset})), sweep_id, cells


def test_compare_says_where_two_sweeps_agree_and_whether_their_seeds_are_disjoint():
    """The same outcomes on fresh seeds agree in every cell and exponent; B needing four times the
    N at alpha* = 0.1 differs there; the same seeds twice are no replication."""
    a = _shifted("a", 0)
    again = compare(a, _shifted("b", 100))
    assert again.seeds_b == [100, 101, 102, 103] and again.shared_seeds == [] and again.spec_differences == []
    assert [(p.ratio.value, p.verdict) for p in again.cells] == [(1.0, AGREE)] * 2
    assert again.verdicts["vit"] == AGREE and again.difference["vit"].value == 0
    harder = compare(a, _shifted("c", 100, hard=8))
    verdicts = {p.label: p.verdict for p in harder.cells}
    assert verdicts["vit alpha_star=0.1"] == DIFFER and verdicts["vit alpha_star=0.3"] == AGREE
    assert harder.verdicts["vit"] == DIFFER  # N* 10 and 40: the exponent grows from 0 to log 4 / log 3
    overlap = dataclasses.replace(again, seeds_b=again.seeds_a).to_dict()
    assert overlap["disjoint"] is False and overlap["shared_seeds"] == [0, 1, 2, 3]


@pytest.fixture(scope="module")
def two_seed_sets(local_ray, tmp_path_factory):
    """The tiny spec run twice under one home, on seeds 0-3 and with `--seed-start 100`: (home, the
    two sweep ids, the second run's output)."""
    home = tmp_path_factory.mktemp("replication")
    path = home / "tiny.yaml"
    path.write_text(TINY)
    ids = []
    for extra in ([], ["--seed-start", "100"]):
        result = runner.invoke(app, ["run", str(path), "--home", str(home / "runs"), "--json", *extra])
        assert result.exit_code == 0, result.output
        ids.append(json.loads(result.stdout.strip().splitlines()[-1])["sweep_id"])
    return home / "runs", ids, result.output


def test_a_sweep_with_seed_start_trains_and_records_seeds_from_it(two_seed_sets):
    """Its models are seeds 100-103 (as recorded in MLflow), the parent run's params say so, its
    kept spec holds the offset, and its summary names the seeds."""
    home, (first, replica), output = two_seed_sets
    assert first != replica
    models = vitsweep.load_sweep(replica, home=home).models
    assert sorted(set(models["seed"])) == [100, 101, 102, 103]
    assert sorted(set(vitsweep.load_sweep(first, home=home).models["seed"])) == [0, 1, 2, 3]
    client = MlflowClient(embedded_uri(home))
    parent = client.search_runs(
        [client.get_experiment_by_name("vitsweep").experiment_id], f"tags.`{tracking.SWEEP_TAG}` = '{replica}'"
    )[0]
    assert parent.data.params["seed_start"] == "100" and parent.data.params["seeds"] == "4"
    assert parse_spec(state.spec_text(home, replica)).seed_start == 100
    assert "4 seeds, 100-103 (" in output  # the answer's primary line names the seeds it measured on


def test_compare_of_two_real_sweeps_on_disjoint_seeds_and_of_one_with_itself(two_seed_sets, tmp_path):
    """Every cell and exponent gets a ratio or difference, its CI and a verdict that follows from
    it; the seeds are disjoint and the specs the same; a sweep against itself is warned of."""
    home, (first, replica), _ = two_seed_sets
    result = runner.invoke(app, ["compare", first, replica, "--home", str(home), "--out", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["disjoint"] is True and out["seeds_a"] == [0, 1, 2, 3] and out["seeds_b"] == [100, 101, 102, 103]
    assert out["spec_differences"] == [] and "warning" not in result.stderr
    for pair in out["cells"]:
        assert pair["verdict"] == verdict(pair["ratio"]["ci95"], 1.0)
    assert out["verdicts"] == {"vit": verdict(out["difference"]["vit"]["ci95"], 0.0)}
    assert "measurement seeds: A 0-3, B 100-103: disjoint" in result.stdout
    itself = runner.invoke(app, ["compare", replica, replica, "--home", str(home), "--out", str(tmp_path / "same")])
    assert itself.exit_code == 0, itself.output
    assert "warning: A and B measured N* on 4 of the same seeds" in itself.stderr
    assert "100-103: 4 shared (100-103)" in itself.stdout
