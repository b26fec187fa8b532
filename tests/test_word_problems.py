"""The word-problem task: GSM8K-format rows generated locally at a chosen difficulty (arithmetic
steps, operand range), read, split and hashed through the math task like the hub data set."""

from __future__ import annotations

import re

import pytest

from grpo_ablation.tasks.math import MathTask, source_rows, write_splits
from grpo_ablation.tasks.word_problem_generator import WordProblems, generate, write_word_problems

STEP = re.compile(r"<<(\d+)([+-])(\d+)=(\d+)>>(\d+)")


def test_every_worked_answer_computes_its_final_number_in_the_declared_steps():
    for steps, top in ((1, 9), (2, 9), (3, 20)):
        rows = generate(WordProblems(200, 50, seed=3, steps=steps, max_operand=top))
        for row in rows["train"] + rows["test"]:
            lines = row["answer"].split("\n")
            found = [STEP.search(line) for line in lines[:-1]]
            assert len(found) == steps and all(found), row
            count = None
            for m in found:
                a, op, b, c, shown = m.groups()
                a, b, c = int(a), int(b), int(c)
                assert count in (None, a)  # each step starts from the previous count
                assert 1 <= b <= top and c == (a + b if op == "+" else a - b) == int(shown)
                assert c >= 0
                count = c
            assert lines[-1] == f"#### {count}"
            assert row["question"].endswith("?") and str(found[0].group(1)) in row["question"]


def test_the_rows_depend_on_the_values_only_and_train_and_test_are_disjoint():
    spec = WordProblems(300, 60, seed=0, steps=2, max_operand=9)
    first, again = generate(spec), generate(spec)
    assert first == again
    assert generate(WordProblems(300, 60, seed=1, steps=2, max_operand=9)) != first
    questions = [r["question"] for r in first["train"] + first["test"]]
    assert len(set(questions)) == len(questions) == 360


def test_one_step_digit_additions_are_every_phrasing_of_every_sum():
    # five templates name a person (12 names), one does not; 12 items, 9 x 9 operand pairs
    distinct = (5 * 12 + 1) * 12 * 9 * 9
    rows = generate(WordProblems(distinct - 100, 100))
    assert len(rows["train"]) + len(rows["test"]) == distinct == 59_292
    with pytest.raises(ValueError, match=f"{distinct} distinct ones"):
        generate(WordProblems(distinct - 100, 101))


def test_bad_sections_are_named():
    with pytest.raises(ValueError, match="word_problems"):
        WordProblems.from_dict({"n_train": 10, "n_test": 5, "operands": 3})
    with pytest.raises(ValueError, match=r"word_problems.steps must be >= 1, got 0"):
        WordProblems(10, 5, steps=0)
    with pytest.raises(ValueError, match=r"word_problems.n_test must be >= 1, got 0"):
        WordProblems(10, 0)
    with pytest.raises(ValueError, match=r"config section 'word_problems' lacks 'n_test'"):
        WordProblems.from_dict({"n_train": 10})


def test_the_math_task_reads_splits_and_hashes_them_with_difficulty_the_steps(tmp_path):
    data = write_word_problems(tmp_path / "wp", 120, 30, seed=0, steps=2, max_operand=9)
    task = MathTask(dataset_path=str(data), n_validation=20)
    rows, files = source_rows(task, "test")
    assert len(rows) == 30 and {r["difficulty"] for r in rows} == {2}
    manifest = write_splits(task, tmp_path / "splits")
    counts = {s: manifest["splits"][s]["count"] for s in ("train", "validation", "test")}
    assert counts == {"train": 100, "validation": 20, "test": 30}
    assert manifest["splits"]["test"]["difficulty_histogram"] == {"2": 30}
    assert manifest["source"]["files"]["test"][0]["sha256"] == files[0].sha256
    reward = task.reward_function()
    gold = [r["answer"] for r in rows[:3]]
    right = [f"So the answer is \\boxed{{{g}}}." for g in gold]
    wrong = [f"So the answer is \\boxed{{{int(g) + 1}}}." for g in gold]
    assert reward(None, right + wrong, gold + gold) == [1.0] * 3 + [0.0] * 3
