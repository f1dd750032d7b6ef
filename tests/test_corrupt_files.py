"""Every file vitsweep keeps under a home (a sweep's marker, its saved result, a result-cache entry)
says its format, and one that does not read back (truncated, overwritten, of a newer format) costs
one line naming it and exit 2, or, a cache entry, the training of its model again: never a
traceback, and no other file of the home is touched."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SYNTHETIC_SPEC, synthetic_sweep

from services.store import state
from services.store.cache import ResultCache
from services.store.files import CorruptFile

DAMAGE = {
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
    return tmp_path


def _files(home: Path) -> dict[str, Path]:
    return {
        "marker": state.folder(home, "s-1") / state.MARKER,
        "result": state.folder(home, "s-1") / state.RESULT,
        "cache": next((home / "cache").glob("*/*.json")),
    }


def test_each_file_says_its_format_and_reads_back(home):
    for path in _files(home).values():
        assert json.loads(path.read_text())["format"] == 1
    assert [sweep_id for sweep_id, _ in state.markers(home)] == ["s-1"]
    assert state.load_result(home, "s-1").to_json() == _files(home)["result"].read_text()  # a round trip
    assert ResultCache(home / "cache").get("ab" * 32)["n_train"] == 5
    older = json.loads(_files(home)["marker"].read_text())
    del older["format"]  # written before files named their format: format 1
    _files(home)["marker"].write_text(json.dumps(older))
    assert state.marker(home, "s-1")["spec_key"] == older["spec_key"]


@pytest.mark.parametrize("damage", DAMAGE)
@pytest.mark.parametrize("kind", ["marker", "result", "cache"])
def test_a_damaged_file_is_named_or_retrained_and_nothing_else_is_touched(home, kind, damage):
    files = _files(home)
    files[kind].write_text(DAMAGE[damage](files[kind].read_text()))
    before = {name: path.read_bytes() for name, path in files.items()}
    if kind == "cache":
        with pytest.warns(UserWarning, match="its model is trained again"):
            assert ResultCache(home / "cache").get("ab" * 32) is None
    else:
        read = state.markers if kind == "marker" else lambda h: state.load_result(h, "s-1")
        with pytest.raises(CorruptFile) as corrupt:
            read(home)
        assert corrupt.value.path == files[kind]
    assert {name: path.read_bytes() for name, path in files.items()} == before


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
    from services.estimate import plan
    from services.spec import parse_spec

    spec = parse_spec(SYNTHETIC_SPEC)
    path = plan.plan_path(spec, tmp_path)
    path.parent.mkdir(parents=True)
    for text in ("", '{"format": 1, "cel'):
        path.write_text(text)
        with pytest.warns(UserWarning, match="passed over"):
            assert plan.load(spec, tmp_path) is None
    from services.execution.ray_tune import trial_status

    folder = tmp_path / "ray" / "s-1"
    (folder / "experiment_state-2026-12-07_00-00-00.json").parent.mkdir(parents=True)
    (folder / "experiment_state-2026-12-07_00-00-00.json").write_text("")
    with pytest.raises(CorruptFile, match="Ray Tune's saved state does not read back") as corrupt:
        trial_status(folder)
    assert corrupt.value.path.name.startswith("experiment_state-")
