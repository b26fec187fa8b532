"""Independent evaluation of checkpoints on the held-out test split with lm-eval.

This module deliberately imports nothing from the training code. What it shares with training is
the *declared* answer rule (``full_match_digits`` for the addition task, ``math_verify`` for math),
named in the task and recorded in both ``objective.json`` and every ``results.json``; the rule is
implemented here a second time, as a small module written next to the task YAML (``grpo_answer.py``)
that lm-eval loads as its metric. A test checks that the two implementations agree.

The evaluation asks the question training asks: the prompt column fed verbatim (through the model's
chat template when the task declares one, as TRL does for conversational prompts), generation
stopped at the model's eos, the same ``max_gen_toks`` as training's ``max_completion_length``.

Two tasks are written per split, three where the answer rule's accepted completions can be
enumerated with the checkpoints' tokenizer:

- ``<name>_greedy``: one greedy completion per prompt; metric ``correct`` (accuracy).
- ``<name>_sampled``: ``repeats: k`` completions at ``temperature`` (pure temperature sampling:
  every field of ``grpo_ablation.sampling.protocol`` is stated in the task, as training states it,
  and each model is loaded with a generation config stripped to its token ids, so a checkpoint's
  ``generation_config.json`` (top-k, top-p, repetition penalty ...) never changes the
  distribution; ``results.json`` records the protocol and what was ignored). No filter drops repeats, so each document reaches the metric with
  its k raw completions; ``correct`` returns the fraction of them the rule accepts, and lm-eval's
  ``mean`` aggregation averages it over documents: mean@k. The same number is recomputed from the
  per-sample log and the two must agree.
- ``<name>_exact``: the expected accuracy under that same sampled protocol, computed exactly: the
  log-likelihood at temperature T of every completion the rule accepts, summed per prompt
  (``grpo_ablation.evaluation.exact``, copied next to the task as lm-eval's functions). It is the
  headline sampled metric (``sampled_accuracy``) and has no sampling noise; mean@k stays as its
  cross-check. Per-prompt probabilities are written to the sample log.

Generation stops at the eos *id* (``generation_config.eos_token_id``, checked and set on load):
HFLM decodes continuations with ``skip_special_tokens=True``, so an eos stop *string* never
appears in the decoded text, and without the eos id a finished sequence in a batch would keep
generating and the extra characters would be appended to its answer. lm-eval adds the decoded eos
to the stop strings itself, so the task lists none.

Resuming: a checkpoint's evaluation is finished when its ``done.json`` (written after its results
and sample log) holds the key of what was evaluated: the checkpoint's weight files (path, size,
modification time) or hub id and revision, the task files, the rows they point at and this
module (by content), seeds, batch size, device, precision, backend, limit, external benchmarks
and library versions. A rerun (a retry, or a job killed
mid-way) skips every checkpoint whose key matches and evaluates the rest; anything else changed
evaluates it again.

Determinism: the four lm-eval seeds are reset before every checkpoint, so reruns on the same machine
give byte-identical results.json and samples.jsonl. With the keyed sampler (the default) a sampled
completion depends on its prompt and repeat only; with ``stream`` it also depends on the batch
size (batch composition changes how the random stream is consumed).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import multiprocessing
import os
import resource
import time
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

from grpo_ablation.choices import EXTERNAL_PROTOCOL
from grpo_ablation.compute import OFFLINE_VARS
from grpo_ablation.evaluation import answer_rules
from grpo_ablation.evaluation import exact as exact_module
from grpo_ablation.sampling import (
    check_sampler,
    generate_kwargs,
    neutral_generation_config,
    protocol,
    sampler_description,
)
from grpo_ablation.settings import weight_files
from grpo_ablation.tasks.splits import sha256

FALLBACK = "[invalid]"
MANIFEST = "manifest.json"
METRICS_MODULE = "grpo_answer"
EXACT_MODULE = "grpo_exact"  # a copy of grpo_ablation/evaluation/exact.py
# The answer rules whose accepted completions grpo_exact enumerates.
ENUMERABLE_RULES = ("full_match_digits",)

# The declared answer rules, implemented for lm-eval (grpo_ablation/evaluation/answer_rules).
ANSWER_RULES = answer_rules.RULES


def load_rule(task_dir: Path, module: str = METRICS_MODULE) -> Any:
    """The answer-rule module written into ``task_dir`` (the one lm-eval scores with), or another
    module written there (the exact task's enumeration)."""
    import importlib.util

    path = Path(task_dir) / f"{module}.py"
    spec = importlib.util.spec_from_file_location(f"{module}_{abs(hash(path))}", path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _q(value: str) -> str:
    # JSON strings are valid YAML double-quoted scalars and escape regex backslashes correctly.
    return json.dumps(value)


def _task_header(task: str, test_jsonl: Path) -> list[str]:
    return [
        "# Written by grpo_ablation.evaluation.evaluate.write_task; do not edit by hand.",
        f"task: {task}",
        "dataset_path: json",
        "dataset_kwargs:",
        "  data_files:",
        # Absolute: lm-eval resolves data_files from the working directory, not this folder.
        f"    test: {_q(str(test_jsonl))}",
        "test_split: test",
        # Bare column names: the prompt is fed verbatim (through the chat template when the task
        # declares one), and lm-eval skips compiling a Jinja template per document.
        "doc_to_text: prompt",
        'target_delimiter: ""',
        'fewshot_delimiter: ""',
        "num_fewshot: 0",
    ]


def _task_yaml(
    task: str,
    test_jsonl: Path,
    generation: list[str],
    repeats: int,
    filters: list[str],
) -> str:
    lines = [
        *_task_header(task, test_jsonl),
        "output_type: generate_until",
        "doc_to_target: answer",
        "generation_kwargs:",
        "  until: []  # lm-eval adds the model's eos; training stops at eos too",
        *[f"  {g}" for g in generation],
        f"repeats: {repeats}",
        "filter_list:",
        "  - name: answer",
        f"    filter: [{', '.join(f'{{function: {f}}}' for f in filters)}]",
        "metric_list:",
        f"  - metric: !function {METRICS_MODULE}.correct",
        "    aggregation: mean",
        "    higher_is_better: true",
        "metadata:",
        "  version: 2",
    ]
    return "\n".join(lines) + "\n"


def _exact_yaml(task: str, test_jsonl: Path, bounded: bool) -> str:
    """The exact task: the log-likelihood of every continuation of :mod:`exact`'s enumeration,
    summed into P(correct) per document by its ``process_results`` (``bounded``: and the
    unresolved mass)."""
    twin = "_bounded" if bounded else ""
    metrics = ["p_correct", *(["p_unresolved"] if bounded else [])]
    lines = [
        *_task_header(task, test_jsonl),
        "output_type: multiple_choice",
        f"doc_to_choice: !function {EXACT_MODULE}.doc_to_choice{twin}",
        "doc_to_target: 0  # unused: process_results scores every continuation",
        f"process_results: !function {EXACT_MODULE}.process_results{twin}",
        "metric_list:",
        *[f"  - metric: {m}\n    aggregation: mean" for m in metrics],
        "metadata:",
        "  version: 1",
    ]
    return "\n".join(lines) + "\n"


def exact_tokens(tokenizer: Any) -> dict[str, Any]:
    """What the enumeration of :mod:`exact` needs to know of a tokenizer: its eos, the tokens that
    decode to nothing and those that decode to whitespace. Raises when the accepted completions
    are not enumerable with it: a token that decodes to more than one character (``55`` could
    then be one token or two), or a character of an answer that is not exactly one token."""
    vocab: dict[str, int] = tokenizer.get_vocab()
    if tokenizer.eos_token is None:
        raise ValueError("exact metric: the tokenizer has no eos token")
    empty, space = [], []
    for text, i in sorted(vocab.items(), key=lambda kv: kv[1]):
        decoded = tokenizer.decode([i], skip_special_tokens=True)
        if len(decoded) > 1:
            raise ValueError(
                f"exact metric: token {text!r} decodes to {decoded!r}; enumerating accepted "
                "completions needs a tokenizer of one token per character"
            )
        if i != tokenizer.eos_token_id and decoded.strip() == "":
            (space if decoded else empty).append(text)
    for text in [".", *"0123456789", tokenizer.eos_token, *empty, *space]:
        if tokenizer.encode(text, add_special_tokens=False) != [vocab[text]]:
            raise ValueError(f"exact metric: {text!r} is not one token of the tokenizer")
    return {"eos": tokenizer.eos_token, "empty": empty, "space": space}


def write_task(
    test_jsonl: Path,
    task_dir: Path,
    name: str,
    max_gen_toks: int,
    k: int,
    temperature: float,
    *,
    answer_rule: str = "full_match_digits",
    chat_template: bool = False,
    exact: dict[str, Any] | None = None,
    sampler: str = "keyed",
) -> list[str]:
    """Write the greedy and sampled lm-eval tasks for ``test_jsonl``; return their names.

    ``sampler`` says how the sampled task's tokens are drawn (``grpo_ablation.sampling``): keyed
    by (seed, prompt, repeat, position), so every checkpoint is evaluated on the same random
    numbers, or from the global stream.

    ``exact`` (the :func:`exact_tokens` of the tokenizer the checkpoints will have) adds the exact
    task: P(correct) under the sampled protocol by enumeration (:mod:`exact`), the headline sampled
    metric, with mean@k kept as its cross-check.

    ``max_gen_toks`` is training's ``max_completion_length`` (lm-eval's default of 256 would both
    change the protocol and exceed a tiny model's context). ``answer_rule`` names the declared
    rule; ``chat_template`` says whether prompts go through the model's chat template. Also
    writes ``manifest.json`` (roles and settings) read by :func:`evaluate_checkpoints`.
    """
    if k < 1 or temperature <= 0:
        raise ValueError(f"sampled task needs k >= 1 and temperature > 0, got {k=}, {temperature=}")
    check_sampler(sampler)
    if answer_rule not in ANSWER_RULES:
        raise ValueError(
            f"unknown answer rule {answer_rule!r}; expected one of {list(ANSWER_RULES)}"
        )
    test_jsonl = Path(test_jsonl).resolve()
    if not test_jsonl.is_file():
        raise FileNotFoundError(test_jsonl)
    task_dir = Path(task_dir)
    task_dir.mkdir(parents=True, exist_ok=True)
    greedy, sampled = f"{name}_greedy", f"{name}_sampled"
    sampling = {
        "greedy": protocol(None, max_gen_toks),
        "sampled": protocol(temperature, max_gen_toks),
    }
    greedy_gen, sampled_gen = (_generation_lines(sampling[role]) for role in ("greedy", "sampled"))
    (task_dir / f"{greedy}.yaml").write_text(
        _task_yaml(greedy, test_jsonl, greedy_gen, repeats=1, filters=["take_first"])
    )
    # No filter: every one of the k repeats reaches the metric.
    (task_dir / f"{sampled}.yaml").write_text(
        _task_yaml(sampled, test_jsonl, sampled_gen, repeats=k, filters=[])
    )
    (task_dir / f"{METRICS_MODULE}.py").write_text(answer_rules.module_text(answer_rule))
    tasks = {"greedy": greedy, "sampled": sampled}
    if exact is not None:
        if answer_rule not in ENUMERABLE_RULES or chat_template:
            raise ValueError(
                f"exact metric: answer rule {answer_rule!r} (chat template {chat_template}) has no "
                f"enumeration; enumerable rules: {list(ENUMERABLE_RULES)} without a chat template"
            )
        for role, bounded in (("exact", False), ("exact_bounded", True)):
            tasks[role] = f"{name}_{role}"
            (task_dir / f"{tasks[role]}.yaml").write_text(
                _exact_yaml(tasks[role], test_jsonl, bounded)
            )
        (task_dir / f"{EXACT_MODULE}.py").write_text(Path(exact_module.__file__).read_text())
        spec = {"max_len": max_gen_toks, **exact}
        (task_dir / exact_module.SPEC_FILE).write_text(json.dumps(spec, indent=2) + "\n")
    manifest = {
        "name": name,
        "tasks": tasks,
        "sampled_metric": "exact" if exact is not None else "mean_at_k",
        "exact": exact,
        "test": str(test_jsonl),
        "k": k,
        "temperature": float(temperature),
        "max_gen_toks": max_gen_toks,
        "answer_rule": answer_rule,
        "chat_template": chat_template,
        "stop": "eos",
        "sampling": sampling,
        "sampler": sampler,
    }
    (task_dir / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return list(tasks.values())


def _generation_lines(settings: dict[str, Any]) -> list[str]:
    """A protocol as lm-eval ``generation_kwargs`` lines (lm-eval calls the limit max_gen_toks;
    the eos stop is the model's, see the module docstring)."""
    renamed = {"max_new_tokens": "max_gen_toks"}
    return [f"{renamed.get(k, k)}: {json.dumps(v)}" for k, v in generate_kwargs(settings).items()]


def write_split_tasks(
    data: Path,
    tasks: Path,
    prefix: str,
    evaluation: dict[str, Any],
    answer_rule: str,
    chat_template: bool,
    exact: dict[str, Any] | None = None,
) -> None:
    """The test and validation tasks of a splits folder, as the evaluation section says. The exact
    task is the test split's headline; validation only chooses winners (greedy or mean@k)."""
    for split in ("test", "validation"):
        write_task(
            Path(data) / f"{split}.jsonl",
            Path(tasks) / split,
            f"{prefix}_{split}",
            evaluation["max_gen_toks"],
            evaluation["k"],
            evaluation["temperature"],
            answer_rule=answer_rule,
            chat_template=chat_template,
            exact=exact if split == "test" else None,
            sampler=evaluation["sampler"],
        )


def _versions() -> dict[str, str]:
    out = {}
    for lib in ("lm_eval", "transformers", "torch", "datasets"):
        try:
            out[lib] = metadata.version(lib.replace("_", "-"))
        except metadata.PackageNotFoundError:
            out[lib] = "absent"
    return out


def _load_lm(
    path: Path | str,
    device: str,
    batch_size: int,
    dtype: str,
    revision: str | None = None,
    backend: str = "hf",
    seed: int = 0,
) -> Any:
    hub = {"revision": revision} if revision else {}
    if backend == "vllm":  # GPUs only; not run by the tests here
        from lm_eval.models.vllm_causallms import VLLM

        if device != "cuda":
            raise ValueError("evaluation.backend 'vllm' needs compute.device cuda")
        # add_bos_token=False and the eos stop as for HFLM below; vLLM stops at the eos itself.
        # generation_config="vllm": the engine's neutral defaults, not the checkpoint's file.
        lm = VLLM(
            pretrained=str(path),
            dtype=dtype,
            batch_size=batch_size,
            seed=seed,
            add_bos_token=False,
            gpu_memory_utilization=0.8,
            generation_config="vllm",
            **hub,
        )
        return lm, {"not read": "vLLM engine with generation_config='vllm'"}
    from lm_eval.models.huggingface import HFLM

    # add_bos_token=False: the prompt is tokenized as TRL tokenizes it (no added special tokens).
    lm = HFLM(
        pretrained=str(path),
        device=device,
        batch_size=batch_size,
        dtype=dtype,
        add_bos_token=False,
        **hub,
    )
    ignored = neutral_generation_config(lm.model)  # the protocol is ours, never the checkpoint's
    tok, gen = lm.tokenizer, lm.model.generation_config
    if tok.eos_token_id is None:
        raise ValueError(f"{path}: tokenizer has no eos token; generate_until needs one")
    # Stopping must work on the eos id (see module docstring); fill it in if the checkpoint lacks it.
    if gen.eos_token_id is None:
        gen.eos_token_id = tok.eos_token_id
    if gen.pad_token_id is None:
        gen.pad_token_id = tok.pad_token_id
    return lm, ignored


@contextlib.contextmanager
def _without_env_probe() -> Iterator[None]:
    """Skip lm-eval's per-call environment dump (``pip list`` and ``git`` subprocesses).

    It costs ~0.7 s per checkpoint and nothing is lost: versions are recorded in results.json.
    """
    import lm_eval.evaluator as ev

    saved = {
        name: getattr(ev, name)
        for name in ("add_env_info", "get_git_commit_hash")
        if hasattr(ev, name)
    }
    try:
        for name in saved:
            setattr(ev, name, lambda *args, **kwargs: None)
        yield
    finally:
        for name, fn in saved.items():
            setattr(ev, name, fn)


DONE = "done.json"


def _task_content(task_dir: Path, manifest: dict[str, Any]) -> list[Any]:
    """What an evaluation's results depend on besides the weights and options: the task files,
    and the rows they point at and this evaluation code by content (a new split or a fix of the
    evaluation evaluates every checkpoint again)."""
    tasks_text = {p.name: p.read_text() for p in sorted(task_dir.iterdir()) if p.is_file()}
    return [tasks_text, *(sha256(Path(p).read_bytes()) for p in (manifest["test"], __file__))]


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


def _time_generation(lm: Any) -> list[float]:
    """Wrap ``lm.generate_until`` so the seconds spent generating accumulate in the returned cell."""
    spent = [0.0]
    inner = lm.generate_until

    def timed(*args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - t

    lm.generate_until = timed
    return spent


def _sample_rows(
    samples: list[dict], role: str, task: str, tokenizer: Any, max_gen_toks: int, rule: Any
) -> list[dict]:
    rows = []
    samples = sorted(samples, key=lambda s: s["doc_id"])
    # Token counts of every raw generation in one tokenizer call (one call per text costs ~0.1 s
    # per checkpoint, a visible share of a tiny model's evaluation).
    texts = [text for s in samples for text in s["resps"][0]]
    counts = iter(len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"])
    for s in samples:
        # One instance per document whose resps hold its `repeats` raw generations.
        gold = str(s["target"]).strip()
        context = s["arguments"][0][0]  # the exact text the model was prompted with
        for rep, text in enumerate(s["resps"][0]):
            n_tok = next(counts)
            rows.append(
                {
                    "task": role,
                    "task_name": task,
                    "doc_id": s["doc_id"],
                    "repeat": rep,
                    **s["doc"],
                    "target": s["target"],
                    "context": context,
                    "generated": text,
                    "extracted": rule.extract(text),
                    "correct": int(rule.is_correct(text, gold)),
                    "completion_chars": len(text),
                    "completion_tokens": n_tok,
                    # eos counts inside max_gen_toks: a text of max_gen_toks tokens never emitted eos.
                    "truncated": int(n_tok >= max_gen_toks),
                }
            )
    return rows


def _exact_ready(lm: Any, manifest: dict[str, Any], backend: str, ckpt: str) -> None:
    """Check that the enumeration holds for this checkpoint's tokenizer, and make lm-eval's
    log-likelihoods those of the sampling distribution softmax(logits / T)."""
    got = exact_tokens(lm.tokenizer)
    if got != manifest["exact"]:
        raise ValueError(
            f"{ckpt}: the exact task was written for tokens {manifest['exact']} but this "
            f"checkpoint's tokenizer has {got}; write the tasks again for this tokenizer"
        )
    temperature = float(manifest["temperature"])
    if backend != "hf":
        if temperature != 1.0:
            raise ValueError("exact metric at temperature != 1 needs evaluation.backend hf")
        return
    inner = lm._model_call  # HFLM's forward for log-likelihoods (generation does not use it)

    def tempered(*args: Any, **kwargs: Any) -> Any:
        return inner(*args, **kwargs) / temperature

    lm._model_call = tempered


def _keyed_generation(lm: Any, seed: int, backend: str = "hf") -> None:
    """Draw lm-eval's sampled tokens by keyed Gumbel-max (``grpo_ablation.keyed_sampling``): the
    key of a row is (seed, its prompt's tokens, how many times that prompt was sampled before in
    this evaluation), so each checkpoint meets the same noise on the same (prompt, repeat). With
    vLLM the key seeds the request instead."""
    from grpo_ablation.keyed_sampling import KeyedGumbel, evaluation_keys, seeded_requests

    if backend == "vllm":
        vllm_generate, vllm_seen = lm._model_generate, {}

        def seeded(requests: list[list[int]], generate: bool = False, sampling_params: Any = None):
            if not generate or sampling_params is None:
                return vllm_generate(requests, generate, sampling_params)
            params = (
                sampling_params
                if isinstance(sampling_params, list)
                else [sampling_params] * len(requests)
            )
            # Only sampled requests are keyed and counted as repeats (a batch may hold greedy ones
            # too: lm-eval's vLLM batches by length, not by sampling settings).
            drawn = [i for i, p in enumerate(params) if p.temperature]
            keys = evaluation_keys(seed, [requests[i] for i in drawn], vllm_seen)
            seeded = dict(
                zip(drawn, seeded_requests([params[i] for i in drawn], keys), strict=True)
            )
            return vllm_generate(
                requests, generate, [seeded.get(i, p) for i, p in enumerate(params)]
            )

        lm._model_generate = seeded
        return
    inner, seen, pad = lm._model_generate, {}, lm.tokenizer.pad_token_id

    def keyed(context: Any, max_length: int, stop: list[str], **kwargs: Any) -> Any:
        if not kwargs.get("do_sample"):
            return inner(context, max_length, stop, **kwargs)
        rows = []
        for ids in context.tolist():
            start = next((i for i, t in enumerate(ids) if t != pad), len(ids))
            rows.append(ids[start:])  # lm-eval pads on the left
        processor = KeyedGumbel(evaluation_keys(seed, rows, seen), kwargs.get("temperature", 1.0))
        return inner(context, max_length, stop, logits_processor=[processor], **kwargs)

    lm._model_generate = keyed


def _exact_rows(
    samples: list[dict], task: str, res: dict[str, Any], exact: Any, bounded: bool
) -> list[dict]:
    """One row per document: its exact P(correct) (and unresolved mass where ``bounded``),
    recomputed from the logged log-likelihoods and checked against lm-eval's aggregate."""
    rows = []
    for s in sorted(samples, key=lambda s: s["doc_id"]):
        lls = [float(r[0]) for r in s["filtered_resps"]]
        kinds = [kind for kind, _ in exact.doc_continuations(s["doc"], bounded)]
        rows.append(
            {
                "task": "exact",
                "task_name": task,
                "doc_id": s["doc_id"],
                **s["doc"],
                "target": s["target"],
                "context": s["arguments"][0][0],
                **exact.probabilities(kinds, lls),
                "n_continuations": len(lls),
            }
        )
    for metric in ("p_correct", "p_unresolved") if bounded else ("p_correct",):
        value, recomputed = res[f"{metric},none"], _mean([r[metric] for r in rows])
        if abs(value - recomputed) > 1e-9:
            raise RuntimeError(f"{task}: lm-eval {metric}={value} but samples give {recomputed}")
    return rows


def _seeds(seed: int) -> dict[str, int]:
    """lm-eval's four seeds, all set to ``seed``."""
    return {
        "random_seed": seed,
        "numpy_random_seed": seed,
        "torch_random_seed": seed,
        "fewshot_random_seed": seed,
    }


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


# Headline metric of a built-in task, in lm-eval's order of preference.
_EXTERNAL_METRICS = (
    "exact_match,strict-match",
    "exact_match,flexible-extract",
    "math_verify,none",
    "exact_match,none",
    "acc,none",
)


def _external(lm: Any, tasks: list[str], limit: int | None, seeds: dict[str, int]) -> dict:
    """lm-eval built-in benchmarks on an already loaded model, one labelled entry per task.

    Their data come from the Hugging Face cache (filled by the prefetch rule): jobs run offline.
    """
    import lm_eval
    from lm_eval.tasks import TaskManager

    out = lm_eval.simple_evaluate(
        model=lm,
        tasks=list(tasks),
        task_manager=TaskManager(),
        limit=limit,
        verbosity="WARNING",
        **seeds,
    )
    entries = {}
    for task in tasks:
        res = out["results"].get(task, {})
        metric = next((m for m in _EXTERNAL_METRICS if isinstance(res.get(m), int | float)), None)
        entries[task] = {
            "value": float(res[metric]) if metric else None,
            "metric": metric,
            "protocol": EXTERNAL_PROTOCOL,
            "n_shot": out.get("n-shot", {}).get(task),
            "results": json.loads(json.dumps(res, default=str)),
        }
    return entries


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
    seeds = _seeds(seed)
    versions = _versions()
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
        lm, ignored = _load_lm(
            ckpt, device, batch_size, dtype, None if local else revision, backend, seed
        )
        if "exact" in roles:
            _exact_ready(lm, manifest, backend, ckpt)
        if sampler == "keyed":
            _keyed_generation(lm, seed, backend)
        t2 = time.perf_counter()
        gen_s = _time_generation(lm)
        with _without_env_probe():
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
            ext = _external(lm, external, limit, seeds) if external else {}
        t3 = time.perf_counter()
        rows: list[dict] = []
        metrics: dict[str, Any] = {}
        for role, task in roles.items():
            if role not in run_roles:
                continue
            if role.startswith("exact"):
                bounded = role == "exact_bounded"
                samples, res = out["samples"][task], out["results"][task]
                rows += _exact_rows(samples, task, res, exact, bounded)
                continue
            cfg = out["configs"][task]
            max_gen = int(cfg["generation_kwargs"]["max_gen_toks"])
            task_rows = _sample_rows(out["samples"][task], role, task, lm.tokenizer, max_gen, rule)
            rows += task_rows
            res = out["results"][task]
            metric = "correct"
            value = res[f"{metric},answer"]
            # lm-eval's number and the per-sample log must tell the same story.
            recomputed = _mean([r["correct"] for r in task_rows])
            if abs(value - recomputed) > 1e-9:
                raise RuntimeError(
                    f"{task}: lm-eval {metric}={value} but samples give {recomputed}"
                )
            stderr = res.get(f"{metric}_stderr,answer")
            metrics[role] = {
                "value": value,
                "stderr": stderr if isinstance(stderr, float) else None,
                "n_examples": len({r["doc_id"] for r in task_rows}),
                "n_samples": len(task_rows),
                "repeats": int(cfg.get("repeats", 1)),
                "mean_completion_chars": _mean([r["completion_chars"] for r in task_rows]),
                "truncation_rate": _mean([r["truncated"] for r in task_rows]),
                "generation_kwargs": cfg["generation_kwargs"],
            }
        sampled_rows = [r for r in rows if r["task"] == "sampled"]
        by_doc: dict[int, int] = {}
        for r in sampled_rows:
            by_doc[r["doc_id"]] = max(by_doc.get(r["doc_id"], 0), r["correct"])
        exact_rows = [r for r in rows if r["task"] == "exact"]
        exact_p = _mean([r["p_correct"] for r in exact_rows]) if exact_rows else None
        unresolved = [r["p_unresolved"] for r in exact_rows if r["p_unresolved"] is not None]
        result = {
            "step": step,
            "checkpoint": str(ckpt),
            "greedy_accuracy": metrics["greedy"]["value"],
            # The headline sampled metric: expected accuracy under the sampled protocol, exact
            # where the task's accepted completions are enumerable, else estimated by mean@k.
            "sampled_accuracy": metrics["sampled"]["value"] if exact_p is None else exact_p,
            "sampled_metric": manifest["sampled_metric"],
            # P(correct) lies in [exact, exact + unresolved] per prompt (evaluation/exact.py);
            # the unresolved mass is computed at the last checkpoint of a run (null elsewhere).
            "sampled_exact": exact_p,
            "sampled_exact_unresolved": _mean(unresolved) if unresolved else None,
            "sampled_exact_unresolved_max": max(unresolved) if unresolved else None,
            "greedy_accuracy_stderr": metrics["greedy"]["stderr"],
            "sampled_mean_at_k": metrics["sampled"]["value"],
            "sampled_mean_at_k_stderr": metrics["sampled"]["stderr"],
            # Any of the k correct; computed from the samples, not reported by lm-eval.
            "sampled_pass_at_k": _mean(list(by_doc.values())),
            # Mean length in tokens (eos not counted) of the incorrect sampled completions.
            "sampled_incorrect_tokens": _mean(
                [r["completion_tokens"] for r in sampled_rows if not r["correct"]]
            ),
            "k": metrics["sampled"]["repeats"],
            "temperature": float(metrics["sampled"]["generation_kwargs"]["temperature"]),
            "max_gen_toks": manifest["max_gen_toks"],
            "n_examples": metrics["greedy"]["n_examples"],
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
        step_dir.mkdir(parents=True, exist_ok=True)
        (step_dir / "results.json").write_text(json.dumps(result, indent=2) + "\n")
        with (step_dir / "samples.jsonl").open("w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
        timing = {
            "import_lm_eval_s": import_s,
            "task_index_s": index_s,
            "load_s": t2 - t1,
            "evaluate_s": t3 - t2,
            "generate_s": gen_s[0],
            "write_s": time.perf_counter() - t3,
            # This process's peak (a job-worker child's when GRPO_WORKER is used:
            # Snakemake's benchmark then measures only the thin client).
            "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "in_worker": os.environ.get("GRPO_WORKER_CHILD") == "1",
            "pid": os.getpid(),
        }
        (step_dir / "timing.json").write_text(json.dumps(timing, indent=2) + "\n")
        (step_dir / DONE).write_text(json.dumps({"key": key}) + "\n")  # last: the step is finished
        all_results.append(result)
        del lm
    if only is None:
        summary = json.dumps({"checkpoints": all_results}, indent=2) + "\n"
        (out_dir / "summary.json").write_text(summary)
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
    lm, _ = _load_lm(model, device, batch_size, dtype, None if local else revision, backend, seed)
    _exact_ready(lm, manifest, backend, model)
    task_manager = TaskManager(include_path=str(task_dir.resolve()), include_defaults=False)
    with _without_env_probe():
        out = lm_eval.simple_evaluate(
            model=lm,
            tasks=[task],
            task_manager=task_manager,
            log_samples=True,
            verbosity="WARNING",
            **_seeds(seed),
        )
    exact = load_rule(task_dir, EXACT_MODULE)
    return _exact_rows(out["samples"][task], task, out["results"][task], exact, bounded=True)


CURVE = "curve.json"


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
    settings = [seed, batch_size, device, dtype, limit, backend, _versions()]
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
        lm, _ = _load_lm(policy, device, batch_size, dtype, None, backend, seed)
        if role == "exact":
            _exact_ready(lm, manifest, backend, policy)
        elif manifest.get("sampler", "stream") == "keyed":
            _keyed_generation(lm, seed, backend)
        with _without_env_probe():
            out = lm_eval.simple_evaluate(
                model=lm,
                tasks=[task],
                task_manager=task_manager,
                limit=limit,
                verbosity="WARNING",
                apply_chat_template=bool(manifest["chat_template"]),
                **_seeds(seed),
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
