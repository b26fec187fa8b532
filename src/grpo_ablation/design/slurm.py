"""Where each job runs under SLURM: the config's ``slurm`` section (account, GPU partition, CPU
partition) turned into the per-rule resources the SLURM executor plugin reads (``slurm_account``,
``slurm_partition``), and what is missing before a run may submit. Knows nothing of Snakemake.

A job that asks for a GPU goes to ``slurm.gpu_partition``; any other submitted job to
``slurm.cpu_partition``, or, where that is empty, to the cluster's default partition (sbatch
without ``-p``). An empty key adds no resource, so a run without SLURM is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from grpo_ablation.settings import from_dict, option

SECTION = "slurm"


@dataclass(frozen=True)
class SlurmConfig:
    """The ``slurm`` section, declared once; any key left out takes its default."""

    account: str = option("", "charged for every job (sbatch -A)")
    gpu_partition: str = option(
        "", "partition of the jobs that ask for a GPU (train, evaluate, a GPU warm start)"
    )
    cpu_partition: str = option(
        "",
        "partition of the submitted jobs that need no GPU (diagnostics, push, a CPU warm start); "
        "empty: the cluster's default partition. Bookkeeping, tables and figures run on the "
        "submit host",
    )

    @classmethod
    def of(cls, section: dict[str, Any] | None) -> SlurmConfig:
        return from_dict(cls, section, SECTION)


def slurm_resources(section: dict[str, Any] | None, gpus: int) -> dict[str, str]:
    """The SLURM resources of a job asking for ``gpus`` GPUs (empty keys left out)."""
    slurm = SlurmConfig.of(section)
    partition = slurm.gpu_partition if gpus else slurm.cpu_partition
    resources = {"slurm_partition": partition, "slurm_account": slurm.account}
    return {k: v for k, v in resources.items() if v}


def slurm_problems(section: dict[str, Any] | None, gpu_jobs: int, no_account: bool) -> list[str]:
    """What keeps a SLURM run from submitting: an empty GPU partition while ``gpu_jobs`` jobs ask
    for a GPU (the cluster's default partition refuses --gpus where it has none, and every retry
    with it), and an empty account unless the run says it has none (``--slurm-no-account``)."""
    slurm = SlurmConfig.of(section)
    problems = []
    if gpu_jobs and not slurm.gpu_partition:
        problems.append(
            f"{SECTION}.gpu_partition is empty, and {gpu_jobs} planned job"
            f"{' asks' if gpu_jobs == 1 else 's ask'} for a GPU: name the partition of the GPU nodes"
        )
    if not no_account and not slurm.account:
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
