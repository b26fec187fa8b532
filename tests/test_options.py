"""Options declared once: the schema, the objective record and the checks follow them."""

from dataclasses import make_dataclass

import pytest
import yaml

from grpo_ablation.design import schema
from grpo_ablation.design.options import ComputeConfig, TrainingConfig
from grpo_ablation.objective.record import ObjectiveRecord
from grpo_ablation.settings import option


@pytest.mark.parametrize("section", list(schema.SECTIONS))
def test_the_schema_section_is_the_dataclass(section):
    text = schema.SCHEMA.read_text()
    # Up to date: else run `grpo-ablation schema` and commit the schema.
    assert schema.file_section(text, section) == schema.section_text(section)
    written = yaml.safe_load(text)["properties"][section]["properties"]
    fields = schema.SECTIONS[section].__dataclass_fields__
    assert list(written) == list(fields)
    for name, spec in written.items():
        assert spec["default"] == fields[name].default
        assert spec["description"] == fields[name].metadata["help"]


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
        ("learning_rate", 0.0, "training.learning_rate must be > 0"),
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
