"""Results the way a researcher reaches for them: vitsweep.load_sweep's DataFrames, `vitsweep export`
to CSV and Parquet, and `vitsweep compare` of two sweeps, all read from MLflow alone."""

import json
import math

import pandas as pd
import pytest
from conftest import record_synthetic_sweep
from mlflow.tracking import MlflowClient
from typer.testing import CliRunner

import vitsweep
from services.app.cli import app
from services.store import tracking
from services.store.uris import embedded_uri

runner = CliRunner()


def _cli(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.fixture(scope="module")
def reported(two_sweeps) -> dict[str, dict]:
    """`vitsweep report --json` of each sweep: what the other commands must agree with."""
    out = {}
    for sweep in ("sweep-a", "sweep-b"):
        text = _cli("report", sweep, "--home", str(two_sweeps), "--out", str(two_sweeps / "report" / sweep), "--json")
        out[sweep] = json.loads(text.strip().splitlines()[-1])
    return out


def test_load_sweep_gives_the_records_and_the_cells_the_report_gives(two_sweeps, reported):
    sweep = vitsweep.load_sweep("sweep-a", home=two_sweeps)
    assert sweep.sweep_id == "sweep-a"
    assert len(sweep.models) == 4 * 4 * 4  # cells x N x seeds, as synthetic_sweep made them
    assert {"cell", "model", "alpha_star", "n_train", "seed", "outcome", "test_error"} <= set(sweep.models.columns)
    assert set(sweep.models.groupby("cell").size()) == {16}
    n_star = dict(zip(sweep.cells["cell"], sweep.cells["n_star"]))
    assert {k: (None if pd.isna(v) else int(v)) for k, v in n_star.items()} == reported["sweep-a"]["n_star"]
    assert vitsweep.load_sweep(home=two_sweeps).sweep_id == "sweep-b"  # the latest, by default
    with pytest.raises(LookupError, match="no sweep nope"):
        vitsweep.load_sweep("nope", home=two_sweeps)


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_export_round_trips_the_dataframes(two_sweeps, reported, tmp_path, suffix):
    sweep = vitsweep.load_sweep("sweep-a", home=two_sweeps)
    for table in ("models", "cells"):
        out = tmp_path / f"{table}{suffix}"
        assert f"rows of {table} written" in _cli(
            "export", "sweep-a", "--home", str(two_sweeps), "--table", table, "--out", str(out)
        )
        read = pd.read_csv(out) if suffix == ".csv" else pd.read_parquet(out)
        frame = getattr(sweep, table)
        assert list(read.columns) == list(frame.columns) and len(read) == len(frame)
        if suffix == ".parquet":
            pd.testing.assert_frame_equal(read, frame)
    cells = pd.read_csv(tmp_path / "cells.csv") if suffix == ".csv" else pd.read_parquet(tmp_path / "cells.parquet")
    n_star = {c: (None if pd.isna(v) else int(v)) for c, v in zip(cells["cell"], cells["n_star"])}
    assert n_star == reported["sweep-a"]["n_star"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--out", "x.xlsx"], "must end in .csv"),
        (["--out", "x.csv", "--table", "runs"], "must be models or cells"),
        (["nope", "--out", "x.csv"], "no sweep nope"),
    ],
)
def test_export_refuses_what_it_cannot_write_with_exit_2(two_sweeps, tmp_path, args, message):
    result = runner.invoke(app, ["export", *args, "--home", str(two_sweeps)])
    assert result.exit_code == 2 and message in result.stderr


def test_compare_fits_both_sweeps_and_the_difference_of_their_exponents(two_sweeps, reported, tmp_path):
    out = _cli("compare", "sweep-a", "sweep-b", "--home", str(two_sweeps), "--out", str(tmp_path / "cmp"), "--json")
    comparison = json.loads(out.strip().splitlines()[-1])
    assert (comparison["sweep_a"], comparison["sweep_b"]) == ("sweep-a", "sweep-b")
    pairs = {p["label"]: p for p in comparison["cells"]}
    assert pairs["vit alpha_star=0.1"]["n_star_a"] == 20 and pairs["vit alpha_star=0.1"]["n_star_b"] == 40
    assert pairs["vit alpha_star=0.3"]["n_star_a"] == pairs["vit alpha_star=0.3"]["n_star_b"] == 10
    # N* doubles at alpha* = 0.1 and stays at 0.3: the slope over 1/alpha* in {10/3, 10} grows by log 2 / log 3
    difference = comparison["difference"]["vit"]
    assert difference["value"] == pytest.approx(math.log(2) / math.log(3), abs=1e-3)
    assert difference["ci95"][0] <= difference["value"] <= difference["ci95"][1]
    for sweep, key in (("sweep-a", "exponent_a"), ("sweep-b", "exponent_b")):
        assert comparison[key]["vit"]["value"] == reported[sweep]["exponent"]["vit"]["value"]
        assert comparison[key]["vit"]["ci95"] == reported[sweep]["exponent"]["vit"]["ci95"]
    assert (tmp_path / "cmp" / tracking.COMPARE_FIGURE).stat().st_size > 0
    client = MlflowClient(embedded_uri(two_sweeps))
    run = client.get_run(comparison["mlflow_run_id"])
    assert run.data.tags[tracking.COMPARE_TAG] == "sweep-a vs sweep-b"
    assert run.data.metrics["exponent_difference.vit"] == pytest.approx(difference["value"])
    assert {a.path for a in client.list_artifacts(run.info.run_id)} == {tracking.COMPARE_FIGURE, tracking.COMPARE_JSON}
    assert vitsweep.load_sweep(home=two_sweeps).sweep_id == "sweep-b"  # the comparison's run is not a sweep


