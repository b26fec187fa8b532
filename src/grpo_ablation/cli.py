"""Entry points the Snakemake rules call: ``python -m grpo_ablation.cli <command> ...``.

Each command is a thin adapter from files and JSON arguments to a library function: its
arguments (``args_<command>``) and its job (``cmd_<command>``) are here, the jobs the worker may
serve are in their ``job`` modules, and every command is declared once in
``grpo_ablation.commands`` (which builds this CLI from them).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grpo_ablation import commands
from grpo_ablation.layout import BASE_INFO, checkpoint, checkpoint_step

if TYPE_CHECKING:
    from grpo_ablation.design.ablation import Design


def cmd_splits(a: argparse.Namespace) -> None:
    from grpo_ablation.tasks import get_task

    fetched = json.loads(a.prefetch.read_text())["task"] if a.prefetch else None
    manifest = get_task(json.loads(a.task)).write_splits(a.out, fetched=fetched)
    print(json.dumps(manifest, indent=2))
    _leave_without_shutdown()  # a hub data set's splits are read through the data-set client


def cmd_prefetch(a: argparse.Namespace) -> None:
    """Fill the Hugging Face cache on the submit host: model, data set, built-in benchmark data."""
    from grpo_ablation.policy.prefetch import prefetch

    record = prefetch(json.loads(a.config))
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    print(json.dumps(record, indent=2))
    _leave_without_shutdown()


def _leave_without_shutdown() -> None:
    """Exit 0 now, everything written. A native thread left by the hub and data-set clients has
    aborted the interpreter's shutdown now and then ("terminate called without an active
    exception", exit 134, after the complete output: seen in prefetch, then in the splits of a hub
    data set), failing a finished job: leave without that shutdown."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def cmd_base_policy(a: argparse.Namespace) -> None:
    from grpo_ablation.design.options import ComputeConfig
    from grpo_ablation.policy.pretrained import build_base_policy
    from grpo_ablation.tasks import get_task

    a.out.mkdir(parents=True, exist_ok=True)
    base = json.loads(a.base)
    threads = base.get("num_threads")
    if threads and threads != a.threads:
        # The local warm start's weights depend on its thread count: the config's count wins.
        print(
            f"base_policy.num_threads={threads} (not the {a.threads} granted): the weights depend on it"
        )
    commands.bootstrap(threads=threads or a.threads)
    info = build_base_policy(
        base,
        get_task(json.loads(a.task)),
        a.splits,
        a.out / "model",
        ComputeConfig.of(json.loads(a.compute)),
    )
    (a.out / BASE_INFO).write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")


def _base_model(path: Path) -> tuple[str, str | None]:
    """(model directory or hub id, hub revision) of the base policy."""
    info = json.loads(path.read_text())
    return info["model"], info.get("revision")


def cmd_eval_tasks(a: argparse.Namespace) -> None:
    from grpo_ablation.evaluation.task_folders import write_split_tasks
    from grpo_ablation.tasks import get_task

    task, evaluation = get_task(json.loads(a.task)), json.loads(a.evaluation)
    exact = None
    if evaluation["sampled_metric"] == "exact":  # the local base's tokenizer, built as it builds it
        from grpo_ablation.evaluation.task_folders import exact_tokens
        from grpo_ablation.policy.tokenizer import build_char_tokenizer

        exact = exact_tokens(build_char_tokenizer())
    write_split_tasks(
        a.data, a.tasks, task.kind, evaluation, task.answer_rule, task.chat_template, exact
    )


def cmd_design(a: argparse.Namespace) -> None:
    from grpo_ablation.design.ablation import Design

    # The DAG checked the whole config; design.json lies in the experiment folder it names.
    print(Design(json.loads(a.config), a.out.parent).write(a.out))


def cmd_select(a: argparse.Namespace) -> None:
    from grpo_ablation.design.ablation import Design, select_winner
    from grpo_ablation.design.axes import BY_NAME
    from grpo_ablation.layout import cell_and_seed

    design = Design.load(a.design)
    stage = design.stage(a.stage)
    by_value: dict[str, list[dict[str, Any]]] = {}
    for path in a.inputs:
        cell = design.parse_cell(cell_and_seed(path)[0])
        final = json.loads(Path(path).read_text())["checkpoints"][-1]
        by_value.setdefault(BY_NAME[stage.primary].spell(cell[stage.primary]), []).append(final)
    choice = select_winner(by_value, stage.selection_metric, stage.name)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(choice, indent=2) + "\n")
    print(json.dumps(choice))


def cmd_calculations(a: argparse.Namespace) -> None:
    from grpo_ablation.objective.calculations import write_sheet

    for path in write_sheet(a.out):
        print(path)


