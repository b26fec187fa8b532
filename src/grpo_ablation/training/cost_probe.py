"""What the configured DAG will cost, measured before a user spends GPU-hours on it.

    grpo-ablation cost-probe --configfile config/cluster.yaml --steps 20

runs, on this machine and with the config's model, task, device and precision, the base policy (a
few warm-start steps if it has any), ``--steps`` training steps of the reference cell, and one
evaluation of the resulting checkpoint on the test split (and on validation), then prints the
seconds of a steady training step beside the first step's warm-up and a checkpoint save's
(``grpo_ablation.training.step_timing``), peak memory (GPU, or host RSS on CPU), checkpoint size,
and the projection of the whole DAG as configured: job-hours, GPU-hours (jobs weighted by the GPUs they request), the
wall time one job at a time and along the critical path (base -> one run -> its evaluation, with as
many GPUs as jobs), and the disk the checkpoints take. On a GPU node it is the first thing to run;
``--out`` keeps the numbers as JSON. Hub content must be in the cache (run the prefetch rule first);
a config with a ``stand_in`` builds its stand-in.
"""

from __future__ import annotations

import json
import math
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from grpo_ablation.design import checks
from grpo_ablation.design.ablation import Design
from grpo_ablation.design.base_policy import base_policy_of
from grpo_ablation.design.options import ComputeConfig, TrainingConfig
from grpo_ablation.design.packing import runs_per_gpu
from grpo_ablation.design.resources import ResourcesConfig
from grpo_ablation.design.schema import load_config
from grpo_ablation.layout import BASE_INFO
from grpo_ablation.process import in_own_process


@dataclass(frozen=True)
class Measurement:
    """What one cost probe measured on this machine."""

    train_setup_s: float  # model load, trainer set-up: the run's wall less its steps and saves
    train_step_s: float  # seconds per steady optimizer step of the reference cell (after the first)
    sft_step_s: float  # seconds per warm-start step of the base policy (0 when it has none)
    eval_checkpoint_s: float  # one checkpoint evaluated on the test split
    eval_validation_s: float  # the final checkpoint evaluated on the validation split
    weights_bytes: int  # one checkpoint's weights
    optimizer_bytes: int  # one checkpoint's optimizer and scheduler state
    peak_memory_bytes: int
    peak_memory_kind: str  # "gpu" (torch.cuda.max_memory_allocated) or "host RSS"
    train_peak_gpu_bytes: int | None = None  # the training process's peak on the GPU alone
    gpu_total_bytes: int | None = None  # the probe's GPU's memory (None on CPU)
    # The first step's seconds and a checkpoint save's. None: a record written before they were
    # timed apart, whose train_step_s is the whole trainer.train() over the steps (its
    # projection stays what it was).
    train_warmup_s: float | None = None
    train_save_s: float | None = None
    # Over the steady steps, where generate runs in the training process (None with vLLM):
    # completion positions decoded per second of generate, and sequence positions scored and
    # trained per second of the rest of the step.
    generation_tokens_per_s: float | None = None
    update_tokens_per_s: float | None = None
    # resources.runs_per_gpu > 1: the reference cell trained that many times at once on this
    # device, and the mean of their steady steps (None: not measured).
    packed_runs: int | None = None
    packed_step_s: float | None = None


def dag_shape(config: dict[str, Any]) -> dict[str, Any]:
    """Runs, checkpoints and GPUs of the DAG as configured. A stage that takes another's winner is
    counted at that stage's reference (an estimate: another winner may share fewer cells with the
    other stages, adding runs). Optimizer steps and checkpoints are means over cells (an
    update-epochs stage takes more steps per run)."""
    design = Design.of(config)
    paths: dict[str, None] = {}
    for s in design.stages:
        winners = {src: design.stage(src).reference for src in s.sources()}
        paths.update(dict.fromkeys(c.path for c in design.cells(s, winners)))
    runs = [design.training_config(design.parse_cell(p), 0) for p in paths]
    steps = sum(r.max_steps for r in runs) / max(1, len(runs))
    checkpoints = sum(r.checkpoints for r in runs) / max(1, len(runs))
    cells = paths
    r, c = config["resources"], ComputeConfig.of(config["compute"])
    return {
        "cells": len(cells),
        # every seed of every cell under each base-policy draw
        "base_policies": max(1, len(design.draws)),
        "runs": len(cells) * len(design.seeds) * max(1, len(design.draws)),
        "max_steps": steps,
        "checkpoints_per_run": checkpoints,
        "sft_steps": base_policy_of(config["base_policy"]).sft_steps,
        "train_gpus": int(r["gpus_per_train_job"]) * c.processes_per_train_job,
        "eval_gpus": int(r["gpus_per_eval_job"]),
        "runs_per_gpu": runs_per_gpu(r),
    }


