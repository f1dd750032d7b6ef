"""What vitsweep prints for the user to open or type works as printed: the address of a sweep's runs
in MLflow's UI opens the model-training runs table of that sweep (its parent, its children and
their N*, in headless Chromium), and every command line it prints runs as typed from the user's
directory, naming vitsweep as the user started it where PATH does not find it."""

import contextlib
import os
import shutil
import socket
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from chaos import BIN, GRID, ROOT
from conftest import CHROMIUM, answers, chromium_dom, mlflow_server_at, wait_until
from mlflow.tracking import MlflowClient

from services.app import browser
from services.app.printing import command
from services.store.tracking import PARENT_TAG, SWEEP_TAG
from services.store.uris import UI_HOST, UI_PORT, embedded_uri, ui_address

pytestmark = pytest.mark.system  # Ray, servers, Docker, Slurm or benchmarks: make test-fast leaves this file out

PROGRAM = os.path.relpath(BIN / "vitsweep", ROOT)  # as a user in the repository types it: .venv/bin/vitsweep
SPEC = GRID.replace("chaos-grid", "ui-address")  # chaos's grid: two cells (vit, cnn), eight trainings
UI = f"http://{UI_HOST}:{UI_PORT}"


def user_env() -> dict[str, str]:
    """The test's environment with no vitsweep on PATH and no display (no browser opens)."""
    path = os.pathsep.join(d for d in os.environ["PATH"].split(os.pathsep) if not (Path(d) / "vitsweep").exists())
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "BROWSER")}
    return env | {"PATH": path}


def vitsweep(*args: str) -> subprocess.CompletedProcess:
    """`.venv/bin/vitsweep ARGS` from the repository root, as a user there runs it."""
    return subprocess.run([PROGRAM, *args], cwd=ROOT, env=user_env(), capture_output=True, text=True)


def as_typed(line: str) -> str:
    """The command a printed line ends with, from the program's name on."""
    assert f"{PROGRAM} " in line, line
    return line[line.index(f"{PROGRAM} ") :]


def printed(output: str, before: str) -> str:
    """What follows ``before`` on the one printed line that starts with it."""
    (line,) = [line for line in output.splitlines() if line.startswith(before)]
    return line.removeprefix(before)


@pytest.fixture(scope="module")
def swept(tmp_path_factory) -> dict:
    """A tiny sweep run by `.venv/bin/vitsweep run` from the repository root, with vitsweep on no
    PATH and a home named relative to the root, with a space: what it printed, its home and spec."""
    folder = tmp_path_factory.mktemp("ui_address")
    (folder / "spec.yaml").write_text(SPEC)
    home = os.path.relpath(folder / "my home", ROOT)
    assert shutil.which("vitsweep", path=user_env()["PATH"]) is None
    done = vitsweep("run", str(folder / "spec.yaml"), "--home", home)
    assert done.returncode == 0, done.stderr[-3000:]
    return {"out": done.stdout, "home": home, "spec": str(folder / "spec.yaml"), "folder": folder}


@contextlib.contextmanager
def serving(command: str):
    """The printed `ui` command run as typed (its shell replaced by it: the pid is the server's),
    until it answers HTTP on the address vitsweep prints; stopped by its pid after."""
    with socket.socket() as probe:
        if probe.connect_ex((UI_HOST, UI_PORT)) == 0:
            pytest.skip(f"{UI} is taken by another server: the printed `ui` command serves there")
    ui = subprocess.Popen(
        f"exec {command}", shell=True, cwd=ROOT, env=user_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_until(lambda: answers(f"{UI}/health"), f"the printed `{command}`", ui)
        yield
    finally:
        ui.terminate()
        ui.wait()


class RunsTable(HTMLParser):
    """The rows of MLflow's runs table in a page's DOM: run id -> {column id: the cell's text}."""

    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}

    def __init__(self, dom: str):
        super().__init__()
        self.rows: dict[str, dict[str, str]] = {}
        self.open: list[tuple[str | None, str | None]] = []  # (row, column) each open element is in
        self.feed(dom)

    def handle_starttag(self, tag: str, attrs: list) -> None:
        row, column = self.open[-1] if self.open else (None, None)
        found = dict(attrs)
        row = found.get("row-id", row)
        column = found.get("col-id") if found.get("role") == "gridcell" else column
        if tag not in self.VOID:
            self.open.append((row, column))

    def handle_endtag(self, tag: str) -> None:
        if tag not in self.VOID and self.open:
            self.open.pop()

    def handle_data(self, data: str) -> None:
        row, column = self.open[-1] if self.open else (None, None)
        if row and column and data.strip():
            cells = self.rows.setdefault(row, {})
            cells[column] = f"{cells.get(column, '')} {data.strip()}".strip()


