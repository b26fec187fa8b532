"""Evaluation packed per SLURM allocation: submissions saved and start-up shared.

On a cluster each evaluation job is its own sbatch, paying the queue and the process start-up
for a few seconds of generation. The SLURM profile can pack them (``group-components``, opt in):
``PACK`` jobs to an allocation, sharing its job worker. ``packed_evaluation`` runs a finished
SLURM experiment's evaluation jobs again packed and compares submissions and the share of each
job outside generation; ``slurm_packing`` does it on a single-node SLURM of this machine
(``benchmarks.local_slurm``), and tests/test_slurm.py on the test cluster.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.evaluation import evaluation_overhead
from benchmarks.records import ROOT

PACK = 8  # evaluation jobs per allocation in the packed run (profiles/slurm: group-components)
PACKING_FLAGS = ["--group-components", f"evaluation={PACK}", "--resources", "eval_slots=1"]
# how the result names the two runs it compares: unpacked first
SIDES = ("one per allocation", "packed")


def _submissions(logs: Path, prefix: str) -> int:
    """sbatch submissions the SLURM plugin logged under ``<logs>/<prefix>*/`` (one log each; a
    group job's folder is ``group_<group>_<rules>``)."""
    return sum(len(list(d.rglob("*.log"))) for d in logs.glob(f"{prefix}*") if d.is_dir())


def _snakemake(cmd: list[str], what: str, cwd: Path, env: dict[str, str]) -> None:
    """Run a Snakemake command through the SLURM profile; raise with its output's tail if it
    fails."""
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=1800)
    if done.returncode:
        raise RuntimeError(f"{what} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")


def packed_evaluation(
    snakemake: list[str], exp: Path, logs: Path, env: dict[str, str], cwd: Path
) -> dict[str, Any]:
    """The evaluation jobs of a finished SLURM run, run again packed ``PACK`` to an allocation.

    ``snakemake`` is the command that ran the experiment through ``--profile profiles/slurm`` (with
    ``--slurm-logdir logs``). Before: one sbatch per evaluation job, each paying its own start-up.
    After: one sbatch per pack, whose jobs share the allocation's job worker.
    """
    before = evaluation_overhead(exp)
    # The evaluation rules are the group "evaluation": unpacked, one allocation per job.
    submitted = _submissions(logs, "group_evaluation")
    _snakemake(
        [*snakemake, "--forcerun", "evaluate", "evaluate_base", *PACKING_FLAGS],
        "packed evaluation run",
        cwd,
        env,
    )
    sides = dict(zip(SIDES, (before, evaluation_overhead(exp)), strict=True))
    compared = ("median_outside_generation", "pooled_outside_generation", "jobs_in_worker")
    return {
        "benchmark": "slurm_packed_evaluation",
        "what": f"evaluation jobs through a single-node SLURM: one sbatch each vs {PACK} per allocation",
        "target": "fewer submissions, shorter evaluation jobs",
        # the base policy's evaluation (benchmarks/evaluate/base.tsv) included
        "evaluation_jobs": len(before["jobs"]),
        "sbatch_before": submitted,
        "sbatch_after": _submissions(logs, "group_evaluation") - submitted,
        **{key: {side: r[key] for side, r in sides.items()} for key in compared},
        "job_wall_s": {
            side: sorted(job["wall_s"] for job in r["jobs"]) for side, r in sides.items()
        },
    }


def slurm_packing() -> dict[str, Any]:
    """Bring up the single-node SLURM, run the smoke config (one seed) through the SLURM
    profile, then its evaluation jobs packed (``packed_evaluation``). Needs root and Debian's
    slurm packages (``benchmarks.local_slurm``); otherwise says why it was skipped."""
    from benchmarks.local_slurm import Cluster, unavailable_reason

    reason = unavailable_reason()
    if reason:
        return {"benchmark": "slurm_packed_evaluation", "skipped": reason}
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        results, logs = tmp / "results", tmp / "slurm_logs"
        override = tmp / "one_seed.yaml"
        override.write_text(f"results_dir: {results}\nseeds: [0]\n")
        cmd = [
            str(Path(sys.executable).with_name("snakemake")),
            "--profile",
            "profiles/slurm",
            "--configfile",
            str(ROOT / "config/smoke.yaml"),
            str(override),
            # no slurmdbd on the local cluster: sacct would never see a job finish
            "--slurm-status-command",
            "squeue",
            "--slurm-init-seconds-before-status-checks",
            "2",
            "--slurm-keep-successful-logs",
            "--slurm-logdir",
            str(logs),
            "--slurm-no-account",  # no accounts on the local cluster
        ]
        env = {
            **os.environ,
            # the jobs' own commands (snakemake, grpo.py) from this environment
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
            "OMP_NUM_THREADS": "1",
        }
        cluster = Cluster(tmp / "slurm")
        cluster.up()
        try:
            _snakemake(cmd, "SLURM run", ROOT, env)
            return packed_evaluation(cmd, results / "smoke", logs, env, ROOT)
        finally:
            cluster.down()
