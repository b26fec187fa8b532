"""Bad input fails early with a message that names the problem (or, for a broken verifier,
finishes with every group marked failed_scoring)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from conformance import G

from grpo_ablation.design.ablation import Design, DesignError
from grpo_ablation.design.options import TrainingConfig
from grpo_ablation.design.schema import SECTIONS
from grpo_ablation.training.rollout_log import read_rollouts
from grpo_ablation.training.train import train
from grpo_ablation.training.trainer import AblationGRPOTrainer, NonFiniteLossError

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = Path(sys.executable).with_name("snakemake")
TINY = dict(group_size=G, prompts_per_step=2, max_completion_length=6, save_steps=2)
torch.set_num_threads(1)


def dry_run(tmp_path: Path, **changes) -> subprocess.CompletedProcess:
    cfg = changed_smoke_config(results_dir=str(tmp_path / "results"), **changes)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(
        [str(SNAKEMAKE), "-n", "--cores", "1", "--configfile", str(path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def changed_smoke_config(**changes) -> dict:
    """config/smoke.yaml with ``changes`` (``a__b=v`` sets ``cfg["a"]["b"] = v``)."""
    cfg = yaml.safe_load((ROOT / "config/smoke.yaml").read_text())
    for dotted, value in changes.items():
        *parents, leaf = dotted.split("__")
        node = cfg
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    return cfg


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"trianing": {"max_steps": 3}}, "trianing"),
        ({"training__learnig_rate": 0.1}, "learnig_rate"),
        ({"training__std_scaling": "stdev"}, "stdev"),
        ({"seeds": ["x"]}, "'x' is not of type 'integer'"),
    ],
)
def test_the_schema_the_dag_validates_first_names_the_bad_key(change, named):
    """In process, the check each dry run below makes through Snakemake."""
    from snakemake.exceptions import WorkflowError
    from snakemake.utils import validate

    with pytest.raises(WorkflowError) as refused:
        validate(changed_smoke_config(**change), str(ROOT / "workflow/schemas/config.schema.yaml"))
    assert named in str(refused.value)


def test_every_config_problem_is_named_at_once_with_the_name_meant():
    """A config of one's own with three mistakes: each named in one pass, with the key, what is
    wrong and the name meant, and no schema dump."""
    from grpo_ablation.design.schema import config_problems

    cfg = changed_smoke_config(training__max_step=30, training__std_scaling="popul")
    cfg["stages"]["liteppo"] = {"fixed": {"aggregation": "token_mean"}}
    cfg["stages"]["lite_ppo"] = {"vary": {"std_scaling": ["batch"]}, "reference": "batch"}
    problems = config_problems(cfg)
    assert problems == [
        "training.max_step: unknown key; did you mean max_steps or save_steps?",
        "training.std_scaling: 'popul' is not one of ['none', 'population', 'sample', 'batch']; "
        "did you mean population?",
        "stages.liteppo: no stage of this name, and a stage of its own needs ['vary', "
        "'reference']; did you mean lite_ppo?",
    ]
    # a key with no name near it lists the known ones; a valid config has no problem
    (far,) = config_problems(changed_smoke_config(training__zzz=1))
    assert far.startswith("training.zzz: unknown key (known: aggregation, baseline")
    assert config_problems(changed_smoke_config()) == []
    # the evaluation section, generated from its declaration as training's is
    assert config_problems(
        changed_smoke_config(evaluation__samplr="keyed", evaluation__backend="vlm")
    ) == [
        "evaluation.samplr: unknown key; did you mean sampler or sampled_metric?",
        "evaluation.backend: 'vlm' is not one of ['hf', 'vllm']; did you mean vllm?",
    ]
    # and a list's items, one by one
    assert config_problems(changed_smoke_config(tracking__report_to=["wandb", "tensorbord"])) == [
        "tracking.report_to.1: 'tensorbord' is not one of ['tensorboard', 'wandb', 'trackio']; "
        "did you mean tensorboard?"
    ]


@pytest.mark.parametrize("section", list(SECTIONS))
def test_a_misspelt_key_of_every_declared_section_is_named_with_the_key_meant(section):
    """By the schema, or where a section's schema is open to other keys (a base policy's kind's
    fields), by the design's checks."""
    from grpo_ablation.design.schema import check_config

    name = next(iter(SECTIONS[section].__dataclass_fields__))
    cfg = changed_smoke_config()
    key = f"{section}.{name}x"
    if section == "config":  # the top level's own keys
        cfg[key := f"{name}x"] = 1
    elif section in ("stage", "hypothesis"):  # misspelt in one entry of the config's
        entries = cfg["stages" if section == "stage" else "hypotheses"]
        entry = next(iter(entries))
        entries[entry][f"{name}x"] = 1
        key = f"{'stages' if section == 'stage' else 'hypotheses'}.{entry}.{name}x"
    else:
        cfg[section] = {**(cfg.get(section) or {}), f"{name}x": 1}
    with pytest.raises(DesignError) as err:
        check_config(cfg)
    (found,) = [p for p in err.value.problems if p.startswith(f"{key}: ")]
    assert f"{key}: unknown key" in found and f"did you mean {name}" in found


