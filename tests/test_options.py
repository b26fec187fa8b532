"""Options declared once: the schema, the objective record and the checks follow them."""

import re
from dataclasses import MISSING, asdict, fields, make_dataclass
from pathlib import Path

import pytest
import yaml

from grpo_ablation.design import schema
from grpo_ablation.design.options import ComputeConfig, EvaluationConfig, TrainingConfig
from grpo_ablation.objective.record import ObjectiveRecord
from grpo_ablation.settings import REQUIRED, check_option, default_of, identity, option, required

# The training options declared before neutral values existed: every finished run's train params
# hold each of them, so none may declare one (the params of its runs at that value would change,
# and every such run retrain).
BEFORE_NEUTRAL = (
    "std_scaling",
    "std_eps",
    "aggregation",
    "group_size",
    "beta",
    "clip_eps_low",
    "clip_eps_high",
    "mask_truncated_completions",
    "success_threshold",
    "zero_variance",
    "max_generation_batches",
    "prompts_per_step",
    "max_steps",
    "max_completion_length",
    "num_iterations",
    "gradient_accumulation_steps",
    "learning_rate",
    "lr_scheduler_type",
    "warmup_steps",
    "temperature",
    "sampler",
    "generation_backend",
    "vllm_gpu_memory_utilization",
    "vllm_importance_sampling_mode",
    "save_steps",
    "curve_points",
    "seed",
)


@pytest.mark.parametrize("section", list(schema.SECTIONS))
def test_the_schema_section_is_the_dataclass(section):
    text = schema.SCHEMA.read_text()
    # Up to date: else run `grpo-ablation schema` and commit the schema.
    assert schema.file_section(text, section) == schema.section_text(section)
    node = yaml.safe_load(text)
    for key in schema.where(section)[:-1]:
        node = node[key]
    written = node["properties"]
    fields = schema.SECTIONS[section].__dataclass_fields__
    # the declared keys, then those the schema describes by hand (each said why); the top
    # level's other keys are sections, each of its own
    assert list(written)[: len(fields)] == list(fields)
    rest = list(written)[len(fields) :]
    if section == "config":
        assert rest and all(written[k]["type"] == "object" for k in rest)
    else:
        assert rest == list(schema.HAND_WRITTEN.get(section, ()))
    for name, spec in ((k, written[k]) for k in fields):
        # no default where the config must give the key, or where None stands for its absence
        unfilled = REQUIRED if fields[name].metadata["absent"] else default_of(fields[name])
        assert spec.get("default", REQUIRED) == unfilled
        assert spec["description"] == fields[name].metadata["help"]
    # the keys a config must give are the options declared without a default
    given = [k for k in node.get("required", []) if k in fields]
    assert given == required(schema.SECTIONS[section])


def test_the_schemas_metric_list_is_written_from_the_registries():
    # Up to date: else run `grpo-ablation schema` (a metric added to design/quantities.py).
    text = schema.SCHEMA.read_text()
    assert schema.file_section(text, schema.METRIC) == schema.section_text(schema.METRIC)


def test_a_missing_compute_key_takes_the_declared_default_everywhere():
    # the train command, the base policy and the DAG's checks read the section through one class
    assert ComputeConfig.of({}) == ComputeConfig()
    assert ComputeConfig.of({"dtype": "bfloat16"}).device == "auto"
    with pytest.raises(ValueError, match=r"compute.accelerate_config: unknown accelerate config"):
        ComputeConfig.of({"accelerate_config": "megatron"})
    with pytest.raises(ValueError, match=r"compute.processes_per_train_job must be >= 1, got 0"):
        ComputeConfig.of({"processes_per_train_job": 0})
    with pytest.raises(ValueError, match=r"unknown key.*'gpus'.*config section 'compute'"):
        ComputeConfig.of({"gpus": 2})


