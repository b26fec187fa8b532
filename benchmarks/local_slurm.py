"""A real single-node SLURM on this machine, for the SLURM tests and the packing benchmark.

Debian's slurmctld/slurmd/munge (installed with apt-get if missing), started by hand as root.
SLURM 22.05 works in a container without systemd or cgroup delegation with
``proctrack/linuxproc``, ``task/none``, no accounting and ``cgroup/v1`` in cgroup.conf; the
executor plugin's job step strips ``SLURM_*`` variables, so slurm.conf must sit at its default
path (/etc/slurm/slurm.conf) and an existing one this module did not write is never touched.
``SlurmdParameters=config_overrides`` lets the node advertise the CPUs, memory and (fake,
``File=/dev/...``) GPUs the profile's per-rule resources ask for, so the profile runs unchanged.
Without slurmdbd the plugin must query squeue (sacct would never see a job finish).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

ETC = Path("/etc/slurm")
MARKER = "# written by grpo-ablation tests/test_slurm.py"  # (benchmarks.local_slurm)
PACKAGES = ["slurmctld", "slurmd", "slurm-client", "munge"]
# What the node advertises (config_overrides): enough for the profile's largest request.
CPUS, MEMORY_MB = 16, 131072
GPU_FILES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/urandom")
# A second partition on the same node, not the default: a job lands in it only when asked to
# (the config's slurm.cpu_partition), so the test sees where each job was sent.
CPU_PARTITION = "cpu"


def unavailable_reason() -> str | None:
    """Why a cluster cannot be brought up here (None when it can); installs SLURM if missing."""
    if os.geteuid() != 0:
        return "SLURM test needs root (it starts slurmctld, slurmd and munged itself)"
    if shutil.which("slurmctld") is None:
        if shutil.which("apt-get") is None:
            return "slurmctld is not installed and apt-get is unavailable"
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        done = subprocess.run(
            ["apt-get", "install", "-y", "-qq", *PACKAGES], env=env, capture_output=True, text=True
        )
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
PartitionName={CPU_PARTITION} Nodes={self.node} Default=NO MaxTime=INFINITE State=UP
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
            state = subprocess.run(
                ["sinfo", "-h", "-N", "-o", "%T"], capture_output=True, text=True
            )
            # one line per partition the node is in
            states = set(state.stdout.split())
            if state.returncode == 0 and states and states <= {"idle", "mixed", "allocated"}:
                break
            time.sleep(1)
        else:
            self.down()
            raise RuntimeError(f"SLURM node did not come up; see {self.ctld_log}")
        subprocess.run(
            ["scontrol", "update", f"NodeName={self.node}", f"Gres=gpu:{len(GPU_FILES)}"],
            check=True,
        )

    def jobs(self) -> list[dict[str, str]]:
        """Jobs slurmctld still knows (squeue: no accounting database here)."""
        out = subprocess.run(
            ["squeue", "-h", "-o", "%i|%T|%P|%j|%k"], capture_output=True, text=True, check=True
        ).stdout
        keys = ("id", "state", "partition", "name", "comment")
        return [dict(zip(keys, line.split("|", 4), strict=True)) for line in out.splitlines()]

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