@pytest.mark.slow  # starts processes of its own
def test_a_key_typo_stops_the_dry_run_with_one_short_message(tmp_path):
    done = dry_run(tmp_path, training__max_step=3)
    text = done.stderr + done.stdout
    assert done.returncode != 0 and "did you mean max_steps" in text
    assert "additionalProperties" not in text and len(text.splitlines()) < 60


def test_an_automatic_batch_size_is_for_vllm_alone():
    from snakemake.utils import validate

    from grpo_ablation.design.checks import DesignError, evaluation_config

    schema = str(ROOT / "workflow/schemas/config.schema.yaml")
    for backend in ("hf", "vllm"):
        cfg = changed_smoke_config(evaluation__batch_size="auto", evaluation__backend=backend)
        validate(cfg, schema)  # the schema takes the word; the check decides by backend
        if backend == "vllm":
            assert evaluation_config(cfg)["batch_size"] == "auto"
        else:
            with pytest.raises(DesignError, match=r"'auto' needs evaluation\.backend vllm"):
                evaluation_config(cfg)


@pytest.mark.slow  # starts processes of its own
def test_an_unknown_config_key_is_named(tmp_path):
    done = dry_run(tmp_path, trianing={"max_steps": 3})
    assert done.returncode != 0
    assert "trianing" in done.stderr + done.stdout


@pytest.mark.slow  # starts processes of its own
def test_seeds_given_on_the_command_line_are_integers_and_bad_ones_are_named(tmp_path):
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}

    def run(seeds: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [
                str(SNAKEMAKE),
                "-n",
                "--cores",
                "1",
                "--configfile",
                "config/smoke.yaml",
                "--config",
                f"results_dir={tmp_path}",
                f"seeds={seeds}",
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    done = run("[0,7]")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "seed=7" in done.stdout + done.stderr
    done = run("[0,x]")
    assert done.returncode != 0 and "'x' is not of type 'integer'" in done.stderr + done.stdout


@pytest.mark.slow  # starts processes of its own
def test_an_unknown_training_key_is_named(tmp_path):
    done = dry_run(tmp_path, training__learnig_rate=0.1)
    assert done.returncode != 0 and "learnig_rate" in done.stderr + done.stdout


@pytest.mark.slow  # starts processes of its own
@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("stages__std_scaling__vary", {"std_scaling": ["sample", "stdev"]}),
        ("stages__aggregation__vary", {"aggregation": ["sequence_mean", "tokenmean"]}),
        ("training__std_scaling", "stdev"),
        ("training__aggregation", "tokenmean"),
    ],
)
def test_an_invalid_std_scaling_or_aggregation_name_is_named(tmp_path, key, value):
    done = dry_run(tmp_path, **{key: value})
    assert done.returncode != 0
    bad = next(iter(value.values()))[-1] if isinstance(value, dict) else value
    assert bad in done.stderr + done.stdout


def test_a_seed_or_a_varied_value_listed_twice_is_named():
    from grpo_ablation.design.checks import check_design

    with pytest.raises(DesignError, match=r"seeds=\[0, 0\]: a seed is listed more than once"):
        check_design(changed_smoke_config(seeds=[0, 0]))
    twice = {"std_scaling": ["sample", "none", "sample"]}
    with pytest.raises(DesignError, match=r"stages.std_scaling.vary.std_scaling=.*more than once"):
        check_design(changed_smoke_config(stages__std_scaling__vary=twice))
    check_design(changed_smoke_config(seeds=[0, 1]))  # distinct: accepted


