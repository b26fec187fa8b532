"""The cluster task (``task.kind: math``): a hub math data set scored by a rule-based verifier.

Splits are written with the same JSONL columns as the embedded addition task (``prompt_id``,
``prompt``, ``answer``, ``difficulty``) plus a ``manifest.json`` with the same layout (per-split
``sha256``, ``count``, ``difficulty_histogram``), so every downstream rule is task-agnostic.
Training rows come from the data set's train split (validation is a seeded slice of it, disjoint
from the rows kept for training); test rows come from its test split.

The reward is math-verify's equivalence check (1.0 equivalent, 0.0 not, or an unparseable
completion) and ``None`` when the verifier itself fails (exception, timeout, unparseable gold
answer): the trainer records such a group as ``failed_scoring`` instead of guessing. Evaluation
applies the same declared rule (``math_verify``) in lm-eval, to the same prompts (chat template
included), so the headline measures what training optimised.

The data set is read from its parquet files (``grpo_ablation.tasks.source``): a hub id's snapshot
at the pinned revision (filled into the Hugging Face cache once by the prefetch rule, then read
offline) or a local folder with the same layout (the CPU stand-in of ``config/cluster_smoke.yaml``);
the manifest records every source file's SHA-256 next to the split files'. A split asked for more
rows than the data hold is refused, never truncated. ``datasets`` and ``math_verify`` are imported
lazily: importing this module downloads and imports nothing.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

from grpo_ablation import settings
from grpo_ablation.layout import MANIFEST
from grpo_ablation.tasks import Prompt, chat_prompt
from grpo_ablation.tasks.source import Source, SourceFile
from grpo_ablation.tasks.splits import sha256

GENERATOR_VERSION = "math-v1"
SOURCE_SPLITS = ("train", "test")  # validation is carved from the source's train split
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
# The user turn (the chat template wraps it): Qwen2.5-Math's instruction for boxed answers.
DEFAULT_TEMPLATE = (
    "{question}\nPlease reason step by step, and put your final answer within \\boxed{}."
)


@dataclass(frozen=True)
class MathTask:
    """The math task of the cluster preset; every field is recorded in the split manifest."""

    kind: ClassVar[str] = "math"
    answer_rule: ClassVar[str] = "math_verify"
    hub_data: ClassVar[bool] = True
    local_base: ClassVar[bool] = False

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
    # Prompts go through the model's chat template (an instruct model); false feeds them raw.
    chat_template: bool = True

    def __post_init__(self) -> None:
        if self.dataset not in DATASETS:
            raise ValueError(
                f"unknown math dataset {self.dataset!r}; expected one of {list(DATASETS)}"
            )
        if "{question}" not in self.prompt_template:
            raise ValueError("prompt_template must contain {question}")
        if any(not 1 <= lv <= 5 for lv in self.levels):
            raise ValueError(f"levels must be within 1..5, got {self.levels}")

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MathTask:
        d = {k: v for k, v in d.items() if k != "kind"}
        if "levels" in d:
            d["levels"] = tuple(int(x) for x in d["levels"])
        return settings.from_dict(cls, d, "task")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def source(self) -> dict[str, Any]:
        spec = dict(DATASETS[self.dataset])
        spec["path"] = self.dataset_path or spec["path"]
        spec["name"] = self.dataset_name or spec["name"]
        return spec

    def data_source(self) -> Source:
        spec = self.source()
        return Source(spec["path"], spec["name"], self.revision)

    # -- the Task protocol (grpo_ablation.tasks) ---------------------------------------------
    def write_splits(self, out_dir: Path, fetched: dict[str, Any] | None = None) -> dict[str, Any]:
        return write_splits(self, out_dir, fetched=fetched)

    def prefetch(self) -> dict[str, Any]:
        """Fill the Hugging Face cache with the data set's snapshot at the pinned revision (needs
        the hub; a local folder is only read) and record its split files' hashes."""
        source = self.data_source()
        root = source.root(download=True)
        return {
            "dataset": source.path,
            "name": source.name,
            "revision": self.revision,
            # a local folder as named (relative to the jobs' working directory), not resolved
            # into wherever the checkout lies; a hub snapshot where the cache holds it
            "root": str(root) if source.is_local else str(root.resolve()),
            "files": source.files(SOURCE_SPLITS),
        }

    def prompt(self, row: dict[str, Any]) -> Prompt:
        return chat_prompt(row["prompt"]) if self.chat_template else row["prompt"]

    def reward_function(self) -> Callable[..., list[float | None]]:
        return make_reward_function(self)

    def sft_pairs(self, rows: list[dict[str, Any]]) -> list[tuple[Prompt, str]]:
        """A short boxed answer per training row: enough to teach a stand-in the answer format."""
        return [(self.prompt(r), f"The answer is \\boxed{{{r['answer']}}}.") for r in rows]


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


def source_rows(cfg: MathTask, split: str) -> tuple[list[dict[str, Any]], list[SourceFile]]:
    """The task rows of a source split (rows without a gold answer, or off ``levels``, dropped),
    and the source files they were read from."""
    spec = cfg.source()
    data, files = cfg.data_source().read(split)
    rows = []
    for idx, row in enumerate(data):
        solution = str(row[spec["solution"]])
        answer = gold_answer(cfg.dataset, solution)
        level = difficulty(cfg.dataset, row, solution)
        if answer is None or (cfg.dataset == "math" and level not in cfg.levels):
            continue
        rows.append(
            {
                "prompt_id": f"{cfg.dataset}-{split}-{idx}",
                "prompt": cfg.prompt_template.replace("{question}", str(row[spec["question"]])),
                "answer": answer,
                "difficulty": level,
            }
        )
    return rows, files


