"""The README's own-ablation recipe as a newcomer uses it: the config block copied as it stands,
on its own (no config/config.yaml before it), planned and run end to end. Only its sizes are made
smaller here (data, warm start, steps), by a second file that names no stage, seed or hypothesis,
so what runs is the recipe's design."""

import re
import subprocess

import pandas as pd
import pytest
import yaml
from conftest import BIN, ROOT, snakemake

pytestmark = pytest.mark.slow

SIZES = {
    "task": {"kind": "addition", "n_train": 48, "n_validation": 16, "n_test": 16},
    "base_policy": {"kind": "local", "sft_steps": 30, "eval_samples": 2},
    "training": {
        "group_size": 4,
        "prompts_per_step": 2,
        "max_steps": 2,
        "save_steps": 2,
        "curve_points": 2,
        "max_completion_length": 8,
    },
}


def recipe() -> str:
    """The YAML block of the README's "Your own ablation" section, verbatim."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Your own ablation", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```yaml\n(.*?)```", section, re.S).group(1)


def test_the_recipe_is_short_and_names_its_own_design():
    text = recipe()
    config = yaml.safe_load(text)
    assert len(text.splitlines()) <= 12
    assert {"experiment", "seeds", "stages"} <= set(config)


@pytest.fixture(scope="module")
def own(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("own")
    mine, sizes = root / "mine.yaml", root / "sizes.yaml"
    mine.write_text(recipe())
    sizes.write_text(yaml.safe_dump({**SIZES, "results_dir": str(root / "results")}))
    plan = subprocess.run(
        [str(BIN / "grpo-ablation"), "plan", "--configfile", str(mine)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    snakemake([mine, sizes], timeout=1200)
    config = yaml.safe_load(recipe())
    return {"plan": plan, "exp": root / "results" / config["experiment"], "config": config}


def test_plan_reads_the_recipe_alone(own):
    assert own["plan"].returncode == 0, own["plan"].stderr
    assert "exploratory" in own["plan"].stdout  # it declares no hypothesis, and is told so


def test_the_recipe_runs_on_its_own_every_cell_and_seed(own):
    stage, spec = next(iter(own["config"]["stages"].items()))
    (values,) = spec["vary"].values()
    results = pd.read_csv(own["exp"] / "tables/results.csv")
    cells = results[(results["stage"] == stage) & (results["n_seeds"] > 0)]
    assert len(cells) == len(values)
    assert all(any(f"={v}" in cell for cell in cells["cell"]) for v in values)
    assert set(cells["n_seeds"]) == {len(own["config"]["seeds"])}
    assert (own["exp"] / "figures/reading.rst").exists()
