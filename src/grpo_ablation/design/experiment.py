"""The config's own keys, declared once: the experiment's name, where its results and checkpoints
go, its seeds and each job's threads (every other top-level key is a section of its own, declared
in its module). Their schema part is written from these declarations."""

from __future__ import annotations

from dataclasses import dataclass

from grpo_ablation.settings import REQUIRED, option


@dataclass(frozen=True, kw_only=True)  # a required key after defaulted ones
class ExperimentConfig:
    """The keys of the config's top level that are not sections."""

    experiment: str = option(
        REQUIRED, "outputs go to <results_dir>/<experiment>/", pattern="^[A-Za-z0-9_.-]+$"
    )
    results_dir: str = option("results", "the folder of every experiment's outputs")
    checkpoints_dir: str | None = option(
        None,
        "where training checkpoints go (e.g. a scratch file system: they are most of a run's "
        "disk); each run's checkpoints/ folder becomes a link to <checkpoints_dir>/<its path under "
        "results_dir>/checkpoints, made when the run starts ($VARS expanded then). null: inside "
        "the run folder. Every job that reads a checkpoint must see the folder. A run that "
        "already holds checkpoints keeps them where they are. No default (nor for slurm): a "
        "config without them validates to what it did before they existed, so a registered "
        "study's config is unchanged",
        absent=True,
        null=True,
    )
    seeds: list[int] = option(
        REQUIRED,
        "every cell is trained once per seed; paired differences match seeds",
        minimum=0,
        min_items=1,
    )
    threads_per_job: int = option(
        1,
        "torch threads of each job (run jobs in parallel with --cores rather than threads)",
        minimum=1,
    )
