"""vitsweep through a real Slurm on this machine: munged, slurmctld and two slurmd (nodes n1 and n2,
`slurmd -N`, each on a port of its own on 127.0.0.1) with a config written here; the smoke sweep
submitted with deploy/slurm/vitsweep.sbatch on both nodes (a Ray node on each) and read back with
`vitsweep report`; then, on one node, a sweep cancelled (scancel) mid-way and submitted again, which
finishes with no model trained twice, in one MLflow record, and one requeued before its time limit.
Everything started here is stopped by its pid."""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import BIN, mlflow_server_at, pick_free_port, wait_until
from mlflow.tracking import MlflowClient

from services.store import state

ROOT = Path(__file__).parents[1]
SCRIPT = ROOT / "deploy" / "slurm" / "vitsweep.sbatch"
DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "scontrol", "scancel")
SMOKE_MODELS = 32  # sweeps/smoke.yaml: 4 cells x 2 N x 4 seeds
SMOKE_CELLS = 4
LIVE = ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING")  # a job's states before it has ended
NODES = ("n1", "n2")  # one slurmd each (`slurmd -N NAME`), both this machine

pytestmark = [
    pytest.mark.system,
    pytest.mark.skipif(
        any(shutil.which(d) is None for d in DAEMONS) or os.geteuid() != 0,
        reason="needs Slurm and munge (make system-tools installs Debian's slurm-wlm and munge) and root, "
        "which runs slurmd here",
    ),
]

# cred_expire=10: a requeued job may start again 11 s after it requeued (Slurm holds it back for the
# credentials' lifetime, 120 s by default, which the requeue test waited out)
# KillWait=5: a cancelled job's processes get SIGKILL 5 s after SIGTERM (Slurm's default: 30 s), which
# a driver whose Ray died of the same SIGTERM waits for (the cancelled test took 74 s at 30 s, 45 s at 5)
CONFIG = """ClusterName=vitsweeptest
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort={ctld_port}
AuthType=auth/munge
AuthInfo=socket={dir}/munge.sock,cred_expire=10
CredType=cred/munge
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool/%n
SlurmctldPidFile={dir}/slurmctld.pid
SlurmdPidFile={dir}/slurmd-%n.pid
SlurmctldLogFile={dir}/slurmctld.log
SlurmdLogFile={dir}/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MinJobAge=3600
KillWait=5
ReturnToService=2
MpiDefault=none
{nodes}
PartitionName=test Nodes={names} Default=YES MaxTime=INFINITE State=UP
"""
# Each node on this machine's address, told apart by its slurmd's port; as many CPUs as the machine
# has, so that a one-node job gets the script's --cpus-per-task=2 as on one real node
NODE = "NodeName={name} NodeAddr=127.0.0.1 Port={port} CPUs={cpus} State=UNKNOWN"


