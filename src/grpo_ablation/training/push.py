"""The push of each objective, measured on the same samples, with no training noise.

For one policy (the base policy, or a checkpoint of a stage's reference run) and R independent
replicates: fold A (n prompts × G completions, keyed samples) defines the update direction d_c of
every choice c (each std scaling × aggregation) as a weighting of the same per-completion score
vectors ∇ log π(y_i) (``grpo_ablation.objective.push``); fold B (n other prompts, other samples)
estimates the gradients of expected accuracy, of the mean length of incorrect completions and of
the mean P(mixed group). Per replicate and choice: the push d_c · ∇J / |d_c| (the first-order
change of J per unit L2 step along the update; the folds being independent, unbiased for
accuracy and P(mixed), consistent for the incorrect length, a ratio), the share
of the update's token weight on long incorrect completions, and the cosine between every pair of
update directions. Intervals are t intervals over the replicates (independent prompt sets).

``parameters`` (a regular expression over parameter names; all of them when unset) restricts every
gradient to the parameters it matches, the others held fixed: the push is then the first-order
change along the update's component in that subspace. It makes the push affordable for a real LLM
on a CPU (20 full gradients of SmolLM2-135M are 21 GB, and each backward pass runs through all 30
layers; the top blocks alone cost a fraction of both). The record names the pattern and the
number of parameters it kept.

Each replicate draws its 2n prompts from the whole training split (``replicate_folds``), so
replicates are independent draws given the split, as many as the design asks. Two purposes draw
with keys of their own, so that a test is never sized on its own samples: ``test`` (the
replicates a declared push hypothesis is judged on) and ``pilot`` (the replicates its SD is
planned from, at the base policy).

A killed push resumes: each finished replicate is kept beside the output (``replicates_folder``)
under a key of everything its numbers depend on, and a rerun loads the replicates whose key
matches (their sampling is keyed, so the others come out as they would have).
"""

from __future__ import annotations

import itertools
import json
import math
import random
import re
import shutil
from pathlib import Path
from typing import Any

import torch

from grpo_ablation.keyed_sampling import KeyedGumbel, completion_key
from grpo_ablation.layout import PUSH_PURPOSES, split_path, weight_identity
from grpo_ablation.objective.conventions import AGGREGATIONS, SCALINGS
from grpo_ablation.objective.push import (
    accuracy_weights,
    choice_weights,
    incorrect_length_weights,
    long_incorrect_share,
    mixed_weights,
)
from grpo_ablation.policy.sft import prompt_ids
from grpo_ablation.sampling import SAMPLING, neutral_generation_config, stop_token_ids
from grpo_ablation.settings import config_hash
from grpo_ablation.tasks.splits import sha256

QUANTITIES = ("accuracy", "incorrect_length", "mixed")
CHOICES = [f"{s}/{a}" for s, a in itertools.product(SCALINGS, AGGREGATIONS)]


def _pad_id(tokenizer: Any) -> int:
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id


