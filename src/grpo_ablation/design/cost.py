"""What a planned run will cost on this machine, said before its first job.

Every compute rule writes a benchmark file per job (``Tree.benchmark``, its ``s`` column the job's
wall seconds). A job's *kind* is its benchmark path under ``benchmarks/`` without the wildcard
segments (``key=value``: cells, seeds): ``train``, ``evaluate``, ``evaluate/base``,
``select/std_scaling``. Earlier runs on this machine, of any experiment under the results folder,
give each kind's typical job time (the median, so a job that paid the job worker's start-up or
waited on a busy machine does not set it); the planned jobs of each kind times that, spread over
the cores the run may use, is the estimate. It is an estimate, not a
bound: jobs wait on one another (the analysis jobs run after the training they read), so a DAG
with little parallelism takes longer; one job at a time is the other end. Rules never measured
here are named, not guessed.
"""

from __future__ import annotations

import csv
import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

BENCHMARKS = "benchmarks"  # the folder of Tree.benchmark, in every experiment and draw folder


def kind(benchmark: str | Path) -> str | None:
    """A benchmark file's job kind: its path under the last ``benchmarks/`` folder, without the
    wildcard segments and the suffix (None: not a benchmark file)."""
    parts = Path(benchmark).with_suffix("").parts
    if BENCHMARKS not in parts:
        return None
    below = parts[len(parts) - parts[::-1].index(BENCHMARKS) :]
    return "/".join(p for p in below if "=" not in p) or None


def measured_seconds(results: Path) -> dict[str, list[float]]:
    """kind -> the wall seconds of its jobs in every benchmark file under ``results``."""
    found: dict[str, list[float]] = {}
    for path in sorted(results.glob(f"**/{BENCHMARKS}/**/*.tsv")):
        rule = kind(path)
        if rule is None:
            continue
        with path.open() as f:
            for row in csv.DictReader(f, delimiter="\t"):
                try:
                    seconds = float(row["s"])
                except (KeyError, ValueError):
                    continue
                if math.isfinite(seconds):
                    found.setdefault(rule, []).append(seconds)
    return found


@dataclass(frozen=True)
class Estimate:
    jobs: int
    seconds: float  # the measured rules' job time, spread over the cores
    serial_seconds: float  # one job at a time
    cores: int
    unmeasured: dict[str, int]  # kind -> planned jobs no earlier run here measured

    def sentence(self) -> str:
        if not self.jobs:
            return "Nothing to run."
        head = f"{self.jobs} job{'' if self.jobs == 1 else 's'} planned"
        if sum(self.unmeasured.values()) == self.jobs:
            return (
                f"{head}; no earlier run on this machine measured their rules, so no estimate yet."
            )
        text = (
            f"{head}: about {_minutes(self.seconds)} on {self.cores} core"
            f"{'' if self.cores == 1 else 's'} (one job at a time: {_minutes(self.serial_seconds)}),"
            " from the median job time of each rule in earlier runs on this machine"
        )
        if self.unmeasured:
            names = ", ".join(f"{rule} ×{n}" for rule, n in sorted(self.unmeasured.items()))
            text += f"; not counted, never measured here: {names}"
        return text + "."


def estimate(
    planned: Iterable[tuple[str, int]], measured: dict[str, list[float]], cores: int
) -> Estimate:
    """The wall time of ``planned`` (kind, threads of one job) on ``cores``: each measured kind's
    median job seconds, weighted by the cores a job holds, summed and divided by the cores."""
    cores = max(1, int(cores))
    jobs, core_seconds, serial = 0, 0.0, 0.0
    unmeasured: dict[str, int] = {}
    for rule, threads in planned:
        jobs += 1
        if not measured.get(rule):
            unmeasured[rule] = unmeasured.get(rule, 0) + 1
            continue
        seconds = statistics.median(measured[rule])
        core_seconds += seconds * min(max(1, threads), cores)
        serial += seconds
    return Estimate(jobs, core_seconds / cores, serial, cores, unmeasured)


def _minutes(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def checkpoint_disk(
    checkpoints: list[int], n_params: int | None, policy: str, folder: str, free_bytes: int | None
) -> str:
    """What the planned runs' checkpoints (``checkpoints``: how many each run saves) need in
    ``folder`` beside what its file system has free: weights and AdamW state in float32 (training
    keeps its parameters in float32 whatever ``compute.dtype``), optimizer state kept as
    ``compute.keep_optimizer_state`` (``policy``) says, at the peak while a save overlaps the
    previous newest (``design.disk.checkpoint_disk_bytes``). ``n_params`` None: not on disk yet."""
    if not checkpoints:
        return "No training run planned: no checkpoints."
    free = "" if free_bytes is None else f" ({free_bytes / 1e9:,.1f} GB free there)"
    head = (
        f"Checkpoints of {len(checkpoints)} planned training run"
        f"{'' if len(checkpoints) == 1 else 's'} ({sum(checkpoints)} in all) go to {folder}{free}"
    )
    if n_params is None:
        return f"{head}; their size is known once the base policy's weights are on disk."
    from grpo_ablation.design.disk import (
        DTYPE_BYTES,
        adamw_bytes_per_param,
        checkpoint_disk_bytes,
    )

    per_param = (DTYPE_BYTES["float32"], adamw_bytes_per_param("float32"))
    sizes = [
        sum(checkpoint_disk_bytes(n_params, *per_param, k, 1, policy, peak) for k in checkpoints)
        for peak in (False, True)
    ]
    text = (
        f"{head}: {sizes[0] / 1e9:,.1f} GB, {sizes[1] / 1e9:,.1f} GB at the peak "
        f"({n_params:,} parameters in float32, optimizer state kept: {policy})."
    )
    if free_bytes is not None and sizes[1] > free_bytes:
        text += " MORE THAN IS FREE: set checkpoints_dir to a larger file system (a scratch)."
    return text
