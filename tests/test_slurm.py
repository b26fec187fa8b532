"""A real SLURM (Debian's slurmctld/slurmd/munge on this machine, as root) runs the smoke config
end to end through `snakemake --profile slurm`: every non-local job goes through sbatch, a
training job cancelled with scancel is resubmitted and the rerun completes the DAG.

The cluster: SLURM 22.05 works in a container without systemd or cgroup delegation with
``proctrack/linuxproc``, ``task/none``, no accounting and ``cgroup/v1`` in cgroup.conf; the
plugin's job step strips ``SLURM_*`` variables, so slurm.conf must sit at its default path
(/etc/slurm/slurm.conf) and an existing one this module did not write is never touched.
``SlurmdParameters=config_overrides`` lets the node advertise the CPUs, memory and (fake,
``File=/dev/...``) GPUs the profile's per-rule resources ask for, so the profile runs unchanged.
Without slurmdbd the plugin must query squeue (sacct would never see a job finish).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = Path(sys.executable).with_name("snakemake")
ETC = Path("/etc/slurm")
MARKER = "# written by grpo-ablation tests/test_slurm.py"
PACKAGES = ["slurmctld", "slurmd", "slurm-client", "munge"]
# What the node advertises (config_overrides): enough for the profile's largest request.
CPUS, MEMORY_MB = 16, 131072
GPU_FILES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/urandom")
LOCAL_RULES = ("prefetch", "splits", "calculations", "eval_tasks", "select_stage1", "all", "tables",
               "stage_figures", "token_weight_figure", "figures")  # fmt: skip


def unavailable_reason() -> str | None:
    """Why a cluster cannot be brought up here (None when it can); installs SLURM if missing."""
    if os.geteuid() != 0:
        return "SLURM test needs root (it starts slurmctld, slurmd and munged itself)"
    if shutil.which("slurmctld") is None:
        if shutil.which("apt-get") is None:
            return "slurmctld is not installed and apt-get is unavailable"
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        done = subprocess.run(["apt-get", "install", "-y", "-qq", *PACKAGES], env=env,
                              capture_output=True, text=True)  # fmt: skip
        if done.returncode or shutil.which("slurmctld") is None:
            return f"apt-get install {' '.join(PACKAGES)} failed: {done.stderr[-500:]}"
    conf = ETC / "slurm.conf"
    if conf.exists() and MARKER not in conf.read_text():
        return f"{conf} belongs to a real SLURM installation; refusing to replace it"
    if subprocess.run(["pgrep", "-x", "slurmctld"], capture_output=True).returncode == 0:
        return "a slurmctld is already running here; refusing to start a second one"
    return None
class Cluster:
    """Start with :meth:`up`, stop with :meth:`down` (which removes the files it wrote)."""

    def __init__(self, state: Path, min_job_age: int = 300) -> None:
        self.state = state
        self.node = socket.gethostname().split(".")[0]
        self.min_job_age = min_job_age
        self.procs: list[subprocess.Popen] = []
        self.ctld_log = state / "slurmctld.log"

    def _write_conf(self) -> None:
        spool = self.state / "spool"
        for d in (spool / "ctld", spool / "d"):
            d.mkdir(parents=True, exist_ok=True)
        ETC.mkdir(parents=True, exist_ok=True)
        (ETC / "slurm.conf").write_text(f"""{MARKER}
