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

import filecmp
import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_ablation.design.options import EvaluationConfig
from grpo_ablation.device import peak_memory
from grpo_ablation.evaluation.model import (
    evaluation_versions,
    lm_eval_seeds,
    load_lm,
    load_weights_into,
    loadable_into,
    ready_for_exact,
    release_lm,
    sampler_generation,
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
from grpo_ablation.hub import OFFLINE_VARS
from grpo_ablation.layout import (
    CURVE,
    MANIFEST,
    STEP_DONE,
    STEP_RESULTS,
    STEP_SAMPLES,
    STEP_TIMING,
    SUMMARY,
    Evaluation,
    checkpoint,
    step_folder,
    weight_files,
    weight_identity,
)
from grpo_ablation.process import in_own_process
from grpo_ablation.samplers import sampler_description
from grpo_ablation.tasks.splits import sha256

# The code an evaluation's numbers come from (part of its cache key).
CODE = [
    Path(__file__).with_name(f"{m}.py")
    for m in ("evaluate", "model", "prefix_tree", "scoring", "task_folders")
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
    return weight_identity(Path(ckpt))


def _finished(step_dir: Path, key: str) -> dict | None:
    """The results of a checkpoint evaluated before under the same key, else None."""
    try:
        done = json.loads((step_dir / STEP_DONE).read_text())
        if done["key"] == key and (step_dir / STEP_SAMPLES).is_file():
            return json.loads((step_dir / STEP_RESULTS).read_text())
    except (OSError, ValueError, KeyError):
        pass
    return None


def _write_checkpoint(
    step_dir: Path, result: dict[str, Any], rows: list[dict], timing: dict[str, Any], key: str
) -> None:
    """``results.json``, ``samples.jsonl``, ``timing.json`` (apart, so that results.json is
    byte-identical across reruns), then ``done.json`` with the key: the step is finished."""
    step_dir.mkdir(parents=True, exist_ok=True)
    (step_dir / STEP_RESULTS).write_text(json.dumps(result, indent=2) + "\n")
    with (step_dir / STEP_SAMPLES).open("w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    (step_dir / STEP_TIMING).write_text(json.dumps(timing, indent=2) + "\n")
    (step_dir / STEP_DONE).write_text(json.dumps({"key": key}) + "\n")


@dataclass(frozen=True)
class EvaluationOptions:
    """How checkpoints are evaluated: every field but ``revision`` is part of the cache key (a
    hub checkpoint's revision is part of its identity). An option not given takes the evaluation
    section's declared default (``EvaluationConfig``)."""

    batch_size: int | str = (
        EvaluationConfig.batch_size
    )  # "auto" with vLLM alone (checks.evaluation_config)
    device: str = "cpu"
    dtype: str = "float32"
    seed: int = EvaluationConfig.seed  # all four lm-eval seeds, and the keyed sampler's
    limit: int | None = EvaluationConfig.limit  # rows per task (None: all)
    revision: str | None = None  # pins a hub checkpoint; a local one has none
    backend: str = EvaluationConfig.backend

    @classmethod
    def of(cls, ev: dict[str, Any], **fields: Any) -> EvaluationOptions:
        """The options of an evaluation section as ``checks.evaluation_config`` completes it,
        the device resolved; ``fields`` (a job's seed, a hub revision) replace its values."""
        from grpo_ablation.device import resolve_device

        section = {
            "batch_size": ev["batch_size"],
            "device": resolve_device(ev["device"]),
            "dtype": ev["dtype"],
            "seed": ev["seed"],
            "limit": ev["limit"],
            "backend": ev["backend"],
        }
        return cls(**{**section, **fields})


def evaluate_checkpoints(
    checkpoints: list[tuple[int, Path | str]],
    task_dir: Path,
    out_dir: Path,
    options: EvaluationOptions | None = None,
    *,
    external: list[str] | None = None,
    process_per_checkpoint: bool | None = None,
) -> list[dict]:
    """Evaluate every checkpoint on the tasks of ``task_dir``: in this one process, or each in a
    process of its own (``process_per_checkpoint``; the default with vLLM, which does not reliably
    free an engine's GPU memory within a process, so one engine per process and a fresh process
    per checkpoint).

    A checkpoint is a local directory or a hub name (the base policy of a preset;
    ``options.revision`` pins it). ``external`` names lm-eval built-in benchmarks (e.g. ``gsm8k``)
    evaluated as extra, clearly labelled columns under ``external_benchmarks``: their own prompts,
    few-shot examples and answer extraction, so never comparable with the headline.

    Writes ``out_dir/step=<N>/results.json``, ``samples.jsonl`` and ``timing.json`` (kept apart so
    that results.json is byte-identical across reruns), plus ``out_dir/summary.json`` listing the
    results of all checkpoints of this call, and returns that list.
    All four lm-eval seeds are set to ``options.seed`` for every checkpoint, so each checkpoint
    sees the same random stream regardless of its position in the list.
    """
    options = options or EvaluationOptions()
    task_dir, out_dir = Path(task_dir), Path(out_dir)
    if process_per_checkpoint is None:
        process_per_checkpoint = options.backend == "vllm"
    if process_per_checkpoint:
        _evaluate_in_processes(checkpoints, task_dir, out_dir, options, external)
    setup = _Setup.open(task_dir, options, external)
    # After the processes every checkpoint is finished: here they are only read back.
    results = [
        _results_of(checkpoints, i, setup, out_dir, may_evaluate=not process_per_checkpoint)
        for i in range(len(checkpoints))
    ]
    (out_dir / SUMMARY).write_text(json.dumps({"checkpoints": results}, indent=2) + "\n")
    return results


def _evaluate_in_processes(
    checkpoints: list[tuple[int, Path | str]],
    task_dir: Path,
    out_dir: Path,
    options: EvaluationOptions,
    external: list[str] | None,
) -> None:
    """Each checkpoint evaluated in a fresh process of its own, one after the other."""
    for i, (step, _) in enumerate(checkpoints):
        try:
            in_own_process(_evaluate_in_child, checkpoints, task_dir, out_dir, options, external, i)
        except RuntimeError as err:
            raise RuntimeError(f"evaluation of step {step}: {err}") from err


def _evaluate_in_child(
    checkpoints: list[tuple[int, Path | str]],
    task_dir: Path,
    out_dir: Path,
    options: EvaluationOptions,
    external: list[str] | None,
    index: int,
) -> None:
    """What the process of checkpoint ``index`` runs: that checkpoint alone, no summary."""
    _results_of(checkpoints, index, _Setup.open(task_dir, options, external), out_dir)


@dataclass(frozen=True)
class _Setup:
    """What every checkpoint of one call shares: the options, the task folder (its manifest,
    lm-eval's index of its tasks, the answer rule and the exact enumeration), lm-eval's seeds and
    versions, and the part of the cache key they make."""

    options: EvaluationOptions
    external: list[str] | None
    manifest: dict[str, Any]
    task_manager: Any
    rule: Any
    exact: Any
    seeds: dict[str, int]
    versions: dict[str, Any]
    settings: list[Any]  # every checkpoint's cache key holds them
    import_s: float
    index_s: float

    @classmethod
    def open(cls, task_dir: Path, options: EvaluationOptions, external: list[str] | None) -> _Setup:
        started = time.perf_counter()
        # lm-eval's import takes seconds: timed apart from the index of the tasks
        import lm_eval.models.huggingface  # noqa: F401
        from lm_eval.tasks import TaskManager

        import_s = time.perf_counter() - started
        manifest = json.loads((task_dir / MANIFEST).read_text())
        # include_defaults=False skips indexing lm-eval's hundreds of built-in tasks (~13 s).
        task_manager = TaskManager(include_path=str(task_dir.resolve()), include_defaults=False)
        index_s = time.perf_counter() - started - import_s
        seeds = lm_eval_seeds(options.seed)
        versions = evaluation_versions()
        rule = load_rule(task_dir)
        exact = load_rule(task_dir, EXACT_MODULE) if "exact" in manifest["tasks"] else None
        o = options
        settings = [seeds, o.batch_size, o.device, o.dtype, o.limit, o.backend, external, versions]
        settings += _task_content(task_dir, manifest)
        return cls(
            options=options,
            external=external,
            manifest=manifest,
            task_manager=task_manager,
            rule=rule,
            exact=exact,
            seeds=seeds,
            versions=versions,
            settings=settings,
            import_s=import_s,
            index_s=index_s,
        )

    @property
    def roles(self) -> dict[str, str]:
        """Each role the task folder holds (greedy, sampled, exact, ...) and its lm-eval task."""
        return self.manifest["tasks"]

    @property
    def sampler(self) -> str:
        return _manifest_sampler(self.manifest)


def _manifest_sampler(manifest: dict[str, Any]) -> str:
    """The sampler a task folder was written for; one written before samplers were named drew
    from the stream (what it was evaluated with then, not the config's default)."""
    return manifest.get("sampler", "stream")


@dataclass(frozen=True)
class _Checkpoint:
    """One checkpoint of a call, as it is evaluated and keyed."""

    step: int
    path: str  # what is loaded: a local folder (resolved) or a hub name
    # What is recorded and keyed: the folder as the job named it (relative to its working
    # directory in the pipeline, so results that move keep their records and cache keys).
    named: str
    revision: str | None  # a hub checkpoint's; None for a local folder
    roles: list[str]  # the roles of the task folder evaluated at this checkpoint
    key: str  # of its evaluation (``done.json``)
    folder: Path  # out_dir/step=<N>

    @classmethod
    def of(
        cls, checkpoints: list[tuple[int, Path | str]], i: int, setup: _Setup, out_dir: Path
    ) -> _Checkpoint:
        step, named = checkpoints[i]
        local = Path(named).exists()
        path = str(Path(named).resolve()) if local else str(named)
        revision = None if local else setup.options.revision
        # The exact task's unresolved mass at the last checkpoint only (it costs ~8x the exact
        # value): the one the contrasts are read at.
        last = i == len(checkpoints) - 1
        roles = [r for r in setup.roles if r != ("exact" if last else "exact_bounded")]
        key = [_checkpoint_identity(str(named), local, revision), setup.settings, roles]
        digest = hashlib.sha256(json.dumps(key, default=str).encode()).hexdigest()
        return cls(step, path, str(named), revision, roles, digest, step_folder(out_dir, step))


def _results_of(
    checkpoints: list[tuple[int, Path | str]],
    i: int,
    setup: _Setup,
    out_dir: Path,
    *,
    may_evaluate: bool = True,
) -> dict[str, Any]:
    """The results of checkpoint ``i``: read back when it was evaluated before under the same
    key, else evaluated now (``may_evaluate`` False: its own process ran it, so an error)."""
    checkpoint = _Checkpoint.of(checkpoints, i, setup, out_dir)
    finished = _finished(checkpoint.folder, checkpoint.key)
    if finished is not None:
        return finished
    if not may_evaluate:
        raise RuntimeError(
            f"step {checkpoint.step} was evaluated in its own process but is not finished"
        )
    return _evaluate_checkpoint(checkpoint, setup)


def _evaluate_checkpoint(checkpoint: _Checkpoint, setup: _Setup) -> dict[str, Any]:
    """Load, run lm-eval, score and write one checkpoint; its results."""
    (checkpoint.folder / STEP_DONE).unlink(missing_ok=True)
    started = time.perf_counter()
    lm, ignored = _load(checkpoint, setup)
    loaded = time.perf_counter()
    generating = time_generation(lm)
    out, external = _run_lm_eval(lm, checkpoint.roles, setup)
    evaluated = time.perf_counter()
    rows, metrics = score_tasks(
        out, setup.roles, checkpoint.roles, lm.tokenizer, setup.rule, setup.exact
    )
    result = _result(checkpoint, setup, rows, metrics, ignored, external)
    timing = {
        "import_lm_eval_s": setup.import_s,
        "task_index_s": setup.index_s,
        "load_s": loaded - started,
        "evaluate_s": evaluated - loaded,
        "generate_s": generating[0],
        "score_s": time.perf_counter() - evaluated,  # the samples scored and summarised
        # This process's peak (a job-worker child's when GRPO_WORKER is used:
        # Snakemake's benchmark then measures only the thin client).
        "max_rss_mb": peak_memory().host_rss_mb,
        "in_worker": os.environ.get("GRPO_WORKER_CHILD") == "1",
        "pid": os.getpid(),
    }
    _write_checkpoint(checkpoint.folder, result, rows, timing, checkpoint.key)
    return result


def _load(checkpoint: _Checkpoint, setup: _Setup) -> tuple[Any, dict[str, Any]]:
    """The checkpoint as lm-eval's model under the sampling protocol, and what its own
    generation config said that is not used."""
    o = setup.options
    lm, ignored = load_lm(
        checkpoint.path, o.device, o.batch_size, o.dtype, checkpoint.revision, o.backend, o.seed
    )
    if "exact" in setup.roles:
        ready_for_exact(lm, setup.manifest, o.backend, checkpoint.path)
    sampler_generation(lm, setup.sampler, o.seed, o.backend)
    return lm, ignored


def _run_lm_eval(lm: Any, roles: list[str], setup: _Setup) -> tuple[dict, dict]:
    """lm-eval's output on the tasks of ``roles``, and the external benchmarks' entries."""
    import lm_eval

    with without_env_probe():
        out = lm_eval.simple_evaluate(
            model=lm,
            tasks=[setup.roles[r] for r in roles],
            task_manager=setup.task_manager,
            limit=setup.options.limit,
            log_samples=True,
            verbosity="WARNING",
            apply_chat_template=bool(setup.manifest["chat_template"]),
            **setup.seeds,
        )
        external = setup.external
        ext = run_external(lm, external, setup.options.limit, setup.seeds) if external else {}
    return out, ext


def _result(
    checkpoint: _Checkpoint,
    setup: _Setup,
    rows: list[dict],
    metrics: dict[str, Any],
    ignored: dict[str, Any],
    external: dict[str, Any],
) -> dict[str, Any]:
    """``results.json`` of one checkpoint: its numbers and everything they were measured under."""
    manifest, o = setup.manifest, setup.options
    return {
        **checkpoint_numbers(checkpoint.step, checkpoint.named, rows, metrics, manifest),
        "limit": o.limit,
        "tasks": metrics,
        "task_names": setup.roles,
        # The declared rule training's reward uses too (objective.json names it).
        "answer_rule": manifest["answer_rule"],
        "chat_template": manifest["chat_template"],
        # The complete sampling protocol of each task, and what the checkpoint's own
        # generation config said that was not used.
        "sampling": manifest["sampling"],
        "sampler": sampler_description(setup.sampler, o.backend == "vllm", evaluation=True),
        "ignored_generation_config": ignored,
        "test": manifest["test"],
        "external_benchmarks": external,
        "seeds": setup.seeds,
        "batch_size": o.batch_size,
        "device": o.device,
        "dtype": o.dtype,
        "backend": o.backend,
        "revision": checkpoint.revision,
        "offline": {k: os.environ.get(k) for k in OFFLINE_VARS},
        "lm_eval_version": setup.versions["lm_eval"],
        "versions": setup.versions,
    }


def exact_probabilities(
    model: Path | str,
    task_dir: Path,
    *,
    batch_size: int = EvaluationConfig.batch_size,
    device: str = "cpu",
    dtype: str = "float32",
    seed: int = EvaluationConfig.seed,
    revision: str | None = None,
    backend: str = EvaluationConfig.backend,
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
    try:
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
    finally:
        # A vLLM engine is shut down before the next policy's (or the curve's) starts; its
        # wrappers hold it in a reference cycle the collector would free only some time later.
        if backend == "vllm":
            release_lm(lm)
    exact = load_rule(task_dir, EXACT_MODULE)
    return score_exact(out["samples"][task], task, out["results"][task], exact, bounded=True)


def evaluate_curve(
    policies: list[tuple[int, Path]],
    task_dir: Path,
    out_dir: Path,
    *,
    batch_size: int = EvaluationConfig.batch_size,
    device: str = "cpu",
    dtype: str = "float32",
    seed: int = EvaluationConfig.seed,
    limit: int | None = EvaluationConfig.limit,
    backend: str = EvaluationConfig.backend,
    scored: dict[int, tuple[str, float]] | None = None,
) -> dict[str, Any]:
    """The efficiency curve of one run: the headline sampled accuracy of each (step, policy) on
    ``task_dir``'s test rows, through lm-eval as every evaluation. Where the task enumerates its
    accepted completions that is the exact task alone (no generation: ~1 s a policy for the
    default), else the sampled task (mean@k). Each point is kept in ``out_dir/step=<N>.json``
    under a key of its weights and settings (a rerun scores only what changed); ``out_dir/curve.json``
    lists them, with the seconds spent. ``scored`` maps a step to what already measured its
    policy's point under these settings, and the value (``write_curve``: a checkpoint's test
    summary); that policy is not evaluated again.

    With vLLM one engine serves every policy of the call: built for the first policy evaluated,
    given each later one's weights (``load_weights_into``), and shut down at the end (a second
    engine in this process would not start: the first one's GPU memory is not given back while
    the process lives). Its keyed sampler and the exact task give each policy what an engine of
    its own would; the stream sampler does not restart the engine's random stream at a policy,
    so a policy's mean@k then depends on which policies this call evaluated before it. With HF
    the exact task's policies share the first one's model too, each given its weights (the
    same tensors its own model would hold; the sampled task builds a model a policy)."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    task_dir, out_dir = Path(task_dir), Path(out_dir)
    manifest = json.loads((task_dir / MANIFEST).read_text())
    role = "exact" if "exact" in manifest["tasks"] else "sampled"
    task = manifest["tasks"][role]
    metric = "p_correct,none" if role == "exact" else "correct,answer"
    task_manager = TaskManager(include_path=str(task_dir.resolve()), include_defaults=False)
    # Built once for every policy of the call (lm-eval builds a task's requests afresh at each
    # evaluation, and the call's seeds are set again): ~25 ms a policy of the default.
    built = task_manager.load([task])["tasks"][task]
    settings = [seed, batch_size, device, dtype, limit, backend, evaluation_versions()]
    settings += _task_content(task_dir, manifest)
    out_dir.mkdir(parents=True, exist_ok=True)
    points = []
    # The model of the first policy evaluated, which the others' weights are loaded into: with
    # vLLM its engine, with HF for the exact task (log-likelihoods only; ~25 ms a policy of the
    # default); the sampled task's HF models keep a model each (their samplers count repeats).
    engine = None
    try:
        for step, named in policies:
            # Loaded resolved; recorded and keyed as named (relative in the pipeline).
            policy = str(Path(named).resolve())
            key = json.dumps([_checkpoint_identity(str(named), True, None), settings], default=str)
            key = hashlib.sha256(key.encode()).hexdigest()
            cached = step_folder(out_dir, step).with_suffix(".json")
            try:
                point = json.loads(cached.read_text())
                if point["key"] == key:
                    points.append(point)
                    continue
            except (OSError, ValueError, KeyError):
                pass
            if step in (scored or {}):
                source, accuracy = scored[step]  # type: ignore[index]
                point = {"step": step, "accuracy": accuracy, "policy": str(named)}
                point |= {"seconds": 0.0, "key": key, "from": source}
                cached.write_text(json.dumps(point, indent=2) + "\n")
                points.append(point)
                continue
            t0 = time.perf_counter()
            if engine is not None and (backend == "vllm" or loadable_into(engine, policy)):
                lm, _ = load_weights_into(engine, policy)
            else:
                lm, _ = load_lm(policy, device, batch_size, dtype, None, backend, seed)
                if backend == "vllm" or role == "exact":
                    engine = lm
            if role == "exact":
                ready_for_exact(lm, manifest, backend, policy)
            else:
                sampler_generation(lm, _manifest_sampler(manifest), seed, backend)
            with without_env_probe():
                out = lm_eval.simple_evaluate(
                    model=lm,
                    tasks=[built],
                    task_manager=task_manager,
                    limit=limit,
                    verbosity="WARNING",
                    apply_chat_template=bool(manifest["chat_template"]),
                    **lm_eval_seeds(seed),
                )
            point = {
                "step": step,
                "accuracy": float(out["results"][task][metric]),
                "policy": str(named),
                "seconds": time.perf_counter() - t0,
                "key": key,
            }
            cached.write_text(json.dumps(point, indent=2) + "\n")
            points.append(point)
            del lm
    finally:
        release_lm(engine)  # the engine shut down, the garbage collected, CUDA's cache emptied
        del engine
    curve = {
        "metric": manifest["sampled_metric"] if role == "sampled" else "exact",
        "task": task,
        "points": [{k: p[k] for k in ("step", "accuracy", "policy")} for p in points],
        "seconds": sum(p["seconds"] for p in points),
    }
    (out_dir / CURVE).write_text(json.dumps(curve, indent=2) + "\n")
    return curve


def write_curve(run: Path, info: dict, tasks: Path, out: Path, options: dict) -> None:
    """The run's efficiency curve, ``out/curve/curve.json``: its curve policies scored on the test
    split (training.curve_points; a checkpoint's, the same weights, read from its test summary),
    or, where it saved none, its checkpoints' test values."""
    folder = Evaluation(out)
    policies = sorted((int(s), run / p) for s, p in info.get("curve_policies", {}).items())
    summary = json.loads(Path(folder.summary("test")).read_text())["checkpoints"]
    if policies:
        options = {k: v for k, v in options.items() if k != "revision"}
        scored = _scored_on_the_curve(policies, summary, run, options["limit"])
        evaluate_curve(policies, tasks, Path(folder.curve_folder()), **options, scored=scored)
        return
    curve = {
        "metric": summary[0]["sampled_metric"],
        "task": "checkpoints (test summary)",
        "points": [
            {"step": c["step"], "accuracy": c["sampled_accuracy"], "policy": c["checkpoint"]}
            for c in summary
        ],
        "seconds": 0.0,
    }
    Path(folder.curve_folder()).mkdir(parents=True, exist_ok=True)
    Path(folder.curve()).write_text(json.dumps(curve, indent=2) + "\n")


def _scored_on_the_curve(
    policies: list[tuple[int, Path]], summary: list[dict[str, Any]], run: Path, limit: int | None
) -> dict[int, tuple[str, float]]:
    """The curve points a checkpoint's test evaluation already measured: where the headline is
    the exact task and the curve's policy of the checkpoint's step has its weights, byte for
    byte, the point is its ``sampled_exact``, to the bit (the exact task's prefix trees and its
    bounded twin's have the same input nodes; tests/test_exact.py)."""
    curve = dict(policies)
    scored = {}
    for c in summary:
        step, ckpt = c["step"], checkpoint(run, c["step"])
        if c["sampled_metric"] != "exact" or step not in curve or c["limit"] != limit:
            continue
        if _same_weights(curve[step], ckpt):
            scored[step] = (f"test summary of {c['checkpoint']}", c["sampled_exact"])
    return scored


def _same_weights(a: Path, b: Path) -> bool:
    """Whether two local model folders hold the same weight files, byte for byte."""
    files = [weight_files(a), weight_files(b)]
    return (
        bool(files[0])
        and [f.name for f in files[0]] == [f.name for f in files[1]]
        and all(filecmp.cmp(x, y, shallow=False) for x, y in zip(*files, strict=True))
    )