def _left_pad(seqs: list[list[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(s) for s in seqs)
    ids = torch.tensor([[pad] * (width - len(s)) + s for s in seqs])
    mask = torch.tensor([[0] * (width - len(s)) + [1] * len(s) for s in seqs])
    return ids, mask


def sample_fold(
    model: Any, tokenizer: Any, rows: list[dict], prompts: list[list[int]], cfg: dict, key: tuple
) -> dict[str, Any]:
    """G keyed completions of every prompt of the fold, their token ids, lengths and rewards."""
    G, eos, pad = (
        cfg["group_size"],
        stop_token_ids(tokenizer.eos_token_id, model.generation_config.eos_token_id),
        _pad_id(tokenizer),
    )
    seqs = [p for p in prompts for _ in range(G)]
    keys = [completion_key(*key, r["prompt_id"], slot) for r in rows for slot in range(G)]
    ids, mask = _left_pad(seqs, pad)
    with torch.no_grad():
        out = model.generate(
            input_ids=ids,
            attention_mask=mask,
            do_sample=True,
            temperature=cfg["temperature"],
            **{k: v for k, v in SAMPLING.items() if v is not None},
            max_new_tokens=cfg["max_completion_length"],
            pad_token_id=pad,
            eos_token_id=eos,
            logits_processor=[KeyedGumbel(keys, cfg["temperature"])],
        )
    completions = []
    for row in out[:, ids.shape[1] :].tolist():
        end = next((i + 1 for i, t in enumerate(row) if t in eos), len(row))
        completions.append(row[:end])
    texts = tokenizer.batch_decode(completions, skip_special_tokens=True)
    columns = {k: [r[k] for r in rows for _ in range(G)] for k in rows[0] if k != "prompt"}
    prompt_texts = [r["prompt"] for r in rows for _ in range(G)]
    rewards = cfg["reward"](prompt_texts, texts, **columns)
    reward = torch.tensor(
        [math.nan if x is None else float(x) for x in rewards], dtype=torch.float64
    )
    return {
        "prompts": seqs,
        "completions": completions,
        "lengths": torch.tensor([len(c) for c in completions], dtype=torch.float64),
        "rewards": reward,
        "correct": (reward >= cfg["success_threshold"]).double(),
        "failed": torch.isnan(reward),
    }


def score_gradients(
    model: Any, fold: dict, weightings: list[torch.Tensor], temperature: float, pad: int
) -> list[torch.Tensor]:
    """Σ_i v_i ∇ log π(y_i) for each weighting v, flattened over the trainable parameters, with
    the positions of sampling (counted over attended tokens, as ``generate`` does)."""
    prompts, completions = fold["prompts"], fold["completions"]
    width = max(len(p) for p in prompts)
    rows, masks, targets = [], [], []
    longest = max(len(c) for c in completions)
    for p, c in zip(prompts, completions, strict=True):
        left = width - len(p)
        right = longest - len(c)
        rows.append([pad] * left + p + c + [pad] * right)
        masks.append([0] * left + [1] * (len(p) + len(c)) + [0] * right)
        targets.append([0] * (width - 1) + [1] * len(c) + [0] * right)
    ids, mask = torch.tensor(rows), torch.tensor(masks)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    logits = model(input_ids=ids, attention_mask=mask, position_ids=positions).logits[:, :-1]
    logp = torch.log_softmax(logits.double() / temperature, dim=-1)
    token = logp.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    seq = (token * torch.tensor(targets, dtype=torch.float64)).sum(-1)
    params = [p for p in model.parameters() if p.requires_grad]
    out = []
    for k, v in enumerate(weightings):  # one forward pass, a backward pass per weighting
        grads = torch.autograd.grad(
            (v.to(seq.dtype) * seq).sum(), params, retain_graph=k < len(weightings) - 1
        )
        out.append(torch.cat([g.reshape(-1).double() for g in grads]))
    return out


def scored_groups(fold: dict[str, Any], G: int) -> dict[str, Any]:
    """The fold without the groups that hold a scoring failure (a failed reward is neither right
    nor wrong: the measured quantities are over scored prompts)."""
    keep = [
        g
        for g in range(len(fold["completions"]) // G)
        if not fold["failed"][g * G : (g + 1) * G].any()
    ]
    rows = [g * G + i for g in keep for i in range(G)]
    return {k: ([v[i] for i in rows] if isinstance(v, list) else v[rows]) for k, v in fold.items()}


def replicate(
    model: Any,
    tokenizer: Any,
    folds: tuple[dict, dict],
    cfg: dict,
    choices: list[str] | None = None,
) -> dict[str, Any]:
    """One replicate: directions from fold A, gradients of the measured quantities from fold B,
    for ``choices`` (every one when None). Each direction is its own backward pass, so a choice's
    numbers are the same bits whichever others are measured with it."""
    a, b = folds
    G, pad = cfg["group_size"], _pad_id(tokenizer)
    weights = {
        c: choice_weights(
            a["rewards"],
            a["lengths"],
            G,
            *c.split("/"),
            cfg["std_eps"],
            cfg["max_completion_length"],
        )
        for c in choices or CHOICES
    }
    grads = score_gradients(model, a, list(weights.values()), cfg["temperature"], pad)
    directions = dict(zip(weights, grads, strict=True))
    b = scored_groups(b, G)
    if not b["completions"]:
        raise RuntimeError("push: every group of a measuring fold has a scoring failure")
    measures = [
        accuracy_weights(b["correct"], G),
        incorrect_length_weights(b["correct"], b["lengths"], G),
        mixed_weights(b["correct"], G),
    ]
    gradients = dict(
        zip(QUANTITIES, score_gradients(model, b, measures, cfg["temperature"], pad), strict=True)
    )
    choices = {}
    for c, d in directions.items():
        norm = float(d.norm())
        choices[c] = {
            "norm": norm,
            "push": {
                q: (float(d @ j) / norm if norm > 0 else math.nan) for q, j in gradients.items()
            },
            "long_incorrect_share": long_incorrect_share(weights[c], a["lengths"], a["correct"]),
        }
    cosines = {}
    for x, y in itertools.combinations(directions, 2):
        nx, ny = directions[x].norm(), directions[y].norm()
        cosines[f"{x}|{y}"] = (
            float(directions[x] @ directions[y] / (nx * ny)) if nx * ny > 0 else math.nan
        )
    return {
        "choices": choices,
        "cosine": cosines,
        "accuracy_a": float(a["correct"].mean()),
        "accuracy_b": float(b["correct"].mean()),
        "failed": int(a["failed"].sum()),
        "groups_measured": len(b["completions"]) // G,
    }


def differentiate_only(model: Any, pattern: str | None) -> dict[str, Any]:
    """Hold fixed every parameter whose name does not match ``pattern`` (None: none); return the
    pattern and how many parameters are differentiated of how many."""
    total = sum(p.numel() for p in model.parameters())
    if pattern:
        for name, p in model.named_parameters():
            p.requires_grad_(re.search(pattern, name) is not None)
    kept = sum(p.numel() for p in model.parameters() if p.requires_grad)
    if kept == 0:
        raise ValueError(f"push.parameters={pattern!r} matches no parameter of the model")
    return {"pattern": pattern, "differentiated": kept, "of": total}


def measure(
    model_dir: Path,
    rows: list[dict],
    task: Any,
    cfg: dict,
    *,
    step: int,
    seed: int,
    purpose: str = "test",
    resume: Path | None = None,
) -> dict[str, Any]:
    """Every replicate at one policy, each on two folds of the training split's ``rows``
    (``replicate_folds``). Prompt draws and sampling keys name the purpose, so a pilot and a
    test never share a sample. With ``resume``, finished replicates are kept there and reused."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    parameters = differentiate_only(model, cfg["parameters"])
    neutral_generation_config(model)
    model.eval()  # no dropout: the directions are those of the policy that sampled
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    n = cfg["prompts_per_fold"]
    replicates = []
    # The first full_replicates measure every choice (the tables, figure and cosines); the others
    # only those the declared push hypotheses compare, which cost a backward pass each.
    full = cfg["full_replicates"] or cfg["replicates"]
    identity = replicate_identity(model_dir, rows, cfg, step=step, seed=seed, purpose=purpose)
    for r in range(cfg["replicates"]):
        choices = None if r < full else cfg["hypothesis_choices"]
        kept = None if resume is None else resume / f"step{step:06d}_r{r:04d}.json"
        key = config_hash({"policy": identity, "replicate": r, "choices": choices})
        if kept is not None and kept.is_file():
            saved = json.loads(kept.read_text())
            if saved.get("key") == key:
                replicates.append(saved["replicate"])
                continue
        folds = []
        for f, part in enumerate(replicate_folds(rows, n, purpose, seed, r), start=2 * r):
            prompts = [prompt_ids(tokenizer, task.prompt(x)) for x in part]
            sample_key = ("push", purpose, seed, step, f)
            folds.append(sample_fold(model, tokenizer, part, prompts, cfg, sample_key))
        replicates.append(replicate(model, tokenizer, (folds[0], folds[1]), cfg, choices))
        if kept is not None:
            kept.parent.mkdir(parents=True, exist_ok=True)
            partial = kept.with_suffix(".part")
            partial.write_text(json.dumps({"key": key, "replicate": replicates[-1]}) + "\n")
            partial.replace(kept)  # a replicate file is whole or absent
    return {
        "step": step,
        "policy": str(model_dir),
        "parameters": parameters,
        "replicates": replicates,
    }


def replicate_identity(
    model_dir: Path, rows: list[dict], cfg: dict, *, step: int, seed: int, purpose: str
) -> str:
    """What a replicate's numbers depend on besides its index and choices: the policy's weight
    files (name, size, mtime), the training rows, the push's settings and this module's code."""
    settings = {k: v for k, v in cfg.items() if k != "reward"}
    return config_hash(
        {
            "weights": weight_identity(model_dir),
            "rows": sha256(json.dumps(rows, sort_keys=True).encode()),
            "settings": settings,
            "step": step,
            "seed": seed,
            "purpose": purpose,
            "code": sha256(Path(__file__).read_bytes()),
        }
    )


def replicates_folder(out: Path) -> Path:
    """Where a push writing ``out`` keeps its finished replicates until ``out`` is written."""
    return out.with_name(out.name + ".replicates")


def replicate_folds(rows: list[dict], n: int, purpose: str, seed: int, r: int) -> list[list[dict]]:
    """The two folds of replicate ``r``: 2n distinct prompts drawn from the whole training split
    by a generator keyed by (purpose, seed, r). Replicates are then independent and identically
    distributed given the split (whatever their number, the split's size bounds none), and the
    same at every policy measured, so the base policy and a checkpoint see the same prompts."""
    if 2 * n > len(rows):
        raise ValueError(
            f"a push replicate takes 2 x {n} prompts; the training split has {len(rows)}"
        )
    picked = random.Random(f"push|{purpose}|{seed}|{r}").sample(rows, 2 * n)
    return [picked[:n], picked[n:]]


def run_push(
    policies: list[tuple[int, Path]],
    data: Path,
    task_config: dict,
    training: dict,
    push: dict,
    out: Path,
    seed: int = 0,
    purpose: str = "test",
) -> Path:
    """``out``: the push of every choice at each policy (JSON), for one purpose (``PUSH_PURPOSES``)."""
    from grpo_ablation.tasks import get_task

    if purpose not in PUSH_PURPOSES:
        raise ValueError(f"push purpose {purpose!r}; expected one of {list(PUSH_PURPOSES)}")
    task = get_task(task_config)
    rows = [json.loads(x) for x in split_path(data, "train").read_text().splitlines()]
    replicates = push["replicates" if purpose == "test" else "pilot_replicates"]
    cfg = {
        **{
            k: training[k]
            for k in ("group_size", "temperature", "max_completion_length", "std_eps")
        },
        "success_threshold": training["success_threshold"],
        "reward": task.reward_function(),
        **push,
        "replicates": replicates,
    }
    # A pilot measures every choice; a test beyond its full replicates only the hypotheses'.
    if purpose == "pilot" or not push.get("hypothesis_choices"):
        cfg["full_replicates"] = replicates
    torch.manual_seed(seed)
    kept = replicates_folder(out)
    results = [
        measure(path, rows, task, cfg, step=step, seed=seed, purpose=purpose, resume=kept)
        for step, path in policies
    ]
    record = {
        "purpose": purpose,
        "choices": CHOICES,
        "quantities": list(QUANTITIES),
        "group_size": training["group_size"],
        "prompts_per_fold": push["prompts_per_fold"],
        "replicates": replicates,
        "policies": results,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    shutil.rmtree(kept, ignore_errors=True)
    return out
