"""Ctrl-C during a sweep: it stops, says where the finished work is, and logs nothing partial."""

import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).parents[1]


def test_ctrl_c_stops_cleanly_and_says_where_the_results_are(tmp_path):
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "vitsweep"), "run", "sweeps/sample_complexity.yaml", "--home", str(tmp_path)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    time.sleep(20)  # Ray is up and the first trials run; the whole sweep takes ~4 minutes
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, out + err
    assert "interrupted:" in err and str(tmp_path / "ray") in err
    store = tmp_path / "mlflow.db"  # opened while Ray started: it may exist, with no run in it
    assert not store.exists() or sqlite3.connect(store).execute("select count(*) from runs").fetchone() == (0,)
