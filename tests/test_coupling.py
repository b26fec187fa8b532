"""The coupling diagnostic: the share of a cell's completions identical to its reference's, and the
first step that differs, from the two runs' rollout logs."""

import gzip
import json

import pandas as pd
import pytest

from grpo_ablation.analysis.coupling import (
    coupling_table,
    first_difference,
    load_coupling,
    step_coupling,
)
from grpo_ablation.analysis.prose.coupling import coupling_reading

G = 4


def rollouts(completions_by_step: list[list[str]], prompts=("a", "b")) -> pd.DataFrame:
    """One run's rows: each step has len(prompts) groups of G completions."""
    rows = []
    for step, texts in enumerate(completions_by_step):
        for i, text in enumerate(texts):
            g, slot = divmod(i, G)
            rows.append(
                {
                    "step": step,
                    "group_index": g,
                    "completion_index": slot,
                    "prompt_id": prompts[g],
                    "completion": text,
                }
            )
    return pd.DataFrame(rows)


REF = [["1"] * 8, ["2"] * 8, ["3"] * 8]
# Same at step 0, one completion of eight differs at step 1, half at step 2.
CELL = [["1"] * 8, ["2"] * 7 + ["x"], ["3"] * 4 + ["y"] * 4]


def test_identical_shares_and_the_first_difference():
    steps = step_coupling(rollouts(CELL), rollouts(REF))
    assert steps["identical"].tolist() == [1.0, 7 / 8, 0.5]
    assert steps["compared"].tolist() == [8, 8, 8]
    assert first_difference(steps) == 1
    # Never different: one past the last step.
    assert first_difference(step_coupling(rollouts(REF), rollouts(REF))) == 3


def test_runs_whose_batches_do_not_line_up_are_not_compared():
    other_prompts = rollouts(REF, prompts=("b", "a"))
    assert step_coupling(rollouts(CELL), other_prompts).empty
    bigger_groups = rollouts(REF)[lambda f: f["completion_index"] < 2]  # G = 2 against G = 4
    assert step_coupling(rollouts(CELL), bigger_groups).empty


def write_run(path, frame: pd.DataFrame) -> None:
    path.mkdir(parents=True)
    with gzip.open(path / "rank0.jsonl.gz", "wt") as fh:
        for row in frame.to_dict("records"):
            fh.write(json.dumps(row) + "\n")


def test_the_table_and_reading_summarise_seeds(tmp_path):
    for seed, cell in ((0, CELL), (1, REF)):  # seed 1: the cell never leaves the reference
        write_run(tmp_path / f"runs/ref/seed={seed}/rollouts", rollouts(REF))
        write_run(tmp_path / f"runs/cell/seed={seed}/rollouts", rollouts(cell))
    rows = [
        {"stage": "s", "cell": "ref", "reference": "ref"},
        {"stage": "s", "cell": "cell", "reference": "ref"},
    ]
    steps = load_coupling(tmp_path, rows, [0, 1])
    assert set(steps["cell"]) == {"cell"} and len(steps) == 6
    table = coupling_table(steps)
    row = table.iloc[0]
    assert row["identical_step0"] == 1.0
    assert row["identical_last"] == pytest.approx(0.75)
    assert row["identical_mean"] == pytest.approx((1 + 7 / 8 + 0.5 + 3) / 6)
    assert (row["first_difference_min"], row["first_difference_max"]) == (1, 3)
    assert row["first_difference_median"] == 2
    text = coupling_reading(table)
    assert "cell vs ref" in text and "75% at the last step" in text


def test_a_resampled_step_is_compared_on_its_first_generation_batch():
    """Resampling adds batches the reference never generates: the first batch (the reference's
    prompts, the same keys) is compared, the further ones are not."""
    import pandas as pd

    from grpo_ablation.analysis.coupling import step_coupling

    def rows(completions, batches):
        return pd.DataFrame(
            {
                "step": 0,
                "group_index": range(len(completions)),
                "completion_index": 0,
                "prompt_id": [f"p{i % 2}" for i in range(len(completions))],
                "completion": completions,
                "generation_batch": batches,
            }
        )

    ref = rows(["a", "b"], [0, 0])
    cell = rows(["a", "x", "extra", "more"], [0, 0, 1, 1])
    got = step_coupling(cell, ref)
    assert got["compared"].tolist() == [2] and got["identical"].tolist() == [0.5]