def project(m: Measurement, shape: dict[str, Any]) -> dict[str, Any]:
    """The DAG's cost from one probe (pure arithmetic, so a test can check it). With
    ``runs_per_gpu`` N > 1 a train job runs beside N - 1 others on its GPU: its steady step is the
    one measured N at a time (its set-up, warm-up and saves as alone), or, where that was not
    measured, the whole run N times as long (no gain assumed: an upper bound); its GPU-seconds
    count 1/N."""
    bases = shape.get("base_policies", 1)
    n = shape.get("runs_per_gpu", 1)
    step_s, packing = packed_step(m, n)
    base_s = shape["sft_steps"] * m.sft_step_s
    train_s = train_seconds(
        replace(m, train_step_s=step_s), shape["max_steps"], shape["checkpoints_per_run"]
    )
    if packing == "no gain assumed":
        train_s = n * train_seconds(m, shape["max_steps"], shape["checkpoints_per_run"])
    # Every checkpoint on test, the final one on validation; the base policy once on both.
    eval_s = shape["checkpoints_per_run"] * m.eval_checkpoint_s + m.eval_validation_s
    base_eval_s = m.eval_checkpoint_s + m.eval_validation_s
    runs = shape["runs"]
    job_s = bases * (base_s + base_eval_s) + runs * (train_s + eval_s)
    gpu_s = (
        bases * base_s * shape["train_gpus"]
        + (bases * base_eval_s + runs * eval_s) * shape["eval_gpus"]
        + runs * train_s * shape["train_gpus"] / n
    )
    disk = runs * (shape["checkpoints_per_run"] * m.weights_bytes + m.optimizer_bytes)
    return {
        "base_policy_s": base_s,
        "train_run_s": train_s,
        "eval_run_s": eval_s,
        "job_hours": job_s / 3600,
        "gpu_hours": gpu_s / 3600,
        "wall_hours_one_job_at_a_time": job_s / 3600,
        # every job after the other on one device, the train jobs N at a time
        "wall_hours_one_gpu": (job_s - runs * train_s * (1 - 1 / n)) / 3600,
        "wall_hours_critical_path": (base_s + max(base_eval_s, train_s + eval_s)) / 3600,
        "checkpoint_disk_bytes": disk,
        "runs_per_gpu": n,
        "packing": packing,
    }


def packed_step(m: Measurement, n: int) -> tuple[float, str]:
    """A steady step's seconds with ``n`` runs on one device, and where the figure comes from."""
    if n == 1:
        return m.train_step_s, "alone"
    if m.packed_runs == n and m.packed_step_s:
        return m.packed_step_s, "measured"
    return n * m.train_step_s, "no gain assumed"  # project() scales the whole run


def train_seconds(m: Measurement, steps: float, checkpoints: float) -> float:
    """One run's projected seconds: its set-up, the first step's warm-up, the steady steps after
    it and its checkpoint saves (an older record: set-up and steps at its mean step)."""
    if m.train_warmup_s is None or m.train_save_s is None:
        return m.train_setup_s + steps * m.train_step_s
    steady = max(0.0, steps - 1) * m.train_step_s
    return m.train_setup_s + m.train_warmup_s + steady + checkpoints * m.train_save_s