def test_paper_grid_puts_the_papers_figure_beside_each_sweep_and_finds_a_spec_by_name(two_sweeps, tmp_path):
    """`vitsweep paper`: per model, every column of the paper's Fig 1 (its N*, "<= 40" at its
    smallest N) then our cells off its grid, each sweep's N* with its CI; a spec's name stands for
    its latest sweep ("sweep" here: sweep-b); the figure and JSON go to the folder and to MLflow."""
    out = runner.invoke(
        app, ["paper", "sweep-a", "sweep", "--home", str(two_sweeps), "--out", str(tmp_path / "g"), "--json"]
    )
    assert out.exit_code == 0, out.output
    grid = json.loads(out.stdout.strip().splitlines()[-1])
    assert grid["sweeps"] == ["sweep-a", "sweep-b"] and grid["x_power"] == {"vit": 2.0, "cnn": 4.0}
    points = {(p["model"], round(p["value"], 4)): p for p in grid["points"]}
    assert points["vit", 0.5]["paper_n_star"] == 40 and points["vit", 0.5]["ours"] == {}
    assert points["vit", 0.2673]["paper_n_star"] == 320
    ours = points["vit", 0.1]["ours"]
    assert points["vit", 0.1]["paper_ns"] is None  # off the paper's grid: no column
    assert (ours["sweep-a"]["n_star"], ours["sweep-b"]["n_star"]) == (20, 40)
    assert not ours["sweep-a"]["tuned"] and ours["sweep-a"]["protocol"] == "multi_pass"
    assert "| 0.5 | 4 | <= 40 | - | - |" in out.stdout and "| 0.1 | 100 | - | 20 [" in out.stdout
    assert (tmp_path / "g" / tracking.GRID_FIGURE).stat().st_size > 0
    run = MlflowClient(embedded_uri(two_sweeps)).get_run(grid["mlflow_run_id"])
    assert run.data.tags[tracking.GRID_TAG] == "sweep-a, sweep-b"
    assert vitsweep.load_sweep(home=two_sweeps).sweep_id == "sweep-b"  # the grid's run is not a sweep


def _report(home, out, *flags: str) -> tuple[list[str], str]:
    """`vitsweep report sweep-a` into ``out``: (its lines but the one naming the folder, that line)."""
    lines = _cli("report", "sweep-a", "--home", str(home), "--out", str(out), *flags).splitlines()
    written = next(line for line in lines if line.startswith("report written to"))
    return [line for line in lines if line != written], written


def test_report_and_export_read_back_what_the_run_recorded_equal_to_recomputing_it(two_sweeps, tmp_path):
    read, read_line = _report(two_sweeps, tmp_path / "read")
    again, again_line = _report(two_sweeps, tmp_path / "again", "--recompute")
    assert "as the sweep's run recorded it" in read_line and "(recomputed)" in again_line
    assert read == again  # the same table, fits and notes
    files = sorted(p.name for p in (tmp_path / "read").iterdir())
    assert files == sorted(p.name for p in (tmp_path / "again").iterdir())
    assert {"summary.md", "summary.html", "summary.json"} < set(files) and any(f.endswith(".png") for f in files)
    for name in files:  # the figures too: MLflow holds them as the report folder draws them
        assert (tmp_path / "read" / name).read_bytes() == (tmp_path / "again" / name).read_bytes(), name
    for flags in ((), ("--recompute",)):
        out = tmp_path / f"cells{len(flags)}.csv"
        _cli("export", "sweep-a", "--home", str(two_sweeps), "--table", "cells", "--out", str(out), *flags)
    assert (tmp_path / "cells0.csv").read_bytes() == (tmp_path / "cells1.csv").read_bytes()


def test_a_record_whose_report_view_is_of_another_format_is_recomputed(tmp_path):
    _, _, uri, run_id = record_synthetic_sweep(tmp_path, "sweep-a")
    MlflowClient(uri).log_dict(run_id, {"format": 0, "rows": []}, tracking.REPORT_VIEW)  # a format it cannot read
    lines, written = _report(tmp_path, tmp_path / "out")
    assert "(recomputed)" in written and any(line.startswith("| vit alpha_star=0.1") for line in lines)