class Slurm:
    """A Slurm cluster of the nodes NODES in ``folder`` (short: munge's and Ray's socket paths)."""

    def __init__(self, folder: Path):
        self.dir, self.procs, self.jobs = folder, [], []
        for sub in ("state", *(f"spool/{name}" for name in NODES)):
            (folder / sub).mkdir(parents=True)
        key = folder / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        self.conf = folder / "slurm.conf"
        self.conf.write_text(
            CONFIG.format(
                host=socket.gethostname().split(".")[0],
                ctld_port=pick_free_port(),
                dir=folder,
                nodes="\n".join(NODE.format(name=name, port=pick_free_port(), cpus=os.cpu_count()) for name in NODES),
                names=",".join(NODES),
            )
        )
        # a user's first job: a home of its own, with no ~/.ray/auth_token from an earlier Ray on this machine
        (folder / "user").mkdir()
        self.env = {**os.environ, "SLURM_CONF": str(self.conf), "HOME": str(folder / "user")}
        munge = ["munged", "-F", "--force", f"--key-file={key}", f"--socket={folder}/munge.sock"]
        munge += [f"--pid-file={folder}/munged.pid", f"--seed-file={folder}/munge.seed"]
        munge += [f"--log-file={folder}/munged.log"]
        self._start(munge, "munged")
        wait_until(lambda: (folder / "munge.sock").exists(), "munged's socket", self.procs[-1])
        self._start(["slurmctld", "-D", "-i", "-f", str(self.conf)], "slurmctld")
        for name in NODES:
            self._start(["slurmd", "-D", "-N", name, "-f", str(self.conf)], f"slurmd-{name}")
        idle = f"{len(NODES)} idle"
        wait_until(lambda: self.run("sinfo", "-h", "-o", "%D %T").stdout.strip() == idle, "the nodes idle")

    def _start(self, command: list[str], name: str) -> None:
        with open(self.dir / f"{name}.out", "w") as log:  # the daemon keeps its own copy of the file
            self.procs.append(subprocess.Popen(command, env=self.env, stdout=log, stderr=subprocess.STDOUT))

    def run(self, *command: str, **kwargs) -> subprocess.CompletedProcess:
        return subprocess.run(command, env=self.env, capture_output=True, text=True, **kwargs)

    def submit(self, spec: str, home: Path, *extra: str, sbatch: tuple[str, ...] = (), **env: str) -> str:
        """sbatch of the project's script (``sbatch``: options of sbatch's own), from the project's
        folder, as a user types it."""
        out = self.dir / "job-%j.out"
        done = subprocess.run(
            ["sbatch", "--parsable", f"--output={out}", *sbatch, str(SCRIPT), spec, "--json", *extra],
            env={**self.env, "VITSWEEP_HOME": str(home), **env},
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
        self.jobs.append(done.stdout.strip().split(";")[0])
        return self.jobs[-1]

    def state(self, job: str) -> str:
        shown = self.run("scontrol", "show", "job", job).stdout
        return shown.split("JobState=")[1].split()[0] if "JobState=" in shown else "UNKNOWN"

    def wait(self, job: str) -> str:
        """Until the job has ended: its final state."""
        wait_until(lambda: self.state(job) not in LIVE, f"job {job}")
        return self.state(job)

    def wait_for_models(self, job: str, cached: Path) -> None:
        """Until the job's first models are in the result cache ``cached``; the test fails, with the
        job's output, where the job ends first."""

        def seen() -> bool:
            if cached.exists() and any(f.is_file() for f in cached.rglob("*")):
                return True
            if (now := self.state(job)) not in LIVE:
                pytest.fail(f"job {job} ended {now} before its first models: {self.output(job)[-3000:]}")
            return False

        wait_until(seen, f"job {job}'s first models")

    def output(self, job: str) -> str:
        return (self.dir / f"job-{job}.out").read_text()

    def stop(self) -> None:
        """Its jobs cancelled and ended (their steps outlive the daemons), then the daemons, by pid."""
        for job in self.jobs:
            self.run("scancel", job)
        for job in self.jobs:
            self.wait(job)
            wait_until(lambda job=job: no_ray_of(job), f"job {job}'s Ray to stop")
            for temp in Path("/tmp").glob(f"ray-{job}-*"):  # its Ray's logs, a folder per node (the script keeps them)
                shutil.rmtree(temp, ignore_errors=True)
        for proc in reversed(self.procs):
            proc.terminate()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture(scope="module")
def slurm():
    folder = Path(tempfile.mkdtemp(prefix="slurm", dir="/tmp"))
    cluster = Slurm(folder)
    try:
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def tracking(tmp_path_factory):
    """The MLflow server the jobs log to (the script's TRACKING_URI), as a cluster would have one."""
    with mlflow_server_at(pick_free_port(), tmp_path_factory.mktemp("mlflow")) as url:
        yield url


def summary(output: str) -> dict:
    """The last JSON line `vitsweep run --json` printed in a job's output."""
    return json.loads([line for line in output.splitlines() if line.startswith("{")][-1])


def no_ray_of(job: str) -> bool:
    """Whether no process of the job's Ray (its temp dirs /tmp/ray-JOB-NODE) is left on this machine."""
    listed = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return f"/tmp/ray-{job}-" not in listed


def new_runs(client: MlflowClient, earlier: set[str]) -> list:
    """The server's runs but those in ``earlier`` (run ids)."""
    found = client.search_runs([e.experiment_id for e in client.search_experiments()])
    return [r for r in found if r.info.run_id not in earlier]


def assert_one_finished_record(client: MlflowClient, earlier: set[str]) -> None:
    """The smoke sweep's one record among the runs since ``earlier``: a parent and a child per cell, all FINISHED."""
    runs = new_runs(client, earlier)
    statuses = sorted((r.info.run_name, r.info.status, "mlflow.parentRunId" in r.data.tags) for r in runs)
    assert [child for _, _, child in statuses].count(False) == 1 and len(runs) == 1 + SMOKE_CELLS, statuses
    assert {status for _, status, _ in statuses} == {"FINISHED"}, statuses


def test_the_smoke_sweep_runs_through_sbatch_on_two_nodes_and_its_report_reads_it_back(slurm, tracking, tmp_path):
    """The script's multi-node path: a Ray head on the first node, `ray start --address` on the
    other (one CPU each), the sweep started once both had joined, on both nodes' trial slots. Which
    node trains which trial is Ray's choice (here the head's one trial actor, reused, may train all
    four of the smoke sweep's short trials before the other node's has started). The one-node path
    runs in the tests below."""
    home = tmp_path / "home"
    job = slurm.submit("sweeps/smoke.yaml", home, sbatch=("--nodes=2", "--cpus-per-task=1"), TRACKING_URI=tracking)
    assert slurm.wait(job) == "COMPLETED", slurm.output(job)[-3000:]
    said = slurm.output(job)
    assert "Ray up on 2 of 2 node(s)" in said, said[-3000:]
    ran = summary(said)
    assert ran["trainings"] == SMOKE_MODELS and ran["tracking_uri"] == tracking
    # the driver's trial slots (trials at once) counted every node's CPU, one each
    [sweep_id] = state.sweep_ids(home)
    assert state.load_result(home, sweep_id).slots == len(NODES)
    reported = subprocess.run(
        [str(BIN / "vitsweep"), "report", "--home", str(home), "--tracking-uri", tracking, "--json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert reported.returncode == 0, reported.stderr[-3000:]
    assert json.loads(reported.stdout.strip().splitlines()[-1])["n_star"] == ran["n_star"]
    wait_until(lambda: no_ray_of(job), f"job {job}'s Ray to stop")


def test_a_cancelled_sweep_submitted_again_finishes_with_nothing_trained_twice(slurm, tracking, tmp_path):
    home, gate = tmp_path / "home", tmp_path / "never"
    client = MlflowClient(tracking)  # the server the module's tests share
    earlier = {r.info.run_id for r in new_runs(client, set())}
    # held once its first trial has reported (trials the driver has not started yet wait with it)
    held = f"{sys.executable} {ROOT / 'tests' / 'kill_at.py'} hold trial_complete 1"
    first = slurm.submit("sweeps/smoke.yaml", home, TRACKING_URI=tracking, VITSWEEP=held, KILL_AT_GATE=str(gate))
    cached = home / "cache"
    slurm.wait_for_models(first, cached)
    assert slurm.state(first) == "RUNNING"
    assert slurm.run("scancel", first).returncode == 0
    assert slurm.wait(first) == "CANCELLED"
    wait_until(lambda: no_ray_of(first), f"job {first}'s Ray to stop")
    trained_before = sum(1 for f in cached.rglob("*") if f.is_file())
    assert 0 < trained_before < SMOKE_MODELS

    second = slurm.submit("sweeps/smoke.yaml", home, TRACKING_URI=tracking)
    assert slurm.wait(second) == "COMPLETED", slurm.output(second)[-3000:]
    resumed = summary(slurm.output(second))
    assert resumed["trainings"] == SMOKE_MODELS - trained_before  # each model trained once, in one job or the other
    assert sum(1 for f in cached.rglob("*") if f.is_file()) == SMOKE_MODELS
    # one record, resumed in the runs the cancelled job's live record opened (ended KILLED as the
    # SIGTERM landed, where the driver outlived its Ray long enough), nothing left RUNNING
    assert_one_finished_record(client, earlier)


def test_a_sweep_warned_of_its_time_limit_requeues_itself_and_finishes_in_the_same_runs(slurm, tracking, tmp_path):
    """Slurm's warning before the time limit (the script's --signal=B:USR1@120, sent here as Slurm
    sends it, to the batch script alone, once the first trial finished): the sweep stops with its
    runs KILLED, the job requeues itself and its second start finishes the sweep in the same runs,
    no model trained twice."""
    home, gate = tmp_path / "home", tmp_path / "gate"
    client = MlflowClient(tracking)
    earlier = {r.info.run_id for r in new_runs(client, set())}
    held = f"{sys.executable} {ROOT / 'tests' / 'kill_at.py'} hold trial_complete 1"  # until the gate exists
    job = slurm.submit("sweeps/smoke.yaml", home, TRACKING_URI=tracking, VITSWEEP=held, KILL_AT_GATE=str(gate))
    cached = home / "cache"
    slurm.wait_for_models(job, cached)
    assert slurm.run("scancel", "--batch", "--signal=USR1", job).returncode == 0

    killed = lambda: any(r.info.status == "KILLED" for r in new_runs(client, earlier))  # noqa: E731  (the live record, as the SIGTERM lands)
    wait_until(killed, "the driver taking the warning")
    gate.touch()  # the held trial goes on and Tune stops; the next start of the job passes the gate at once
    wait_until(lambda: "interrupted by SIGTERM" in slurm.output(job), "the driver's own words")
    wait_until(lambda: "Restarts=1" in slurm.run("scontrol", "show", "job", job).stdout, "the job requeued")
    assert slurm.wait(job) == "COMPLETED", slurm.output(job)[-3000:]
    said = slurm.output(job)
    assert "requeued to go on in the same runs" in said and "resuming smoke-" in said, said[-3000:]
    assert summary(said)["trainings"] < SMOKE_MODELS  # the first start's models read from the cache
    assert sum(1 for f in cached.rglob("*") if f.is_file()) == SMOKE_MODELS
    assert_one_finished_record(client, earlier)