def cmd_plan(a: argparse.Namespace) -> None:
    import math

    import pandas as pd

    from grpo_ablation.analysis.render import to_markdown
    from grpo_ablation.design.ablation import Design
    from grpo_ablation.design.hypotheses import PLAN_COLUMNS, Plan, plan_rows
    from grpo_ablation.training.calibrate import load_config

    design = Design.of(load_config(a.configfile))
    gpu_per_unit = math.nan
    if a.calibration:
        # The cost calibration of a GPU node (calibrate --out): GPU-hours of its DAG per unit.
        record = json.loads(a.calibration.read_text())
        dag = record["dag"]
        units = dag["base_policies"] if dag["base_policies"] > 1 else dag["runs"] // dag["cells"]
        gpu_per_unit = record["projection"]["gpu_hours"] / units
    plan = Plan.of(design)
    if not design.sections.get("hypotheses"):
        print(f"{a.configfile} declares no hypotheses: every contrast it runs is exploratory.")
        return
    text = (
        f"Power of the declared hypotheses at {plan.units} {plan.unit}s, from the SDs the config "
        f"declares ({plan.source or 'no source given'}); 80% power; one-sided level = Holm's "
        "first step over the support and refute tests of every hypothesis. mde: directional, the "
        "true effect detected; equivalence, the smallest margin shown at the expected Δ.\n\n"
        + to_markdown(
            pd.DataFrame(plan_rows(design, gpu_per_unit), columns=PLAN_COLUMNS).map(_significant)
        )
        + "\n"
    )
    print(text)
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(text + "\n")


def _significant(x: Any) -> Any:
    """A float for people: three significant digits; blank where unknown."""
    if isinstance(x, float):
        return "" if x != x else f"{x:.0f}" if abs(x) >= 100 else f"{x:.3g}"
    return x


def _report_inputs(a: argparse.Namespace) -> tuple[Design, dict[str, Any]]:
    from grpo_ablation.design.ablation import Design, read_winners

    return Design.load(a.design), read_winners([p for p in a.selection if p.exists()])


def cmd_tables(a: argparse.Namespace) -> None:
    from grpo_ablation.analysis.calibration import write_calibration
    from grpo_ablation.analysis.coupling import write_coupling
    from grpo_ablation.analysis.hypotheses import write_verdicts
    from grpo_ablation.analysis.loading import load_runs
    from grpo_ablation.analysis.tables import write_tables

    design, winners = _report_inputs(a)
    rows, seeds = design.rows(winners), design.seeds
    runs = load_runs(a.exp, rows, seeds)  # read once, used twice
    for path in [
        *write_tables(a.exp, design, rows, runs, a.out),
        *write_verdicts(design, rows, runs, a.out),
        *write_calibration(a.exp, rows, seeds, a.out),
        *write_coupling(a.exp, rows, seeds, a.out),
    ]:
        print(path)


def cmd_figures(a: argparse.Namespace) -> None:
    from grpo_ablation.analysis.figures import write_figures

    design, winners = _report_inputs(a)
    for path in write_figures(a.exp, design, winners, a.out, a.results, a.stage):
        print(path)


def cmd_reading(a: argparse.Namespace) -> None:
    from grpo_ablation.analysis.hypotheses import write_reading

    print(
        write_reading(a.effects, a.out, a.verdicts, a.calibration, a.coupling, a.push, a.efficiency)
    )


def cmd_pooled(a: argparse.Namespace) -> None:
    from grpo_ablation.analysis.draws import write_pooled
    from grpo_ablation.design.ablation import Design

    for path in write_pooled(Design.load(a.design), a.out):
        print(path)


def cmd_push(a: argparse.Namespace) -> None:
    from grpo_ablation.training.push import run_push
    from grpo_ablation.training.train import last_checkpoint

    commands.bootstrap(threads=a.threads)
    training, push = json.loads(a.training), json.loads(a.push)
    final = last_checkpoint(a.run)
    steps = push.get("steps") or [0, checkpoint_step(final)]
    policies = []
    for step in steps:
        path = Path(_base_model(a.base)[0]) if step == 0 else checkpoint(a.run, step)
        if not (path / "config.json").exists():
            raise FileNotFoundError(f"push.steps names step {step}, but {path} holds no model")
        policies.append((step, path))
    run_push(policies, a.data, json.loads(a.task), training, push, a.out, seed=training["seed"])
    print(a.out)


def cmd_push_report(a: argparse.Namespace) -> None:
    from grpo_ablation.analysis.push import write_push

    for path in write_push(a.push, a.tables.parent, a.figure.parent):
        print(path)


