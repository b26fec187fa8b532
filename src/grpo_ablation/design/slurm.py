"""Where each job runs under SLURM: the config's ``slurm`` section (account, GPU partition, CPU
partition) turned into the per-rule resources the SLURM executor plugin reads (``slurm_account``,
``slurm_partition``), and what is missing before a run may submit. Knows nothing of Snakemake.

A job that asks for a GPU goes to ``slurm.gpu_partition``; any other submitted job to
``slurm.cpu_partition``, or, where that is empty, to the cluster's default partition (sbatch
without ``-p``). An empty key adds no resource, so a run without SLURM is unchanged.
"""

from __future__ import annotations

from typing import Any

SECTION = "slurm"


def slurm_resources(slurm: dict[str, Any], gpus: int) -> dict[str, str]:
    """The SLURM resources of a job asking for ``gpus`` GPUs (empty keys left out)."""
    partition = slurm.get("gpu_partition" if gpus else "cpu_partition") or ""
    resources = {"slurm_partition": partition, "slurm_account": slurm.get("account") or ""}
    return {k: str(v) for k, v in resources.items() if v}


def slurm_problems(slurm: dict[str, Any], gpu_jobs: int, no_account: bool) -> list[str]:
    """What keeps a SLURM run from submitting: an empty GPU partition while ``gpu_jobs`` jobs ask
    for a GPU (the cluster's default partition refuses --gpus where it has none, and every retry
    with it), and an empty account unless the run says it has none (``--slurm-no-account``)."""
    problems = []
    if gpu_jobs and not slurm.get("gpu_partition"):
        problems.append(
            f"{SECTION}.gpu_partition is empty, and {gpu_jobs} planned job"
            f"{' asks' if gpu_jobs == 1 else 's ask'} for a GPU: name the partition of the GPU nodes"
        )
    if not no_account and not slurm.get("account"):
        problems.append(
            f"{SECTION}.account is empty: name the account to charge "
            "(`--slurm-no-account` where the cluster has none)"
        )
    return problems


def refusal(problems: list[str], others: list[str] | None = None) -> str:
    """The message of a run refused before its first submission: ``problems`` of the config's
    slurm section (where to set them said after), then ``others`` (each says its own fix)."""
    where = (
        f"\nSet them in the config's `{SECTION}` section (config/cluster.yaml lists it), e.g."
        f" a file holding `{SECTION}: {{account: ..., gpu_partition: ..., cpu_partition: ...}}`"
        " added last to --configfile."
        if problems
        else ""
    )
    text = "SLURM run refused before any job was submitted:"
    return (
        text
        + "".join(f"\n  {p}" for p in problems)
        + where
        + "".join(f"\n  {o}" for o in others or [])
    )
