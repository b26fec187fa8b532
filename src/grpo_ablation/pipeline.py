"""The ablation design as pure functions of the validated config: stages, cells, budgets, paths.

The Snakefile calls these; they know nothing of Snakemake, so tests can check the design without
running a workflow. A cell is spelled as key=value path segments
(``std=population/agg=sequence_mean/G=8``); a cell shared by two stages is one directory, so it is
trained once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from grpo_ablation.choices import AGGREGATIONS, SCALINGS
from grpo_ablation.tasks import get_task
from grpo_ablation.training.train import TrainingConfig

STAGES = ("std_scaling", "aggregation", "group_size")
FROM_STAGE1 = "from_stage1"


@dataclass(frozen=True, order=True)
class Cell:
    std_scaling: str
    aggregation: str
    group_size: int

    @property
    def path(self) -> str:
        return f"std={self.std_scaling}/agg={self.aggregation}/G={self.group_size}"

    @classmethod
    def parse(cls, path: str) -> Cell:
        parts = dict(seg.split("=", 1) for seg in path.strip("/").split("/"))
        return cls(parts["std"], parts["agg"], int(parts["G"]))

    def label(self) -> str:
        return f"{self.std_scaling} / {self.aggregation} / G={self.group_size}"


class DesignError(ValueError):
    """The ablation design in the config is inconsistent (named in the message)."""


def completions_per_step(config: dict[str, Any]) -> int:
    t = config["training"]
    return int(t["prompts_per_step"]) * int(t["group_size"])


def training_config(config: dict[str, Any], cell: Cell, seed: int) -> TrainingConfig:
    """The full TrainingConfig of one run: shared fields, the cell's three choices, the seed.

    The completion budget per step is fixed, so a larger G means fewer prompts per step.
    """
    shared = {k: v for k, v in config["training"].items() if k != "seed"}
    budget = completions_per_step(config)
    if budget % cell.group_size:
        raise DesignError(
            f"G={cell.group_size} does not divide the {budget} completions per step "
            "(training.prompts_per_step x training.group_size)"
        )
    shared.update(
        std_scaling=cell.std_scaling,
        aggregation=cell.aggregation,
        group_size=cell.group_size,
        prompts_per_step=budget // cell.group_size,
        seed=seed,
    )
    known = {f.name for f in fields(TrainingConfig)}
    unknown = sorted(set(shared) - known)
    if unknown:
        raise DesignError(f"unknown key(s) {unknown} in config section 'training'")
    return TrainingConfig(**shared)


def nominal_budget(cfg: TrainingConfig) -> dict[str, Any]:
    """What a run is allowed to spend; cells within a stage must agree on every entry."""
    return {
        "completions": cfg.max_steps // cfg.num_iterations * cfg.generation_batch_size,
        "optimizer_steps": cfg.max_steps,
        "max_completion_length": cfg.max_completion_length,
        "learning_rate": cfg.learning_rate,
        "lr_scheduler_type": cfg.lr_scheduler_type,
        "warmup_steps": cfg.warmup_steps,
        "num_iterations": cfg.num_iterations,
    }


def baseline(config: dict[str, Any]) -> Cell:
    s = config["stages"]
    return Cell(
        s["std_scaling"]["reference"],
        s["std_scaling"]["aggregation"],
        config["training"]["group_size"],
    )


def stage_cells(config: dict[str, Any], stage: str, stage1_winner: str | None = None) -> list[Cell]:
    """The cells of one stage, in the order the config lists their values."""
    s = config["stages"][stage]
    if not s.get("enabled", True):
        return []
    G = config["training"]["group_size"]
    if stage == "std_scaling":
        _check(s["values"], SCALINGS, "stages.std_scaling.values")
        return [Cell(v, s["aggregation"], G) for v in s["values"]]
    if stage == "aggregation":
        _check(s["values"], AGGREGATIONS, "stages.aggregation.values")
        std = s["std_scaling"]
        if std == FROM_STAGE1:
            if stage1_winner is None:
                raise DesignError(
                    "stage 'aggregation' takes std scaling from stage 1: no winner yet"
                )
            std = stage1_winner
        return [Cell(std, v, G) for v in s["values"]]
    if stage == "group_size":
        base = baseline(config)
        std = s.get("std_scaling") or base.std_scaling
        agg = s.get("aggregation") or base.aggregation
        return [Cell(std, agg, int(g)) for g in s["values"]]
    raise DesignError(f"unknown stage {stage!r}; expected one of {STAGES}")


def reference_cell(config: dict[str, Any], stage: str, cells: list[Cell]) -> Cell:
    ref = config["stages"][stage]["reference"]
    attr = {"std_scaling": "std_scaling", "aggregation": "aggregation", "group_size": "group_size"}[
        stage
    ]
    for cell in cells:
        if str(getattr(cell, attr)) == str(ref):
            return cell
    raise DesignError(f"stages.{stage}.reference={ref!r} is not among the stage's values")


def check_matched_budgets(config: dict[str, Any], stage: str, cells: list[Cell]) -> dict[str, Any]:
    """Refuse a stage whose cells would spend different nominal budgets."""
    budgets = {c.path: nominal_budget(training_config(config, c, 0)) for c in cells}
    distinct = {json.dumps(b, sort_keys=True) for b in budgets.values()}
    if len(distinct) > 1:
        lines = "; ".join(f"{p}: {b}" for p, b in budgets.items())
        raise DesignError(f"nominal budgets differ within stage '{stage}': {lines}")
    return next(iter(budgets.values()), {})


def _check(values: list[str], allowed: tuple[str, ...], where: str) -> None:
    bad = [v for v in values if v not in allowed]
    if bad:
        raise DesignError(f"{where}: unknown value(s) {bad}; expected among {list(allowed)}")


def select_winner(summaries: dict[str, list[dict[str, Any]]], metric: str) -> dict[str, Any]:
    """Stage-1 winner on the validation split: highest mean over seeds of ``metric``.

    ``summaries`` maps a cell's std scaling to the validation results of its seeds. Ties go to
    the value listed first (dicts keep the config's order), so the choice is deterministic.
    """
    means = {k: sum(r[metric] for r in rs) / len(rs) for k, rs in summaries.items() if rs}
    if not means:
        raise DesignError("no validation results to select a stage-1 winner from")
    best = max(means, key=lambda k: (means[k], -list(means).index(k)))
    return {"winner": best, "metric": metric, "split": "validation", "means": means}


def evaluation_config(config: dict[str, Any]) -> dict[str, Any]:
    """The evaluation section as jobs need it: training's generation length and the compute
    section's device and precision filled in (one answer protocol for training and evaluation)."""
    ev = dict(config["evaluation"])
    length = int(config["training"]["max_completion_length"])
    if ev.get("max_gen_toks") not in (None, length):
        raise DesignError(
            f"evaluation.max_gen_toks={ev['max_gen_toks']} differs from training.max_completion_length="
            f"{length}: evaluation must generate as training does; drop evaluation.max_gen_toks"
        )
    ev["max_gen_toks"] = length
    ev["device"] = config["compute"]["device"]
    ev["dtype"] = config["compute"]["dtype"]
    return ev


def needs_prefetch(config: dict[str, Any]) -> bool:
    """Whether any job reads hub content (or its stand-in): then the prefetch rule runs first."""
    return bool(
        config.get("stand_in")
        or config["base_policy"].get("kind") == "hub"
        or get_task(config["task"]).hub_data
        or config["evaluation"].get("external_benchmarks")
    )


def experiment_dir(config: dict[str, Any]) -> Path:
    return Path(config.get("results_dir", "results")) / config["experiment"]


def asdict_config(cfg: TrainingConfig) -> dict[str, Any]:
    from dataclasses import asdict

    return asdict(cfg)


def check_design(config: dict[str, Any]) -> None:
    """Everything the DAG can check before any job runs: names, references, matched budgets."""
    evaluation_config(config)
    for stage in STAGES:
        if not config["stages"][stage]["enabled"]:
            continue
        if stage == "aggregation" and config["stages"][stage]["std_scaling"] == FROM_STAGE1:
            if not config["stages"]["std_scaling"]["enabled"]:
                raise DesignError(
                    "stages.aggregation.std_scaling is from_stage1 but stage 1 is disabled"
                )
            # every possible winner must give a consistent stage
            for std in config["stages"]["std_scaling"]["values"]:
                cells = stage_cells(config, stage, std)
                check_matched_budgets(config, stage, cells)
            reference_cell(
                config,
                stage,
                stage_cells(config, stage, config["stages"]["std_scaling"]["values"][0]),
            )
            continue
        cells = stage_cells(config, stage)
        check_matched_budgets(config, stage, cells)
        reference_cell(config, stage, cells)
        for cell in cells:
            training_config(config, cell, 0)


def read_json(path: Path | str) -> Any:
    return json.loads(Path(path).read_text())
