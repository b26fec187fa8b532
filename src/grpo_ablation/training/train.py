"""Train one ablation cell (``grpo-ablation train --base DIR --data DIR --out DIR``)
(the pipeline's ``train`` command; ``--base`` a model folder or a base_policy.json).

No Snakemake needed. The run directory receives ``checkpoints/checkpoint-<step>/`` (standalone
Hugging Face model directories with their tokenizer), ``rollouts/rank<r>.jsonl.gz``,
``metrics.jsonl``, ``objective.json``/``objective.md``, ``budget.json`` and ``run_info.json``.
A killed run resumes from its last complete checkpoint when the same command is run again.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grpo_ablation.design.options import ComputeConfig, TrainingConfig
from grpo_ablation.layout import (
    BUDGET,
    CHECKPOINT_PREFIX,
    CHECKPOINTS,
    CURVE_POLICIES,
    MANIFEST,
    METRICS_LOG,
    ROLLOUTS,
    RUN_IDENTITY,
    RUN_INFO,
    TRAINER_STATE,
    WALL_TIME,
    checkpoint_step,
    split_path,
    weight_files,
)
from grpo_ablation.objective.conventions import VLLM_IS_CLIP
from grpo_ablation.objective.record import ObjectiveRecord, library_versions
from grpo_ablation.sampling import SAMPLING, neutral_generation_config
from grpo_ablation.settings import config_hash
from grpo_ablation.training import tracking
from grpo_ablation.training.generation import CACHE_IMPLEMENTATIONS

if TYPE_CHECKING:
    from grpo_ablation.tasks import Task


def git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            cwd=Path(__file__).parent,
        )
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def last_checkpoint(run: Path) -> Path | None:
    """The run's newest checkpoint whose save completed (``TRAINER_STATE`` is written last)."""
    done = [p for p in saved_checkpoints(run) if (p / TRAINER_STATE).exists()]
    return max(done, key=checkpoint_step, default=None)


def saved_checkpoints(run: Path) -> list[Path]:
    """Every ``checkpoints/checkpoint-<step>`` folder of the run, complete or not."""
    found = (run / CHECKPOINTS).glob(f"{CHECKPOINT_PREFIX}*")
    return [p for p in found if checkpoint_step(p) is not None]


def link_checkpoints(run: Path, target: Path) -> Path:
    """Make the run's checkpoints folder a link to ``target`` (config ``checkpoints_dir``) and
    return where its checkpoints go. A run that already has the folder keeps it (checkpoints in it
    stay where they are, and the run resumes from them); a link whose target is gone (a purged
    scratch) gets the folder made again, and the run starts afresh."""
    link = run / CHECKPOINTS
    if not link.is_symlink() and not link.exists():
        run.mkdir(parents=True, exist_ok=True)
        target.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target.resolve(), target_is_directory=True)
    elif link.is_symlink():
        link.resolve().mkdir(parents=True, exist_ok=True)
    return link.resolve()


def checkpoint_dtypes(checkpoint: Path | None) -> list[str]:
    """The tensor dtypes stored in a checkpoint's safetensors weights (e.g. ["F32"])."""
    from safetensors import safe_open

    dtypes: set[str] = set()
    for file in sorted(checkpoint.glob("*.safetensors")) if checkpoint else []:
        with safe_open(str(file), "pt") as f:
            dtypes |= {f.get_slice(name).get_dtype() for name in f.keys()}  # noqa: SIM118
    return sorted(dtypes)


def _truncate_jsonl(path: Path, step: int) -> None:
    if path.exists():
        rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
        path.write_text(
            "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows if r["step"] <= step)
        )


