"""The config schema's sections that are written from their dataclasses, not by hand.

``workflow/schemas/config.schema.yaml`` holds, between two marker comments per section, the
properties of each section of ``SECTIONS`` (``training`` from ``TrainingConfig``, ``compute``,
``evaluation``, ``resources``, ...; a stage's options a level deeper, ``WHERE``): names, types,
choices, bounds, defaults and descriptions, from the fields' ``option`` declarations (an option
declared ``REQUIRED`` has no default, and the section's hand-written ``required`` lists it:
tested; keys a section describes by hand follow its block, ``HAND_WRITTEN``, each said why);
and a hypothesis's ``metric``
(``METRIC``), whose description lists the metrics a hypothesis may name (``quantities.NAMEABLE``
and the push's). Run ``grpo-ablation schema`` after changing a declaration;
``tests/test_options.py`` fails while the file differs.
"""

from __future__ import annotations

import json
import re
import textwrap
from dataclasses import fields
from pathlib import Path
from typing import Any

from grpo_ablation.design.ablation import Design, StageOptions
from grpo_ablation.design.base_policy import BasePolicySection
from grpo_ablation.design.experiment import ExperimentConfig
from grpo_ablation.design.hypotheses import PUSH
from grpo_ablation.design.hypothesis_options import HypothesisOptions
from grpo_ablation.design.options import ComputeConfig, EvaluationConfig, TrainingConfig
from grpo_ablation.design.power_section import PowerValues
from grpo_ablation.design.push import PushConfig
from grpo_ablation.design.quantities import NAMEABLE
from grpo_ablation.design.resources import ResourcesConfig
from grpo_ablation.design.slurm import SlurmConfig
from grpo_ablation.design.stand_in import StandInConfig
from grpo_ablation.design.study import StudyConfig
from grpo_ablation.design.tracking import TrackingConfig
from grpo_ablation.settings import REQUIRED, default_of, did_you_mean, unknown_keys
from grpo_ablation.tasks import TaskSection
from grpo_ablation.tasks.word_problem_generator import WordProblems

SCHEMA = Path(__file__).parents[3] / "workflow/schemas/config.schema.yaml"
SECTIONS: dict[str, type] = {
    "config": ExperimentConfig,
    "slurm": SlurmConfig,
    "tracking": TrackingConfig,
    "stand_in": StandInConfig,
    "task": TaskSection,
    "word_problems": WordProblems,
    "base_policy": BasePolicySection,
    "training": TrainingConfig,
    "compute": ComputeConfig,
    "evaluation": EvaluationConfig,
    "resources": ResourcesConfig,
    "push": PushConfig,
    "study": StudyConfig,
    "power": PowerValues,
    "stage": StageOptions,
    "hypothesis": HypothesisOptions,
}
# A hypothesis's metric property, written from the registries.
METRIC = "hypothesis metric"
# Where a section's properties lie in the schema, when not at properties.<section>.properties.
WHERE: dict[str, tuple[str, ...]] = {
    "config": ("properties",),
    "stage": ("properties", "stages", "additionalProperties", "properties"),
    "hypothesis": ("properties", "hypotheses", "additionalProperties", "properties"),
    METRIC: ("properties", "hypotheses", "additionalProperties", "properties"),
}
# The keys a section's schema lists by hand after its declared ones, and why: a stage's axes are
# free-form maps of axis names to values (``ablation.stage_of`` reads and checks them); a base
# policy's or a task's are fields of one of its kinds, typed in the schema but with no default
# there (their defaults are the kind's: ``base_policy.base_policy_of``, ``tasks.get_task``); a
# hypothesis's cell is free-form (a value or axis -> value), its metric a block of its own; the
# power section's sd maps each metric to a number or a list of earlier runs (a oneOf), and its
# minutes_split, measured_on and reference_correlation are objects with keys of their own.
HAND_WRITTEN: dict[str, tuple[str, ...]] = {
    "stage": ("vary", "fixed", "reference"),
    "base_policy": ("name", "gguf", "revision", "num_threads"),
    "task": ("revision", "dataset_path"),
    "hypothesis": ("cell", "metric"),
    "power": ("sd", "minutes_split", "measured_on", "reference_correlation"),
}
_JSON_TYPES = {
    "str": "string",
    "int": "integer",
    "float": "number",
    "bool": "boolean",
    "None": "null",
}
_LIST = re.compile(r"list\[(\w+)\]( \| None)?")


def where(section: str) -> tuple[str, ...]:
    """The path of the section's properties in the schema."""
    return WHERE.get(section, ("properties", section, "properties"))


def _indent(section: str) -> str:
    return "  " * len(where(section))


def markers(section: str) -> tuple[str, str]:
    indent = _indent(section)
    return f"{indent}# BEGIN {section} options", f"{indent}# END {section} options"


