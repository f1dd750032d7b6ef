"""A running `vitsweep run` on the embedded default: every socket its processes (the driver, Ray's
GCS, raylet, agents and workers) listen on is on loopback; Ctrl-C then stops it cleanly, says
where the finished work is and ends its live MLflow runs KILLED, and SIGTERM does the same.
(Resuming it: tests/test_kill_anywhere.py, tests/test_live_record.py.)"""

import contextlib
import ipaddress
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time

import psutil
import pytest
from chaos import GRID, ROOT, KilledSweep, session, wait_gone
from conftest import wait_until

from services.app import runs

pytestmark = pytest.mark.system  # Ray, servers, Docker, Slurm or benchmarks: make test-fast leaves this file out


def _listening(sid: int) -> list[tuple[str, str, int]]:
    """(process name, address, port) of every listening TCP or bound UDP socket of the processes of session ``sid``."""
    found = []
    for proc in session(sid):
        with contextlib.suppress(psutil.Error):
            for c in proc.net_connections(kind="inet"):
                if c.status == psutil.CONN_LISTEN or (c.type == 2 and not c.raddr):
                    found.append((proc.name(), c.laddr.ip, c.laddr.port))
    return found


def _statuses(sweep: KilledSweep) -> list[tuple[str]]:
    return sqlite3.connect(sweep.home / "mlflow.db").execute("select distinct status from runs").fetchall()


def test_a_running_sweep_listens_on_loopback_only_and_ctrl_c_stops_it_cleanly(tmp_path):
    seen = {}

    def inspect_then_interrupt(proc):  # the driver froze (SIGSTOP) once the first of 8 trials finished
        seen["sockets"] = _listening(proc.pid)  # its session: it and everything it started
        os.kill(proc.pid, signal.SIGINT)  # delivered as it continues: Ctrl-C mid-sweep
        os.kill(proc.pid, signal.SIGCONT)

    sweep = KilledSweep(GRID, tmp_path)
    stopped = sweep.run(("trial_complete", 1), action="stop", on_stop=inspect_then_interrupt)
    sockets = seen["sockets"]
    assert {"gcs_server", "raylet"} <= {name for name, _, _ in sockets}, sockets  # the check saw Ray's own processes
    loopback = lambda ip: ipaddress.ip_address(ip.removeprefix("::ffff:")).is_loopback  # noqa: E731  (IPv4-mapped IPv6 too)
    assert [s for s in sockets if not loopback(s[1])] == []

    assert stopped.returncode == 130, stopped.stderr[-3000:]
    assert "interrupted:" in stopped.stderr and str(sweep.home / "ray") in stopped.stderr
    assert _statuses(sweep) == [("KILLED",)]  # the live record's parent and its started children; none left RUNNING


def test_sigterm_stops_a_sweep_as_ctrl_c_does(tmp_path):
    """`kill`, `docker stop`, a Slurm time limit: Ray Tune saves its state, the live record ends
    KILLED and the exit code is 128 + 15, where Ray's own handler exited at once with code 15 and
    left the record FAILED."""

    def terminate(proc):
        os.kill(proc.pid, signal.SIGTERM)
        os.kill(proc.pid, signal.SIGCONT)

    sweep = KilledSweep(GRID, tmp_path)
    stopped = sweep.run(("trial_complete", 1), action="stop", on_stop=terminate)
    assert stopped.returncode == 143, stopped.stderr[-3000:]
    assert "interrupted by SIGTERM:" in stopped.stderr
    assert _statuses(sweep) == [("KILLED",)]


def test_a_sigterm_while_trials_run_is_tunes_ctrl_c_and_ends_the_live_record_from_a_thread():
    """SIGTERM calls the SIGINT handler Tune installed (its graceful stop). Where Ray's processes got
    the signal too (`scancel` signals the whole job), the driver dies with them before Tune's stop
    returns: the live record is told KILLED as the signal lands, from a thread (a signal
    handler may not take the locks its queue takes). After, both handlers are as before: Tune
    leaves its SIGINT handler behind (Ray #37737)."""
    told, stopped = [], []

    class Live:
        def end_now(self, status: str) -> None:
            told.append((status, threading.current_thread().name))

    term, ctrl_c = signal.getsignal(signal.SIGTERM), signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with runs._terminated_as_interrupted(Live()) as received:
            signal.signal(signal.SIGINT, lambda signum, frame: stopped.append(signum))  # as Tune's fit does
            signal.raise_signal(signal.SIGTERM)
        assert signal.getsignal(signal.SIGTERM) is term
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        with runs._terminated_as_interrupted(Live()) as quiet:
            pass  # no signal: nothing told
    finally:
        signal.signal(signal.SIGINT, ctrl_c)
    assert received == [signal.SIGTERM] and stopped == [signal.SIGINT] and told == [("KILLED", "sigterm-live")]
    assert quiet == []


