"""The default task: splits, manifest, the answer-extraction rule and the reward outcomes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grpo_ablation.tasks.addition import (
    AdditionTask,
    ScoringError,
    carryless_sum,
    count_carries,
    extract_answer,
    generate_splits,
    is_correct,
    make_reward_function,
    score_completion,
    write_splits,
)

SMALL = AdditionTask(n_train=120, n_validation=30, n_test=40)


def test_splits_are_disjoint_even_up_to_operand_order() -> None:
    splits = generate_splits(SMALL)
    keys = {s: {tuple(sorted((r["a"], r["b"]))) for r in rows} for s, rows in splits.items()}
    assert [len(rows) for rows in splits.values()] == [120, 30, 40]
    assert not keys["train"] & keys["validation"]
    assert not keys["train"] & keys["test"]
    assert not keys["validation"] & keys["test"]
    for rows in splits.values():
        for r in rows:
            assert r["prompt"] == f"{r['a']}+{r['b']}="
            assert r["answer"] == str(r["a"] + r["b"])
            assert r["difficulty"] == count_carries(r["a"], r["b"])


def test_splits_beyond_the_problem_universe_are_refused_and_exactly_all_of_it_is_not(
    tmp_path: Path,
) -> None:
    # a <= 9, b <= 9: 55 problems up to operand order.
    sizes = {"a_max": 9, "b_max": 9, "n_validation": 5, "n_test": 10}
    with pytest.raises(ValueError, match=r"splits ask for 56 problems .* has only 55 distinct"):
        generate_splits(AdditionTask(n_train=41, **sizes))
    manifest = write_splits(AdditionTask(n_train=40, **sizes), tmp_path)
    assert {s: (v["count"], v["requested"]) for s, v in manifest["splits"].items()} == {
        "train": (40, 40),
        "validation": (5, 5),
        "test": (10, 10),
    }


def test_all_difficulties_and_both_operand_orders_occur() -> None:
    rows = generate_splits(AdditionTask())["train"]
    assert {r["difficulty"] for r in rows} == {0, 1, 2}
    assert any(r["a"] < r["b"] for r in rows) and any(r["a"] > r["b"] for r in rows)


def test_held_out_splits_do_not_depend_on_train_size() -> None:
    a, b = (
        generate_splits(SMALL),
        generate_splits(AdditionTask(n_train=60, n_validation=30, n_test=40)),
    )
    assert a["validation"] == b["validation"] and a["test"] == b["test"]


def test_rerun_writes_byte_identical_files(tmp_path: Path) -> None:
    m1 = write_splits(SMALL, tmp_path / "one")
    m2 = write_splits(SMALL, tmp_path / "two")
    assert m1 == m2
    for name in ("train.jsonl", "validation.jsonl", "test.jsonl", "manifest.json"):
        assert (tmp_path / "one" / name).read_bytes() == (tmp_path / "two" / name).read_bytes()


def test_manifest_records_counts_hashes_and_config(tmp_path: Path) -> None:
    m = write_splits(SMALL, tmp_path)
    assert json.loads((tmp_path / "manifest.json").read_text()) == m
    assert m["generator_seed"] == SMALL.seed and m["generator_version"]
    for split in ("train", "validation", "test"):
        entry = m["splits"][split]
        assert entry["count"] == sum(entry["difficulty_histogram"].values())
        assert len(entry["sha256"]) == 64


def test_config_change_changes_manifest(tmp_path: Path) -> None:
    m1 = write_splits(SMALL, tmp_path / "a")
    m2 = write_splits(AdditionTask.from_dict({**SMALL.to_dict(), "seed": 7}), tmp_path / "b")
    m3 = write_splits(
        AdditionTask.from_dict({**SMALL.to_dict(), "failure_rate": 0.1}), tmp_path / "c"
    )
    assert m1["task_config_sha256"] != m2["task_config_sha256"] != m3["task_config_sha256"]
    assert m1["splits"]["train"]["sha256"] != m2["splits"]["train"]["sha256"]
    assert m1["task_config_sha256"] != m3["task_config_sha256"]


def test_from_dict_rejects_unknown_keys() -> None:
    with pytest.raises(ValueError, match="n_trian"):
        AdditionTask.from_dict({"n_trian": 3})
    with pytest.raises(ValueError):
        AdditionTask(reward_kind="fuzzy")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("55", "55"),
        ("...55", "55"),
        ("  ..55 ", "55"),
        ("055", "055"),  # kept as written: compared as a string, so it is not "55"
        ("", None),
        ("....", None),  # filler only (e.g. truncated)
        ("55.", None),  # anything after the digits
        ("5.5", None),
        ("a55", None),
        ("-5", None),
    ],
)
def test_extraction_rule(text: str, expected: str | None) -> None:
    assert extract_answer(text) == expected


def test_is_correct() -> None:
    assert is_correct("..55", "55")
    assert not is_correct("..45", "55")
    assert not is_correct("055", "55")


def test_carry_helpers() -> None:
    assert count_carries(47, 8) == 1 and carryless_sum(47, 8) == 45
    assert count_carries(95, 9) == 2 and carryless_sum(95, 9) == 94
    assert count_carries(12, 3) == 0 and carryless_sum(12, 3) == 15


def test_binary_reward_has_trl_signature() -> None:
    fn = make_reward_function(AdditionTask())
    out = fn(
        prompts=["47+8="] * 3,
        completions=["..55", "45", "x"],
        answer=["55"] * 3,
        prompt_id=["add-8-47"] * 3,
        difficulty=[1] * 3,
    )
    assert out == [1.0, 0.0, 0.0]


def test_failure_injection_rate_and_determinism() -> None:
    cfg = AdditionTask(failure_rate=0.2, failure_seed=3)
    fn = make_reward_function(cfg)
    comps = [f"{'.' * (i % 4)}{i}" for i in range(2000)]
    kw = {"answer": ["7"] * 2000, "prompt_id": [f"p{i % 50}" for i in range(2000)]}
    first = fn(prompts=["3+4="] * 2000, completions=comps, **kw)
    assert first == fn(prompts=["3+4="] * 2000, completions=comps, **kw)
    rate = sum(r is None for r in first) / 2000
    assert 0.17 < rate < 0.23
    failed = comps[first.index(None)]
    with pytest.raises(ScoringError):
        score_completion(cfg, kw["prompt_id"][first.index(None)], failed, "7")
    other_seed = make_reward_function(AdditionTask(failure_rate=0.2, failure_seed=4))
    assert other_seed(prompts=["3+4="] * 2000, completions=comps, **kw) != first
    assert None not in make_reward_function(AdditionTask())(["3+4="] * 2000, comps, **kw)


def test_graded_reward_has_tiny_gaps_that_standardisation_erases() -> None:
    cfg = AdditionTask(reward_kind="graded")
    fn = make_reward_function(cfg)
    r = fn(
        ["47+8="] * 4, ["55", "45", ".45", "..45"], answer=["55"] * 4, prompt_id=["add-8-47"] * 4
    )
    assert r[0] == pytest.approx(0.51, abs=cfg.graded_noise)
    assert all(x == pytest.approx(0.5, abs=cfg.graded_noise) for x in r[1:])
    assert len(set(r[1:])) == 3  # deterministic noise differs between wrong completions
    assert r == fn(
        ["47+8="] * 4, ["55", "45", ".45", "..45"], answer=["55"] * 4, prompt_id=["add-8-47"] * 4
    )
    # group standardisation maps a 0.01 gap to the same advantages as a 1.0 gap (up to noise)
    import statistics

    def std_adv(x: list[float]) -> list[float]:
        m, s = statistics.mean(x), statistics.stdev(x)
        return [(v - m) / s for v in x]

    assert std_adv(r)[0] == pytest.approx(std_adv([1.0, 0.0, 0.0, 0.0])[0], abs=0.2)
