"""A data generator, not a task: arithmetic word problems in GSM8K's format, with a difficulty
knob, for the math task to read.

Each row is a question and a worked answer: one reasoning line per arithmetic step with its
``<<a+b=c>>`` calculator annotation, then ``#### N`` (so the math task's ``difficulty``, the number
of annotations, is the number of steps). The config's ``word_problems`` section writes them, once,
as a local folder in openai/gsm8k's layout (``main/{train,test}-00000-of-00001.parquet`` and a
``README.md`` declaring the ``main`` config) at ``task.dataset_path``; the math task then reads,
splits and hashes them like the hub data set, and scores them with the same verifier.

Difficulty: ``steps`` operations (additions and subtractions that never go below zero) on operands
drawn from 1..``max_operand``. ``steps: 1, max_operand: 9`` is every one-step addition of single
digits the templates can phrase (59,292 questions, shuffled); other levels are drawn at random,
distinct questions only. Train and test questions are disjoint; the files depend only on the
section's values.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_ablation import settings
from grpo_ablation.settings import REQUIRED, option

NAMES = ["Tom", "Ana", "Ben", "Mia", "Sam", "Lily", "Omar", "Zoe", "Raj", "Ella", "Leo", "Nina"]
ITEMS = [
    "apples",
    "pencils",
    "marbles",
    "stickers",
    "books",
    "cookies",
    "shells",
    "coins",
    "stamps",
    "cards",
    "eggs",
    "toys",
]
# One-step additions: question text and the reasoning sentence; {n} name, {x} item, {a} {b} operands.
TEMPLATES = [
    (
        "{n} has {a} {x} and buys {b} more. How many {x} does {n} have now?",
        "{n} has {a} + {b} = <<{a}+{b}={c}>>{c} {x} now.",
    ),
    (
        "{n} picked {a} {x} in the morning and {b} {x} in the afternoon. How many {x} did {n} pick in all?",
        "{n} picked {a} + {b} = <<{a}+{b}={c}>>{c} {x} in all.",
    ),
    (
        "There are {a} {x} in a box. {n} puts {b} more {x} in the box. How many {x} are in the box?",
        "The box has {a} + {b} = <<{a}+{b}={c}>>{c} {x}.",
    ),
    (
        "{n} found {a} {x} on Monday and {b} {x} on Tuesday. How many {x} did {n} find?",
        "{n} found {a} + {b} = <<{a}+{b}={c}>>{c} {x}.",
    ),
    (
        "{n} had {a} {x}. A friend gave {n} {b} {x}. How many {x} does {n} have?",
        "{n} has {a} + {b} = <<{a}+{b}={c}>>{c} {x}.",
    ),
    (
        "A shelf holds {a} {x} and a table holds {b} {x}. How many {x} are there altogether?",
        "There are {a} + {b} = <<{a}+{b}={c}>>{c} {x} altogether.",
    ),
]
# Chained steps: (sign, event sentence, reasoning sentence); {p} the count before, {c} after.
EVENTS = [
    (+1, "{n} buys {b} more.", "After buying, {n} has {p} + {b} = <<{p}+{b}={c}>>{c} {x}."),
    (
        +1,
        "A friend gives {n} {b} more.",
        "After the gift, {n} has {p} + {b} = <<{p}+{b}={c}>>{c} {x}.",
    ),
    (+1, "{n} finds {b} more.", "After finding more, {n} has {p} + {b} = <<{p}+{b}={c}>>{c} {x}."),
    (-1, "{n} gives {b} to a friend.", "After giving, {n} has {p} - {b} = <<{p}-{b}={c}>>{c} {x}."),
    (-1, "{n} loses {b}.", "After losing some, {n} has {p} - {b} = <<{p}-{b}={c}>>{c} {x}."),
    (-1, "{n} uses {b}.", "After using some, {n} has {p} - {b} = <<{p}-{b}={c}>>{c} {x}."),
]


@dataclass(frozen=True)
class WordProblems:
    """The config's ``word_problems`` section, declared once (its schema part is written from
    it): how many rows, which seed, which difficulty."""

    n_train: int = option(REQUIRED, "rows of the train split", minimum=1)
    n_test: int = option(REQUIRED, "rows of the test split (disjoint questions)", minimum=1)
    seed: int = option(0, "the rows drawn (and their order) depend on it alone")
    steps: int = option(
        1, "arithmetic steps per problem (calculator annotations in the worked answer)", minimum=1
    )
    max_operand: int = option(9, "operands are drawn from 1..max_operand", minimum=1)

    def __post_init__(self) -> None:
        settings.check_options(self, "word_problems")

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> WordProblems:
        return settings.from_dict(cls, d, "word_problems")


def one_step_rows(seed: int, max_operand: int) -> list[dict[str, str]]:
    """Every distinct one-step addition the templates can make, in a seed-determined order."""
    rows: dict[str, str] = {}
    operands = range(1, max_operand + 1)
    for q_tpl, a_tpl in TEMPLATES:
        for n in NAMES:
            for x in ITEMS:
                for a in operands:
                    for b in operands:
                        v = {"n": n, "x": x, "a": a, "b": b, "c": a + b}
                        rows.setdefault(q_tpl.format(**v), f"{a_tpl.format(**v)}\n#### {a + b}")
    out = [{"question": q, "answer": a} for q, a in sorted(rows.items())]
    random.Random(f"gsm8k-standin:{seed}").shuffle(out)
    return out


def chained_row(rng: random.Random, steps: int, max_operand: int) -> dict[str, str]:
    """One problem of ``steps`` events after a starting count; the count never goes below 0."""
    n, x = rng.choice(NAMES), rng.choice(ITEMS)
    count = rng.randint(1, max_operand)
    question, lines = [f"{n} has {count} {x}."], []
    for _ in range(steps):
        sign, event, reason = rng.choice([e for e in EVENTS if e[0] > 0 or count >= 1])
        b = rng.randint(1, max_operand if sign > 0 else min(max_operand, count))
        after = count + sign * b
        v = {"n": n, "x": x, "b": b, "p": count, "c": after}
        question.append(event.format(**v))
        lines.append(reason.format(**v))
        count = after
    question.append(f"How many {x} does {n} have now?")
    return {"question": " ".join(question), "answer": "\n".join(lines) + f"\n#### {count}"}


def generate(spec: WordProblems) -> dict[str, list[dict[str, str]]]:
    """The train and test rows of ``spec`` (disjoint questions), deterministic in its values."""
    wanted = spec.n_train + spec.n_test
    if spec.steps == 1:
        rows = one_step_rows(spec.seed, spec.max_operand)
    else:
        rng = random.Random(f"word-problems:{spec.seed}:{spec.steps}:{spec.max_operand}")
        seen: dict[str, dict[str, str]] = {}
        for _ in range(50 * wanted):  # distinct questions only; the bound stops a tiny space
            row = chained_row(rng, spec.steps, spec.max_operand)
            seen.setdefault(row["question"], row)
            if len(seen) == wanted:
                break
        rows = list(seen.values())
    if wanted > len(rows):
        raise ValueError(
            f"word_problems: {spec.n_train} + {spec.n_test} rows asked for, the templates make "
            f"{len(rows)} distinct ones at steps={spec.steps}, max_operand={spec.max_operand}"
        )
    return {"train": rows[: spec.n_train], "test": rows[spec.n_train : wanted]}


def _readme(splits: list[str], spec: WordProblems) -> str:
    """Front matter as on the hub: a ``main`` config whose ``data_files`` name each split's file."""
    files = "".join(f"  - split: {s}\n    path: main/{s}-00000-of-00001.parquet\n" for s in splits)
    return (
        "---\nconfigs:\n- config_name: main\n  data_files:\n"
        + files
        + "dataset_info:\n  config_name: main\n  features:\n"
        "  - name: question\n    dtype: string\n  - name: answer\n    dtype: string\n---\n\n"
        "# Word problems in GSM8K's format\n\nSynthetic arithmetic word problems in the format of "
        "openai/gsm8k (config `main`), written by `grpo_ablation.tasks.word_problem_generator`: "
        f"{spec.steps} arithmetic step(s) on operands 1..{spec.max_operand}.\n"
    )


def write_word_problems(
    out_dir: Path,
    n_train: int,
    n_test: int,
    seed: int,
    steps: int = WordProblems.steps,
    max_operand: int = WordProblems.max_operand,
) -> Path:
    """Write the problems as a local copy of openai/gsm8k's layout; return ``out_dir``.

    ``Source(str(out_dir), "main").read("train")`` (and ``datasets.load_dataset``) read it as the
    hub data set would be read.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    spec = WordProblems(n_train, n_test, seed, steps, max_operand)
    splits = generate(spec)
    out_dir = Path(out_dir)
    (out_dir / "main").mkdir(parents=True, exist_ok=True)
    features = {
        "question": {"dtype": "string", "_type": "Value"},
        "answer": {"dtype": "string", "_type": "Value"},
    }
    schema = pa.schema(
        [("question", pa.string()), ("answer", pa.string())],
        metadata={"huggingface": json.dumps({"info": {"features": features}})},
    )
    for split, split_rows in splits.items():
        table = pa.Table.from_pylist(split_rows, schema=schema)
        pq.write_table(table, out_dir / "main" / f"{split}-00000-of-00001.parquet")
    (out_dir / "README.md").write_text(_readme(list(splits), spec))
    return out_dir
