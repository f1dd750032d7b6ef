"""Submit `vitsweep run` of a spec to a Ray cluster through the Ray Jobs API, and follow the job."""

import asyncio
import shlex
import time
from collections.abc import Callable
from pathlib import Path

from services import process
from services.store import provenance

process.apply_environment(process.CLIENT_ENVIRONMENT)
from ray.job_submission import JobSubmissionClient  # noqa: E402  (after: Ray reads RAY_AUTH_MODE at import)

PROJECT_ROOT = Path(__file__).resolve().parents[2]
UPLOAD_EXCLUDES = [".venv", ".git", "runs", "bench/results", "**/__pycache__", "*.egg-info"]
AGENT_WAIT_S = 60  # a head answers "No available agent" for a while after it starts


def submit(
    spec_path: Path, spec_name: str, address: str, tracking_uri: str | None, home: str | None
) -> tuple[JobSubmissionClient, str]:
    """Upload the project (its working tree, less UPLOAD_EXCLUDES) and start `vitsweep run` of the
    spec on the cluster at ``address``: (the client, the job id)."""
    command = ["vitsweep", "run", spec_path.resolve().relative_to(PROJECT_ROOT).as_posix(), "--json"]
    command += ["--tracking-uri", tracking_uri] if tracking_uri else []
    command += ["--home", home] if home else []
    client = JobSubmissionClient(address)
    job_id = submit_when_ready(
        client,
        entrypoint=" ".join(map(shlex.quote, command)),
        runtime_env={"working_dir": str(PROJECT_ROOT), "excludes": UPLOAD_EXCLUDES, "env_vars": provenance.shipped()},
        metadata={"vitsweep.spec": spec_name},
    )
    return client, job_id


def submit_when_ready(client, **job) -> str:
    """client.submit_job, asking again while a freshly started head says its job agent is not
    up yet (Ray answers "No available agent to submit job, please try again later")."""
    deadline = time.monotonic() + AGENT_WAIT_S
    while True:
        try:
            return client.submit_job(**job)
        except RuntimeError as error:
            if "No available agent" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(2)


def follow(client: JobSubmissionClient, job_id: str, write: Callable[[str], None]) -> str:
    """Write the job's log as the job writes it (its progress lines as they come), until it ends:
    its status. Where the log's connection breaks first, the rest is written once the job ends."""
    written = 0

    async def tail() -> None:
        nonlocal written
        async for text in client.tail_job_logs(job_id):
            write(text)
            written += len(text)

    try:
        asyncio.run(tail())
    except RuntimeError:  # Ray's tail: the connection closed before the job ended
        while not client.get_job_status(job_id).is_terminal():
            time.sleep(2)
        write(client.get_job_logs(job_id)[written:])
    return client.get_job_status(job_id).value
