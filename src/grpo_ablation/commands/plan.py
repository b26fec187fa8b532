"""``grpo-ablation plan``: the power and cost of every declared hypothesis, before any run."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from grpo_ablation.commands import configfile_argument

HELP = "the power and cost of every declared hypothesis, before any run"
# A command a person runs (``grpo-ablation --help`` lists it first).
PERSON = True


def add_arguments(p: argparse.ArgumentParser) -> None:
    configfile_argument(p)
    p.add_argument(
        "--cost-probe", type=Path, help="a GPU node's `cost-probe --out` JSON: GPU-hours per unit"
    )
    p.add_argument("--out", type=Path, help="also write the table (Markdown) here")


def run(a: argparse.Namespace) -> None:
    import pandas as pd

    from grpo_ablation.analysis.render import to_markdown
    from grpo_ablation.analysis.study import SEQUENTIAL_COLUMNS, plan_with_looks, study_minutes
    from grpo_ablation.design.ablation import Design
    from grpo_ablation.design.hypotheses import PLAN_COLUMNS, Plan
    from grpo_ablation.design.schema import load_config

    design_config = load_config(a.configfile)
    design = Design.of(design_config)
    gpu_per_unit = math.nan
    if a.cost_probe:
        # A GPU node's cost probe (cost-probe --out): GPU-hours of its DAG per unit.
        record = json.loads(a.cost_probe.read_text())
        dag = record["dag"]
        units = dag["base_policies"] if dag["base_policies"] > 1 else dag["runs"] // dag["cells"]
        gpu_per_unit = record["projection"]["gpu_hours"] / units
    plan = Plan.of(design)
    study = bool((design.sections.get("study") or {}).get("looks"))
    columns = PLAN_COLUMNS + (SEQUENTIAL_COLUMNS if study else [])
    if not design.sections.get("hypotheses"):
        names = " ".join(map(str, a.configfile))
        print(f"{names} declares no hypotheses: every contrast it runs is exploratory.")
        return
    text = (
        f"Power of the declared hypotheses at {plan.units} {plan.unit}s, from the SDs the config "
        f"declares ({plan.source or 'no source given'}); 80% power; one-sided level = Holm's "
        "first step over the support and refute tests of every hypothesis (in a study with a "
        "gatekeeper: the gatekeeper's half of α, the others' level once it is decided). "
        "expected_power: averaged over the planning SD's uncertainty (its df). mde: directional, "
        "the true effect detected; equivalence, the smallest margin shown at the expected Δ.\n\n"
        # every number rounded by what it holds (render.kind_of; mde, sd by the row's metric)
        + to_markdown(pd.DataFrame(plan_with_looks(design, gpu_per_unit), columns=columns))
        + "\n"
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
    from grpo_ablation.design.checks import protocol_warnings

    text += "".join(f"\n{w}" for w in protocol_warnings(design_config))
    print(text)
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(text + "\n")