def metric_description() -> str:
    """What a hypothesis's ``metric`` may be: every name it accepts, and no other."""
    return (
        "a quantity the results table pairs by seed (grpo_ablation.design.quantities): "
        f"{', '.join(NAMEABLE)}; or a push ({', '.join(PUSH)}: the first-order change per unit "
        "step along the cell's update, paired by push replicate, with `policy`); another name "
        "stops the DAG (a quantity that exists only where the outcome allowed it, as the "
        "efficiency fit's parameters, is refused)"
    )


def _metric_lines() -> list[str]:
    """The metric property as the schema file spells it: its description a folded block."""
    text = textwrap.wrap(metric_description(), 88, break_long_words=False, break_on_hyphens=False)
    lines = ["metric:", "  type: string", "  description: >", *("    " + line for line in text)]
    return [_indent(METRIC) + line for line in lines]


def _type(annotation: str) -> dict[str, Any]:
    """The JSON-schema type of a field's annotation: ``int``, ``int | None`` (a null allowed)."""
    types = [_JSON_TYPES[t] for t in annotation.split(" | ")]
    return {"type": types[0] if len(types) == 1 else types}


def _value(annotation: str, meta: Any) -> dict[str, Any]:
    """The JSON schema of one value: one of the choices, a number within its bounds or one of
    its words (``batch_size: auto``), else its type within its bounds."""
    if meta["choices"]:
        return {"enum": list(meta["choices"])}
    if meta["words"]:
        number = _type(annotation.split(" | ")[0]) | meta["bounds"]
        return {"oneOf": [number, *({"const": w} for w in meta["words"])]}
    text = {"pattern": meta.get("pattern"), "minLength": meta.get("min_length")}
    return _type(annotation) | {k: v for k, v in text.items() if v} | meta["bounds"]


def properties(cls: type) -> dict[str, dict[str, Any]]:
    """The JSON-schema properties of a section, one per field of its dataclass; a list's choices
    and bounds are its items' (``list[int] | None``: a list or null). An option the config must
    give (``REQUIRED``) has no default, nor has one whose None stands for the key left out
    (``absent``: nor does it take a null)."""
    out = {}
    for f in fields(cls):
        absent = f.metadata.get("absent")
        null = f.metadata.get("null")
        annotation = f.type.removesuffix(" | None") if absent and not null else f.type
        listed = _LIST.fullmatch(annotation)
        if listed:
            array = ["array", "null"] if listed.group(2) else "array"
            spec = {"type": array, "items": _value(listed.group(1), f.metadata)}
            if f.metadata.get("min_items"):
                spec["minItems"] = f.metadata["min_items"]
        else:
            spec = _value(annotation, f.metadata)
        if not (default_of(f) is REQUIRED or absent):
            spec["default"] = default_of(f)
        spec["description"] = f.metadata["help"]
        out[f.name] = spec
    return out


def section_text(section: str) -> str:
    """The section as the schema file spells it: one block per option, between its markers."""
    import yaml

    begin, end = markers(section)
    lines = [begin + " (grpo-ablation schema)"]
    if section == METRIC:
        return "\n".join([*lines, *_metric_lines(), end])
    indent = _indent(section)
    for name, spec in properties(SECTIONS[section]).items():
        lines.append(f"{indent}{name}:")
        for key, value in spec.items():
            text = (
                yaml.safe_dump({key: value}, width=84, allow_unicode=True).rstrip()
                if key == "description"
                else f"{key}: {json.dumps(value)}"  # a JSON scalar or list is a YAML flow value
            )
            lines += [indent + "  " + line for line in text.splitlines()]
    return "\n".join([*lines, end])


def file_section(text: str, section: str) -> str:
    """The section as the schema file holds it now."""
    begin, end = markers(section)
    match = re.search(rf"^{re.escape(begin)}.*?^{re.escape(end)}", text, re.S | re.M)
    if match is None:
        raise ValueError(f"{SCHEMA} has no '{begin.strip()}' ... '{end.strip()}' block")
    return match.group(0)


def write_schema(check: bool = False) -> None:
    """Write the dataclass-declared sections (``SECTIONS``) into the schema; ``check``: only
    say whether it is up to date (``grpo-ablation schema [--check]``)."""
    text = SCHEMA.read_text()
    new = text
    for section in (*SECTIONS, METRIC):
        new = new.replace(file_section(new, section), section_text(section))
    if check:
        raise SystemExit(0 if new == text else f"{SCHEMA} is out of date")
    SCHEMA.write_text(new)


