"""The ``vitsweep`` command, stopped at a chosen moment: ``python tests/kill_at.py ACTION PHASE K ARGS...``
runs ``vitsweep ARGS...`` and, the K-th time it reaches PHASE, does ACTION:

- ``kill``: SIGKILL to its whole process group (the driver and the Ray it started), as
  ``kill -9 -PGID`` would; the tests start it in its own session;
- ``int``: SIGINT to the driver (Ctrl-C);
- ``stop``: SIGSTOP to the driver, which freezes there while what it started runs on;
- ``hold``: the driver's thread that got there waits until the file named by the environment's
  KILL_AT_GATE exists, while its other threads (the live MLflow record) go on.

PHASE is one of PHASES: each names a function of the driver and whether ACTION comes before or
after it runs. ACTION comes from inside so that it lands exactly there, whatever the machine's speed.
"""

import os
import signal
import sys
import time
from functools import wraps

from ray import tune

from services.app import cli
from services.execution import ray_start, ray_tune
from services.store import state, tracking

# phase -> (owner, function, "before" or "after" it runs)
PHASES = {
    "start_ray": (ray_start, "start_ray", "before"),  # the sweep's marker is written; Ray is not started
    "fit": (tune.Tuner, "fit", "before"),  # Ray is up; Tune has not started
    "trial_start": (
        ray_tune._TrialDone,
        "on_trial_start",
        "after",
    ),  # the K-th trial was started (trials are being created)
    "trial_result": (ray_tune._TrialDone, "on_trial_result", "after"),  # the K-th result reached the driver
    "trial_complete": (ray_tune._TrialDone, "on_trial_complete", "after"),  # the K-th trial finished
    "saved": (state, "save_result", "after"),  # every trial done and the results saved; MLflow has the live record
    "record_cell": (tracking, "_record_cell", "before"),  # MLflow has the parent run and K-1 of its children
    "recorded": (tracking, "record_sweep", "after"),  # MLflow has the whole record; the marker does not say so
    "marked": (state, "set_recorded", "after"),  # recorded and marked; the process has not exited
}


SIGNALS = {"int": signal.SIGINT, "stop": signal.SIGSTOP}  # to the driver alone; "kill" goes to its group


def arm(action: str, phase: str, k: int) -> None:
    """Wrap PHASE's function so that its K-th call (in this process) ends in ``action``."""
    owner, name, when = PHASES[phase]
    original = getattr(owner, name)
    calls = 0

    def strike() -> None:
        if action == "hold":
            while not os.path.exists(os.environ["KILL_AT_GATE"]):
                time.sleep(0.1)
        elif action == "kill":
            os.killpg(os.getpgrp(), signal.SIGKILL)
        else:
            os.kill(os.getpid(), SIGNALS[action])

    @wraps(original)
    def wrapped(*args, **kwargs):
        nonlocal calls
        calls += 1
        if when == "before" and calls == k:
            strike()
        out = original(*args, **kwargs)
        if when == "after" and calls == k:
            strike()
        return out

    setattr(owner, name, wrapped)


if __name__ == "__main__":
    arm(sys.argv[1], sys.argv[2], int(sys.argv[3]))
    sys.argv = ["vitsweep", *sys.argv[4:]]
    cli.entry()