ClusterName=grpotest
SlurmctldHost={self.node}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation={spool / "ctld"}
SlurmdSpoolDir={spool / "d"}
SlurmctldPidFile={self.state / "slurmctld.pid"}
SlurmdPidFile={self.state / "slurmd.pid"}
SlurmctldLogFile={self.ctld_log}
SlurmdLogFile={self.state / "slurmd.log"}
SlurmctldDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
MinJobAge={self.min_job_age}
GresTypes=gpu
SlurmdParameters=config_overrides
NodeName={self.node} CPUs={CPUS} RealMemory={MEMORY_MB} Gres=gpu:{len(GPU_FILES)} State=UNKNOWN
PartitionName=debug Nodes={self.node} Default=YES MaxTime=INFINITE State=UP
""")
        (ETC / "cgroup.conf").write_text(f"{MARKER}\nCgroupPlugin=cgroup/v1\n")
        gres = "".join(f"Name=gpu File={f}\n" for f in GPU_FILES)
        (ETC / "gres.conf").write_text(f"{MARKER}\n{gres}")

    def up(self, timeout: float = 60) -> None:
        self._write_conf()
        run = Path("/run/munge")
        run.mkdir(parents=True, exist_ok=True)
        shutil.chown(run, "munge", "munge")
        if subprocess.run(["pgrep", "-x", "munged"], capture_output=True).returncode:
            self.procs.append(subprocess.Popen(["runuser", "-u", "munge", "--", "munged", "-F"]))
        # Started by hand: the package scripts are blocked from starting services here.
        for cmd in (["slurmctld", "-D", "-i"], ["slurmd", "-D"]):
            self.procs.append(
                subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            )
        deadline = time.time() + timeout
        while time.time() < deadline:
            state = subprocess.run(["sinfo", "-h", "-N", "-o", "%T"], capture_output=True, text=True)
            if state.returncode == 0 and state.stdout.strip() in ("idle", "mixed", "allocated"):
                break
            time.sleep(1)
        else:
            self.down()
            raise RuntimeError(f"SLURM node did not come up; see {self.ctld_log}")
        subprocess.run(["scontrol", "update", f"NodeName={self.node}", f"Gres=gpu:{len(GPU_FILES)}"], check=True)

    def jobs(self) -> list[dict[str, str]]:
        """Jobs slurmctld still knows (squeue: no accounting database here)."""
        out = subprocess.run(["squeue", "-h", "-o", "%i|%T|%j|%k"], capture_output=True,
                             text=True, check=True).stdout  # fmt: skip
        keys = ("id", "state", "name", "comment")
        return [dict(zip(keys, line.split("|", 3), strict=True)) for line in out.splitlines()]

    def down(self) -> None:
        subprocess.run(["scancel", "--full", "--user=root"], capture_output=True)
        for proc in reversed(self.procs):
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs.clear()
        for name in ("slurm.conf", "cgroup.conf", "gres.conf"):
            path = ETC / name
            if path.exists() and MARKER in path.read_text():
                path.unlink()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    c = Cluster(tmp_path_factory.mktemp("slurm"))
    c.up()
    yield c
    c.down()


def _snakemake(results: Path, logs: Path) -> list[str]:
    # One seed: the whole smoke DAG (every stage, the stage-1 checkpoint) at half the jobs; every
    # training job runs two processes (torchrun, gloo) inside its allocation.
    override = results.parent / "one_seed.yaml"
    override.write_text(f"results_dir: {results}\nseeds: [0]\ncompute:\n  processes_per_train_job: 2\n")
    return [str(SNAKEMAKE), "--profile", "slurm", "--configfile", "config/smoke.yaml", str(override),
            # No slurmdbd here: squeue, polled early (MinJobAge 300 >= 3 x 2 s keeps squeue).
            "--slurm-status-command", "squeue", "--slurm-init-seconds-before-status-checks", "2",
            "--slurm-keep-successful-logs", "--slurm-logdir", str(logs)]  # fmt: skip


def test_the_smoke_config_runs_through_slurm_and_survives_scancel(cluster, tmp_path):
    results, logs = tmp_path / "results", tmp_path / "slurm_logs"
    # Jobs inherit the submitting environment: the venv's python must come first on PATH.
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "OMP_NUM_THREADS": "1"}  # fmt: skip
    first = subprocess.Popen(_snakemake(results, logs), cwd=ROOT, env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
    cancelled = None
    deadline = time.time() + 600
    while cancelled is None and first.poll() is None and time.time() < deadline:
        running = [j for j in cluster.jobs() if j["state"] == "RUNNING" and "rule_train" in j["comment"]]
        if running:
            time.sleep(3)  # let it get going: the rerun must cope with a half-written run
            cancelled = running[0]
            subprocess.run(["scancel", cancelled["id"]], check=True)
        time.sleep(0.5)
    out, _ = first.communicate(timeout=900)
    assert cancelled is not None, f"no training job was seen running:\n{out[-3000:]}"

    second = subprocess.run(_snakemake(results, logs), cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=900)  # fmt: skip
    assert second.returncode == 0, second.stdout[-4000:]

    exp = results / "smoke"
    runs = sorted(exp.glob("runs/**/run_info.json"))
    evals = sorted(exp.glob("eval/std=*/**/test/summary.json"))
    assert len(runs) >= 4 and len(evals) == len(runs)
    assert (exp / "eval/base/test/summary.json").exists()
    assert (exp / "calculations/calculations.md").exists()
    # Two processes per cell, the cancelled one included: both ranks' rollout rows, each once.
    from grpo_ablation.rollout_log import read_rollouts

    for info in runs:
        run = info.parent
        assert json.loads((run / "objective.json").read_text())["num_processes"] == 2
        rows = read_rollouts(run / "rollouts")
        assert set(rows["rank"]) == {0, 1}
        assert not rows.duplicated(["step", "group_index", "completion_index"]).any()
        assert len(rows) == json.loads((run / "budget.json").read_text())["completions"]

    # Every non-local job went through sbatch (the plugin logs each job under rule_<name>/);
    # local rules never did.
    submitted = {p.name: p for p in logs.iterdir()}
    assert len(list(submitted["rule_train"].iterdir())) == len(runs)
    assert len(list(submitted["rule_evaluate"].iterdir())) == len(evals)
    for rule in ("rule_base_policy", "rule_evaluate_base"):
        assert rule in submitted
    assert not {f"rule_{r}" for r in LOCAL_RULES} & set(submitted)
    slurm_logs = list(logs.rglob("*.log"))
    ctld = cluster.ctld_log.read_text()
    batch_jobs = set(re.findall(r"_slurm_rpc_submit_batch_job: JobId=(\d+)", ctld))
    assert {p.stem for p in slurm_logs} <= batch_jobs

    # The cancelled job was submitted again (a retry in the first run or the rerun) and finished.
    resubmitted = [d for d in submitted["rule_train"].iterdir() if len(list(d.glob("*.log"))) > 1]
    assert resubmitted, "the cancelled training job was never resubmitted"
    assert cancelled["id"] in {p.stem for d in resubmitted for p in d.glob("*.log")}
