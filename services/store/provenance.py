"""Where a sweep's results came from, in MLflow's own tags: the git commit of the code (read where the
code is: its checkout, or VITSWEEP_GIT_COMMIT, which `vitsweep submit` and the image's build set where
no .git travels), whether the checkout had uncommitted changes, the hash of vit_core that keys the
result cache, the machine its driver ran on, and the spec's opening comment as the run's description.
A hash of the resolved spec's fields that results depend on (spec_hash) tells, with vit_core's, whether
a measurement was taken at the spec and the science as they are now (services.store.registry)."""

import hashlib
import json
import os
import platform
import re
import subprocess
from functools import cache
from pathlib import Path

from services.store.cache import vit_core_hash

PROJECT_ROOT = Path(__file__).resolve().parents[2]
GIT_COMMIT_ENV, GIT_DIRTY_ENV = "VITSWEEP_GIT_COMMIT", "VITSWEEP_GIT_DIRTY"  # where the code came without .git
COMMIT_TAG, SOURCE_TAG, NOTE_TAG = "mlflow.source.git.commit", "mlflow.source.name", "mlflow.note.content"
DIRTY_TAG, SCIENCE_TAG = "vitsweep.git_dirty", "vitsweep.vit_core_hash"
MACHINE_TAG = "vitsweep.machine"  # the driver's machine: its CPU model and count, its system
# a resolved spec's fields no result depends on: where it is logged, what a trial is given, the size limit
RESULT_FREE_FIELDS = frozenset({"tracking", "resources", "max_trainings"})


def _git(*args: str) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True, cwd=PROJECT_ROOT, timeout=10)
    except OSError:  # no git here
        return None


@cache
def git_commit() -> str | None:
    """The commit of this code: VITSWEEP_GIT_COMMIT where set, else its checkout's HEAD; None
    where neither says (a copy of the code without its history)."""
    if os.environ.get(GIT_COMMIT_ENV):
        return os.environ[GIT_COMMIT_ENV]
    head = _git("rev-parse", "--verify", "HEAD")
    return head.stdout.strip() if head is not None and head.returncode == 0 else None


def uncommitted() -> bool | None:
    """Whether the checkout's tracked files differ from its commit (None: not known here)."""
    if os.environ.get(GIT_COMMIT_ENV):  # a shipped copy: what its sender's checkout said
        return {"true": True, "false": False}.get(os.environ.get(GIT_DIRTY_ENV, ""))
    diff = _git("diff", "--quiet", "HEAD", "--")
    return None if diff is None or diff.returncode not in (0, 1) else diff.returncode == 1


def shipped() -> dict[str, str]:
    """The environment that tells a copy of this code (a Ray job's upload) its commit and state."""
    if (commit := git_commit()) is None:
        return {}
    dirty = uncommitted()
    return {GIT_COMMIT_ENV: commit} | ({} if dirty is None else {GIT_DIRTY_ENV: str(dirty).lower()})


def description(spec_text: str) -> str:
    """The spec's opening comment (what it reproduces, what to expect, its time and command), unmarked."""
    lines = []
    for line in spec_text.splitlines():
        if not line.startswith("#"):
            break
        lines.append(line[1:].removeprefix(" "))
    return "\n".join(lines)


def run_tags(spec_text: str) -> dict[str, str]:
    """The parent run's provenance tags (a commit MLflow's UI links to, where one is known)."""
    tags = {SOURCE_TAG: "vitsweep run", SCIENCE_TAG: vit_core_hash(), MACHINE_TAG: machine()}
    if (commit := git_commit()) is not None:
        tags[COMMIT_TAG] = commit
    if (dirty := uncommitted()) is not None:
        tags[DIRTY_TAG] = str(dirty).lower()
    if text := description(spec_text):
        tags[NOTE_TAG] = text
    return tags


def spec_hash(spec) -> str:
    """A hash of a resolved spec (a SweepSpec) less RESULT_FREE_FIELDS: a spec whose comments, layout,
    tracking or resources changed hashes the same; one whose grid, data, model or training changed not."""
    fields = spec.model_dump(mode="json", exclude=set(RESULT_FREE_FIELDS))
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


@cache
def machine() -> str:
    """This machine in a few words: its CPU model and count, its system and architecture."""
    return f"{_cpu_model()}, {os.cpu_count()} CPUs, {platform.system()} {platform.machine()}"


def cpus_of(machine_text: str) -> int | None:
    """The CPU count a machine() text names (None: it names none)."""
    found = re.search(r"\b(\d+) CPUs\b", machine_text)
    return int(found.group(1)) if found else None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:  # no /proc here (macOS, Windows)
        pass
    return platform.processor() or "unknown CPU"
