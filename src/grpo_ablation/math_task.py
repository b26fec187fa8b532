"""The cluster task (``task.kind: math``): a hub math data set scored by a rule-based verifier.

Splits are written with the same JSONL columns as the embedded addition task (``prompt_id``,
``prompt``, ``answer``, ``difficulty``) plus a ``manifest.json`` with the same layout (per-split
``sha256``, ``count``, ``difficulty_histogram``), so every downstream rule is task-agnostic.
Training rows come from the data set's train split (validation is a seeded slice of it, disjoint
from the rows kept for training); test rows come from its test split.

The reward is math-verify's equivalence check (1.0 equivalent, 0.0 not, or an unparseable
completion) and ``None`` when the verifier itself fails (exception, timeout, unparseable gold
answer): the trainer records such a group as ``failed_scoring`` instead of guessing.

``datasets`` and ``math_verify`` are imported lazily: importing this module (the dry run, the
CLI's argument parsing) downloads and imports nothing.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

GENERATOR_VERSION = "math-v1"
DATASETS: dict[str, dict[str, Any]] = {
    # GSM8K: the answer is the number after "####"; difficulty = calculator annotations (steps).
    "gsm8k": {"path": "openai/gsm8k", "name": "main", "question": "question", "solution": "answer"},
    # MATH (all subjects in one config); difficulty = the "Level N" of each problem.
    "math": {
        "path": "DigitalLearningGmbH/MATH-lighteval",
        "name": "default",
        "question": "problem",
        "solution": "solution",
    },
}
DEFAULT_TEMPLATE = (
    "Solve the following math problem. Reason step by step, then give the final answer as "
    "\\boxed{{ANSWER}}.\n\nProblem: {question}\n\nSolution:"
)


@dataclass(frozen=True)
class MathTaskConfig:
    """The math task of the cluster preset; every field is recorded in the split manifest."""

    # Which data set: "gsm8k" or "math" (the hub location of each is in DATASETS).
    dataset: str = "gsm8k"
    # Override the hub path / config name (e.g. a local mirror); None takes DATASETS' entry.
    dataset_path: str | None = None
    dataset_name: str | None = None
    # Hub revision (commit or tag) to pin the data; recorded in the manifest.
    revision: str | None = None
    # MATH only: keep these difficulty levels (the preset uses 3-5: level 1-2 is saturated).
    levels: tuple[int, ...] = (1, 2, 3, 4, 5)
    # Seed of the train/validation shuffle; the same config always writes the same files.
    seed: int = 1234
    # Rows per split; None keeps every available row (validation is carved from train first).
    n_train: int | None = None
    n_validation: int = 200
    n_test: int | None = None
    # Prompt text; {question} is replaced by the problem statement (literal braces doubled).
    prompt_template: str = DEFAULT_TEMPLATE
    # Seconds math-verify may spend on one parse or comparison before it counts as a failure.
    verifier_timeout_s: int = 5

    def __post_init__(self) -> None:
        if self.dataset not in DATASETS:
            raise ValueError(f"unknown math dataset {self.dataset!r}; expected one of {list(DATASETS)}")
        if "{question}" not in self.prompt_template:
            raise ValueError("prompt_template must contain {question}")
        if any(not 1 <= lv <= 5 for lv in self.levels):
            raise ValueError(f"levels must be within 1..5, got {self.levels}")

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MathTaskConfig:
        d = {k: v for k, v in d.items() if k != "kind"}
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"unknown MathTaskConfig key(s): {', '.join(unknown)}")
        if "levels" in d:
            d["levels"] = tuple(int(x) for x in d["levels"])
        return cls(**d)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def source(self) -> dict[str, Any]:
        spec = dict(DATASETS[self.dataset])
        spec["path"] = self.dataset_path or spec["path"]
        spec["name"] = self.dataset_name or spec["name"]
        return spec


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` in ``text`` (braces balanced), or None."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    i, depth = start + len("\\boxed{"), 1
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i:j]
    return None


def gold_answer(dataset: str, solution: str) -> str | None:
    if dataset == "gsm8k":
        _, sep, tail = solution.rpartition("####")
        return tail.strip().replace(",", "") if sep else None
    return last_boxed(solution)


def difficulty(dataset: str, row: dict[str, Any], solution: str) -> int:
    if dataset == "gsm8k":
        return solution.count("<<")  # calculator annotations ~ arithmetic steps
    m = re.search(r"(\d)", str(row.get("level", "")))
    return int(m.group(1)) if m else 0


def _rows(cfg: MathTaskConfig, split: str) -> list[dict[str, Any]]:
    from datasets import load_dataset  # lazy: the hub is touched only when splits are written

    spec = cfg.source()
    data = load_dataset(spec["path"], spec["name"], split=split, revision=cfg.revision)
    rows = []
    for idx, row in enumerate(data):
        solution = str(row[spec["solution"]])
        answer = gold_answer(cfg.dataset, solution)
        level = difficulty(cfg.dataset, row, solution)
        if answer is None or (cfg.dataset == "math" and level not in cfg.levels):
            continue
        rows.append({
            "prompt_id": f"{cfg.dataset}-{split}-{idx}",
            "prompt": cfg.prompt_template.replace("{question}", str(row[spec["question"]])),
            "answer": answer,
            "difficulty": level,
        })  # fmt: skip
    return rows


def make_splits(cfg: MathTaskConfig, train_rows: list[dict], test_rows: list[dict]) -> dict[str, list]:
    """Seeded validation slice of train, then the (optionally truncated) train and test rows."""
    train = list(train_rows)
    random.Random(f"{GENERATOR_VERSION}:{cfg.seed}").shuffle(train)
    if cfg.n_validation >= len(train):
        raise ValueError(f"n_validation={cfg.n_validation} leaves no training rows ({len(train)})")
    validation, train = train[: cfg.n_validation], train[cfg.n_validation :]
    train = train[: cfg.n_train] if cfg.n_train is not None else train
    test = test_rows[: cfg.n_test] if cfg.n_test is not None else list(test_rows)
    return {"train": train, "validation": validation, "test": test}


def write_splits(cfg: MathTaskConfig, out_dir: Path, splits: dict[str, list] | None = None) -> dict:
    """Write ``{train,validation,test}.jsonl`` and ``manifest.json``; return the manifest.

    ``splits`` (rows already loaded) is for tests; by default the rows come from the hub.
    """
    if splits is None:
        splits = make_splits(cfg, _rows(cfg, "train"), _rows(cfg, "test"))
    from grpo_ablation.task import write_split_files

    out_dir = Path(out_dir)
    files = write_split_files({s: splits[s] for s in ("train", "validation", "test")}, out_dir)
    task = cfg.to_dict()
    manifest = {
        "generator_version": GENERATOR_VERSION,
        "generator_seed": cfg.seed,
        "source": {**cfg.source(), "revision": cfg.revision},
        "task_config": task,
        "task_config_sha256": _sha256(json.dumps(task, sort_keys=True).encode()),
        "answer_extraction": "math-verify parse of the completion vs \\boxed{answer}; equivalence by verify",
        "splits": files,
    }
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def _text(completion: Any) -> str:
    # TRL passes strings for plain prompts and message lists for conversational ones.
    if isinstance(completion, list):
        return str(completion[-1].get("content", "")) if completion else ""
    return str(completion)


def make_reward_function(cfg: MathTaskConfig) -> Callable[..., list[float | None]]:
    """A TRL reward function: 1.0 / 0.0 by math-verify, None when the verifier fails."""

    def math_verify_reward(
        prompts: list[Any], completions: list[Any], answer: list[str], **kwargs: Any
    ) -> list[float | None]:
        from math_verify import parse, verify  # lazy: not needed to build the DAG

        out: list[float | None] = []
        for completion, ans in zip(completions, answer, strict=True):
            try:
                gold = parse(f"\\boxed{{{ans}}}", parsing_timeout=cfg.verifier_timeout_s,
                             raise_on_error=True)  # fmt: skip
                if not gold:
                    raise ValueError(f"gold answer {ans!r} does not parse")
                pred = parse(_text(completion), parsing_timeout=cfg.verifier_timeout_s,
                             raise_on_error=True)  # fmt: skip
                ok = bool(pred) and verify(gold, pred, timeout_seconds=cfg.verifier_timeout_s,
                                           raise_on_error=True)  # fmt: skip
                out.append(1.0 if ok else 0.0)  # no extractable answer is simply incorrect
            except Exception:  # the verifier broke (timeout, sympy error): unknown, not wrong
                out.append(None)
        return out

    math_verify_reward.__name__ = f"math_verify_{cfg.dataset}"
    return math_verify_reward


# --- evaluation with lm-eval's standard tasks (evaluation.lm_eval_tasks) ---------------------


def _headline(task_results: dict[str, Any]) -> float | None:
    """The accuracy lm-eval reports first among exact-match style metrics of one task."""
    for key in ("exact_match,strict-match", "exact_match,flexible-extract", "math_verify,none",
                "exact_match,none", "acc,none"):  # fmt: skip
        if isinstance(task_results.get(key), int | float):
            return float(task_results[key])
    return None


def evaluate_builtin_tasks(
    checkpoints: list[tuple[int, str]],
    tasks: list[str],
    out_dir: Path,
    *,
    batch_size: int | str = "auto",
    device: str = "cuda",
    seed: int = 0,
    limit: int | None = None,
) -> list[dict[str, Any]]:
    """Evaluate checkpoints (paths or hub names) on lm-eval's built-in tasks (e.g. gsm8k).

    Needs lm-eval's default task index and the tasks' data sets (hub access on the cluster).
    Writes ``step=<N>/results.json`` per checkpoint and ``summary.json`` listing them;
    ``greedy_accuracy`` is the mean over tasks of each task's headline exact-match metric.
    """
    import lm_eval
    from lm_eval.tasks import TaskManager

    manager = TaskManager()  # the default index: standard tasks are the point here
    out_dir = Path(out_dir)
    results = []
    for step, ckpt in checkpoints:
        out = lm_eval.simple_evaluate(
            model="hf",
            model_args=f"pretrained={ckpt},dtype=bfloat16",
            tasks=tasks,
            task_manager=manager,
            batch_size=batch_size,
            device=device,
            limit=limit,
            random_seed=seed,
            numpy_random_seed=seed,
            torch_random_seed=seed,
            fewshot_random_seed=seed,
        )
        per_task = {t: out["results"].get(t, {}) for t in tasks}
        heads = [h for h in (_headline(r) for r in per_task.values()) if h is not None]
        result = {
            "step": step,
            "checkpoint": str(ckpt),
            "greedy_accuracy": sum(heads) / len(heads) if heads else None,
            "lm_eval_tasks": tasks,
            "results": json.loads(json.dumps(per_task, default=str)),
            "seed": seed,
            "limit": limit,
        }
        step_dir = out_dir / f"step={step}"
        step_dir.mkdir(parents=True, exist_ok=True)
        (step_dir / "results.json").write_text(json.dumps(result, indent=2) + "\n")
        results.append(result)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "summary.json").write_text(json.dumps({"checkpoints": results}, indent=2) + "\n")
    return results