def _build_args(
    cfg: TrainingConfig,
    out: Path,
    num_processes: int,
    use_cpu: bool,
    compute: ComputeConfig,
    report_to: list[str] | None = None,
):
    from trl import GRPOConfig

    return GRPOConfig(
        output_dir=str(out / CHECKPOINTS),
        per_device_train_batch_size=cfg.per_device_batch_size(num_processes),
        gradient_accumulation_steps=cfg.gradient_accumulation_steps,
        num_generations=cfg.group_size,
        max_completion_length=cfg.max_completion_length,
        num_iterations=cfg.num_iterations,
        learning_rate=cfg.learning_rate,
        lr_scheduler_type=cfg.lr_scheduler_type,
        warmup_steps=cfg.warmup_steps,
        temperature=cfg.temperature,
        # The rest of the sampling protocol, stated rather than left to TRL's defaults.
        top_k=SAMPLING["top_k"],
        top_p=SAMPLING["top_p"],
        min_p=SAMPLING["min_p"],
        repetition_penalty=SAMPLING["repetition_penalty"],
        beta=cfg.beta,
        epsilon=cfg.clip_eps_low,
        epsilon_high=cfg.clip_eps_high,
        mask_truncated_completions=cfg.mask_truncated_completions,
        max_grad_norm=cfg.max_grad_norm,
        max_steps=cfg.max_steps,
        save_strategy="steps",
        save_steps=cfg.save_steps,
        logging_steps=1,
        seed=cfg.seed,
        data_seed=cfg.seed,
        use_cpu=use_cpu,
        bf16=compute.dtype == "bfloat16",
        # Set either way on a GPU (a job worker's process may have run another job before);
        # None leaves the CPU, which has no TF32, as it is.
        tf32=None if use_cpu else compute.tf32,
        # Said explicitly: TRL 1.16 turns it on by default, a second forward pass per step.
        gradient_checkpointing=compute.gradient_checkpointing,
        # generate's KV cache (None: transformers' dynamic one, as before the option)
        cache_implementation=CACHE_IMPLEMENTATIONS[compute.generation_cache],
        report_to=report_to or "none",
        run_name=tracking.run_name(out),
        disable_tqdm=True,
        # Dropout would make the training log-probs disagree with the sampling policy.
        disable_dropout=True,
        **_vllm_args(cfg),
        # TRL's own choices are overridden by the project trainer; keep them neutral and visible.
        loss_type="grpo",
        scale_rewards="none",
    )


def _is_local(model: Path | str) -> bool:
    """A local directory, or something that looks like a path; else a hub id (``org/name``)."""
    model = Path(model)
    return model.exists() or str(model).startswith((".", "/")) or len(model.parts) != 2


def _vllm_args(cfg: TrainingConfig) -> dict[str, Any]:
    if cfg.generation_backend != "vllm":
        return {}
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        raise ImportError(
            "training.generation_backend is 'vllm' but vllm is not installed: "
            "install the GPU nodes' pin set (envs/gpu-vllm.lock.txt, or the conda environment "
            "envs/grpo-gpu.yaml; CUDA only)"
        )
    return {
        "use_vllm": True,
        "vllm_mode": "colocate",
        "vllm_gpu_memory_utilization": cfg.vllm_gpu_memory_utilization,
        "vllm_importance_sampling_correction": True,
        "vllm_importance_sampling_mode": cfg.vllm_importance_sampling_mode,
        "vllm_importance_sampling_clip_min": VLLM_IS_CLIP[0],
        "vllm_importance_sampling_clip_max": VLLM_IS_CLIP[1],
    }


@dataclass(frozen=True)
class RunInputs:
    """What one run trains from: the base model (a local folder, or a hub id read from the cache
    at ``revision``), the data folder, the config's ``task`` section as given, the training config
    and the number of processes. A run folder resumes only from checkpoints trained from the same
    inputs (``identity``)."""

    model_dir: Path | str
    revision: str | None
    data_dir: Path
    task_config: dict[str, Any] | None
    cfg: TrainingConfig
    num_processes: int

    @property
    def train_file(self) -> Path:
        return split_path(self.data_dir, "train")

    @property
    def hub(self) -> dict[str, Any]:
        """The keyword arguments that load the base model and its tokenizer."""
        return {} if _is_local(self.model_dir) else {"revision": self.revision}

    def base_model(self) -> dict[str, Any]:
        """What the objective record says of the base model: where it was read, and where its
        weights came from when a GGUF file was converted into it."""
        from grpo_ablation.policy.gguf import provenance

        local = _is_local(self.model_dir)
        return {
            "model": str(self.model_dir),
            "revision": self.revision,
            "converted_from": provenance(self.model_dir) if local else None,
        }

    def identity(self) -> dict[str, Any]:
        """What a run folder's checkpoints were trained from: the training config, the base
        model (a hub id and revision, or a local folder's weight files by name, size and mtime),
        the training split by content, the task and the number of processes."""
        from grpo_ablation.tasks.splits import sha256

        if _is_local(self.model_dir):
            files = weight_files(Path(self.model_dir))
            base: Any = [[f.name, f.stat().st_size, f.stat().st_mtime_ns] for f in files]
        else:
            base = {"hub": str(self.model_dir), "revision": self.revision}
        return {
            # as the train rule's trigger sees it: an option added at its neutral value leaves
            # an interrupted run's identity, and so its checkpoints, as they were
            "training": self.cfg.rerun_identity(),
            "base_model": base,
            "train_split_sha256": sha256(self.train_file.read_bytes()),
            "task": self.task_config or {},
            "num_processes": self.num_processes,
        }


