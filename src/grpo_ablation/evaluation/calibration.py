"""The probabilities behind the mixed-group calibration, measured apart from the groups they predict.

At every step where training sampled its groups from a policy that was saved (the base policy at
step 0, ``checkpoint-N`` at step N: a rollout's step is the number of optimizer steps taken before
it was generated), the exact P(correct) of each of that step's prompts under that policy is
computed with lm-eval (:func:`evaluate.exact_probabilities`), at the training temperature (the
groups' sampling protocol, which the evaluation's may differ from), and stored next to the group's
observed outcome. P(mixed) = 1 − p^G − (1 − p)^G then predicts the group from a number that never
saw it; the analysis compares (``analysis/calibration.py``). The rollout log is read as data (its
fields are documented in docs/guarantees.md); no training code is imported.

Writes ``<out>/calibration.json``: ``measured`` (false, with the reason, where the sampled accuracy
is not exact), the temperature, the policy steps, and one entry per group: step, group index,
prompt id, size G, correct and failed counts, its category, ``p_correct`` and ``p_unresolved``.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from grpo_ablation.evaluation.evaluate import exact_probabilities
from grpo_ablation.evaluation.task_folders import write_task
from grpo_ablation.layout import (
    CALIBRATION,
    CALIBRATION_ROWS,
    CALIBRATION_TASK,
    CALIBRATION_WORK,
    MANIFEST,
    ROLLOUTS,
    RUN_INFO,
    checkpoint,
    split_path,
    step_folder,
)


def read_rollouts(run: Path) -> Iterator[dict[str, Any]]:
    for path in sorted((Path(run) / ROLLOUTS).glob("rank*.jsonl.gz")):
        with gzip.open(path, "rt") as f:
            yield from (json.loads(line) for line in f if line.strip())


def policy_groups(rows: Iterable[dict[str, Any]], steps: set[int]) -> list[dict[str, Any]]:
    """The groups generated at ``steps``, one entry each, in (step, group index) order."""
    groups: dict[tuple[int, int], dict[str, Any]] = {}
    for r in rows:
        if r["step"] not in steps:
            continue
        key = (int(r["step"]), int(r["group_index"]))
        g = groups.setdefault(
            key,
            {
                "step": key[0],
                "group_index": key[1],
                "prompt_id": r["prompt_id"],
                "size": 0,
                "correct": 0,
                "failed": 0,
                "category": r["group_category"],
            },
        )
        g["size"] += 1
        g["failed"] += r["correct"] is None
        g["correct"] += bool(r["correct"])
    return [groups[k] for k in sorted(groups)]


def training_temperature(info: dict[str, Any]) -> float:
    """The temperature the run sampled its groups at (``training.temperature`` of its
    ``run_info.json``): the groups are predicted from P(correct) under the protocol that drew
    them, not under the evaluation's (``evaluation.temperature``, in the test tasks' manifest)."""
    return float(info["training_config"]["temperature"])


def measure(
    run: Path, base_model: Path | str, tasks: Path, out: Path, **options: Any
) -> dict[str, Any]:
    """Exact P(correct) of every prompt a saved policy was sampled on, per group (``layout.CALIBRATION``)."""
    manifest = json.loads((Path(tasks) / "test" / MANIFEST).read_text())
    out = Path(out)
    if manifest["sampled_metric"] != "exact":
        record: dict[str, Any] = {
            "measured": False,
            "reason": "the task's accepted completions are not enumerable (sampled_metric "
            f"{manifest['sampled_metric']}): no probability measured apart from the groups",
        }
        (out / CALIBRATION).write_text(json.dumps(record, indent=2) + "\n")
        return record
    info = json.loads((Path(run) / RUN_INFO).read_text())
    temperature = training_temperature(info)
    policies: dict[int, Path | str] = {0: base_model}
    policies |= {int(s): checkpoint(run, s) for s in info["checkpoints"]}
    groups = policy_groups(read_rollouts(run), set(policies))
    # The training prompts: the split file next to the test split the tasks were written from.
    train = split_path(Path(manifest["test"]).parent, "train")
    rows = {r["prompt_id"]: r for r in map(json.loads, train.read_text().splitlines())}
    for step in sorted({g["step"] for g in groups}):
        at = [g for g in groups if g["step"] == step]
        folder = step_folder(out / CALIBRATION_WORK, step)
        folder.mkdir(parents=True, exist_ok=True)
        ids = sorted({g["prompt_id"] for g in at})
        (folder / CALIBRATION_ROWS).write_text("".join(json.dumps(rows[i]) + "\n" for i in ids))
        write_task(
            folder / CALIBRATION_ROWS,
            folder / CALIBRATION_TASK,
            "calibration",
            manifest["max_gen_toks"],
            1,
            temperature,
            exact=manifest["exact"],
        )
        probs = {
            r["prompt_id"]: r
            for r in exact_probabilities(policies[step], folder / CALIBRATION_TASK, **options)
        }
        for g in at:
            g["p_correct"] = probs[g["prompt_id"]]["p_correct"]
            g["p_unresolved"] = probs[g["prompt_id"]]["p_unresolved"]
    record = {
        "measured": True,
        "temperature": temperature,
        "policy_steps": sorted(policies),
        "groups": groups,
    }
    (out / CALIBRATION).write_text(json.dumps(record, indent=2) + "\n")
    return record
