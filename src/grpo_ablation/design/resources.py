"""The ``resources`` section, declared once: what each job that is not local asks the executor
for (SLURM on clusters; the SLURM profile sets CPUs only). Its schema part is written from these
declarations (``design/schema.py``), and every reader takes the resolved value (``of``).
Runtimes in minutes, memory in MB."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from grpo_ablation.settings import check_options, from_dict, option


@dataclass(frozen=True)
class ResourcesConfig:
    """Per-job resources passed to the executor, one option per rule kind."""

    base_policy_runtime: int = option(60, "minutes of a base-policy job", minimum=1)
    base_policy_mem_mb: int = option(4000, "memory (MB) of a base-policy job", minimum=1)
    train_runtime: int = option(30, "minutes of a train job", minimum=1)
    train_mem_mb: int = option(4000, "memory (MB) of a train job", minimum=1)
    gpus_per_train_job: int = option(
        0,
        "GPUs per training process; a train job asks for this x compute.processes_per_train_job",
        minimum=0,
    )
    runs_per_gpu: int = option(
        1,
        "training runs packed onto one GPU (runs of one GPU and one process each): a train job "
        "then asks for one of the card's runs_per_gpu gpu_slots instead of a whole GPU, and under "
        "SLURM the group `training` (--group-components training=N) sends N of them to one "
        "sbatch with one GPU; evaluation and GPU warm-start jobs take every slot of their GPUs. "
        "Locally `--resources gpu_slots=N`. 1 gives every job a whole GPU, as before",
        minimum=1,
    )
    gpu_memory_gib: float | None = option(
        None,
        "the memory of one GPU of the nodes the train jobs run on (GiB; name the model in the "
        "profile's gpu_model); the cost probe refuses a config whose training it projects over "
        "90% of it and names the knob that brings it under. null: the calibrating GPU's own",
        exclusive_minimum=0,
    )
    eval_runtime: int = option(20, "minutes of an evaluation job", minimum=1)
    eval_mem_mb: int = option(4000, "memory (MB) of an evaluation job", minimum=1)
    gpus_per_eval_job: int = option(0, "GPUs of an evaluation job", minimum=0)
    diagnostics_runtime: int = option(10, "minutes of a diagnostics job", minimum=1)
    diagnostics_mem_mb: int = option(2000, "memory (MB) of a diagnostics job", minimum=1)

    def __post_init__(self) -> None:
        check_options(self, "resources")

    @classmethod
    def of(cls, section: dict[str, Any] | None) -> ResourcesConfig:
        """The config's ``resources`` section (any key left out takes its default)."""
        return from_dict(cls, section, "resources")