def train(
    model_dir: Path | str,
    data_dir: Path,
    out: Path,
    cfg: TrainingConfig,
    task_config: dict[str, Any] | None = None,
    reward_func: Any = None,
    callbacks: list[Any] | None = None,
    *,
    compute: ComputeConfig | None = None,
    revision: str | None = None,
    report_to: str = "none",
) -> dict[str, Any]:
    """Train one run into ``out``; resumes if ``out`` holds a complete checkpoint.

    ``model_dir`` is a local Hugging Face directory or a hub id (read from the cache, offline,
    at ``revision``). ``task_config`` is the config's ``task`` section: the task gives the prompts
    and, unless ``reward_func`` overrides it (tests), the reward. ``report_to`` names the live
    trackers (``tensorboard,wandb``; ``grpo_ablation.training.tracking``). ``compute``: the
    config's compute section (device, precision, retention; its defaults when not given).
    Returns the budget and the run info written (in the main process; ``{}`` in the others).
    """
    from accelerate import PartialState

    from grpo_ablation.device import check_dtype, resolve_device
    from grpo_ablation.tasks import get_task
    from grpo_ablation.training.retention import KeepOptimizerStateOfNewest
    from grpo_ablation.training.snapshots import CurveSnapshots
    from grpo_ablation.training.trainer import AblationGRPOTrainer

    _check_inputs(model_dir, data_dir)
    task = get_task(task_config)
    compute = compute or ComputeConfig()
    device = resolve_device(compute.device)
    check_dtype(compute.dtype)
    # cpu=True: on CPU, processes started by torchrun join one gloo group only when the first
    # PartialState of the process says so (it is a singleton; the Trainer's comes later).
    state = PartialState(cpu=device == "cpu")
    run = RunInputs(model_dir, revision, data_dir, task_config, cfg, state.num_processes)
    record = ObjectiveRecord.from_config(
        cfg,
        run.num_processes,
        task.answer_rule,
        base_model=run.base_model(),
        dtype=compute.dtype,
        tf32=compute.tf32 and device != "cpu",
        generation_cache=compute.generation_cache,
        generation_weights=compute.generation_weights,
    )
    _claim_folder(out, run, record, state)
    if reward_func is None:
        reward_func = task.reward_function()
    resume = _resume_point(out, state)
    trackers, tracker_callbacks = tracking.setup(
        tracking.parse(report_to), out, record.to_dict(), state.is_main_process
    )
    args = _build_args(cfg, out, run.num_processes, device == "cpu", compute, trackers)
    tokenizer, model, ignored = _load_policy(run, task)
    trainer = AblationGRPOTrainer(
        model=model,
        args=args,
        train_dataset=_prompts(run, task),
        processing_class=tokenizer,
        reward_funcs=reward_func,
        options=cfg,
        run_dir=out,
        compute=compute,
        # Pruning first, so that later callbacks see the checkpoints as they stay on disk.
        callbacks=[
            KeepOptimizerStateOfNewest(compute.keep_optimizer_state),
            CurveSnapshots(out, cfg.curve_steps, tokenizer),
            *tracker_callbacks,
            *(callbacks or []),
        ],
    )
    elapsed_s = _run_trainer(trainer, resume, cfg.max_steps)

    summary: dict[str, Any] = {}
    if state.is_main_process:
        budget = _write_budget(out, cfg, trainer.state.global_step, elapsed_s)
        info = _write_run_info(
            out, run, task=task, compute=compute, device=device, ignored_generation_config=ignored
        )
        summary = {"budget": budget, "run_info": info}
    state.wait_for_everyone()
    return summary


def _check_inputs(model_dir: Path | str, data_dir: Path) -> None:
    if _is_local(model_dir) and not (Path(model_dir) / "config.json").exists():
        raise FileNotFoundError(
            f"base model directory {model_dir} does not exist or has no config.json "
            "(build it with the base_policy rule, or name a hub model with base_policy.kind: hub)"
        )
    train_file = split_path(data_dir, "train")
    if not train_file.exists():
        raise FileNotFoundError(f"training split {train_file} does not exist")


