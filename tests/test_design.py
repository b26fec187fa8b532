"""The ablation design: stages, cells, shared baselines, matched budgets, environments, lint."""

import copy
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from grpo_ablation.design import checks
from grpo_ablation.design.ablation import (
    Design,
    DesignError,
    cell_label,
    reference_of,
    select_winner,
)
from grpo_ablation.design.axes import path_regex
from grpo_ablation.layout import Tree

ROOT = Path(__file__).resolve().parents[1]


def default_config() -> dict:
    """config/config.yaml with the schema's defaults filled in, as Snakemake sees it."""
    from snakemake.utils import validate

    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    validate(config, str(ROOT / "workflow/schemas/config.schema.yaml"))
    return config


def without_push_hypotheses(config: dict) -> dict:
    """``config`` less its push hypotheses: a stage that takes a winner has no push to judge
    (the push measures the baseline's choices before any winner is known; refused, tested in
    test_hypotheses.py)."""
    hyps = config["hypotheses"]
    config["hypotheses"] = {k: h for k, h in hyps.items() if not h["metric"].startswith("push_")}
    return config


def cells(config: dict, stage: str, winners: dict | None = None) -> list:
    return Design.of(config).cells(stage, winners)


def test_a_cell_is_a_path_and_back():
    config = default_config()
    cell = Design.of(config).cell({"std_scaling": "population"})
    assert cell.path == "std=population/agg=sequence_mean/G=8"
    assert Design.of(config).parse_cell(cell.path) == cell
    assert cell["beta"] == 0.0 and cell["num_iterations"] == 1


def test_an_axis_is_named_in_a_path_only_off_its_default():
    """The three first axes are always named; beta and mu only where a cell departs from the
    baseline, so adding an axis leaves every existing path (and run directory) as it was."""
    config = default_config()
    kl = Design.of(config).cell({"beta": 0.04, "std_scaling": "none"})
    assert kl.path == "std=none/agg=sequence_mean/G=8/beta=0.04"
    assert Design.of(config).cell({"beta": 0}).path == "std=sample/agg=sequence_mean/G=8"
    mu = Design.of(config).cell({"num_iterations": 4})
    assert mu.path == "std=sample/agg=sequence_mean/G=8/mu=4"
    assert Design.of(config).parse_cell(mu.path) == mu
    assert re.fullmatch(path_regex(), kl.path) and re.fullmatch(path_regex(), mu.path)
    assert not re.fullmatch(path_regex(), "std=sample/agg=sequence_mean/G=8/mu=4/beta=0.1")
    assert cell_label(kl.path) == "none / sequence_mean / G=8 / beta=0.04"


def test_stage_one_varies_std_scaling_and_stage_two_aggregation():
    config = default_config()
    s1, s2 = cells(config, "std_scaling"), cells(config, "aggregation")
    assert [c["std_scaling"] for c in s1] == ["none", "population", "sample", "batch"]
    assert {c["aggregation"] for c in s1} == {"sequence_mean"}
    assert [c["aggregation"] for c in s2] == [
        "sequence_mean",
        "token_mean",
        "group_token_mean",
        "constant",
    ]
    assert {c["std_scaling"] for c in s2} == {"sample"}
    # the baseline belongs to both stages and is one cell, trained once
    assert len(set(s1) | set(s2)) == 7
    st1, st2 = Design.of(config).stage("std_scaling"), Design.of(config).stage("aggregation")
    assert reference_of(st1, s1[0], s1) == reference_of(st2, s2[0], s2)


def test_stage_two_can_take_the_stage_one_winner():
    config = without_push_hypotheses(default_config())
    config["stages"]["aggregation"]["fixed"] = {"std_scaling": {"winner_of": "std_scaling"}}
    with pytest.raises(DesignError, match="no winner yet"):
        cells(config, "aggregation")
    taken = cells(config, "aggregation", {"std_scaling": "batch"})
    assert {c["std_scaling"] for c in taken} == {"batch"}
    checks.check_design(config)


def test_a_winner_must_come_from_another_stage_that_varies_that_axis():
    config = default_config()
    config["stages"]["aggregation"]["fixed"] = {"std_scaling": {"winner_of": "stage_3"}}
    with pytest.raises(DesignError, match="'stage_3', which must be another enabled stage"):
        checks.check_design(config)
    config["stages"]["aggregation"]["fixed"] = {"std_scaling": {"winner_of": "group_size"}}
    with pytest.raises(DesignError, match="must vary std_scaling alone"):
        checks.check_design(config)


