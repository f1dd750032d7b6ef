"""Every file vitsweep keeps under a home (a sweep's marker, its spec, its searcher checkpoint, its
saved result, a result-cache entry, a plan) says its format (the spec: the marker keeps its hash),
and one that does not read back (emptied, truncated, overwritten, of a newer format) costs one line
naming it and exit 2, or, a cache (an entry, a plan), the training of its model or the plan again
with a warning: never a traceback, and no other file of the home is touched."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SYNTHETIC_SPEC, synthetic_sweep

from services.app import cli
from services.estimate import plan
from services.execution.ray_tune import trial_status
from services.search.rounds import RoundPlanner
from services.spec import parse_spec
from services.store import state
from services.store.cache import ResultCache
from services.store.files import CorruptFile

DAMAGE = {
    "emptied": lambda text: "",
    "truncated": lambda text: text[: len(text) // 2],
    "overwritten": lambda text: "\x00\x01 not json",
    "a list": lambda text: "[1, 2]",
    "a newer format": lambda text: json.dumps(json.loads(text) | {"format": 99}),
    "without its keys": lambda text: json.dumps({"format": 1}),
}


@pytest.fixture
def home(tmp_path) -> Path:
    """A home holding one finished sweep (its marker, spec and result) and one cache entry."""
    spec, result = synthetic_sweep("s-1")
    state.mark_sweep(spec, "s-1", tmp_path, SYNTHETIC_SPEC)
    state.save_result(result, tmp_path)
    record = [r.as_dict() for r in result.cells[0].records[:1]]
    entry = {"n_train": 5, "records": record, "eval_steps": [0, 1], "curves": {}, "snapshots": {}}
    ResultCache(tmp_path / "cache").put("ab" * 32, entry)
    planner = RoundPlanner(1)
    (state.folder(tmp_path, "s-1") / SEARCHER).write_text(state.searcher_checkpoint(planner.get_state(), True))
    return tmp_path


@pytest.fixture
def killed_home(tmp_path) -> Path:
    """A home whose sweep was killed while it trained: its marker, spec and searcher checkpoint, no result."""
    spec, _ = synthetic_sweep("s-1")
    state.mark_sweep(spec, "s-1", tmp_path, SYNTHETIC_SPEC)
    (state.folder(tmp_path, "s-1") / SEARCHER).write_text(state.searcher_checkpoint(RoundPlanner(1).get_state(), False))
    return tmp_path


SEARCHER = "searcher-state-2026-12-07_00-00-00.pkl"  # where Tune has PlanSearcher.save write it


def _files(home: Path) -> dict[str, Path]:
    return {
        "marker": state.folder(home, "s-1") / state.MARKER,
        "spec": state.folder(home, "s-1") / state.SPEC,
        "searcher": state.folder(home, "s-1") / SEARCHER,
        "result": state.folder(home, "s-1") / state.RESULT,
        "cache": next((home / "cache").glob("*/*.json"), None),  # a killed home's trials cached none here
    }


READ = {  # each kind's one reader
    "marker": state.markers,
    "spec": lambda home: state.spec_text(home, "s-1"),
    "searcher": lambda home: state.restore_searcher(_files(home)["searcher"], RoundPlanner(1)),
    "result": lambda home: state.load_result(home, "s-1"),
}


def test_each_file_says_its_format_and_reads_back(home):
    for kind, path in _files(home).items():
        if kind == "spec":  # the user's YAML, kept as written: the marker keeps its hash
            assert json.loads(_files(home)["marker"].read_text())["spec_sha256"]
        else:
            assert json.loads(path.read_text())["format"] == 1
    assert state.spec_text(home, "s-1") == SYNTHETIC_SPEC
    assert state.restore_searcher(_files(home)["searcher"], RoundPlanner(1)) is True
    assert [sweep_id for sweep_id, _ in state.markers(home)] == ["s-1"]
    assert state.load_result(home, "s-1").to_json() == _files(home)["result"].read_text()  # a round trip
    assert ResultCache(home / "cache").get("ab" * 32)["n_train"] == 5
    older = json.loads(_files(home)["marker"].read_text())
    del older["format"]  # written before files named their format: format 1
    _files(home)["marker"].write_text(json.dumps(older))
    assert state.marker(home, "s-1")["spec_key"] == older["spec_key"]


@pytest.mark.parametrize(
    ("kind", "damage"),
    [(kind, damage) for kind in ["marker", "searcher", "result", "cache"] for damage in DAMAGE]
    + [("spec", damage) for damage in ("emptied", "truncated", "overwritten", "a list")]  # YAML: no format of its own
    + [("spec", "other text"), ("searcher", "a foreign state")],
)
def test_a_damaged_file_is_named_or_retrained_and_nothing_else_is_touched(home, kind, damage):
    files = _files(home)
    text = files[kind].read_text()
    if damage == "other text":
        damaged = text.replace("seeds: 4", "seeds: 3")
    elif damage == "a foreign state":
        damaged = json.dumps({"format": 1, "queue": [{"cell": "x"}], "in_flight": {}, "search_finished": False})
    else:
        damaged = DAMAGE[damage](text)
    files[kind].write_text(damaged)
    before = {name: path.read_bytes() for name, path in files.items()}
    if kind == "cache":
        with pytest.warns(UserWarning, match="its model is trained again"):
            assert ResultCache(home / "cache").get("ab" * 32) is None
    else:
        with pytest.raises(CorruptFile) as corrupt:
            READ[kind](home)
        assert corrupt.value.path == files[kind]
    assert {name: path.read_bytes() for name, path in files.items()} == before


def test_a_searcher_checkpoint_read_from_tunes_staging_copy_names_the_homes_file(home, tmp_path_factory):
    copy = tmp_path_factory.mktemp("staging") / SEARCHER
    copy.write_text("")
    with pytest.raises(CorruptFile) as corrupt:
        state.restore_searcher(copy, RoundPlanner(1), named=_files(home)["searcher"])
    assert corrupt.value.path == _files(home)["searcher"]


def command(capsys, monkeypatch, *args: str) -> tuple[int, list[str]]:
    """`vitsweep ARGS` in this process, as the console script runs it: (exit code, stderr's lines)."""
    monkeypatch.setattr(sys, "argv", ["vitsweep", *args])
    monkeypatch.setattr(cli.warnings, "formatwarning", cli.warnings.formatwarning)
    monkeypatch.setattr(cli.process, "freeze_garbage_at_exit", lambda: None)
    capsys.readouterr()
    with pytest.raises(SystemExit) as ended:
        cli.entry()
    return ended.value.code, capsys.readouterr().err.strip().splitlines()


COMMANDS = {  # the commands that read each kind, in a finished home and in a killed one
    ("finished", "marker"): [("status",), ("sync",)],
    ("finished", "spec"): [("sync",)],
    ("finished", "result"): [("sync",)],
    ("killed", "marker"): [("status",), ("sync",), ("run", "SPEC")],
}


@pytest.mark.parametrize("damage", ["emptied", "truncated"])
@pytest.mark.parametrize(("stage", "kind"), COMMANDS)
def test_each_command_that_reads_a_damaged_file_ends_in_one_line_naming_it(
    request, capsys, monkeypatch, tmp_path_factory, stage, kind, damage
):
    home = request.getfixturevalue("home" if stage == "finished" else "killed_home")
    path = _files(home)[kind]
    path.write_text(DAMAGE[damage](path.read_text()))
    spec = tmp_path_factory.mktemp("spec") / "synthetic.yaml"
    spec.write_text(SYNTHETIC_SPEC)
    for args in COMMANDS[stage, kind]:
        code, lines = command(
            capsys, monkeypatch, *[str(spec) if a == "SPEC" else a for a in args], "--home", str(home)
        )
        assert (code, len(lines)) == (2, 1), (args, lines)
        assert lines[0].startswith(f"vitsweep: {path} cannot be read (") and "Move it out of the home" in lines[0]


def test_a_killed_homes_spec_or_searcher_damaged_leaves_status_and_sync_as_they_were(killed_home, capsys, monkeypatch):
    """Neither is read before the sweep resumes (the searcher's: by Tune, as `run` resumes it)."""
    for kind in ("spec", "searcher"):
        _files(killed_home)[kind].write_text("")
    for args in (("status",), ("sync",)):
        monkeypatch.setattr(sys, "argv", ["vitsweep", *args, "--home", str(killed_home)])
        capsys.readouterr()
        try:
            cli.entry()
        except SystemExit as ended:
            assert ended.code in (0, None, 1), capsys.readouterr().err  # sync: 1, a sweep is left to log
        assert "cannot be read" not in capsys.readouterr().err


def test_the_command_says_which_file_in_one_line_and_exits_2(home):
    marker = _files(home)["marker"]
    marker.write_text(marker.read_text()[:10])
    done = subprocess.run(
        [str(Path(sys.executable).parent / "vitsweep"), "status", "--home", str(home)], capture_output=True, text=True
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [done.stderr.strip()]
    assert done.stderr.startswith(f"vitsweep: {marker} cannot be read (not a JSON sweep marker")


def test_a_broken_marker_of_another_spec_does_not_stop_this_one(home):
    """latest_sweep passes over a marker it cannot read where the sweep's own spec.yaml names
    another spec, and stops, naming it, where it may be this spec's."""
    spec, _ = synthetic_sweep("other-1")
    other = SYNTHETIC_SPEC.replace("name: synthetic", "name: other")
    state.mark_sweep(spec, "other-1", home, other)
    (state.folder(home, "other-1") / state.MARKER).write_text("{cut")
    assert state.latest_sweep(spec, home) == "s-1"
    (state.folder(home, "other-1") / state.SPEC).write_text(SYNTHETIC_SPEC)  # now it may be this spec's
    with pytest.raises(CorruptFile):
        state.latest_sweep(spec, home)


def test_an_emptied_plan_or_tune_state_is_passed_over_or_named(tmp_path):
    """A plan (a cache of `vitsweep plan`) that does not read back is passed over with a warning;
    Ray Tune's saved state emptied names its file (status lists the sweep as unreadable)."""
    spec = parse_spec(SYNTHETIC_SPEC)
    path = plan.plan_path(spec, tmp_path)
    path.parent.mkdir(parents=True)
    for text in ("", '{"format": 1, "cel'):
        path.write_text(text)
        with pytest.warns(UserWarning, match="passed over"):
            assert plan.load(spec, tmp_path) is None

    folder = tmp_path / "ray" / "s-1"
    (folder / "experiment_state-2026-12-07_00-00-00.json").parent.mkdir(parents=True)
    (folder / "experiment_state-2026-12-07_00-00-00.json").write_text("")
    with pytest.raises(CorruptFile, match="Ray Tune's saved state does not read back") as corrupt:
        trial_status(folder)
    assert corrupt.value.path.name.startswith("experiment_state-")