def _claim_folder(out: Path, run: RunInputs, record: ObjectiveRecord, state: Any) -> None:
    """Make ``out`` the folder of this run and write its objective record. A folder left by
    other inputs (Snakemake reruns a job whose params or inputs changed, and keeps the
    checkpoints: only run_info.json is declared) is never resumed: its state is cleared."""
    out.mkdir(parents=True, exist_ok=True)
    if state.is_main_process:
        identity = run.identity()
        if _read_json(out / RUN_IDENTITY) != identity:
            _clear_run(out)
            (out / RUN_IDENTITY).write_text(json.dumps(identity, indent=2, sort_keys=True) + "\n")
        record.write(out)
    state.wait_for_everyone()


def _resume_point(out: Path, state: Any) -> Path | None:
    """The checkpoint the run resumes from, with the logs cut back to its step (they are
    written again as the run gets there); None, with every earlier log removed, for a fresh
    start."""
    resume = last_checkpoint(out)
    if resume is None:
        if state.is_main_process:
            _remove_logs(out)
    else:
        _cut_logs_back(out, checkpoint_step(resume), state)
    state.wait_for_everyone()
    return resume


def _remove_logs(out: Path) -> None:
    for stale in (METRICS_LOG, ROLLOUTS, CURVE_POLICIES):
        path = out / stale
        if path.exists():
            shutil.rmtree(path) if path.is_dir() else path.unlink()


def _cut_logs_back(out: Path, step: int, state: Any) -> None:
    """Metrics, checkpoints and curve policies after ``step`` removed (by the main process), and
    each process's rollouts after it."""
    from grpo_ablation.training.rollout_log import RolloutLog
    from grpo_ablation.training.snapshots import snapshots

    if state.is_main_process:
        _truncate_jsonl(out / METRICS_LOG, step)
        # Checkpoints newer than the resume point are incomplete: never take them for done.
        for partial in saved_checkpoints(out):
            if checkpoint_step(partial) > step:
                shutil.rmtree(partial)
        for later, snapshot in snapshots(out):
            if later > step:
                shutil.rmtree(snapshot)
    RolloutLog(out / ROLLOUTS, state.process_index).truncate_after(step)


def _load_policy(run: RunInputs, task: Task) -> tuple[Any, Any, dict[str, Any]]:
    """The base model's tokenizer and model, and what its generation config set that the
    rollouts will not use."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(run.model_dir, **run.hub)
    if task.chat_template and not tokenizer.chat_template:
        raise ValueError(
            f"task '{task.kind}' declares chat_template: true but the tokenizer of {run.model_dir} "
            "has no chat template; set task.chat_template: false to feed prompts raw"
        )
    # Master weights (and AdamW's moments) stay float32 whatever compute.dtype says: bfloat16
    # weights would round away updates of lr 1e-6 (its spacing near 0.05 is ~2e-4). bfloat16 is
    # the autocast precision of the forward and backward passes (GRPOConfig.bf16).
    model = AutoModelForCausalLM.from_pretrained(run.model_dir, dtype=torch.float32, **run.hub)
    # Rollouts follow the sampling protocol set in _build_args, never the checkpoint's defaults
    # (TRL saves this neutral config into every checkpoint, which evaluation loads again).
    ignored = neutral_generation_config(model)
    return tokenizer, model, ignored


def _prompts(run: RunInputs, task: Task) -> Any:
    """The training split as TRL takes it (through the task's chat prompt when it declares a
    chat template)."""
    from datasets import load_dataset

    dataset = load_dataset("json", data_files=str(run.train_file), split="train")
    if task.chat_template:
        dataset = dataset.map(lambda row: {"prompt": task.prompt(row)})
    return dataset


def _run_trainer(trainer: Any, resume: Path | None, max_steps: int) -> float:
    """Train, from ``resume`` when given; the seconds it took. A run killed after its final
    checkpoint is finished: its state is loaded, not trained (the Trainer, resumed there, would
    take one more step before it checks max_steps)."""
    started = time.time()
    if resume is not None and checkpoint_step(resume) >= max_steps:
        from transformers import TrainerState

        trainer.state = TrainerState.load_from_json(str(resume / TRAINER_STATE))
    else:
        trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    return time.time() - started


# What a run folder holds from training (objective.json and run_identity.json are rewritten).
_RUN_STATE = (
    CHECKPOINTS,
    METRICS_LOG,
    ROLLOUTS,
    CURVE_POLICIES,
    WALL_TIME,
    BUDGET,
    RUN_INFO,
    "tensorboard",
)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _clear_run(out: Path) -> None:
    for name in _RUN_STATE:
        path = out / name
        if path.is_symlink():  # the checkpoints folder elsewhere (link_checkpoints): emptied
            shutil.rmtree(path.resolve(), ignore_errors=True)
            path.resolve().mkdir(parents=True, exist_ok=True)
        elif path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


def _split_hashes(manifest: Path) -> dict[str, str] | None:
    """sha256 of each split file, from the manifest the task's split writer left beside them."""
    if not manifest.exists():
        return None
    splits = json.loads(manifest.read_text()).get("splits", {})
    return {name: entry["sha256"] for name, entry in sorted(splits.items())}