def test_group_size_stage_holds_completions_per_step_fixed():
    config = default_config()
    g = cells(config, "group_size")
    runs = [Design.of(config).training_config(c, seed=0) for c in g]
    assert [(r.group_size, r.prompts_per_step) for r in runs] == [(4, 8), (8, 4), (16, 2)]
    assert len({r.generation_batch_size for r in runs}) == 1
    Design.of(config).check_matched_budgets(Design.of(config).stage("group_size"), g)


def test_a_group_size_that_does_not_divide_the_budget_is_refused():
    config = default_config()
    config["stages"]["group_size"].update(vary={"group_size": [4, 6]}, reference=4)
    with pytest.raises(DesignError, match="G=6 does not divide the 32 completions"):
        checks.check_design(config)


def test_the_kl_stage_crosses_beta_with_std_scaling_against_beta_zero():
    config = default_config()
    stage = Design.of(config).stage("kl")
    kl = cells(config, stage)
    assert [(c["beta"], c["std_scaling"]) for c in kl] == [
        (b, s) for b in (0.0, 0.01, 0.04) for s in ("none", "sample")
    ]
    # each cell is compared with beta = 0 at its own std scaling
    for c in kl:
        ref = reference_of(stage, c, kl)
        assert ref["beta"] == 0.0 and ref["std_scaling"] == c["std_scaling"]
    assert {Design.of(config).training_config(c, 0).beta for c in kl} == {0.0, 0.01, 0.04}


def test_the_update_epochs_stage_matches_completions_not_optimizer_steps():
    """mu optimizer steps per generation batch: mu times the steps, the same completions, and
    checkpoints at the same completion counts."""
    config = default_config()
    stage = Design.of(config).stage("update_epochs")
    mu = cells(config, stage)
    runs = [Design.of(config).training_config(c, 0) for c in mu]
    assert [(r.num_iterations, r.max_steps, r.save_steps) for r in runs] == [
        (1, 100, 100),
        (2, 200, 200),
        (4, 400, 400),
    ]
    budget = Design.of(config).check_matched_budgets(stage, mu)
    assert budget["completions"] == 100 * 32 and "optimizer_steps" not in budget


def test_the_stage_one_winner_is_chosen_on_validation_with_ties_to_the_first():
    results = {"sample": [{"acc": 0.5}, {"acc": 0.7}], "none": [{"acc": 0.6}, {"acc": 0.6}]}
    assert select_winner(results, "acc")["winner"] == "sample"
    results["none"][0]["acc"] = 0.7
    assert select_winner(results, "acc")["winner"] == "none"


def test_every_run_of_a_stage_has_the_same_nominal_budget_and_its_own_seed():
    config = default_config()
    for name in ("std_scaling", "aggregation", "kl"):
        stage = Design.of(config).stage(name)
        budget = Design.of(config).check_matched_budgets(stage, cells(config, stage))
        assert budget["completions"] == 100 * 32 and budget["optimizer_steps"] == 100
    assert Design.of(config).training_config(cells(config, "kl")[0], seed=2).seed == 2


def test_a_reference_outside_the_stage_is_refused():
    config = copy.deepcopy(default_config())
    config["stages"]["std_scaling"]["vary"] = {"std_scaling": ["none", "population"]}
    with pytest.raises(DesignError, match="reference='sample' is not among"):
        checks.check_design(config)


@pytest.mark.parametrize(
    ("stage", "message"),
    [
        ({"vary": {"temperature": [1.0]}, "reference": 1.0}, "unknown axis 'temperature'"),
        (
            {"vary": {"std_scaling": ["populaton"]}, "reference": "populaton"},
            "unknown std scaling 'populaton'",
        ),
        ({"vary": {"beta": [0.0, -1.0]}, "reference": 0.0}, "must be >= 0.0"),
        ({"vary": {"num_iterations": [1, 1.5]}, "reference": 1}, "must be an integer"),
        (
            {"vary": {"beta": [0.0]}, "fixed": {"beta": 0.1}, "reference": 0.0},
            "both varied and fixed",
        ),
    ],
)
def test_a_wrong_stage_is_refused_naming_the_axis(stage, message):
    config = default_config()
    config["stages"]["extra"] = stage
    with pytest.raises(DesignError, match=re.escape(message)):
        checks.check_design(config)