def test_a_study_refuses_repeated_draws_unordered_looks_and_draws_of_no_look():
    from grpo_ablation.design.checks import check_study

    config = {"base_policy": {"draws": [1, 2]}, "study": {"draws": [1, 2, 3, 4], "looks": [2, 4]}}
    check_study(config)  # the first look's draws: accepted
    check_study({**config, "base_policy": {"draws": [1, 2, 3, 4]}})  # the second's
    for study, match in (
        ({"draws": [1, 2, 2, 4], "looks": [2, 4]}, r"study.draws=.*listed more than once"),
        ({"draws": [1, 2, 3, 4], "looks": [4, 2]}, r"study.looks=\[4, 2\]: expected increasing"),
        ({"draws": [1, 2, 3, 4], "looks": [2, 5]}, r"the last at most the 4 of study.draws"),
        ({"draws": [2, 1, 3, 4], "looks": [2, 4]}, r"base_policy.draws=\[1, 2\] are not the draws"),
    ):
        with pytest.raises(DesignError, match=match):
            check_study({**config, "study": study})


@pytest.mark.slow  # starts processes of its own
def test_seeds_listed_twice_stop_the_dry_run_naming_them(tmp_path):
    done = dry_run(tmp_path, seeds=[0, 0])
    assert done.returncode != 0 and "seeds=[0, 0]" in done.stderr + done.stdout


def test_invalid_names_are_refused_by_the_training_config_too():
    with pytest.raises(ValueError, match="unknown std scaling 'stdev'"):
        TrainingConfig(std_scaling="stdev")
    with pytest.raises(ValueError, match="unknown length aggregation 'tokenmean'"):
        TrainingConfig(aggregation="tokenmean")


def test_nominal_budgets_that_differ_within_a_stage_are_refused(monkeypatch):
    cfg = yaml.safe_load((ROOT / "config/smoke.yaml").read_text())
    cfg["training"].update(
        max_steps=4,
        num_iterations=1,
        learning_rate=5e-4,
        lr_scheduler_type="constant",
        warmup_steps=0,
    )
    design = Design.of(cfg)
    stage = design.stage("std_scaling")
    cells = [design.cell({"std_scaling": v}) for v in ("sample", "none")]
    real = Design.training_config

    def drifting(self, cell, seed, draw=None):  # one cell silently trains longer
        tc = real(self, cell, seed, draw)
        if cell["std_scaling"] == "none":
            tc.max_steps += 1
        return tc

    monkeypatch.setattr(Design, "training_config", drifting)
    with pytest.raises(DesignError, match="nominal budgets differ within stage 'std_scaling'"):
        design.check_matched_budgets(stage, cells)


@pytest.mark.slow  # starts processes of its own
def test_a_group_size_that_breaks_the_fixed_budget_is_refused(tmp_path):
    done = dry_run(tmp_path, stages__group_size__vary={"group_size": [3, 4]})
    assert done.returncode != 0
    assert "G=3 does not divide the 8 completions per step" in done.stderr + done.stdout


def test_a_missing_base_model_path_is_named(setup, tmp_path):
    _, data = setup
    missing = tmp_path / "no-such-model"
    with pytest.raises(
        FileNotFoundError, match=r"base model directory .*no-such-model does not exist"
    ):
        train(missing, data, tmp_path / "run", TrainingConfig(max_steps=1, **TINY), {})
    assert not (tmp_path / "run" / "run_info.json").exists()


def test_a_reward_that_fails_on_every_sample_finishes_with_every_group_failed(setup, tmp_path):
    model, data = setup
    # write_data's rows carry the addition task's columns (prompt_id, answer): the task reward.
    train(model, data, tmp_path, TrainingConfig(max_steps=2, **TINY), {"failure_rate": 1.0})
    rows = read_rollouts(tmp_path / "rollouts")
    assert len(rows) == 2 * 2 * G
    assert (rows["group_category"] == "failed_scoring").all() and rows["reward"].isna().all()
    assert (
        rows["scoring_failure"].str.contains("returned None").all()
    )  # the task maps its error to None
    budget = json.loads((tmp_path / "budget.json").read_text())
    assert budget["scoring_failures"] == budget["completions"] == len(rows)
    metrics = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert all(m["groups/failed_scoring"] == 1.0 for m in metrics)
    assert (tmp_path / "run_info.json").exists()


