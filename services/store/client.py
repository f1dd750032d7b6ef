"""A client of a tracking store: a server's as MLflow makes it; the embedded SQLite one made or brought up to
date by one process at a time, and made whole or not at all (a kill while MLflow made its tables bricked
every later run of a home: "table _alembic_tmp_experiments already exists")."""

import contextlib
import logging
import os
import sqlite3
from pathlib import Path

from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
from mlflow.tracking import MlflowClient

from services.store.files import locked


def client_of(tracking_uri: str) -> MlflowClient:
    """A client of the store at ``tracking_uri``; a SQLite store's tables made or brought up to
    date by one process at a time (two sweeps starting at once on one home both migrated a new
    store, and one failed on "duplicate column name: step"). A new store is made whole beside its
    place and renamed into it, so a kill while MLflow makes its tables leaves no store, never half
    of one; a half-made store an older vitsweep left (it holds no run) is made again. A server
    orders its own writes."""
    if not tracking_uri.startswith("sqlite:///"):
        return MlflowClient(tracking_uri)
    store = Path(tracking_uri.removeprefix("sqlite:///"))
    with locked(store.with_name(store.name + ".lock")):
        if not store.exists():
            _make_store(store)
        try:
            return MlflowClient(tracking_uri)  # an older store's tables brought up to date
        except Exception:
            if _runs_in(store):
                raise  # a store with runs is the user's: never replaced
        # MLflow keeps one engine a URI, open on the file it failed on: let it go before the file is made again
        if (engine := SqlAlchemyStore._engine_map.pop(tracking_uri, None)) is not None:
            engine.dispose()
        store.replace(store.with_name(store.name + ".half-made"))  # kept beside, for a look
        _make_store(store)
        return MlflowClient(tracking_uri)


def _make_store(store: Path) -> None:
    """A new SQLite store at ``store``, its tables made under another name first, then renamed."""
    partial = store.with_name(store.name + ".making")
    partial.unlink(missing_ok=True)  # a kill's leftover: the caller holds the store's lock
    mlflow_db, level = logging.getLogger("mlflow.store.db.utils"), logging.getLogger("mlflow.store.db.utils").level
    mlflow_db.setLevel(logging.WARNING)  # "Creating initial MLflow database tables...": nothing a user acts on
    try:
        MlflowClient(f"sqlite:///{partial}")  # makes the tables as it opens the store
    finally:
        mlflow_db.setLevel(level)
    os.replace(partial, store)


def _runs_in(store: Path) -> int:
    """Runs a SQLite store holds (0 where it has no runs table: a store whose making was cut short)."""
    try:
        with contextlib.closing(sqlite3.connect(store)) as db:
            return db.execute("SELECT count(*) FROM runs").fetchone()[0]
    except sqlite3.Error:
        return 0
