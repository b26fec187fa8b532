"""Several training runs on one GPU (``resources.runs_per_gpu``): the resources each GPU job asks
for so that a scheduler packs N single-GPU runs onto one card. Knows nothing of Snakemake.

A 135 M run leaves most of a GPU idle (decoding is launch-bound). With N > 1:

- a train job asks for no whole GPU (``gpu`` 0) but for one of the card's N ``gpu_slots``; the
  evaluation and GPU warm-start jobs ask for all N slots of each of their GPUs. Locally
  ``snakemake --resources gpu_slots=N`` then runs N train jobs side by side on the machine's GPU
  and an evaluation alone.
- Under SLURM the train jobs form the group ``training``: ``--group-components training=N`` sends
  N of them to one sbatch, and the group asks for one GPU (``gres`` ``gpu:1``, a string that
  Snakemake keeps for the group where it sums ``gpu``), N times the CPUs and memory, and the
  runtime of one job (they run side by side). A run that asks for N per GPU without the group
  size is refused before its first sbatch (``packing_problems``). Packing in one allocation
  works on any SLURM; sharing a card between allocations (MPS or GPU shards as a GRES) needs the
  site to configure it, and each run would still pay its own start-up. Without MPS the runs'
  kernels take turns on the card (time-sliced), which still overlaps one run's host work and
  launches with another's kernels; with an MPS daemon on the node they run at once.

N = 1 (the default) leaves every job's resources as they were.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from grpo_ablation.design.resources import ResourcesConfig

PACK_GROUP = "training"
SLOTS = "gpu_slots"


def runs_per_gpu(resources: Mapping[str, Any]) -> int:
    return ResourcesConfig.of(dict(resources)).runs_per_gpu


def packing_error(resources: Mapping[str, Any], train_gpus: int) -> str | None:
    """Why the config cannot pack its train jobs (None: it can, asks for no packing, or its runs
    take no GPU, which leaves nothing to pack)."""
    n = runs_per_gpu(resources)
    if n > 1 and train_gpus > 1:
        return (
            f"resources.runs_per_gpu {n} packs runs of one GPU each, but a train job asks for "
            f"{train_gpus} (resources.gpus_per_train_job x compute.processes_per_train_job): set "
            "resources.runs_per_gpu: 1, or one GPU and one process per run"
        )
    return None


def train_resources(resources: Mapping[str, Any], train_gpus: int) -> dict[str, Any]:
    """The GPU resources of a train job asking for ``train_gpus`` GPUs."""
    if runs_per_gpu(resources) == 1 or not train_gpus:
        return {"gpu": train_gpus}
    return {"gpu": 0, "gres": "gpu:1", SLOTS: 1}


def gpu_job_resources(resources: Mapping[str, Any], gpus: int) -> dict[str, Any]:
    """The GPU resources of another job (evaluation, a GPU warm start) asking for ``gpus`` whole
    GPUs: with packing, every slot of them too."""
    n = runs_per_gpu(resources)
    return {"gpu": gpus} if n == 1 or not gpus else {"gpu": gpus, SLOTS: gpus * n}


def pack_group(resources: Mapping[str, Any]) -> str | None:
    """The train rule's group: ``training`` when packing, else none (each job alone)."""
    return PACK_GROUP if runs_per_gpu(resources) > 1 else None


def packing_problems(
    resources: Mapping[str, Any], group_components: Mapping[str, int]
) -> list[str]:
    """What keeps a SLURM run from packing as configured: the group size differs from N."""
    n = runs_per_gpu(resources)
    given = group_components.get(PACK_GROUP)
    if n == 1 or given == n:
        return []
    return [
        f"resources.runs_per_gpu is {n} but the group {PACK_GROUP!r} packs "
        f"{given or 'one job'} per sbatch: add --group-components {PACK_GROUP}={n} (in the "
        f'profile: group-components: ["{PACK_GROUP}={n}"], beside any other group)'
    ]


def asks_for_gpu(resources: Mapping[str, Any]) -> bool:
    """Whether a job's resources ask SLURM for a GPU: by count, or (a packed train job) by GRES."""
    return bool(resources.get("gpu", 0)) or "gpu" in str(resources.get("gres") or "")