def test_every_reader_of_the_evaluation_section_gets_the_declared_defaults():
    """The schema fills in what the dataclass declares, and the jobs' section is the dataclass's:
    no reader keeps a default of its own."""
    from snakemake.utils import validate

    from grpo_ablation.design.checks import evaluation_config, needs_prefetch, uses_vllm

    config = {"experiment": "x", "seeds": [0]}
    validate(config, str(schema.SCHEMA))
    assert config["evaluation"] == asdict(EvaluationConfig())
    config |= {"task": {"kind": "addition"}, "base_policy": {"kind": "local"}}
    job = evaluation_config(config)
    assert {k: job[k] for k in config["evaluation"] if k != "max_gen_toks"} == {
        k: v for k, v in asdict(EvaluationConfig()).items() if k != "max_gen_toks"
    } | {"sampled_metric": "exact"}
    assert not uses_vllm(config) and not needs_prefetch(config)
    assert EvaluationConfig.of({}) == EvaluationConfig()
    with pytest.raises(ValueError, match=r"evaluation.backend: unknown backend 'jax'"):
        EvaluationConfig.of({"backend": "jax"})
    with pytest.raises(ValueError, match=r"evaluation.limit must be >= 1, got 0"):
        EvaluationConfig.of({"limit": 0})
    assert EvaluationConfig.of({"batch_size": "auto", "limit": None}).batch_size == "auto"
    with pytest.raises(ValueError, match=r"unknown key.*'samplr'.*config section 'evaluation'"):
        EvaluationConfig.of({"samplr": "keyed"})


def test_the_resources_section_is_read_through_its_declaration():
    from grpo_ablation.design.packing import runs_per_gpu
    from grpo_ablation.design.resources import ResourcesConfig

    assert runs_per_gpu({}) == ResourcesConfig().runs_per_gpu == 1
    with pytest.raises(ValueError, match=r"resources.runs_per_gpu must be >= 1, got 0"):
        runs_per_gpu({"runs_per_gpu": 0})
    with pytest.raises(ValueError, match=r"resources.gpu_memory_gib must be > 0"):
        ResourcesConfig.of({"gpu_memory_gib": 0.0})


def test_a_new_option_is_recorded_without_touching_the_record():
    extended = make_dataclass(
        "Extended",
        [("entropy_bonus", float, option(0.01, "a made-up new option"))],
        bases=(TrainingConfig,),
    )
    record = ObjectiveRecord.from_config(extended(), 1)
    data = record.to_dict()
    assert data["entropy_bonus"] == 0.01 and record.entropy_bonus == 0.01
    assert ObjectiveRecord.from_dict(data) == record


def test_an_option_at_its_neutral_value_is_left_out_of_the_rerun_trigger_only():
    def declared(default):
        return make_dataclass(
            "Extended",
            [("entropy_bonus", float, option(default, "a made-up new option", neutral=0.0))],
            bases=(TrainingConfig,),
        )

    today = identity(TrainingConfig())  # the trigger of runs trained before the option
    added = declared(0.0)  # the default trains as before the option existed
    assert identity(added()) == today  # no finished run's trigger changes
    assert asdict(added())["entropy_bonus"] == 0.0  # the job receives the option
    assert ObjectiveRecord.from_config(added(), 1).to_dict()["entropy_bonus"] == 0.0  # recorded
    assert identity(added(entropy_bonus=0.1)) == today | {"entropy_bonus": 0.1}
    moved = declared(0.1)  # the default changed later, away from the neutral value
    assert identity(moved()) == today | {"entropy_bonus": 0.1}  # the runs at the default retrain
    assert identity(moved(entropy_bonus=0.0)) == today  # a run held at the neutral value stays


def test_every_option_declared_later_says_which_value_keeps_finished_runs():
    for name, f in TrainingConfig.__dataclass_fields__.items():
        neutral = f.metadata["neutral"]
        if name in BEFORE_NEUTRAL:
            assert neutral is MISSING, f"training.{name} is in every finished run's train params"
        else:
            assert neutral is not MISSING, (
                f"training.{name}: declare neutral=<the value that trains as before the option "
                "existed>, or adding it retrains every finished run (docs/design.md, 'To add an axis')"
            )
            check_option("training", name, neutral, f.metadata)