def test_training_section_values_of_an_axis_are_checked():
    config = default_config()
    config["training"]["aggregation"] = "tokenmean"
    with pytest.raises(DesignError, match=r"training\.aggregation: unknown length aggregation"):
        checks.check_design(config)


def test_captions_and_titles_are_derived_from_the_axes():
    config = default_config()
    # numbered among the declared stages, enabled or not (the recipe stages come 4th and 5th,
    # dynamic sampling 6th)
    assert Design.of(config).stage_title("kl") == "stage 7: KL coefficient β × std scaling"
    # a recipe stage names the recipe it runs besides its reference's
    assert Design.of(config).stage_title("dr_grpo").endswith("× length aggregation (Dr. GRPO)")
    assert Design.of(config).stage_title("group_size") == "stage 3: group size G"
    assert (
        Design.of(config)
        .stage_caption("dr_grpo")
        .startswith(
            "std scaling over ['sample', 'none'] crossed with length aggregation over "
            "['sequence_mean', 'constant'] (reference sample / sequence_mean);"
        )
    )
    caption = Design.of(config).stage_caption("update_epochs")
    assert caption.startswith("update epochs μ over ['1', '2', '4'] (reference 1);")
    assert "std scaling sample" in caption and "KL coefficient β 0" in caption


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


# Where the GPU pin set may differ from requirements.txt, and why (envs/gpu-vllm.in says so too).
GPU_EXCEPTIONS = {
    "transformers": "vllm 0.31.0 requires transformers < 5.18",
    "protobuf": "vllm's range",
}