def test_the_printed_runs_address_shows_the_sweeps_runs_and_their_n_star(swept):
    """`run` prints how to open the UI and the sweep's runs there; that address, served by the
    printed command, shows MLflow's model-training runs table of the sweep alone: its parent run
    and each cell's child run side by side, each child with its model and N*."""
    out = swept["out"]
    runs, parent_page = printed(out, "the sweep's runs: "), printed(out, "its parent run: ")
    client = MlflowClient(embedded_uri(ROOT / swept["home"]))
    found = client.search_runs([e.experiment_id for e in client.search_experiments()])
    (parent,) = [r for r in found if SWEEP_TAG in r.data.tags]
    children = [r for r in found if r.data.tags.get(PARENT_TAG) == parent.info.run_id]
    experiment = parent.info.experiment_id
    assert runs.startswith(f"{UI}/#/experiments/{experiment}/runs?") and "workflowType=machine_learning" in runs
    assert parent_page == f"{UI}/#/experiments/{experiment}/runs/{parent.info.run_id}?workflowType=machine_learning"
    assert len(children) == 2 and all("n_star" in c.data.metrics for c in children)
    if CHROMIUM is None:
        pytest.skip("the addresses are printed; the page check needs Debian's chromium (make test installs it)")
    page = {}

    def shown() -> bool:
        page["dom"] = chromium_dom(runs)
        page["rows"] = RunsTable(page["dom"]).rows
        return len(page["rows"]) == 3 and all("metrics.`n_star`" in row for row in page["rows"].values())

    with serving(as_typed(printed(out, "Open the UI with: "))):
        wait_until(shown, f"the runs table at {runs}")
    rows = page["rows"]
    assert set(rows) == {parent.info.run_id, *(c.info.run_id for c in children)}, rows  # the sweep's runs alone
    assert parent.data.tags[SWEEP_TAG] in rows[parent.info.run_id]["attributes.`Run Name`"]
    for child in children:
        row = rows[child.info.run_id]
        assert child.info.run_name in row["attributes.`Run Name`"], row
        assert row["params.`model`"] == child.data.params["model"], row
        assert row["metrics.`n_star`"] == f"{child.data.metrics['n_star']:g}", row
    assert "Model registry" in page["dom"] and "Evaluation runs" not in page["dom"]  # the training view's navigation


def test_every_command_vitsweep_prints_works_as_typed(swept, free_port):
    """Started as `.venv/bin/vitsweep` (no vitsweep on PATH), every command line it prints names
    it so, its paths quoted: the `ui` line serves; the `run --new` line of a recorded sweep runs
    one more; the `sync` line of a sweep whose server was down logs it once the server is up."""
    home, spec, folder = swept["home"], swept["spec"], swept["folder"]
    ui = as_typed(printed(swept["out"], "Open the UI with: "))
    assert ui == f"{PROGRAM} ui --home '{home}'"  # the home's space quoted
    with serving(ui):
        pass

    again = vitsweep("run", spec, "--home", home)
    assert again.returncode == 0, again.stderr[-3000:]
    (line,) = [line for line in again.stderr.splitlines() if "--new" in line]
    new = subprocess.run(as_typed(line), shell=True, cwd=ROOT, env=user_env(), capture_output=True, text=True)
    assert new.returncode == 0, new.stderr[-3000:]
    assert "0 trainings (8 more read from the result cache)" in new.stdout  # a sweep more, trained from the cache

    server = f"http://127.0.0.1:{free_port()}"  # nothing answers there yet
    down = vitsweep("run", spec, "--home", str(folder / "other"), "--cache", f"{home}/cache", "--tracking-uri", server)
    assert down.returncode == 3, down.stderr[-3000:]
    (line,) = [line for line in down.stderr.splitlines() if "log them with: " in line]
    (folder / "server").mkdir()
    with mlflow_server_at(int(server.rsplit(":", 1)[1]), folder / "server") as url:
        synced = subprocess.run(as_typed(line), shell=True, cwd=ROOT, env=user_env(), capture_output=True, text=True)
        assert synced.returncode == 0, synced.stderr[-3000:]
        client = MlflowClient(url)
        logged = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert f"logged to {url}" in synced.stdout
    assert [r.data.tags[SWEEP_TAG] for r in logged if SWEEP_TAG in r.data.tags] == [synced.stdout.split(":")[0]]


