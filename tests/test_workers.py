"""The environment a sweep's trials run under: start_ray's runtime env reaches Ray Tune's trials.

A trial's function runs in a thread of its worker, where glibc's arena of its own gave back and
faulted in again the pages of every large evaluation (docs/performance.md, "What was fixed,
measured": sample_complexity_premises 386 s -> 227 s in the sweep)."""

import os

import pytest
import ray
from ray import tune

from services.execution.ray_start import start_ray, worker_runtime_env
from services.process import WORKER_ENVIRONMENT

pytestmark = pytest.mark.system  # Ray, servers, Docker, Slurm or benchmarks: make test-fast leaves this file out


def test_trials_run_under_the_workers_env(tmp_path, monkeypatch):
    def environment(config: dict) -> None:  # defined here, so that the worker gets it by value
        tune.report({name: os.environ.get(name, "") for name in WORKER_ENVIRONMENT})

    for name in WORKER_ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    assert not ray.is_initialized()
    stop = start_ray(None)
    try:
        results = tune.Tuner(environment, run_config=tune.RunConfig(storage_path=str(tmp_path))).fit()
        assert {name: results[0].metrics[name] for name in WORKER_ENVIRONMENT} == {
            name: value for name, (value, _why) in WORKER_ENVIRONMENT.items()
        }
    finally:
        stop()


def test_a_users_own_value_is_kept(monkeypatch):
    """Where this process has the variable (the user's shell, a submitted job's env vars), it is
    not set again: Ray refuses a driver's env var that the job's runtime env sets too."""
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert "MALLOC_ARENA_MAX" not in worker_runtime_env()["env_vars"]
    monkeypatch.delenv("MALLOC_ARENA_MAX")
    assert worker_runtime_env()["env_vars"]["MALLOC_ARENA_MAX"] == "1"
