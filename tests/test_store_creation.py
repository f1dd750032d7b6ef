"""The embedded MLflow store is made whole or not at all: a first `vitsweep run` killed while MLflow
makes its tables leaves a home the same command goes on in (a half-made store bricked every later
run: "table _alembic_tmp_experiments already exists")."""

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import wait_until
from mlflow.tracking import MlflowClient

from services.store.client import client_of

ROOT = Path(__file__).resolve().parents[1]
MAKE = "import sys; from services.store.client import client_of; client_of(sys.argv[1])"


def test_a_kill_while_the_store_is_made_leaves_no_store_and_the_next_call_makes_it(tmp_path):
    store = tmp_path / "mlflow.db"
    making = store.with_name("mlflow.db.making")
    uri = f"sqlite:///{store}"
    proc = subprocess.Popen([sys.executable, "-c", MAKE, uri], cwd=ROOT, stderr=subprocess.PIPE)
    wait_until(lambda: making.exists() and making.stat().st_size > 4096 or proc.poll() is not None, "tables", proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not store.exists() or proc.returncode == 0  # killed in the making: no store, never half of one
    client = client_of(uri)
    run = client.create_run(client.create_experiment("after"))
    assert client.get_run(run.info.run_id).info.status == "RUNNING"
    assert not making.exists()


def test_a_half_made_store_without_runs_is_made_again_and_one_with_runs_is_left_alone(tmp_path):
    store = tmp_path / "mlflow.db"
    with sqlite3.connect(store) as db:  # an older vitsweep's store, killed in MLflow's migration
        db.execute("CREATE TABLE _alembic_tmp_experiments (x INTEGER)")
        db.execute("CREATE TABLE experiments (x INTEGER)")
    client = client_of(f"sqlite:///{store}")
    assert client.search_experiments()[0].name == "Default"
    assert store.with_name("mlflow.db.half-made").exists()

    kept = tmp_path / "kept" / "mlflow.db"
    kept.parent.mkdir()
    with sqlite3.connect(kept) as db:
        db.execute("CREATE TABLE runs (run_uuid TEXT)")
        db.execute("INSERT INTO runs VALUES ('a run someone cares about')")
    with pytest.raises(Exception):  # noqa: B017 - MLflow's own error on a store it cannot open
        client_of(f"sqlite:///{kept}")
    assert kept.exists() and not kept.with_name("mlflow.db.half-made").exists()


def test_a_new_store_is_made_without_mlflows_table_messages(tmp_path):
    made = subprocess.run(
        [sys.executable, "-c", MAKE, f"sqlite:///{tmp_path / 'mlflow.db'}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=os.environ | {"PYTHONPATH": str(ROOT)},
    )
    assert made.returncode == 0 and "database tables" not in made.stderr, made.stderr
    assert isinstance(MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}"), MlflowClient)