def cmd_token_weights(a: argparse.Namespace) -> None:
    from grpo_ablation.analysis.figures import write_weight_figure

    for path in write_weight_figure(a.out):
        print(path)


def args_splits(p: argparse.ArgumentParser) -> None:
    p.add_argument("--task", required=True, help="task config as JSON")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument(
        "--prefetch",
        type=Path,
        help="the prefetch record: the source files must be the ones it read",
    )


def args_prefetch(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--config", required=True, help="sections task, base_policy, evaluation, stand_in as JSON"
    )
    p.add_argument("--out", type=Path, required=True, help="the prefetch record (JSON)")


def args_base_policy(p: argparse.ArgumentParser) -> None:
    p.add_argument("--base", required=True, help="base_policy config as JSON")
    p.add_argument("--task", required=True, help="task config as JSON")
    p.add_argument(
        "--compute", default="{}", help="the config's compute section as JSON (its keys optional)"
    )
    p.add_argument("--splits", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--threads", type=int, default=1)


def args_eval_tasks(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--tasks", type=Path, required=True)
    p.add_argument("--evaluation", required=True, help="evaluation config as JSON")
    p.add_argument("--task", required=True, help="task config as JSON (answer rule, chat template)")


def _args_design(p: argparse.ArgumentParser) -> None:
    p.add_argument("--design", type=Path, required=True, help="the DAG's design.json")


def args_design(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", required=True, help="the design's config sections as JSON")
    p.add_argument("--out", type=Path, required=True, help="design.json")


def args_select(p: argparse.ArgumentParser) -> None:
    p.add_argument("--stage", required=True)
    _args_design(p)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("inputs", nargs="+")


def args_calculations(p: argparse.ArgumentParser) -> None:
    p.add_argument("out", type=Path)


def args_plan(p: argparse.ArgumentParser) -> None:
    p.add_argument("--configfile", type=Path, required=True, help="the config to plan")
    p.add_argument(
        "--calibration", type=Path, help="a GPU node's `calibrate --out` JSON: GPU-hours per unit"
    )
    p.add_argument("--out", type=Path, help="also write the table (Markdown) here")


def _args_analysis(p: argparse.ArgumentParser) -> None:
    p.add_argument("--exp", type=Path, required=True, help="experiment directory")
    _args_design(p)
    p.add_argument(
        "--selection",
        type=Path,
        action="append",
        default=[],
        help="selection/<stage>.json of a stage whose winner another stage takes (repeatable)",
    )
    p.add_argument("--out", type=Path, required=True)


args_tables = _args_analysis


def args_figures(p: argparse.ArgumentParser) -> None:
    _args_analysis(p)
    p.add_argument("--stage", help="only this stage's figures, written directly under --out")
    p.add_argument("--results", type=Path, required=True, help="the tables job's results.csv")


def args_reading(p: argparse.ArgumentParser) -> None:
    p.add_argument("--effects", type=Path, nargs="+", required=True, help="stages' effects.csv")
    p.add_argument("--verdicts", type=Path, help="hypotheses.csv: the verdicts that open it")
    p.add_argument("--calibration", type=Path, help="calibration.csv: a closing paragraph")
    p.add_argument("--coupling", type=Path, help="coupling.csv: a closing paragraph")
    p.add_argument("--efficiency", type=Path, help="efficiency.csv: a paragraph on efficiency")
    p.add_argument("--push", type=Path, help="tables/push.csv: a closing paragraph")
    p.add_argument("--out", type=Path, required=True, help="the reading (reStructuredText)")


def args_pooled(p: argparse.ArgumentParser) -> None:
    _args_design(p)
    p.add_argument("--out", type=Path, required=True, help="the pooled folder")


def args_push(p: argparse.ArgumentParser) -> None:
    p.add_argument("--base", type=Path, required=True, help="base/base_policy.json")
    p.add_argument("--run", type=Path, required=True, help="the reference run's folder")
    p.add_argument("--data", type=Path, required=True, help="the splits folder")
    p.add_argument("--training", required=True, help="the run's training config as JSON")
    p.add_argument("--task", required=True, help="task config as JSON")
    p.add_argument("--push", required=True, help="the push section as JSON")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", type=Path, required=True)


def args_push_report(p: argparse.ArgumentParser) -> None:
    p.add_argument("--push", type=Path, required=True, help="push.json")
    p.add_argument("--tables", type=Path, required=True, help="tables/push.csv (its folder)")
    p.add_argument("--figure", type=Path, required=True, help="figures/push.png (its folder)")


def args_token_weights(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=Path, required=True)


def main(argv: list[str] | None = None) -> None:
    commands.main(argv)


if __name__ == "__main__":
    main()