def test_a_nan_loss_stops_with_a_clear_error_keeps_checkpoints_and_never_looks_done(
    setup, tmp_path, monkeypatch
):
    original = AblationGRPOTrainer._get_per_token_logps_and_entropies

    def nan_from_step_2(self, *args, **kwargs):
        logps, entropies, aux = original(self, *args, **kwargs)
        if self.state.global_step >= 2 and torch.is_grad_enabled():
            logps = logps * float("nan")
        return logps, entropies, aux

    monkeypatch.setattr(AblationGRPOTrainer, "_get_per_token_logps_and_entropies", nan_from_step_2)
    model, data = setup
    with pytest.raises(NonFiniteLossError, match=r"non-finite loss"):
        train(model, data, tmp_path, TrainingConfig(max_steps=4, **TINY), {})
    assert (tmp_path / "checkpoints" / "checkpoint-2" / "trainer_state.json").exists()
    # run_info.json is the rule's only output: without it Snakemake reruns (and resumes) the job.
    assert not (tmp_path / "run_info.json").exists()


def test_a_design_planned_on_another_protocols_numbers_is_warned_with_the_way_to_pilot():
    """A 30-step design of one's own given after config/config.yaml would be planned on the
    default's 100-step SDs and minutes: the plan and the DAG say so, and how to pilot; the
    shipped configs name what they were measured on, and the default runs its own protocol."""
    from grpo_ablation.design.checks import protocol_warnings
    from grpo_ablation.design.schema import load_config

    config = load_config(ROOT / "config/config.yaml")
    assert protocol_warnings(config) == []
    config["training"]["max_steps"] = 30
    (warning,) = protocol_warnings(config)
    assert "max_steps 100 (this design: 30)" in warning and "pilot it" in warning
    config["power"].pop("measured_on")
    (warning,) = protocol_warnings(config)
    assert "power.measured_on is not given" in warning
    # the study's control SD comes from the 100-step reduced study: named
    study = load_config([ROOT / "config/config.yaml", ROOT / "config/study.yaml"])
    (warning,) = protocol_warnings(study)
    assert "power.sd.lr0_lowers_greedy" in warning and "100 steps" in warning


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"stages__aggregation__vary": {"aggregation": ["token_maen"]}}, "'token_maen'"),
        ({"training__max_step": 3}, "training.max_step: unknown key"),
        ({"hypotheses__population_equals_sample__stage": "nostage"}, "'nostage'"),
        ({"task__kind": "additon"}, "task.kind: 'additon' is not one of"),
        (None, "no such config file"),
    ],
)
def test_plan_on_a_bad_config_prints_the_problem_alone(tmp_path, monkeypatch, change, named):
    """A person's command given a bad config (or none) exits with the problem as its message,
    no traceback: a DesignError never leaves the CLI."""
    from grpo_ablation import cli

    monkeypatch.setattr(cli, "bootstrap", lambda **_: None)  # no process-wide env changes
    path = tmp_path / "config.yaml"
    if change is not None:
        path.write_text(yaml.safe_dump(changed_smoke_config(**change), sort_keys=False))
    with pytest.raises(SystemExit) as stopped:
        cli.main(["plan", "--configfile", str(path)])
    message = stopped.value.code
    assert isinstance(message, str) and message.startswith("grpo-ablation plan: ")
    assert named in message


@pytest.mark.parametrize(
    ("change", "named", "meant"),
    [
        (
            {"stages__aggregation__vary": {"aggregation": ["token_maen"]}},
            "unknown length aggregation 'token_maen'; expected one of",
            "token_mean",
        ),
        ({"task__kind": "additon"}, "unknown task kind 'additon'", "addition"),
        (
            {"hypotheses__population_equals_sample__stage": "stdscaling"},
            "is not an enabled stage",
            "std_scaling",
        ),
    ],
)
def test_a_misspelt_name_the_schema_does_not_know_is_given_the_name_meant(change, named, meant):
    """The design's own checks (a varied value, the task, a hypothesis's stage) list the choices
    and, as the schema's problems do, the one close to the misspelling."""
    from grpo_ablation.design.checks import check_design

    with pytest.raises(ValueError) as refused:
        check_design(changed_smoke_config(**change))
    message = str(refused.value)
    assert named in message and f"; did you mean {meant}" in message, message


