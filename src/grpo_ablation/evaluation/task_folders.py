"""The lm-eval task folders of a split: the greedy, sampled and (where the answer rule's accepted
completions can be enumerated) exact tasks, each stating the whole sampling protocol, with the
answer rule and the enumeration copied beside them as lm-eval's metric functions.

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
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from grpo_ablation.design.options import EvaluationConfig
from grpo_ablation.evaluation import exact as exact_module
from grpo_ablation.layout import MANIFEST, split_path
from grpo_ablation.samplers import check_sampler
from grpo_ablation.sampling import generate_kwargs, protocol
from grpo_ablation.tasks import answer_rules

FALLBACK = "[invalid]"
METRICS_MODULE = "grpo_answer"
EXACT_MODULE = "grpo_exact"  # a copy of grpo_ablation/evaluation/exact.py

# The declared answer rules, implemented for lm-eval (grpo_ablation/tasks/answer_rules).
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
        "# Written by grpo_ablation.evaluation.task_folders.write_task; do not edit by hand.",
        f"task: {task}",
        "dataset_path: json",
        "dataset_kwargs:",
        "  data_files:",
        # As given: lm-eval resolves data_files from the working directory, not this folder. The
        # jobs name it relative to theirs (the repository root), so results that move with their
        # checkout (or a fresh clone beside them) keep task folders that read their own splits.
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
    sampler: str = EvaluationConfig.sampler,
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
    test_jsonl = Path(test_jsonl)
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
        if answer_rule not in answer_rules.ENUMERABLE or chat_template:
            raise ValueError(
                f"exact metric: answer rule {answer_rule!r} (chat template {chat_template}) has no "
                f"enumeration; enumerable rules: {list(answer_rules.ENUMERABLE)} without a chat template"
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
            split_path(data, split),
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