def test_options_left_out_of_the_record_say_why():
    cfg = TrainingConfig()
    record = ObjectiveRecord.from_config(cfg, 1)
    for name, f in TrainingConfig.__dataclass_fields__.items():
        why = f.metadata["recorded"]
        if why is True:
            assert record.to_dict()[name] == getattr(cfg, name), name
        else:
            assert isinstance(why, str) and why and name not in record.options, name


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("group_size", 1, "training.group_size must be >= 2, got 1"),
        ("learning_rate", -1e-4, "training.learning_rate must be >= 0"),
        ("vllm_gpu_memory_utilization", 1.5, "must be <= 1"),
        ("generation_backend", "jax", "unknown generation backend 'jax'"),
        ("sampler", "gumbel", "unknown sampler 'gumbel'"),
    ],
)
def test_an_option_out_of_its_declared_range_is_named(field, value, message):
    with pytest.raises(ValueError, match=message):
        TrainingConfig(**{field: value})


def test_the_nominal_budget_counts_generated_completions():
    budget = TrainingConfig(max_steps=200, num_iterations=2, group_size=8).nominal_budget()
    assert budget["completions"] == 100 * 32 and budget["optimizer_steps"] == 200


def test_every_choice_of_an_option_is_named_in_its_help():
    """The help text the schema and `--help` show lists the choices by name; the registries are
    what decide them, so each registered choice must appear there (a choice added to a registry
    and not to the help fails here)."""
    for cls in schema.SECTIONS.values():
        for f in fields(cls):
            choices = f.metadata.get("choices") or ()
            missing = [
                c for c in choices if not re.search(rf"\b{re.escape(c)}\b", f.metadata["help"])
            ]
            assert not missing, f"{cls.__name__}.{f.name}: help does not name {missing}"


def test_a_help_text_that_lists_its_choices_takes_them_from_the_registry():
    """Where a help text lists an option's choices, it says ``{choices}`` and the registry fills
    it in: no list of a registry's choices is copied by hand into options.py."""
    from grpo_ablation.design import options
    from grpo_ablation.settings import spell_choices

    source = Path(options.__file__).read_text()
    listed = 0
    for cls in schema.SECTIONS.values():
        for f in fields(cls):
            choices = f.metadata.get("choices")
            if choices and spell_choices(choices) in f.metadata["help"]:
                listed += 1
                for copy in (spell_choices(choices), ", ".join(choices)):
                    assert copy not in source, f"{f.name}: its choices are copied by hand"
    assert listed >= 4
    assert spell_choices(("a", "b", "c")) == "a, b or c" and spell_choices(("a",)) == "a"


def test_the_schemas_task_description_names_the_math_tasks_fields():
    """The task section's description lists MathTask's fields by hand (its other keys are
    checked by the task itself): the list is the dataclass's, in order."""
    from grpo_ablation.tasks.math import MathTask

    text = " ".join(
        yaml.safe_load(schema.SCHEMA.read_text())["properties"]["task"]["description"].split()
    )
    listed = re.search(r"grpo_ablation\.tasks\.math\.MathTask: ([^)]*)\)", text).group(1)
    assert listed.split(", ") == [f.name for f in fields(MathTask)]


def test_the_study_declares_the_spending_functions_the_analysis_implements():
    from grpo_ablation.analysis.sequential import SPENDING
    from grpo_ablation.design.study import SPENDING_RULES

    assert tuple(SPENDING) == SPENDING_RULES


def test_the_schemas_metric_description_names_every_metric_a_hypothesis_may_take():
    """Every choice the schema lists is written from its registry (the generated sections); the
    hypotheses' metric description names every metric a hypothesis may take and no other (the
    fit's parameters are refused)."""
    from grpo_ablation.design.hypotheses import METRICS
    from grpo_ablation.design.quantities import OUTCOME_DEPENDENT

    props = yaml.safe_load(schema.SCHEMA.read_text())["properties"]
    hypothesis = props["hypotheses"]["additionalProperties"]["properties"]
    named = set(re.findall(r"\b[a-z]+(?:_[a-z]+)+\b", hypothesis["metric"]["description"]))
    assert named - {"grpo_ablation"} == set(METRICS) - set(OUTCOME_DEPENDENT)