def _write_budget(
    out: Path, cfg: TrainingConfig, optimizer_steps: int, elapsed_s: float
) -> dict[str, Any]:
    """``budget.json``: what the run spent, counted from its rollouts; the wall time adds up the
    attempts (a resumed run's included)."""
    from grpo_ablation.training.rollout_log import read_rollouts

    rollouts = read_rollouts(out / ROLLOUTS)
    attempts_path = out / WALL_TIME
    attempts = json.loads(attempts_path.read_text()) if attempts_path.exists() else []
    attempts.append(elapsed_s)
    attempts_path.write_text(json.dumps(attempts))
    budget = {
        "optimizer_steps": optimizer_steps,
        "generation_steps": int(rollouts["step"].nunique()),
        "prompts": int(rollouts.groupby("step")["group_index"].nunique().sum()),
        "completions": len(rollouts),
        # the optimizer side: completions that entered a training batch (resample generates
        # more than it trains on; the others equal completions)
        "completions_in_batch": int(rollouts["in_batch"].fillna(True).astype(bool).sum())
        if "in_batch" in rollouts
        else len(rollouts),
        "generated_tokens": int(rollouts["length"].sum()),
        "reward_calls": len(rollouts),
        "scoring_failures": int(rollouts["reward"].isna().sum()),
        "wall_time_s": sum(attempts),
        "attempts": len(attempts),
        "nominal": cfg.nominal_budget(),
    }
    (out / BUDGET).write_text(json.dumps(budget, indent=2) + "\n")
    return budget


def _write_run_info(
    out: Path,
    run: RunInputs,
    *,
    task: Task,
    compute: ComputeConfig,
    device: str,
    ignored_generation_config: dict[str, Any],
) -> dict[str, Any]:
    """``run_info.json``: where the run came from and what ran it (``device``: compute.device
    resolved), its checkpoints and curve policies."""
    from grpo_ablation.device import device_info, peak_memory
    from grpo_ablation.training.snapshots import snapshots

    info = {
        "git_commit": git_commit(),
        "training_config": asdict(run.cfg),
        "training_config_hash": config_hash(run.cfg),
        "task_config": task.to_dict() | {"kind": task.kind},
        "base_model": str(run.model_dir),
        "base_model_revision": run.revision,
        # What the base model's generation_config.json set that the rollouts did not use.
        "ignored_generation_config": ignored_generation_config,
        "compute": device_info(device, compute.dtype)
        | {
            "gradient_checkpointing": compute.gradient_checkpointing,
            "generation_cache": compute.generation_cache,
            "generation_weights": compute.generation_weights,
        },
        "split_hashes": _split_hashes(run.data_dir / MANIFEST),
        "library_versions": library_versions(),
        "num_processes": run.num_processes,
        "checkpoints": sorted(checkpoint_step(p) for p in saved_checkpoints(out)),
        # The weights-only policies of the efficiency curve (grpo_ablation.training.snapshots).
        "curve_steps": [step for step, _ in snapshots(out)],
        "curve_policies": {str(step): str(p.relative_to(out)) for step, p in snapshots(out)},
        # Read from the newest checkpoint's file: what a launcher preset saved, not what it
        # was asked for (DeepSpeed saves its bf16 module under bf16 mixed precision).
        "checkpoint_dtypes": checkpoint_dtypes(last_checkpoint(out)),
        # Measured by the process that trained (a job worker's client sees only itself).
        "peak_memory": peak_memory().megabytes(),
    }
    (out / RUN_INFO).write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")
    return info