def test_a_new_stage_named_near_an_existing_one_is_warned_not_refused(capsys):
    """``stages: {drgrpo: ...}`` in an override meant ``dr_grpo`` and added a stage instead: the
    check every DAG and plan runs says so and builds the design; the shipped configs, merged as
    documented, hold no such pair."""
    from snakemake.utils import update_config

    from grpo_ablation.design import checks

    cfg = changed_smoke_config()
    cfg["stages"]["drgrpo"] = dict(cfg["stages"]["dr_grpo"])
    checks.check_design(cfg)
    assert "WARNING: stages.drgrpo is a new stage; did you mean dr_grpo?" in capsys.readouterr().err
    shipped = sorted((ROOT / "config").glob("*.yaml"))
    for files in [[ROOT / "config/config.yaml", f] for f in shipped] + [
        [ROOT / f"config/{name}.yaml" for name in ("config", "study", "study_group_size")]
    ]:
        merged: dict = {}
        for file in files:
            update_config(merged, yaml.safe_load(file.read_text()) or {})
        assert checks.new_stage_warnings(merged) == [], files


def test_a_config_with_three_mistakes_is_told_all_three_in_one_message(tmp_path, monkeypatch):
    """A key the schema does not know, a value the design's stage check refuses and a hypothesis
    naming a misspelt stage: one message lists the three, each with its key and the name meant
    (the schema's problems and the design's together, not one phase or one problem a try)."""
    from grpo_ablation import cli

    monkeypatch.setattr(cli, "bootstrap", lambda **_: None)
    path = tmp_path / "mine.yaml"
    config = changed_smoke_config(
        training__max_step=3,
        stages__aggregation__vary={"aggregation": ["sequence_mean", "token_maen"]},
        hypotheses__population_equals_sample__stage="stdscaling",
    )
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    with pytest.raises(SystemExit) as stopped:
        cli.main(["plan", "--configfile", str(path)])
    message = stopped.value.code
    assert message.startswith("grpo-ablation plan: 3 problems in the config:\n")
    lines = message.splitlines()[1:]
    assert (
        lines[0].strip() == "training.max_step: unknown key; did you mean max_steps or save_steps?"
    )
    assert lines[1].strip().startswith(
        "stages.aggregation.vary.aggregation: unknown length aggregation 'token_maen'"
    ) and lines[1].endswith("; did you mean token_mean or group_token_mean?")
    assert lines[2].strip().startswith(
        "hypotheses[population_equals_sample].stage='stdscaling' is not an enabled stage"
    ) and lines[2].endswith("; did you mean std_scaling?")


def test_a_config_the_schema_cannot_build_a_design_from_says_the_design_was_not_checked():
    from grpo_ablation.design.schema import UNCHECKED, check_config

    config = changed_smoke_config(trianing={"max_steps": 3}, seeds=[0, 0])
    del config["experiment"]
    with pytest.raises(DesignError) as refused:
        check_config(config)
    assert refused.value.problems == [
        "trianing: unknown key; did you mean training or tracking?",
        "the config: 'experiment' is a required property",
        UNCHECKED,
    ]
    # without the missing key, the design's own problem (a seed twice) joins the schema's
    config["experiment"] = "mine"
    with pytest.raises(DesignError) as refused:
        check_config(config)
    assert refused.value.problems[1:] == [
        "seeds=[0, 0]: a seed is listed more than once; list each once"
    ]


def test_every_stage_and_every_value_of_a_stage_is_checked_in_one_pass():
    from grpo_ablation.design.checks import check_design

    config = changed_smoke_config(
        stages__aggregation__vary={"aggregation": ["tokenmean", "constnt"]},
        stages__group_size__vary={"group_size": [3, 4]},
    )
    config["stages"]["dr_grpo"]["fixed"] = {"std_scalling": "none"}
    with pytest.raises(DesignError) as refused:
        check_design(config)
    found = "\n".join(refused.value.problems)
    for named in ("'tokenmean'", "'constnt'", "std_scalling", "G=3 does not divide"):
        assert named in found, found