def _stopped_by(tmp_path, send) -> tuple[subprocess.CompletedProcess, float, KilledSweep]:
    """The GRID sweep frozen once its first trial finished, then ``send(pid, said)`` (``said``:
    what it has printed so far): (how it ended, the seconds from the first signal to its end, the
    sweep)."""
    sweep, out, err = KilledSweep(GRID, tmp_path), tmp_path / "out", tmp_path / "err"
    argv = [sys.executable, str(ROOT / "tests" / "kill_at.py"), "stop", "trial_complete", "1"]
    argv += ["run", str(sweep.spec), "--home", str(sweep.home), "--json"]
    with out.open("w") as stdout, err.open("w") as stderr:
        proc = subprocess.Popen(argv, cwd=ROOT, stdout=stdout, stderr=stderr, text=True, start_new_session=True)
        wait_until(lambda: psutil.Process(proc.pid).status() == psutil.STATUS_STOPPED, "the driver frozen", proc)
        sent = time.monotonic()
        send(proc.pid, lambda: err.read_text())
        proc.wait()
    took = time.monotonic() - sent
    wait_gone(proc.pid)
    return subprocess.CompletedProcess(argv, proc.returncode, out.read_text(), err.read_text()), took, sweep


def test_sigterm_to_the_whole_process_group_ends_the_sweep_fast_with_vitsweeps_own_words(tmp_path):
    """`scancel`, `timeout` and a Slurm time limit signal every process of the job. Ray's GCS died
    of the same signal and the driver waited 60 s for it, then ended on Ray's "Failed to connect to
    GCS"; Ray's own processes now leave a SIGTERM to the driver, which stops them."""

    def terminate_group(pid: int, said) -> None:
        os.killpg(pid, signal.SIGTERM)
        os.killpg(pid, signal.SIGCONT)

    stopped, took, sweep = _stopped_by(tmp_path, terminate_group)
    said = stopped.stdout + stopped.stderr
    assert stopped.returncode == 143, said[-3000:]
    assert "interrupted by SIGTERM:" in stopped.stderr and "Run the same command again" in stopped.stderr
    assert "Tuner.restore" not in said and "Failed to connect to GCS" not in said
    assert took < 20, took  # ~10 s on a busy machine; Ray's GCS timeout alone was 60 s
    assert _statuses(sweep) == [("KILLED",)]


@pytest.mark.parametrize("second_when", ["Stop signal received", "interrupted: "])
def test_ctrl_c_twice_ends_the_sweep_with_vitsweeps_own_words(tmp_path, second_when):
    """A second Ctrl-C while Tune stops (an impatient user), or once the sweep said it stopped,
    still ends in vitsweep's message and KILLED runs, not a traceback or Ray's advice. Once it said
    so, Ray's shutdown ran in its atexit handler: a Ctrl-C there ended the process on SIGSEGV (a CI
    run); the driver now stops Ray itself, deaf to Ctrl-C, and is deaf to it after its message."""

    def interrupt_twice(pid: int, said) -> None:
        os.kill(pid, signal.SIGINT)
        os.kill(pid, signal.SIGCONT)
        wait_until(lambda: second_when in said(), f"{second_when!r} said")
        os.kill(pid, signal.SIGINT)

    stopped, took, sweep = _stopped_by(tmp_path, interrupt_twice)
    said = stopped.stdout + stopped.stderr
    assert stopped.returncode == 130, said[-3000:]
    assert "interrupted" in stopped.stderr and "Run the same command again" in stopped.stderr, said[-3000:]
    assert "Tuner.restore" not in said and "Traceback" not in said
    assert took < 20, took
    assert _statuses(sweep) == [("KILLED",)]
