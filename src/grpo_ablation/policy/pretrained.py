"""The base policy of a config: a pretrained model (``base_policy.kind: hub``, a hub id or a local
Hugging Face folder) or the local character GPT-2 (``kind: local``, ``base_policy.py``).

With ``sft_steps: 0`` (the cluster preset) the base policy *is* that model: nothing is copied, and
every job loads the folder of its pinned ``revision`` in the cache the prefetch rule filled (the
snapshot path ``base_policy.json`` records as ``model``; never the bare hub id, which offline
needs a ``refs/main`` a pinned download does not write, and online reads ``main``). With
``sft_steps > 0`` it is first warm-started on the task's supervised pairs (``Task.sft_pairs``) and
saved under ``base/model``; the CPU stand-in of ``config/cluster_smoke.yaml`` needs this, since a
random model solves nothing and every GRPO group would be all-incorrect.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from grpo_ablation.design.base_policy import PretrainedBaseConfig, base_policy_of
from grpo_ablation.design.options import ComputeConfig
from grpo_ablation.layout import WARM_START, split_path
from grpo_ablation.tasks import Task
from grpo_ablation.tasks.splits import read_split


def build_base_policy(
    base: dict[str, Any], task: Task, splits: Path, out_dir: Path, compute: ComputeConfig
) -> dict[str, Any]:
    """The base policy of a config's ``base_policy`` section, either kind; returns what
    ``base_policy.json`` records (``model``: a folder or hub id, ``revision``)."""
    cfg = base_policy_of(base)
    if isinstance(cfg, PretrainedBaseConfig):
        return warm_start_base(cfg, task, splits, out_dir, compute)
    if not task.local_base:
        raise ValueError(
            f"base_policy.kind local builds a character GPT-2 for the addition task; "
            f"task '{task.kind}' needs base_policy.kind: hub"
        )
    from grpo_ablation.policy.base_policy import warm_start

    stats = warm_start(cfg, splits, out_dir)
    return {"kind": "local", "model": str(out_dir), "revision": None, "stats": stats}


def warm_start_base(
    cfg: PretrainedBaseConfig, task: Task, splits: Path, out_dir: Path, compute: ComputeConfig
) -> dict[str, Any]:
    """Resolve (and optionally warm-start) the base policy; return its ``base_policy.json``."""
    from grpo_ablation.hub import hub_snapshot

    info: dict[str, Any] = {"kind": "hub", "config": asdict(cfg)}
    local = Path(cfg.name).exists()
    source = Path(cfg.name) if local else hub_snapshot(cfg.name, cfg.revision)
    if cfg.gguf:
        from grpo_ablation.policy.gguf import provenance

        info["conversion"] = provenance(source)  # the GGUF and package the weights came from
    if cfg.sft_steps == 0:
        # revision None: "model" is a folder, the pinned snapshot itself (config keeps the id).
        return info | {"model": str(source), "revision": None, "stats": None}

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from grpo_ablation.device import resolve_device
    from grpo_ablation.policy.sft import warm_start_pretrained

    tokenizer = AutoTokenizer.from_pretrained(source)
    # float32 master weights, as in training (train.py says why).
    model = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32)
    model.to(resolve_device(compute.device))
    pairs = task.sft_pairs(read_split(split_path(splits, "train")))
    started = time.perf_counter()
    losses = warm_start_pretrained(
        model,
        tokenizer,
        pairs,
        steps=cfg.sft_steps,
        batch_size=cfg.sft_batch_size,
        lr=cfg.sft_lr,
        seed=cfg.seed,
    )
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    stats = {
        "sft_seconds": round(time.perf_counter() - started, 2),
        "sft_loss_first": losses[0],
        "sft_loss_last_10_mean": sum(losses[-10:]) / len(losses[-10:]),
        "n_parameters": sum(p.numel() for p in model.parameters()),
    }
    (out_dir / WARM_START).write_text(json.dumps(stats, indent=2) + "\n")
    return info | {
        "model": str(out_dir),
        "revision": None,
        "warm_started_from": cfg.name,
        "stats": stats,
    }