def test_the_ui_address_is_the_servers_own_or_the_one_vitsweep_ui_serves(tmp_path):
    """A tracking server serves its UI (credentials left out of the address); `vitsweep ui --home`
    serves its home's store alone; no UI is known for another store."""
    server = "https://user:secret@mlflow.example:8443/prefix/"
    assert ui_address(server, tmp_path) == "https://mlflow.example:8443/prefix"
    assert ui_address(embedded_uri(tmp_path), tmp_path) == UI
    assert ui_address(embedded_uri(tmp_path / "elsewhere"), tmp_path) is None
    assert ui_address("postgresql://db/mlflow", tmp_path) is None


def test_a_printed_command_names_vitsweep_as_the_user_can_run_it(monkeypatch, tmp_path):
    """`vitsweep` where PATH finds the very program running; else the path it was started by, as
    typed; each argument shell-quoted."""
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, "argv", [PROGRAM, "run"])
    monkeypatch.setenv("PATH", user_env()["PATH"])
    assert command("sync", "--home", tmp_path / "a home") == f"{PROGRAM} sync --home '{tmp_path / 'a home'}'"
    monkeypatch.setenv("PATH", f"{BIN}{os.pathsep}{os.environ['PATH']}")
    assert command("ui") == "vitsweep ui"
    other = tmp_path / "bin"
    other.mkdir()
    (other / "vitsweep").write_text("#!/bin/sh\n")
    (other / "vitsweep").chmod(0o755)
    monkeypatch.setenv("PATH", f"{other}{os.pathsep}{os.environ['PATH']}")
    assert command("ui") == f"{PROGRAM} ui"  # PATH's vitsweep is another program


def test_ui_opens_the_sweeps_runs_in_a_browser_once_it_answers(two_sweeps, free_port, tmp_path):
    """Where there is a display and a browser (here a stand-in that notes the address it is given),
    `vitsweep ui` opens the runs page it printed."""
    opened = tmp_path / "opened"
    fake = tmp_path / "browser"
    fake.write_text(f'#!/bin/sh\necho "$1" > {opened}\n')
    fake.chmod(0o755)
    port = free_port()
    env = user_env() | {"DISPLAY": ":99", "BROWSER": str(fake)}
    ui = subprocess.Popen(
        [str(BIN / "vitsweep"), "ui", "--home", str(two_sweeps), "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        ui.stdout.readline()  # the parent run's page
        runs = ui.stdout.readline().removeprefix("the sweep's runs: ").strip()
        assert runs.startswith(f"http://127.0.0.1:{port}/#/experiments/"), runs
        wait_until(lambda: opened.exists() and opened.read_text().strip(), "the browser's page", ui)
        assert opened.read_text().strip() == runs
    finally:
        ui.terminate()
        ui.wait()


def test_no_browser_is_opened_without_a_display(monkeypatch):
    """A terminal browser (lynx, w3m) would take the terminal the server logs to."""
    monkeypatch.setattr(sys, "platform", "linux")
    for name in ("DISPLAY", "WAYLAND_DISPLAY"):
        monkeypatch.delenv(name, raising=False)
    assert not browser.can_open()