def test_the_gpu_pin_set_is_the_cpu_one_plus_vllm_within_trls_range():
    from importlib.metadata import requires

    from packaging.requirements import Requirement

    top = _pins((ROOT / "envs/gpu-vllm.in").read_text().splitlines())
    lock = _pins((ROOT / "envs/gpu-vllm.lock.txt").read_text().splitlines())
    cpu = _pins((ROOT / "envs/requirements.txt").read_text().splitlines())
    assert {k: lock.get(k) for k in top} == top  # the lock resolves the pins as written
    extra = next(
        Requirement(r) for r in requires("trl") if r.startswith("vllm") and "extra ==" in r
    )
    assert top["vllm"] in extra.specifier  # TRL 1.16 supports it
    differ = {k for k in cpu.keys() & lock.keys() if cpu[k] != lock[k]}
    assert differ <= GPU_EXCEPTIONS.keys(), differ
    assert cpu.keys() - GPU_EXCEPTIONS.keys() <= lock.keys()  # nothing of the CPU set left out
    # Snakemake builds the environment from a copy of the yaml elsewhere: the pins are inline.
    env = yaml.safe_load((ROOT / "envs/grpo-gpu.yaml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert "python=3.13" in env["dependencies"] and _pins(pip) == lock and len(pip) == len(lock)


def test_jobs_get_the_vllm_environment_exactly_where_the_config_uses_vllm():
    cluster = yaml.safe_load((ROOT / "config/cluster.yaml").read_text())
    assert checks.conda_env(cluster) == "envs/grpo.yaml"
    for section, key in (("training", "generation_backend"), ("evaluation", "backend")):
        on = {**cluster, section: {**cluster.get(section, {}), key: "vllm"}}
        assert checks.conda_env(on) == "envs/grpo-gpu.yaml"
    rules = "".join(p.read_text() for p in (ROOT / "workflow/rules").glob("*.smk"))
    assert len(re.findall(r"conda:\s*\n\s*CONDA_ENV\n", rules)) == rules.count("conda:") > 10


@pytest.mark.slow  # starts processes of its own
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


def test_a_cell_has_one_spelling_so_it_never_trains_in_two_folders():
    config = default_config()
    with pytest.raises(DesignError, match="is spelled 'std=sample/agg=sequence_mean/G=8'"):
        Design.of(config).parse_cell("std=sample/agg=sequence_mean/G=8/beta=0")
    with pytest.raises(DesignError, match="must be a number"):
        Design.of(config).parse_cell("std=sample/agg=sequence_mean/G=8/beta=nan")


def test_two_stages_may_take_the_winner_of_one_stage_but_not_each_others():
    config = without_push_hypotheses(default_config())
    config["stages"]["aggregation"]["fixed"] = {"std_scaling": {"winner_of": "std_scaling"}}
    config["stages"]["group_size"]["fixed"] = {"std_scaling": {"winner_of": "std_scaling"}}
    checks.check_design(config)  # a shared source is no cycle
    config["stages"]["std_scaling"]["fixed"] = {"aggregation": {"winner_of": "aggregation"}}
    with pytest.raises(DesignError, match="in a cycle"):
        checks.check_design(config)


def test_resampling_and_sharded_curve_policies_need_their_process_layout():
    """Resampling selects mixed groups over the whole batch in one process; curve policies are
    saved by rank 0, which under ZeRO-3 or FSDP holds a shard: both refused before any job."""
    config = default_config()
    config["compute"]["processes_per_train_job"] = 2
    with pytest.raises(DesignError, match="zero_variance resample runs in one process"):
        checks.check_design(config)
    config = default_config()
    del config["stages"]["dynamic_sampling"]
    hyps = config["hypotheses"]
    config["hypotheses"] = {k: h for k, h in hyps.items() if h["stage"] != "dynamic_sampling"}
    config["compute"].update(processes_per_train_job=2, accelerate_config="fsdp")
    with pytest.raises(DesignError, match="curve_points=6 saves curve policies from rank 0"):
        checks.check_design(config)
    config["compute"]["accelerate_config"] = "zero2"
    checks.check_design(config)  # zero2 shards optimizer state only: allowed


def test_the_design_written_for_the_jobs_reads_back_as_the_same_design(tmp_path):
    from snakemake.utils import validate

    config = yaml.safe_load((ROOT / "config/smoke.yaml").read_text())
    config["results_dir"] = str(tmp_path)
    validate(config, str(ROOT / "workflow/schemas/config.schema.yaml"))
    design = Design.of(config)
    path = design.write(Path(Tree(design.root).design()))
    back = Design.load(path)
    assert back.sections == design.sections and back.root == design.root == tmp_path / "smoke"
    assert back.stage_names == design.stage_names
    assert back.all_cells() == design.all_cells()
    for stage in design.stages:  # the aggregation stage takes the std_scaling stage's winner
        assert back.stage_title(stage.name) == design.stage_title(stage.name)
        assert back.stage_caption(stage.name) == design.stage_caption(stage.name)
        for winners in design.possible_winners(stage):
            assert back.rows(winners, [stage.name]) == design.rows(winners, [stage.name])
            for cell in design.cells(stage, winners):
                assert back.training_config(cell, 1) == design.training_config(cell, 1)
    # What a reader of design.json finds without the package: every cell, each stage's rows.
    written = json.loads(path.read_text())
    assert list(written["cells"]) == design.all_cells()
    aggregation = next(s for s in written["stages"] if s["name"] == "aggregation")
    assert aggregation["takes_winners_of"] == ["std_scaling"]
    assert [r["winners"] for r in aggregation["rows"]] == [
        {"std_scaling": "sample"},
        {"std_scaling": "population"},
    ]


def test_the_analysis_jobs_read_the_design_file_not_config_sections():
    rules = "".join(p.read_text() for p in (ROOT / "workflow/rules").glob("*.smk"))
    for command in ("select", "tables", "figures", "pooled"):
        (shell,) = re.findall(rf'"python {{params.cli}} {command} [^\n]*(?:\n\s*"[^\n]*)*', rules)
        assert "--design {input.design}" in shell and "--config" not in shell, shell
    # the figures draw the tables job's numbers: they read its folder, and compute nothing
    assert "figures --design {input.design} --tables {params.tables}" in rules


def test_a_ratio_stage_at_one_update_epoch_and_a_cispo_cap_below_one_are_warned_about(capsys):
    """At num_iterations 1 every ratio is exactly 1, so a stage varying the ratio compares cells
    that differ only in their diagnostics; a CISPO cap below 1 makes its weight a constant. Both
    are said before any job; at μ = 2 with a cap of 5 nothing is."""
    config = default_config()
    config["stages"] = {
        "ratio": {"vary": {"ratio": ["clipped", "cispo"]}, "reference": "clipped"},
    }
    config["hypotheses"] = {}
    config["training"]["cispo_cap"] = 0.2
    checks.check_design(config)
    err = capsys.readouterr().err
    assert "stage 'ratio' varies the policy ratio at num_iterations 1" in err
    assert "caps its weight at 0.2 < 1" in err
    config["training"].update(cispo_cap=5.0, num_iterations=2)
    checks.check_design(config)
    assert "warning: stage" not in capsys.readouterr().err
