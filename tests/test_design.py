"""The ablation design: stages, cells, shared baselines, matched budgets, environments, lint."""

import copy
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from grpo_ablation import pipeline
from grpo_ablation.pipeline import Cell, DesignError

ROOT = Path(__file__).resolve().parents[1]


def default_config() -> dict:
    """config/config.yaml with the schema's defaults filled in, as Snakemake sees it."""
    from snakemake.utils import validate

    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    validate(config, str(ROOT / "workflow/schemas/config.schema.yaml"))
    return config


def test_a_cell_is_a_path_and_back():
    cell = Cell("population", "sequence_mean", 8)
    assert cell.path == "std=population/agg=sequence_mean/G=8"
    assert Cell.parse(cell.path) == cell


def test_stage_one_varies_std_scaling_and_stage_two_aggregation():
    config = default_config()
    s1 = pipeline.stage_cells(config, "std_scaling")
    s2 = pipeline.stage_cells(config, "aggregation")
    assert [c.std_scaling for c in s1] == ["none", "population", "sample", "batch"]
    assert {c.aggregation for c in s1} == {"sequence_mean"}
    assert [c.aggregation for c in s2] == [
        "sequence_mean",
        "token_mean",
        "group_token_mean",
        "constant",
    ]
    assert {c.std_scaling for c in s2} == {"sample"}
    # the baseline belongs to both stages and is one cell, trained once
    assert len(set(s1) | set(s2)) == 7
    assert pipeline.reference_cell(config, "std_scaling", s1) == pipeline.reference_cell(
        config, "aggregation", s2
    )


def test_stage_two_can_take_the_stage_one_winner():
    config = default_config()
    config["stages"]["aggregation"]["std_scaling"] = pipeline.FROM_STAGE1
    with pytest.raises(DesignError, match="no winner yet"):
        pipeline.stage_cells(config, "aggregation")
    assert {c.std_scaling for c in pipeline.stage_cells(config, "aggregation", "batch")} == {
        "batch"
    }


def test_group_size_stage_holds_completions_per_step_fixed():
    config = default_config()
    config["stages"]["group_size"]["enabled"] = True
    cells = pipeline.stage_cells(config, "group_size")
    runs = [pipeline.training_config(config, c, seed=0) for c in cells]
    assert [(r.group_size, r.prompts_per_step) for r in runs] == [(4, 8), (8, 4), (16, 2)]
    assert len({r.generation_batch_size for r in runs}) == 1
    pipeline.check_matched_budgets(config, "group_size", cells)


def test_a_group_size_that_does_not_divide_the_budget_is_refused():
    config = default_config()
    config["stages"]["group_size"].update(enabled=True, values=[4, 6], reference=4)
    with pytest.raises(DesignError, match="G=6 does not divide the 32 completions"):
        pipeline.check_design(config)


def test_the_stage_one_winner_is_chosen_on_validation_with_ties_to_the_first():
    results = {"sample": [{"acc": 0.5}, {"acc": 0.7}], "none": [{"acc": 0.6}, {"acc": 0.6}]}
    assert pipeline.select_winner(results, "acc")["winner"] == "sample"
    results["none"][0]["acc"] = 0.7
    assert pipeline.select_winner(results, "acc")["winner"] == "none"


def test_every_run_of_a_stage_has_the_same_nominal_budget_and_its_own_seed():
    config = default_config()
    for stage in ("std_scaling", "aggregation"):
        cells = pipeline.stage_cells(config, stage)
        budget = pipeline.check_matched_budgets(config, stage, cells)
        assert budget["completions"] == 200 * 32 and budget["optimizer_steps"] == 200
    assert pipeline.training_config(config, cells[0], seed=2).seed == 2


def test_a_reference_outside_the_stage_is_refused():
    config = copy.deepcopy(default_config())
    config["stages"]["std_scaling"]["values"] = ["none", "population"]
    with pytest.raises(DesignError, match="reference='sample' is not among"):
        pipeline.check_design(config)


def _pins(lines: list[str]) -> dict[str, str]:
    pins = {}
    for line in lines:
        m = re.match(r"^\s*(?:-\s*)?([A-Za-z0-9_.-]+)==([^\s#]+)", line)
        if m:
            pins[m.group(1).lower()] = m.group(2)
    return pins


def test_conda_environment_and_pip_requirements_agree():
    pip = _pins((ROOT / "envs/requirements.txt").read_text().splitlines())
    conda_env = yaml.safe_load((ROOT / "envs/grpo.yaml").read_text())
    pip_section = next(d["pip"] for d in conda_env["dependencies"] if isinstance(d, dict))
    assert _pins(pip_section) == pip
    assert {"torch", "trl", "transformers", "lm-eval", "snakemake"} <= pip.keys()


@pytest.mark.parametrize("configfile", ["config/config.yaml", "config/smoke.yaml"])
def test_snakemake_lint_is_clean(configfile):
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "--lint", "--configfile", configfile],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Congratulations, your workflow is in a good condition!" in proc.stdout + proc.stderr