# Each rule submitted as a job, the projection of one such job, and its requested runtime.
JOB_LIMITS = {
    "base_policy": ("base_policy_s", "base_policy_runtime"),
    "train": ("train_run_s", "train_runtime"),
    "evaluate": ("eval_run_s", "eval_runtime"),
}


# The runtime to request over the projected one: the machines of a partition differ, and a job
# killed at its limit is lost up to its last checkpoint.
RUNTIME_MARGIN = 1.25


def over_limit(p: dict[str, Any], resources: dict[str, Any]) -> list[str]:
    """A line for every job whose projected wall time exceeds the runtime its rule requests
    (config ``resources``, minutes): the scheduler would kill it before it finished. Each names
    the request that fits, the projection plus RUNTIME_MARGIN."""
    lines = []
    for rule, (projected, limit) in JOB_LIMITS.items():
        minutes = p[projected] / 60
        if minutes > resources[limit]:
            lines.append(
                f"{rule} jobs are projected to take {minutes:.1f} min but request "
                f"resources.{limit} = {resources[limit]} min: set it to "
                f"{math.ceil(minutes * RUNTIME_MARGIN)} (or shorten the job)"
            )
    return lines


# The share of a GPU's memory a plan may fill: the CUDA context, the allocator's fragmentation and
# the libraries' workspaces take the rest (torch's peak allocated bytes count none of them).
GPU_MEMORY_USABLE = 0.9


