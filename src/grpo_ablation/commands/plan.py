"""``grpo-ablation plan``: a design's cost and the power of its hypotheses, before any run."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from grpo_ablation.commands import configfile_argument

HELP = "a design's cost here and the power of every declared hypothesis, before any run"
# A command a person runs (``grpo-ablation --help`` lists it first).
ROLE = "run"


def add_arguments(p: argparse.ArgumentParser) -> None:
    configfile_argument(p)
    p.add_argument(
        "--cost-probe", type=Path, help="a GPU node's `cost-probe --out` JSON: GPU-hours per unit"
    )
    p.add_argument("--out", type=Path, help="also write what it prints here (Markdown)")


def run(a: argparse.Namespace) -> None:
    import pandas as pd

    from grpo_ablation.analysis.render import to_markdown
    from grpo_ablation.analysis.study import SEQUENTIAL_COLUMNS, plan_with_looks, study_minutes
    from grpo_ablation.design.ablation import Design
    from grpo_ablation.design.checks import protocol_warnings
    from grpo_ablation.design.hypotheses import PLAN_COLUMNS, Plan, borrowed_power, sd_sources
    from grpo_ablation.design.schema import SCHEMA, load_config

    design_config = load_config(a.configfile)
    # A config without planning figures of its own is planned on the default's, said and warned.
    borrowed = borrowed_power(design_config, SCHEMA.parents[2])
    if borrowed is not None:
        design_config = {**design_config, "power": borrowed}
    design = Design.of(design_config)
    gpu_per_unit, priced = math.nan, ""
    if a.cost_probe:
        # A GPU node's cost probe (cost-probe --out): GPU-hours of its DAG per unit, its train jobs
        # packed as this config asks (resources.runs_per_gpu).
        gpu_per_unit, priced = probe_gpu_hours_per_unit(a.cost_probe, design_config["resources"])
    plan = Plan.of(design)
    study = bool((design.sections.get("study") or {}).get("looks"))
    columns = PLAN_COLUMNS + (SEQUENTIAL_COLUMNS if study else [])
    text = plan.cost(design) + "\n\n"
    if not design.sections.get("hypotheses"):
        names = " ".join(map(str, a.configfile))
        text += f"{names} declares no hypotheses: every contrast it runs is exploratory.\n"
    else:
        text += (
            f"Power of the declared hypotheses at {plan.units} {plan.unit}s, from the SDs below; "
            "80% power; one-sided level = Holm's first step over the support and refute tests of "
            "every hypothesis (in a study with a gatekeeper: the gatekeeper's half of α, the "
            "others' level once it is decided). expected_power: averaged over the planning SD's "
            "uncertainty (its df). mde: directional, the true effect detected; equivalence, the "
            "smallest margin shown at the expected Δ. minutes_needed: the units_needed at the "
            "minutes above.\n\n"
            # every number rounded by what it holds (render.kind_of; mde, sd by the row's metric)
            + to_markdown(pd.DataFrame(plan_with_looks(design, gpu_per_unit), columns=columns))
            + "\n\nWhere each SD comes from:\n"
            + "".join(f"- {line}\n" for line in sd_sources(design))
        )
    if study:
        most, expected = study_minutes(design)
        looks = design.sections["study"]["looks"]
        text += (
            f"\nThe study's cost here: its first look ({looks[0]} draws, every cell) "
            f"{most * looks[0] / looks[-1]:.0f} min; "
            f"at most {most / 60:.1f} h (every look), expected "
            f"{expected / 60:.1f} h at the expected effects, the stages of decided hypotheses "
            "dropped (an equivalence's stopping counted from single looks, a push hypothesis "
            "open to the end: an upper bound).\n"
        )
    text += priced
    text += "".join(f"\n{w}" for w in protocol_warnings(design_config))
    print(text)
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(text + "\n")


def probe_gpu_hours_per_unit(path: Path, resources: dict[str, Any]) -> tuple[float, str]:
    """GPU-hours a unit of the design, from a GPU node's cost probe (``cost-probe --out``): its
    DAG projected with this config's runs per GPU over the units it probed, and the sentence
    ``probe_projection`` says of it."""
    from grpo_ablation.design.problems import InputError

    try:
        record = json.loads(path.read_text())
        dag = record["dag"]
        units = dag["base_policies"] if dag["base_policies"] > 1 else dag["runs"] // dag["cells"]
        projection, priced = probe_projection(record, resources)
        return projection["gpu_hours"] / units, priced
    except FileNotFoundError:
        raise InputError(f"--cost-probe {path}: no such file") from None
    except (ValueError, KeyError, TypeError, ZeroDivisionError) as err:
        raise InputError(
            f"--cost-probe {path} is not a cost probe's record (`grpo-ablation cost-probe "
            f"--out`): {type(err).__name__} {err}"
        ) from None


def probe_projection(record: dict[str, Any], resources: dict[str, Any]) -> tuple[dict, str]:
    """The probe's DAG projected again with this config's runs per GPU, and a sentence of its
    wall time on one GPU, alone and packed (a record without its measurement: its own projection
    and no sentence)."""
    from grpo_ablation.design.packing import runs_per_gpu
    from grpo_ablation.training.cost_probe import Measurement, project

    if "measured" not in record:
        return record["projection"], ""
    m, n = Measurement(**record["measured"]), runs_per_gpu(resources)
    alone = project(m, record["dag"] | {"runs_per_gpu": 1})
    if n == 1:
        return alone, (
            f"\nThe cost probe's DAG: {alone['gpu_hours']:.2f} GPU-hours, "
            f"{alone['wall_hours_one_gpu']:.2f} h on one GPU, one run at a time.\n"
        )
    packed = project(m, record["dag"] | {"runs_per_gpu": n})
    return packed, (
        f"\nThe cost probe's DAG: {packed['gpu_hours']:.2f} GPU-hours, "
        f"{packed['wall_hours_one_gpu']:.2f} h on one GPU with {n} runs packed on it "
        f"(resources.runs_per_gpu; a run {packed['train_run_s'] / 60:.1f} min packed against "
        f"{alone['train_run_s'] / 60:.1f} alone, {packed['packing']}), "
        f"{alone['wall_hours_one_gpu']:.2f} h one run at a time.\n"
    )
