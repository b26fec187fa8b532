"""Independent evaluation of checkpoints on the held-out test split with lm-eval.

This module deliberately imports nothing from the training code. What it shares with training is
the *declared* answer rule (``full_match_digits`` for the addition task, ``math_verify`` for math),
named in the task and recorded in both ``objective.json`` and every ``results.json``; the rule is
implemented a second time for the evaluation (``answer_rules/``), a small module that
``task_folders`` writes next to the task YAML (``grpo_answer.py``) and lm-eval loads as its metric.
A test checks that the two implementations agree.

The evaluation asks the question training asks: the prompt column fed verbatim (through the model's
chat template when the task declares one, as TRL does for conversational prompts), generation
stopped at the model's eos, the same ``max_gen_toks`` as training's ``max_completion_length``.

The tasks (greedy, sampled and, where the accepted completions can be enumerated, exact) are
written by ``task_folders``; the model is loaded and patched by ``model``; the samples are scored
by ``scoring``; this module runs lm-eval over the checkpoints, resumes and writes.

Resuming: a checkpoint's evaluation is finished when its ``done.json`` (written after its results
and sample log) holds the key of what was evaluated: the checkpoint's weight files (path, size,
modification time) or hub id and revision, the task files, the rows they point at and the
evaluation code (by content), seeds, batch size, device, precision, backend, limit, external benchmarks
and library versions. A rerun (a retry, or a job killed
mid-way) skips every checkpoint whose key matches and evaluates the rest; anything else changed
evaluates it again.

Determinism: the four lm-eval seeds are reset before every checkpoint, so reruns on the same machine
give byte-identical results.json and samples.jsonl. With the keyed sampler (the default) a sampled
completion depends on its prompt and repeat only; with ``stream`` it also depends on the batch
size (batch composition changes how the random stream is consumed).
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import resource
import time
from pathlib import Path
from typing import Any

from grpo_ablation.compute import OFFLINE_VARS
from grpo_ablation.evaluation.model import (
    evaluation_versions,
    keyed_generation,
    lm_eval_seeds,
    load_lm,
    ready_for_exact,
    time_generation,
    without_env_probe,
)
from grpo_ablation.evaluation.scoring import (
    checkpoint_numbers,
    run_external,
    score_exact,
    score_tasks,
)
from grpo_ablation.evaluation.task_folders import EXACT_MODULE, load_rule
from grpo_ablation.layout import CURVE, MANIFEST, SUMMARY
from grpo_ablation.sampling import (
    sampler_description,
)
from grpo_ablation.settings import weight_files
from grpo_ablation.tasks.splits import sha256

DONE = "done.json"
# The code an evaluation's numbers come from (part of its cache key).
CODE = [
    Path(__file__).with_name(f"{m}.py") for m in ("evaluate", "model", "scoring", "task_folders")
]


def _task_content(task_dir: Path, manifest: dict[str, Any]) -> list[Any]:
    """What an evaluation's results depend on besides the weights and options: the task files,
    and the rows they point at and the evaluation code by content (a new split or a fix of the
    evaluation evaluates every checkpoint again)."""
    tasks_text = {p.name: p.read_text() for p in sorted(task_dir.iterdir()) if p.is_file()}
    return [tasks_text, *(sha256(Path(p).read_bytes()) for p in (manifest["test"], *CODE))]


def _checkpoint_identity(ckpt: str, local: bool, revision: str | None) -> Any:
    if not local:
        return {"hub": ckpt, "revision": revision}
    # Weight files identify a checkpoint; optimizer state may be pruned later (retention).
    return [[str(f), f.stat().st_size, f.stat().st_mtime_ns] for f in weight_files(Path(ckpt))]


def _finished(step_dir: Path, key: str) -> dict | None:
    """The results of a checkpoint evaluated before under the same key, else None."""
    try:
        done = json.loads((step_dir / DONE).read_text())
        if done["key"] == key and (step_dir / "samples.jsonl").is_file():
            return json.loads((step_dir / "results.json").read_text())
    except (OSError, ValueError, KeyError):
        pass
    return None


def _write_checkpoint(
    step_dir: Path, result: dict[str, Any], rows: list[dict], timing: dict[str, Any], key: str
) -> None:
    """``results.json``, ``samples.jsonl``, ``timing.json`` (apart, so that results.json is
    byte-identical across reruns), then ``done.json`` with the key: the step is finished."""
    step_dir.mkdir(parents=True, exist_ok=True)
    (step_dir / "results.json").write_text(json.dumps(result, indent=2) + "\n")
    with (step_dir / "samples.jsonl").open("w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    (step_dir / "timing.json").write_text(json.dumps(timing, indent=2) + "\n")
    (step_dir / DONE).write_text(json.dumps({"key": key}) + "\n")


def evaluate_checkpoints(
    checkpoints: list[tuple[int, Path]],
    task_dir: Path,
    out_dir: Path,
    *,
    batch_size: int = 64,
    device: str = "cpu",
    dtype: str = "float32",
    seed: int = 0,
    limit: int | None = None,
    revision: str | None = None,
    external: list[str] | None = None,
    backend: str = "hf",
    process_per_checkpoint: bool | None = None,
    only: int | None = None,
) -> list[dict]:
    """Evaluate every checkpoint on the tasks of ``task_dir``: in this one process, or each in a
    process of its own (``process_per_checkpoint``; the default with vLLM, which does not reliably
    free an engine's GPU memory within a process, so one engine per process and a fresh process
    per checkpoint). ``only`` evaluates the checkpoint of that index alone (what each of those
    processes runs) and writes no summary.

    A checkpoint is a local directory or a hub name (the base policy of a preset; ``revision``
    pins it). ``external`` names lm-eval built-in benchmarks (e.g. ``gsm8k``) evaluated as extra,
    clearly labelled columns under ``external_benchmarks``: their own prompts, few-shot examples
    and answer extraction, so never comparable with the headline.

    Writes ``out_dir/step=<N>/results.json``, ``samples.jsonl`` and ``timing.json`` (kept apart so
    that results.json is byte-identical across reruns), plus ``out_dir/summary.json`` listing the
    results of all checkpoints of this call, and returns that list.
    All four lm-eval seeds are set to ``seed`` for every checkpoint, so each checkpoint sees the
    same random stream regardless of its position in the list.
    """
    if process_per_checkpoint is None:
        process_per_checkpoint = backend == "vllm"
    if process_per_checkpoint and only is None:
        options = dict(
            batch_size=batch_size, device=device, dtype=dtype, seed=seed, limit=limit,
            revision=revision, external=external, backend=backend, process_per_checkpoint=False,
        )  # fmt: skip
        spawn = multiprocessing.get_context("spawn")  # a fresh interpreter: nothing inherited
        for i, (step, _) in enumerate(checkpoints):
            child = spawn.Process(
                target=evaluate_checkpoints,
                args=(checkpoints, task_dir, out_dir),
                kwargs={**options, "only": i},
            )
            child.start()
            child.join()
            if child.exitcode:
                raise RuntimeError(
                    f"evaluation of step {step} failed in its own process (exit code "
                    f"{child.exitcode}); its log is above"
                )
        # Every checkpoint is finished now: the loop below reads them back and writes the summary.
    t0 = time.perf_counter()
    import lm_eval
    import lm_eval.models.huggingface
    from lm_eval.tasks import TaskManager

    import_s = time.perf_counter() - t0

    task_dir, out_dir = Path(task_dir), Path(out_dir)
    manifest = json.loads((task_dir / MANIFEST).read_text())
    roles: dict[str, str] = manifest["tasks"]
    # include_defaults=False skips indexing lm-eval's hundreds of built-in tasks (~13 s).
    task_manager = TaskManager(include_path=str(task_dir.resolve()), include_defaults=False)
    index_s = time.perf_counter() - t0 - import_s
    seeds = lm_eval_seeds(seed)
    versions = evaluation_versions()
    all_results = []
    rule = load_rule(task_dir)
    exact = load_rule(task_dir, EXACT_MODULE) if "exact" in roles else None
    sampler = manifest.get("sampler", "stream")  # task folders written before keyed sampling
    settings = [seeds, batch_size, device, dtype, limit, backend, external, versions]
    settings += _task_content(task_dir, manifest)
    for i, (step, ckpt) in enumerate(checkpoints):
        if only is not None and i != only:
            continue
        local = Path(ckpt).exists()
        ckpt = str(Path(ckpt).resolve()) if local else str(ckpt)
        step_dir = out_dir / f"step={step}"
        # The exact task's unresolved mass at the last checkpoint only (it costs ~8x the exact
        # value): the one the contrasts are read at.
        last = i == len(checkpoints) - 1
        run_roles = [r for r in roles if r != ("exact" if last else "exact_bounded")]
        identity = _checkpoint_identity(ckpt, local, None if local else revision)
        key = [identity, settings, run_roles]
        key = hashlib.sha256(json.dumps(key, default=str).encode()).hexdigest()
        finished = _finished(step_dir, key)
        if finished is not None:
            all_results.append(finished)
            continue
        if process_per_checkpoint and only is None:  # its process ran: never load it here
            raise RuntimeError(f"step {step} was evaluated in its own process but is not finished")
        (step_dir / DONE).unlink(missing_ok=True)
        t1 = time.perf_counter()
        lm, ignored = load_lm(
            ckpt, device, batch_size, dtype, None if local else revision, backend, seed
        )
        if "exact" in roles:
            ready_for_exact(lm, manifest, backend, ckpt)
        if sampler == "keyed":
            keyed_generation(lm, seed, backend)
        t2 = time.perf_counter()
        gen_s = time_generation(lm)
        with without_env_probe():
            out = lm_eval.simple_evaluate(
                model=lm,
                tasks=[roles[r] for r in run_roles],
                task_manager=task_manager,
                limit=limit,
                log_samples=True,
                verbosity="WARNING",
                apply_chat_template=bool(manifest["chat_template"]),
                **seeds,
            )
            ext = run_external(lm, external, limit, seeds) if external else {}
        t3 = time.perf_counter()
        rows, metrics = score_tasks(out, roles, run_roles, lm.tokenizer, rule, exact)
        result = {
            **checkpoint_numbers(step, ckpt, rows, metrics, manifest),
            "limit": limit,
            "tasks": metrics,
            "task_names": roles,
            # The declared rule training's reward uses too (objective.json names it).
            "answer_rule": manifest["answer_rule"],
            "chat_template": manifest["chat_template"],
            # The complete sampling protocol of each task, and what the checkpoint's own
            # generation config said that was not used.
            "sampling": manifest["sampling"],
            "sampler": sampler_description(sampler, backend == "vllm", evaluation=True),
            "ignored_generation_config": ignored,
            "test": manifest["test"],
            "external_benchmarks": ext,
            "seeds": seeds,
            "batch_size": batch_size,
            "device": device,
            "dtype": dtype,
            "backend": backend,
            "revision": None if local else revision,
            "offline": {k: os.environ.get(k) for k in OFFLINE_VARS},
            "lm_eval_version": versions["lm_eval"],
            "versions": versions,
        }
        timing = {
            "import_lm_eval_s": import_s,
            "task_index_s": index_s,
            "load_s": t2 - t1,
            "evaluate_s": t3 - t2,
            "generate_s": gen_s[0],
            "score_s": time.perf_counter() - t3,  # the samples scored and summarised
            # This process's peak (a job-worker child's when GRPO_WORKER is used:
            # Snakemake's benchmark then measures only the thin client).
            "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "in_worker": os.environ.get("GRPO_WORKER_CHILD") == "1",
            "pid": os.getpid(),
        }
        _write_checkpoint(step_dir, result, rows, timing, key)
        all_results.append(result)
        del lm
    if only is None:
        summary = json.dumps({"checkpoints": all_results}, indent=2) + "\n"
        (out_dir / SUMMARY).write_text(summary)
    return all_results


def exact_probabilities(
    model: Path | str,
    task_dir: Path,
    *,
    batch_size: int = 64,
    device: str = "cpu",
    dtype: str = "float32",
    seed: int = 0,
    revision: str | None = None,
    backend: str = "hf",
) -> list[dict]:
    """Per prompt of ``task_dir``'s rows, the exact P(correct) and unresolved mass of ``model``
    under the sampled protocol (the exact task alone: no generation). The calibration of the
    mixed-group fraction uses it on the prompts a policy was sampled on in training."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    task_dir = Path(task_dir)
    manifest = json.loads((task_dir / MANIFEST).read_text())
    task = manifest["tasks"]["exact_bounded"]
    local = Path(model).exists()
    model = str(Path(model).resolve()) if local else str(model)
    lm, _ = load_lm(model, device, batch_size, dtype, None if local else revision, backend, seed)
    ready_for_exact(lm, manifest, backend, model)
    task_manager = TaskManager(include_path=str(task_dir.resolve()), include_defaults=False)
    with without_env_probe():
        out = lm_eval.simple_evaluate(
            model=lm,
            tasks=[task],
            task_manager=task_manager,
            log_samples=True,
            verbosity="WARNING",
            **lm_eval_seeds(seed),
        )
    exact = load_rule(task_dir, EXACT_MODULE)
    return score_exact(out["samples"][task], task, out["results"][task], exact, bounded=True)