def memory_plan(
    m: Measurement,
    training: TrainingConfig,
    compute: ComputeConfig,
    gpu_gib: float | None,
    runs_per_gpu: int = 1,
) -> list[str]:
    """A line when the training is projected not to fit one GPU of ``gpu_gib`` GiB
    (``resources.gpu_memory_gib``; None: the probe's GPU), naming the knobs that bring it
    under. A colocated vLLM engine takes its share of whichever GPU
    (``vllm_gpu_memory_utilization`` of the total); the rest of the measured peak is the
    training's own and moves with the model and micro-batch, not with the card. ``runs_per_gpu``
    runs packed on the card need that many times one run. Empty on CPU."""
    if m.train_peak_gpu_bytes is None or m.gpu_total_bytes is None:
        return []
    gib = 1024**3
    target = gpu_gib * gib if gpu_gib else m.gpu_total_bytes
    share = training.vllm_gpu_memory_utilization if training.generation_backend == "vllm" else 0.0
    one = m.train_peak_gpu_bytes + share * (target - m.gpu_total_bytes)
    need = runs_per_gpu * one
    if need <= GPU_MEMORY_USABLE * target:
        return []
    knobs = []
    fits = int(GPU_MEMORY_USABLE * target // one)
    if runs_per_gpu > 1 and fits >= 1:
        knobs.append(f"resources.runs_per_gpu: {fits} (fewer runs share the card)")
    if not compute.gradient_checkpointing:
        knobs.append("compute.gradient_checkpointing: true (activations recomputed; same numbers)")
    micro = training.per_device_batch_size(compute.processes_per_train_job)
    if micro % 2 == 0:  # twice the accumulation steps must still split the batch evenly
        more = training.gradient_accumulation_steps * 2
        knobs.append(
            f"training.gradient_accumulation_steps: {more} (micro-batches of {micro // 2} "
            f"completions, not {micro}; the same objective)"
        )
    scoring = min(training.scoring_batch_size or micro, micro)
    if scoring > 1:  # the scoring passes' logits, fewer completions at a time
        knobs.append(
            f"training.scoring_batch_size: {scoring // 2} (logits of {scoring // 2} completions "
            f"per forward pass, not {scoring}; the same log-probabilities, the gradient "
            "to rounding)"
        )
    if share:
        knobs.append(
            f"training.vllm_gpu_memory_utilization below {share} (a smaller KV cache for the "
            "engine: fewer sequences at once)"
        )
    who = f"train jobs: {runs_per_gpu} runs packed on a GPU" if runs_per_gpu > 1 else "train jobs"
    return [
        f"{who} are projected to need {need / gib:.1f} GiB of a {target / gib:.0f} GiB GPU "
        f"({GPU_MEMORY_USABLE:.0%} of it usable"
        + (f"; vLLM's share {share} included" if share else "")
        + "): set "
        + ", or ".join(knobs or ["a GPU with more memory (resources.gpu_memory_gib)"])
    ]


def measure(config: dict[str, Any], steps: int, work: Path) -> Measurement:
    """Run the base policy, ``steps`` training steps and one evaluation in ``work``.

    The base policy and the training run in a process of their own (as their jobs do), so that
    this one holds none of their device memory when the evaluation starts: a vLLM engine asks for
    its share of the GPU's memory free (``load_lm``'s ``gpu_memory_utilization``) and refuses to
    start below it. The peak memory is the largest of the training process's and this one's."""
    from grpo_ablation.device import peak_memory, resolve_device
    from grpo_ablation.evaluation.evaluate import EvaluationOptions, evaluate_checkpoints
    from grpo_ablation.evaluation.task_folders import write_split_tasks
    from grpo_ablation.policy.prefetch import prefetch
    from grpo_ablation.tasks import get_task

    task = get_task(config["task"])
    device = resolve_device(ComputeConfig.of(config["compute"]).device)
    prefetch(config)
    data = work / "data"
    task.write_splits(data)
    trained = in_own_process(train_steps, config, steps, work)
    n = runs_per_gpu(config["resources"])
    packed = packed_steps(config, steps, work, n) if n > 1 else None
    ckpt = Path(trained["checkpoint"])
    state = {"optimizer.pt", "scheduler.pt"}
    weights = sum(f.stat().st_size for f in ckpt.iterdir() if f.is_file() and f.name not in state)
    optimizer = sum((ckpt / f).stat().st_size for f in state if (ckpt / f).exists())

    ev = checks.evaluation_config(config)
    write_split_tasks(data, work / "tasks", task.kind, ev, task.answer_rule, task.chat_template)
    options = EvaluationOptions.of(ev)
    durations = []
    for split in ("test", "validation"):
        started = time.perf_counter()
        evaluate_checkpoints(
            [(steps, ckpt)],
            work / "tasks" / split,
            work / "eval" / split,
            options,
            # As the evaluation job runs them: external benchmarks on every test checkpoint.
            external=(ev["external_benchmarks"] or None) if split == "test" else None,
        )
        durations.append(time.perf_counter() - started)
    # The probe's peak, training and evaluation included: GPU memory on a GPU, else the
    # host's resident set; of the training process and of this one (the evaluation with hf; with
    # vLLM each checkpoint's evaluation has a process of its own, not measured here).
    peaks = [trained["peak"], peak_memory()]
    on_gpu = device == "cuda"
    return Measurement(
        **training_times(trained),
        sft_step_s=trained["sft_step_s"],
        eval_checkpoint_s=durations[0],
        eval_validation_s=durations[1],
        weights_bytes=weights,
        optimizer_bytes=optimizer,
        peak_memory_bytes=max(
            (p.gpu_allocated_bytes or 0) if on_gpu else p.host_rss_bytes for p in peaks
        ),
        peak_memory_kind="gpu" if on_gpu else "host RSS",
        train_peak_gpu_bytes=trained["peak"].gpu_allocated_bytes if on_gpu else None,
        gpu_total_bytes=trained["gpu_total_bytes"],
        packed_runs=n if packed is not None else None,
        packed_step_s=packed,
    )


def training_times(trained: dict[str, Any]) -> dict[str, Any]:
    """A Measurement's training fields from what ``train_steps`` returned."""
    times = trained["times"]
    return {
        "train_setup_s": max(0.0, trained["wall_s"] - trained["timed_s"]),
        "train_step_s": times["step_s"],
        "train_warmup_s": times["warmup_s"],
        "train_save_s": times["save_s"],
        "generation_tokens_per_s": times["generation_tokens_per_s"],
        "update_tokens_per_s": times["update_tokens_per_s"],
    }


def packed_steps(config: dict[str, Any], steps: int, work: Path, n: int) -> float:
    """The reference cell trained ``n`` times at once on this device (``resources.runs_per_gpu``),
    each in a process and folder of its own under ``work/packed``, started together (their
    steady steps overlap, their set-ups need not end together): the mean of their steady steps."""
    from concurrent.futures import ThreadPoolExecutor

    folders = [work / "packed" / str(i) for i in range(n)]
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
        if not (folder / "data").exists():
            (folder / "data").symlink_to((work / "data").resolve(), target_is_directory=True)
    with ThreadPoolExecutor(max_workers=n) as pool:
        runs = pool.map(lambda f: in_own_process(train_steps, config, steps, f), folders)
        return statistics.fmean(r["times"]["step_s"] for r in runs)


def train_steps(config: dict[str, Any], steps: int, work: Path) -> dict[str, Any]:
    """What the probe's training process runs: the base policy (its warm start cut to ``steps``)
    into ``work/base``, then ``steps`` steps of the reference cell into ``work/run`` (the task's
    splits already in ``work/data``). Its timings (the training's steps and saves apart), last
    checkpoint and peak memory."""
    from grpo_ablation.device import gpu_total_bytes, peak_memory
    from grpo_ablation.training.step_timing import StepTimer
    from grpo_ablation.training.train import last_checkpoint, train

    compute = ComputeConfig.of(config["compute"])
    design = Design.of(config)
    started = time.perf_counter()
    info = build_base(config, work, max_sft_steps=steps)
    model, revision = info["model"], info["revision"]
    sft_steps = info["sft_steps"]
    sft_step_s = (time.perf_counter() - started) / sft_steps if sft_steps else 0.0

    cfg = replace(
        design.training_config(design.baseline(), seed=0),
        max_steps=steps,
        save_steps=steps,
        # No curve snapshots: one would land in its step's time (they are not priced).
        curve_points=0,
        late_points=0,
    )
    # Retention "newest" whatever the config says: the estimate prices one optimizer state.
    compute = replace(compute, keep_optimizer_state="newest")
    timer = StepTimer()
    started = time.perf_counter()
    train(
        model,
        work / "data",
        work / "run",
        cfg,
        config["task"],
        callbacks=[timer],
        compute=compute,
        revision=revision,
    )
    return {
        "sft_step_s": sft_step_s,
        "wall_s": time.perf_counter() - started,
        "times": asdict(timer.times()),  # the steps and saves split (step_timing.StepTimes)
        "timed_s": sum(timer.steps_s) + sum(timer.saves_s),
        "checkpoint": str(last_checkpoint(work / "run")),
        "peak": peak_memory(),
        "gpu_total_bytes": gpu_total_bytes(),
    }


def build_base(
    config: dict[str, Any], work: Path, max_sft_steps: int | None = None
) -> dict[str, Any]:
    """The base policy of the config's first draw (its warm start cut to ``max_sft_steps``) into
    ``work/base``, from the splits in ``work/data``; ``work/base_policy.json`` records it as the
    base_policy rule does, so a train job started on ``work`` reads it. Returns that record with
    the warm-start steps run (``sft_steps``)."""
    from grpo_ablation.policy.pretrained import build_base_policy
    from grpo_ablation.tasks import get_task

    draws = Design.of(config).draws
    base = checks.draw_base_policy(config, draws[0] if draws else None)
    configured = base_policy_of(base).sft_steps
    sft_steps = configured if max_sft_steps is None else min(max_sft_steps, configured)
    info = build_base_policy(
        {**base, "sft_steps": sft_steps},
        get_task(config["task"]),
        work / "data",
        work / "base",
        ComputeConfig.of(config["compute"]),
    )
    (work / BASE_INFO).write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")
    return {**info, "sft_steps": sft_steps}


def refusals(m: Measurement, p: dict[str, Any], config: dict[str, Any]) -> list[str]:
    """Why the config's jobs would not finish as submitted: a runtime the projection exceeds
    (``over_limit``) or a training that does not fit its GPU (``memory_plan``, for the probed
    reference cell)."""
    design = Design.of(config)
    return [
        *over_limit(p, config["resources"]),
        *memory_plan(
            m,
            design.training_config(design.baseline(), seed=0),
            ComputeConfig.of(config["compute"]),
            ResourcesConfig.of(config["resources"]).gpu_memory_gib,
            runs_per_gpu(config["resources"]),
        ),
    ]


def report(m: Measurement, shape: dict[str, Any], p: dict[str, Any], refused: list[str]) -> str:
    gib = 1024**3
    return "\n".join(
        [
            f"seconds per training step        {m.train_step_s:.3f} steady  (first step "
            f"{m.train_warmup_s or 0:.2f} s, a checkpoint save {m.train_save_s or 0:.2f} s, set-up "
            f"{m.train_setup_s:.1f} s per run)",
            "tokens per second                "
            + (
                f"{m.generation_tokens_per_s:.0f} generated, {m.update_tokens_per_s or 0:.0f} "
                "scored and trained"
                if m.generation_tokens_per_s
                else "not timed (generation outside the training process)"
            ),
            f"seconds per warm-start step      {m.sft_step_s:.3f}",
            f"evaluation of one checkpoint     {m.eval_checkpoint_s:.1f} s on test, "
            f"{m.eval_validation_s:.1f} s on validation",
            f"peak memory ({m.peak_memory_kind})".ljust(33)
            + f"{m.peak_memory_bytes / gib:.2f} GiB",
            f"checkpoint size                  {m.weights_bytes / gib:.3f} GiB weights + "
            f"{m.optimizer_bytes / gib:.3f} GiB optimizer state",
            f"DAG as configured                {shape['runs']} runs ({shape['cells']} cells), "
            f"{shape['max_steps']} steps and {shape['checkpoints_per_run']} checkpoints each",
            f"projected job-hours              {p['job_hours']:.2f}",
            f"projected GPU-hours              {p['gpu_hours']:.2f}  ({shape['train_gpus']} GPU(s) "
            f"per train job, {shape['eval_gpus']} per evaluation job)",
            f"projected wall time              {p['wall_hours_one_job_at_a_time']:.2f} h one job at a "
            f"time, {p['wall_hours_critical_path']:.2f} h along the critical path"
            + (
                f", {p['wall_hours_one_gpu']:.2f} h on one GPU with {p['runs_per_gpu']} runs "
                f"packed on it (the packed step {p['packing']})"
                if p["runs_per_gpu"] > 1
                else ""
            ),
            f"projected checkpoint disk        {p['checkpoint_disk_bytes'] / 1e9:.2f} GB "
            "(optimizer state in the newest checkpoint of each run)",
            f"projected job wall times         base policy {p['base_policy_s'] / 60:.1f} min, "
            f"train {p['train_run_s'] / 60:.1f} min, evaluate {p['eval_run_s'] / 60:.1f} min "
            "(external benchmarks included)",
            *(f"NOT SUBMITTABLE: {line}" for line in refused),
        ]
    )


def probe_cost(
    configfile: Path | list[Path], steps: int, out: Path | None, work: Path | None
) -> None:
    """Time ``steps`` training steps and an evaluation of the config's first run here, print the
    projection of its DAG and, with ``out``, write it as JSON (``grpo-ablation cost-probe``)."""
    if steps < 1:
        raise SystemExit("cost-probe: --steps must be at least 1")
    config = load_config(configfile)
    with tempfile.TemporaryDirectory() as tmp:
        m = measure(config, steps, work or Path(tmp))
    shape = dag_shape(config)
    p = project(m, shape)
    refused = refusals(m, p, config)
    print(report(m, shape, p, refused))
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        record = {
            "measured": asdict(m),
            "dag": shape,
            "projection": p,
            "over_limit": refused,
            "steps": steps,
            "config": [str(f) for f in configfile]
            if isinstance(configfile, list)
            else str(configfile),
        }
        out.write_text(json.dumps(record, indent=2) + "\n")
    if refused:
        # No recommendation to submit a config whose jobs the scheduler or the GPU would kill.
        raise SystemExit(
            "cost-probe: do not submit this config as it is: its jobs would outlive their "
            "requested runtime or their GPU's memory (the NOT SUBMITTABLE lines above say what "
            "to set)"
        )