@pytest.fixture
def cli_here(monkeypatch):
    """``grpo-ablation`` in this process, no process-wide set-up; a call returns its exit code
    (or the message it exits with)."""
    from grpo_ablation import cli

    monkeypatch.setattr(cli, "bootstrap", lambda **_: None)

    def run(*args: str) -> int | str | None:
        with pytest.raises(SystemExit) as stopped:
            cli.main(list(args))
        return stopped.value.code

    return run


def test_a_study_registered_after_its_draws_trained_is_refused_in_one_line(cli_here, tmp_path):
    results, record = tmp_path / "results", tmp_path / "studies/study_reduced"
    override = tmp_path / "here.yaml"
    override.write_text(
        yaml.safe_dump({"results_dir": str(results), "study": {"record": str(record)}})
    )
    (results / "study_reduced/draw=132").mkdir(parents=True)  # a draw trained already
    configs = [str(ROOT / "config/config.yaml"), str(ROOT / "config/study_reduced.yaml")]
    said = cli_here("study-register", "--configfile", *configs, str(override))
    assert said.startswith("grpo-ablation study-register: the study's draws have results already")
    assert not record.exists()


def test_an_edited_ledger_is_refused_in_one_line(cli_here, tmp_path):
    import shutil

    from grpo_ablation.layout import LEDGER, REGISTRATION

    study = tmp_path / "study"
    study.mkdir()
    for name in (REGISTRATION, LEDGER, "ledger.head"):
        shutil.copy(ROOT / "studies/study" / name, study / name)
    head = (study / "ledger.head").read_text().split()
    (study / "ledger.head").write_text(f"{head[0]} {'0' * 64}\n")  # the last line "edited"
    said = cli_here("study-verdicts", "--study", str(study))
    assert said.startswith(f"grpo-ablation study-verdicts: {study / LEDGER}") and "\n" not in said


@pytest.mark.parametrize("probe", [None, "{}", "not json"])
def test_a_missing_or_foreign_cost_probe_is_named(cli_here, tmp_path, probe):
    path = tmp_path / "probe.json"
    if probe is not None:
        path.write_text(probe)
    said = cli_here(
        "plan", "--configfile", str(ROOT / "config/smoke.yaml"), "--cost-probe", str(path)
    )
    expected = "no such file" if probe is None else "is not a cost probe's record"
    assert said.startswith(f"grpo-ablation plan: --cost-probe {path}") and expected in said


def test_a_study_record_error_is_a_message_for_a_person_and_a_traceback_in_a_job(
    cli_here, monkeypatch
):
    """Every error of a person's input (a DesignError, a study's RegistrationError, LedgerError
    or RecordError) ends a person's command as its message, exit 1; in a pipeline job it stays
    an exception, whose traceback its log keeps."""
    import dataclasses

    from grpo_ablation import cli
    from grpo_ablation.commands import COMMANDS
    from grpo_ablation.design.records import RecordError

    def refuse(_):
        raise RecordError("draw=12/records.json belongs to another registration")

    for name in ("study-look", "study-record"):
        monkeypatch.setitem(COMMANDS, name, dataclasses.replace(COMMANDS[name], job=refuse))
    said = cli_here("study-look", "--design", "design.json")
    assert said == "grpo-ablation study-look: draw=12/records.json belongs to another registration"
    with pytest.raises(RecordError):
        cli.main(["study-record", "--design", "design.json", "--draw", "12"])


def test_a_number_yaml_reads_as_text_is_named_with_how_to_write_it():
    """PyYAML (YAML 1.1) reads ``2e-4`` without a dot as text: the problem says how to write it."""
    from grpo_ablation.design.schema import config_problems

    cfg = changed_smoke_config(training__learning_rate=yaml.safe_load("x: 2e-4")["x"])
    assert config_problems(cfg) == [
        "training.learning_rate: '2e-4' is not of type 'number'; YAML reads 2e-4 as text: "
        "write 0.0002"
    ]