def evaluate_curve(
    policies: list[tuple[int, Path]],
    task_dir: Path,
    out_dir: Path,
    *,
    batch_size: int = 64,
    device: str = "cpu",
    dtype: str = "float32",
    seed: int = 0,
    limit: int | None = None,
    backend: str = "hf",
) -> dict[str, Any]:
    """The efficiency curve of one run: the headline sampled accuracy of each (step, policy) on
    ``task_dir``'s test rows, through lm-eval as every evaluation. Where the task enumerates its
    accepted completions that is the exact task alone (no generation: ~1 s a policy for the
    default), else the sampled task (mean@k). Each point is kept in ``out_dir/step=<N>.json``
    under a key of its weights and settings (a rerun scores only what changed); ``out_dir/curve.json``
    lists them, with the seconds spent. Values at a checkpoint's step may differ from its test
    summary in the last digits (~1e-8: lm-eval batches the exact task's requests differently
    without the unresolved prefixes)."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    task_dir, out_dir = Path(task_dir), Path(out_dir)
    manifest = json.loads((task_dir / MANIFEST).read_text())
    role = "exact" if "exact" in manifest["tasks"] else "sampled"
    task = manifest["tasks"][role]
    metric = "p_correct,none" if role == "exact" else "correct,answer"
    task_manager = TaskManager(include_path=str(task_dir.resolve()), include_defaults=False)
    settings = [seed, batch_size, device, dtype, limit, backend, evaluation_versions()]
    settings += _task_content(task_dir, manifest)
    out_dir.mkdir(parents=True, exist_ok=True)
    points = []
    for step, policy in policies:
        policy = str(Path(policy).resolve())
        key = json.dumps([_checkpoint_identity(policy, True, None), settings], default=str)
        key = hashlib.sha256(key.encode()).hexdigest()
        cached = out_dir / f"step={step}.json"
        try:
            point = json.loads(cached.read_text())
            if point["key"] == key:
                points.append(point)
                continue
        except (OSError, ValueError, KeyError):
            pass
        t0 = time.perf_counter()
        lm, _ = load_lm(policy, device, batch_size, dtype, None, backend, seed)
        if role == "exact":
            ready_for_exact(lm, manifest, backend, policy)
        elif manifest.get("sampler", "stream") == "keyed":
            keyed_generation(lm, seed, backend)
        with without_env_probe():
            out = lm_eval.simple_evaluate(
                model=lm,
                tasks=[task],
                task_manager=task_manager,
                limit=limit,
                verbosity="WARNING",
                apply_chat_template=bool(manifest["chat_template"]),
                **lm_eval_seeds(seed),
            )
        point = {
            "step": step,
            "accuracy": float(out["results"][task][metric]),
            "policy": policy,
            "seconds": time.perf_counter() - t0,
            "key": key,
        }
        cached.write_text(json.dumps(point, indent=2) + "\n")
        points.append(point)
        del lm
    curve = {
        "metric": manifest["sampled_metric"] if role == "sampled" else "exact",
        "task": task,
        "points": [{k: p[k] for k in ("step", "accuracy", "policy")} for p in points],
        "seconds": sum(p["seconds"] for p in points),
    }
    (out_dir / CURVE).write_text(json.dumps(curve, indent=2) + "\n")
    return curve
