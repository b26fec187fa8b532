"""The mixed-group calibration predicts the training groups, so it measures P(correct) at the
temperature training sampled them at (training.temperature), not at the evaluation's."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from grpo_ablation.evaluation import calibration
from grpo_ablation.layout import CALIBRATION, MANIFEST, ROLLOUTS, RUN_INFO

EXACT = {"eos": "<eos>", "empty": [], "space": []}  # what write_task copies into the spec


def _run(tmp_path: Path, training_temperature: float, evaluation_temperature: float) -> Path:
    """A run folder (run_info, one step-0 group in the rollout log) and test tasks whose
    manifest carries the evaluation temperature."""
    splits = tmp_path / "splits"
    splits.mkdir()
    row = {"prompt_id": "p0", "prompt": "1+1=", "answer": "2"}
    for split in ("train", "test"):
        (splits / f"{split}.jsonl").write_text(json.dumps(row) + "\n")
    tasks = tmp_path / "tasks" / "test"
    tasks.mkdir(parents=True)
    manifest = {
        "sampled_metric": "exact",
        "test": str(splits / "test.jsonl"),
        "max_gen_toks": 4,
        "temperature": evaluation_temperature,
        "exact": EXACT,
    }
    (tasks / MANIFEST).write_text(json.dumps(manifest))
    run = tmp_path / "run"
    (run / ROLLOUTS).mkdir(parents=True)
    info = {"training_config": {"temperature": training_temperature, "seed": 0}, "checkpoints": []}
    (run / RUN_INFO).write_text(json.dumps(info))
    rows = [
        {"step": 0, "group_index": 0, "prompt_id": "p0", "correct": c, "group_category": "mixed"}
        for c in (True, False)
    ]
    with gzip.open(run / ROLLOUTS / "rank0.jsonl.gz", "wt") as f:
        f.write("".join(json.dumps(r) + "\n" for r in rows))
    return run


def test_the_temperature_is_the_runs_training_temperature():
    info = {"training_config": {"temperature": 0.7}}
    assert calibration.training_temperature(info) == 0.7


@pytest.mark.parametrize("training, evaluation", [(0.7, 1.0), (1.0, 0.5)])
def test_the_calibration_task_samples_at_the_training_temperature(
    tmp_path, monkeypatch, training, evaluation
):
    seen = []

    def exact_probabilities(model, task_dir, **options):
        # The task the probabilities are computed on: its manifest's temperature is the one
        # ready_for_exact divides the logits by.
        seen.append(json.loads((Path(task_dir) / MANIFEST).read_text())["temperature"])
        return [{"prompt_id": "p0", "p_correct": 0.5, "p_unresolved": 0.0}]

    monkeypatch.setattr(calibration, "exact_probabilities", exact_probabilities)
    run = _run(tmp_path, training, evaluation)
    out = tmp_path / "out"
    out.mkdir()
    record = calibration.measure(run, "base", tmp_path / "tasks", out)
    assert seen == [training]
    assert record["temperature"] == training
    assert json.loads((out / CALIBRATION).read_text())["groups"][0]["p_correct"] == 0.5