def requested(cfg: MathTask) -> dict[str, int | None]:
    """Rows asked for per split (None: every row the source has)."""
    return {"train": cfg.n_train, "validation": cfg.n_validation, "test": cfg.n_test}


def make_splits(
    cfg: MathTask, train_rows: list[dict], test_rows: list[dict], source: str = "the data set"
) -> dict[str, list]:
    """Seeded validation slice of train, then the train and test rows (the first ``n_train`` /
    ``n_test`` when set). A size larger than the rows available is refused, naming the numbers."""
    asked = requested(cfg)
    available = {
        "validation": len(train_rows),
        "train": len(train_rows) - cfg.n_validation,
        "test": len(test_rows),
    }
    for split in ("validation", "train", "test"):
        n = asked[split]
        if n is not None and n > available[split]:
            where = " after the validation rows" if split == "train" else ""
            raise ValueError(
                f"split {split!r}: {n} rows asked for (task.n_{split}) but {source} has "
                f"{available[split]}{where}; lower task.n_{split} or use a larger data set"
            )
    if available["train"] <= 0:
        raise ValueError(f"n_validation={cfg.n_validation} leaves no training rows in {source}")
    train = list(train_rows)
    random.Random(f"{GENERATOR_VERSION}:{cfg.seed}").shuffle(train)
    validation, train = train[: cfg.n_validation], train[cfg.n_validation :]
    train = train[: cfg.n_train] if cfg.n_train is not None else train
    test = test_rows[: cfg.n_test] if cfg.n_test is not None else list(test_rows)
    return {"train": train, "validation": validation, "test": test}


def check_fetched(source: Source, read: dict[str, list[SourceFile]], fetched: dict) -> None:
    """Stop when the files just read are not the ones the prefetch rule recorded."""
    if "files" not in fetched:
        raise ValueError(
            f"the prefetch record of {source.describe()} lists no source files (it was written "
            "by an older version): delete the experiment's prefetch.json and run again, so that "
            "the prefetch rule records their hashes"
        )
    now = {s: [asdict(f) for f in files] for s, files in read.items()}
    if now != fetched.get("files"):
        raise ValueError(
            f"{source.describe()} changed since the prefetch rule read it: it recorded "
            f"{json.dumps(fetched.get('files'), sort_keys=True)}, the files now are "
            f"{json.dumps(now, sort_keys=True)}; rerun the prefetch rule (delete its record) "
            "if the new files are meant"
        )


def write_splits(
    cfg: MathTask,
    out_dir: Path,
    splits: dict[str, list] | None = None,
    fetched: dict[str, Any] | None = None,
) -> dict:
    """Write ``{train,validation,test}.jsonl`` and ``manifest.json``; return the manifest.

    ``splits`` (rows already loaded) is for tests; by default the rows come from the source's
    files, which must be the ones in ``fetched`` (the prefetch rule's record) when given.
    """
    source = cfg.data_source()
    files: dict[str, list[SourceFile]] = {}
    if splits is None:
        (train, files["train"]), (test, files["test"]) = (
            source_rows(cfg, s) for s in SOURCE_SPLITS
        )
        if fetched is not None:
            check_fetched(source, files, fetched)
        splits = make_splits(cfg, train, test, source.describe())
    from grpo_ablation.tasks.splits import write_split_files

    out_dir = Path(out_dir)
    written = write_split_files(
        {s: splits[s] for s in ("train", "validation", "test")}, out_dir, requested(cfg)
    )
    task = cfg.to_dict()
    manifest = {
        "generator_version": GENERATOR_VERSION,
        "generator_seed": cfg.seed,
        "source": {
            **cfg.source(),
            "revision": cfg.revision,
            "files": {s: [asdict(f) for f in fs] for s, fs in files.items()},
        },
        "task_config": task,
        "task_config_sha256": sha256(json.dumps(task, sort_keys=True).encode()),
        "answer_rule": cfg.answer_rule,
        "answer_extraction": "math-verify parse of the completion vs \\boxed{answer}; equivalence by verify",
        "splits": written,
    }
    (out_dir / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def _text(completion: Any) -> str:
    # TRL passes strings for plain prompts and message lists for conversational ones.
    if isinstance(completion, list):
        return str(completion[-1].get("content", "")) if completion else ""
    return str(completion)


def make_reward_function(cfg: MathTask) -> Callable[..., list[float | None]]:
    """A TRL reward function: 1.0 / 0.0 by math-verify, None when the verifier fails."""

    def math_verify_reward(
        prompts: list[Any], completions: list[Any], answer: list[str], **kwargs: Any
    ) -> list[float | None]:
        from math_verify import parse, verify  # lazy: not needed to build the DAG

        out: list[float | None] = []
        for completion, ans in zip(completions, answer, strict=True):
            try:
                gold = parse(
                    f"\\boxed{{{ans}}}", parsing_timeout=cfg.verifier_timeout_s, raise_on_error=True
                )
                if not gold:
                    raise ValueError(f"gold answer {ans!r} does not parse")
                pred = parse(
                    _text(completion), parsing_timeout=cfg.verifier_timeout_s, raise_on_error=True
                )
                ok = bool(pred) and verify(
                    gold, pred, timeout_seconds=cfg.verifier_timeout_s, raise_on_error=True
                )
                out.append(1.0 if ok else 0.0)  # no extractable answer is simply incorrect
            except Exception:  # the verifier broke (timeout, sympy error): unknown, not wrong
                out.append(None)
        return out

    math_verify_reward.__name__ = f"math_verify_{cfg.dataset}"
    return math_verify_reward
