"""Every process-wide setting vitsweep makes, in one place, each with the reason it exists.

Importing this module applies those every process needs: the environment defaults (a value the
user set wins) and glibc's allocator setting; the Ray Jobs client, the MLflow UI server and the
workers of a sweep's Ray (services.execution.ray_start.start_ray) get their own sets where they
start. services/__init__.py imports it, so any import of services (the CLI, a Ray Tune trial, the
benchmarks) applies it before Ray or MLflow, which read some of these variables at import, are
imported. One setting is not process-wide and stays with its one caller: the Ray constant start_local_ray
swaps for one ray.init (services.execution.ray_start).
"""

import atexit
import ctypes
import ctypes.util
import gc
import os

ENVIRONMENT: dict[str, tuple[str, str]] = {  # name: (value, why)
    "RAY_AIR_NEW_OUTPUT": ("0", "read by Tuner.fit: no Tune tables; vitsweep shows its own progress"),
    "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": (
        "1",
        "read by Tuner.fit: Tune's loggers are those a sweep's tuner names, not its TensorBoard one too "
        "(tensorboardX imports torch into the driver; MLflow is the tracker)",
    ),
    "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": (
        "true",
        "MLflow prints 'View run ... at: <tracking URI>' per run, credentials and all",
    ),
    "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": ("false", "MLflow draws a progress bar per artifact it reads"),
}
CLIENT_ENVIRONMENT: dict[str, tuple[str, str]] = {  # for a Ray Jobs client only (submit, a cluster's status)
    "RAY_AUTH_MODE": (
        "token",
        "read at Ray's import: Ray 2.60 heads require their token (a local ray.init with it set wants a token too)",
    ),
}
WORKER_ENVIRONMENT: dict[str, tuple[str, str]] = {  # for the processes Ray starts a sweep's trials in
    "MALLOC_ARENA_MAX": (
        "1",
        "Ray Tune runs a trial's function in a thread, and glibc gives a thread an arena of its own whose"
        " heaps it unmaps as they empty, whatever keep_freed_memory asks of the main one: the evaluations"
        " of sample_complexity_premises' packs faulted their pages in anew each time (its sweep 1.7x longer)."
        " Read once, as a process starts: set through start_ray's runtime env, not here",
    ),
}
UI_ENVIRONMENT: dict[str, tuple[str, str]] = {  # for the `vitsweep ui` server only
    "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": (
        "false",
        "MLflow 3's server starts eight processes for GenAI scorers and trace rollups, which sweeps never use",
    ),
}
_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4  # glibc's mallopt parameters


def not_set(settings: dict[str, tuple[str, str]]) -> dict[str, str]:
    """The values of ``settings`` whose variables this process has not set already (the user's win)."""
    return {name: value for name, (value, _why) in settings.items() if name not in os.environ}


def apply_environment(settings: dict[str, tuple[str, str]] = ENVIRONMENT) -> None:
    """Set each variable of ``settings`` unless the user has set it."""
    os.environ.update(not_set(settings))


def keep_freed_memory() -> bool:
    """Ask glibc to serve large blocks from the heap and never trim it; True when it did.

    A packed training step allocates and frees tensors of tens of MB. By default glibc serves
    each from a fresh mmap and unmaps it on free, so every step pays page faults on all its
    memory: measured here, a K=256 ViT step 1.6x and an evaluation 2x slower. It holds for the
    main thread's arena (other threads': WORKER_ENVIRONMENT) and changes nothing where the C
    library is not glibc."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_MAX, 0)) and bool(mallopt(_M_TRIM_THRESHOLD, 2**31 - 1))


def freeze_garbage_at_exit() -> None:
    """Freeze the garbage collector once the atexit handlers registered before this one (Ray's
    shutdown among them) are done: Python's finalization otherwise runs full collections over
    every object torch, Ray and MLflow made, ~2 s after every sweep."""
    atexit.register(gc.freeze)


apply_environment()
keep_freed_memory()