def load_config(path: Path | list[Path], overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """The config as the workflow sees it: the files merged key by key in order, the later one
    winning (as Snakemake merges several ``--configfile``), then checked whole (``check_config``:
    the schema, whose defaults it fills in, and every design check, before any job). A problem
    of the files, as every problem of the config, is a DesignError (the CLI prints it alone)."""
    import yaml
    from snakemake.utils import update_config

    from grpo_ablation.design.problems import DesignError

    config: dict[str, Any] = {}
    for file in path if isinstance(path, list) else [path]:
        if not Path(file).is_file():
            raise DesignError(f"{file}: no such config file")
        try:
            update_config(config, yaml.safe_load(Path(file).read_text()) or {})
        except yaml.YAMLError as err:
            raise DesignError(f"{file} is not YAML: {err}") from None
    config.update(overrides or {})
    check_config(config)
    return config


# Said after the schema's problems when the config, less the keys they name, still breaks the
# schema (a required section missing, say): the design cannot be built to be checked.
UNCHECKED = (
    "(the design's own checks did not run: the config breaks the schema too badly to build the "
    "design; fix the problems above and run again)"
)


def check_config(config: dict[str, Any], schema_path: Path = SCHEMA) -> Design:
    """Every problem of ``config`` in one pass, as one DesignError: the schema's
    (``config_problems``) and the design's own checks (``checks.check_design``), which run on
    the config less the keys the schema refused, each then at its default (``UNCHECKED`` where
    the design cannot be built). A valid config gets the schema's defaults filled in, in place
    (Snakemake's validation, as the Snakefile's own config), and its design is returned."""
    import copy

    from snakemake.exceptions import WorkflowError
    from snakemake.utils import validate

    from grpo_ablation.design.checks import check_design
    from grpo_ablation.design.problems import DesignError, Problems

    problems = Problems()
    problems.found += config_problems(config, schema_path)
    checked = config
    if problems.found:  # the design's checks see the config less what the schema refused
        checked = copy.deepcopy(config)
        for err in _errors(config, _schema(schema_path)):
            for key in _refused(err):
                _drop(checked, key)
    try:
        validate(checked, str(schema_path))
    except WorkflowError as err:
        raise DesignError(*problems.found, UNCHECKED) if problems.found else err from None
    with problems.check():
        design = check_design(checked)
    problems.raise_any()
    return design


def _schema(schema_path: Path) -> dict[str, Any]:
    import yaml

    return yaml.safe_load(schema_path.read_text())


def _errors(config: dict[str, Any], schema: dict[str, Any]) -> list[Any]:
    """The schema's validation errors of ``config``, in the order of their keys."""
    import jsonschema

    errors = jsonschema.Draft7Validator(schema).iter_errors(config)
    return sorted(errors, key=lambda e: list(map(str, e.path)))


def _refused(err: Any) -> list[tuple[str, ...]]:
    """The keys a schema error refuses, as paths from the config's top: an unknown key, a stage
    lacking what a stage needs, else the key holding the bad value (a list's whole key)."""
    path = list(err.path)
    if err.validator == "additionalProperties":
        known = (err.schema.get("properties") or {}).keys()
        return [(*map(str, path), str(k)) for k in err.instance if k not in known]
    cut = next((i for i, k in enumerate(path) if not isinstance(k, str)), len(path))
    return [tuple(path[:cut])] if cut else []


def _drop(config: dict[str, Any], key: tuple[str, ...]) -> None:
    node: Any = config
    for k in key[:-1]:
        node = node.get(k) if isinstance(node, dict) else None
    if isinstance(node, dict):
        node.pop(key[-1], None)


def _number_as_text(err: Any) -> str:
    """YAML 1.1 (PyYAML) reads ``2e-4`` as text, not a number: where a number was expected and the
    text is one, say how to write it."""
    wanted = err.validator_value if err.validator == "type" else None
    if wanted not in ("number", "integer") or not isinstance(err.instance, str):
        return ""
    try:
        value = float(err.instance)
    except ValueError:
        return ""
    return f"; YAML reads {err.instance} as text: write {value!r}"


def config_problems(config: dict[str, Any], schema_path: Path = SCHEMA) -> list[str]:
    """Every way ``config`` breaks the schema, one line each, in one pass: the key's path, what is
    wrong and, where a known name is close, which one was meant (an unknown key, a choice outside
    its enum, a stage of a name no stage has). Empty when the config is valid."""
    stages = config.get("stages")
    stage_names = sorted(stages) if isinstance(stages, dict) else []
    out: list[str] = []
    missing: dict[str, list[str]] = {}  # stage -> its required keys missing
    for err in _errors(config, _schema(schema_path)):
        where = ".".join(map(str, err.path)) or "the config"
        if err.validator == "additionalProperties":
            known = (err.schema.get("properties") or {}).keys()
            out += unknown_keys(".".join(map(str, err.path)), sorted(err.instance), known)
        elif err.validator == "enum":
            out.append(
                f"{where}: {err.instance!r} is not one of {err.validator_value}"
                + did_you_mean(err.instance, list(err.validator_value))
            )
        elif err.validator == "required" and len(err.path) == 2 and err.path[0] == "stages":
            missing.setdefault(str(err.path[1]), []).append(err.message.split("'")[1])
        else:
            out.append(f"{where}: {err.message}{_number_as_text(err)}")
    for name, keys in missing.items():
        hint = did_you_mean(name, [s for s in stage_names if s != name])
        out.append(
            f"stages.{name}: no stage of this name, and a stage of its own needs {keys}"
            + (hint or "; to change a stage of config/config.yaml, give that file first")
        )
    return list(dict.fromkeys(out))
