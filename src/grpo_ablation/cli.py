"""The project's one entry point: ``grpo-ablation <command> ...`` (the rules run it through
workflow/scripts/grpo.py; ``python -m grpo_ablation.cli`` is the same).

Every command is declared once, in ``COMMANDS`` at the end of this file: its help, its arguments,
its job (real functions), whether the local job worker may serve it and whether it works offline.
Each is a thin adapter from files and JSON arguments to a library function: the arguments
(``args_<command>``) and the job (``cmd_<command>``) are here, except for the jobs the worker
serves, which live in their ``job`` modules (importable without torch). ``main`` sets the process
up (``grpo_ablation.process.bootstrap``) before anything imports torch, then runs the command in
the job worker where it may serve it, else in this process.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grpo_ablation import worker
from grpo_ablation.analysis import job as diagnostics_job
from grpo_ablation.evaluation import job as evaluation_job
from grpo_ablation.layout import BASE_INFO, PUSH_PURPOSES, checkpoint, checkpoint_step
from grpo_ablation.process import bootstrap
from grpo_ablation.training import job as training_job

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
    bootstrap(threads=threads or a.threads)
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
    from grpo_ablation.analysis.study import SEQUENTIAL_COLUMNS, plan_with_looks, study_minutes
    from grpo_ablation.design.ablation import Design
    from grpo_ablation.design.hypotheses import PLAN_COLUMNS, Plan
    from grpo_ablation.design.schema import load_config

    design = Design.of(load_config(a.configfile))
    gpu_per_unit = math.nan
    if a.calibration:
        # The cost calibration of a GPU node (calibrate --out): GPU-hours of its DAG per unit.
        record = json.loads(a.calibration.read_text())
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
        "first step over the support and refute tests of every hypothesis. mde: directional, the "
        "true effect detected; equivalence, the smallest margin shown at the expected Δ.\n\n"
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
    print(text)
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(text + "\n")


def _report_inputs(a: argparse.Namespace) -> tuple[Design, dict[str, Any]]:
    from grpo_ablation.design.ablation import Design, read_winners

    return Design.load(a.design), read_winners([p for p in a.selection if p.exists()])


def cmd_tables(a: argparse.Namespace) -> None:
    from grpo_ablation.analysis.tabulate import write_all

    design, winners = _report_inputs(a)
    for path in write_all(a.exp, design, winners, a.out):
        print(path)


def cmd_figures(a: argparse.Namespace) -> None:
    from grpo_ablation.analysis.figures import write_figures
    from grpo_ablation.design.ablation import Design

    for path in write_figures(Design.load(a.design), a.tables, a.out, a.stage):
        print(path)


def cmd_reading(a: argparse.Namespace) -> None:
    from grpo_ablation.analysis.compose import write_reading

    print(
        write_reading(a.effects, a.out, a.verdicts, a.calibration, a.coupling, a.push, a.efficiency)
    )


def cmd_pooled(a: argparse.Namespace) -> None:
    from grpo_ablation.analysis.draws import write_pooled
    from grpo_ablation.design.ablation import Design

    for path in write_pooled(Design.load(a.design), a.out):
        print(path)


def cmd_pooled_figures(a: argparse.Namespace) -> None:
    from grpo_ablation.analysis.pooled_figures import write_pooled_figures
    from grpo_ablation.design.ablation import Design

    for path in write_pooled_figures(Design.load(a.design), a.tables, a.out):
        print(path)


def cmd_study_look(a: argparse.Namespace) -> None:
    from grpo_ablation.analysis.study import write_look
    from grpo_ablation.design.ablation import Design
    from grpo_ablation.layout import Tree

    design = Design.load(a.design)
    record = write_look(design, a.out)
    for hid, verdict in record["decisions"].items():
        print(f"look {record['look']}: {hid} {verdict}")
    following = Path(Tree(design.folder()).study_next())
    print(f"next look: {following}" if following.exists() else "the study is over")


def cmd_push(a: argparse.Namespace) -> None:
    from grpo_ablation.training.push import run_push
    from grpo_ablation.training.train import last_checkpoint

    bootstrap(threads=a.threads)
    training, push = json.loads(a.training), json.loads(a.push)
    # A pilot plans the tests at the base policy; the test measures where the config says.
    steps = [0] if a.purpose == "pilot" else push.get("steps")
    if not steps or any(steps):
        if a.run is None:
            raise ValueError("push: --run (the reference run's folder) is needed for a checkpoint")
        steps = steps or [0, checkpoint_step(last_checkpoint(a.run))]
    policies = []
    for step in steps:
        path = Path(_base_model(a.base)[0]) if step == 0 else checkpoint(a.run, step)
        if not (path / "config.json").exists():
            raise FileNotFoundError(f"push.steps names step {step}, but {path} holds no model")
        policies.append((step, path))
    run_push(
        policies,
        a.data,
        json.loads(a.task),
        training,
        push,
        a.out,
        seed=training["seed"],
        purpose=a.purpose,
    )
    print(a.out)


def cmd_push_report(a: argparse.Namespace) -> None:
    from grpo_ablation.analysis.push import write_pilot, write_push

    if a.pilot:
        print(write_pilot(a.push, a.pilot))
        return
    if a.tables is None or a.figure is None:
        raise ValueError("push-report: --tables and --figure, or --pilot")
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


def args_study_look(p: argparse.ArgumentParser) -> None:
    _args_design(p)
    p.add_argument("--out", type=Path, help="also write the look's record here (JSON)")


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
    p.add_argument(
        "--configfile",
        type=Path,
        nargs="+",
        required=True,
        help="the config to plan (several: merged key by key, the later winning, as Snakemake does)",
    )
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
    _args_design(p)
    p.add_argument("--tables", type=Path, required=True, help="the tables job's folder")
    p.add_argument("--stage", help="only this stage's figures, written directly under --out")
    p.add_argument("--out", type=Path, required=True)


def args_reading(p: argparse.ArgumentParser) -> None:
    p.add_argument("--effects", type=Path, nargs="+", required=True, help="tables/effects.csv")
    p.add_argument("--verdicts", type=Path, help="hypotheses.csv: the verdicts that open it")
    p.add_argument("--calibration", type=Path, help="calibration.csv: a closing paragraph")
    p.add_argument("--coupling", type=Path, help="coupling.csv: a closing paragraph")
    p.add_argument("--efficiency", type=Path, help="efficiency.csv: a paragraph on efficiency")
    p.add_argument("--push", type=Path, help="tables/push.csv: a closing paragraph")
    p.add_argument("--out", type=Path, required=True, help="the reading (reStructuredText)")


def args_pooled(p: argparse.ArgumentParser) -> None:
    _args_design(p)
    p.add_argument("--out", type=Path, required=True, help="the pooled folder")


def args_pooled_figures(p: argparse.ArgumentParser) -> None:
    _args_design(p)
    p.add_argument("--tables", type=Path, required=True, help="the pooled job's tables folder")
    p.add_argument("--out", type=Path, required=True, help="the pooled folder (figures/ in it)")


def args_push(p: argparse.ArgumentParser) -> None:
    p.add_argument("--base", type=Path, required=True, help="base/base_policy.json")
    p.add_argument("--run", type=Path, help="the reference run's folder (for a checkpoint)")
    p.add_argument("--data", type=Path, required=True, help="the splits folder")
    p.add_argument(
        "--purpose",
        choices=PUSH_PURPOSES,
        default="test",
        help="test (first training prompts, judged) or pilot (last ones, base policy: sizes it)",
    )
    p.add_argument("--training", required=True, help="the run's training config as JSON")
    p.add_argument("--task", required=True, help="task config as JSON")
    p.add_argument("--push", required=True, help="the push section as JSON")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", type=Path, required=True)


def args_push_report(p: argparse.ArgumentParser) -> None:
    p.add_argument("--push", type=Path, required=True, help="push.json")
    p.add_argument("--tables", type=Path, help="tables/push.csv (its folder)")
    p.add_argument("--figure", type=Path, help="figures/push.png (its folder)")
    p.add_argument("--pilot", type=Path, help="a pilot's push_pilot.csv (its table alone)")


def args_token_weights(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=Path, required=True)


def cmd_calibrate(a: argparse.Namespace) -> None:
    from grpo_ablation.training.calibrate import calibrate

    calibrate(a.configfile, a.steps, a.out, a.work)


def args_calibrate(p: argparse.ArgumentParser) -> None:
    p.add_argument("--configfile", type=Path, nargs="+", required=True)
    p.add_argument("--steps", type=int, default=20, help="training steps to time")
    p.add_argument("--out", type=Path, help="write the measurement and projection as JSON")
    p.add_argument("--work", type=Path, help="keep the calibration run here (default: a temp dir)")


def cmd_disk(a: argparse.Namespace) -> None:
    from grpo_ablation.training.retention import disk_report

    print(disk_report(a.n_params, a.dtype, a.optimizer_dtype, a.checkpoints_per_run, a.runs))


def args_disk(p: argparse.ArgumentParser) -> None:
    p.add_argument("--n-params", type=int, required=True, help="parameters of the policy")
    p.add_argument("--dtype", default="float32", help="of the saved weights and the parameters")
    p.add_argument(
        "--optimizer-dtype",
        default=None,
        help="dtype of AdamW's moments (default: --dtype, as torch's AdamW)",
    )
    p.add_argument("--checkpoints-per-run", type=int, required=True)
    p.add_argument("--runs", type=int, required=True)


def cmd_schema(a: argparse.Namespace) -> None:
    from grpo_ablation.design.schema import write_schema

    write_schema(check=a.check)


def args_schema(p: argparse.ArgumentParser) -> None:
    p.add_argument("--check", action="store_true", help="only say whether it is up to date")


def cmd_worker(a: argparse.Namespace) -> None:
    if a.action == "where":
        print(worker.socket_path())
    elif a.action == "stop":
        print("stopped" if worker.stop() else "no worker running")
    else:
        worker.serve(a.socket or worker.socket_path(), a.idle, SERVED_JOBS)


def args_worker(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "action",
        choices=("serve", "where", "stop"),
        help="serve: run the worker (normally started by the first client); where: print the "
        "socket this checkout's clients use; stop: stop this checkout's worker now",
    )
    p.add_argument("--socket", type=Path, default=None)
    p.add_argument("--idle", type=float, default=worker.idle_seconds())


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    job: Callable[[argparse.Namespace], None]
    arguments: Callable[[argparse.ArgumentParser], None]
    # The local job worker may run it (imports paid once per machine; grpo_ablation.worker),
    # where ``servable`` of the parsed arguments, if given, agrees.
    served: bool = False
    servable: Callable[[argparse.Namespace], bool] | None = None
    offline: bool = True  # False: it talks to the hub (prefetch alone)

    def parser(self, **kwargs: Any) -> argparse.ArgumentParser:
        p = argparse.ArgumentParser(prog=self.name, description=self.help, **kwargs)
        self.arguments(p)
        return p

    def may_serve(self, a: argparse.Namespace) -> bool:
        return self.served and (self.servable is None or self.servable(a))


COMMANDS: dict[str, Command] = {
    c.name: c
    for c in (
        Command(
            "prefetch",
            "fill the Hugging Face cache (runs on the submit host)",
            cmd_prefetch,
            args_prefetch,
            offline=False,
        ),
        Command("splits", "write the fixed splits and their manifest", cmd_splits, args_splits),
        Command(
            "base-policy",
            "build and warm-start the base policy (or name a hub model)",
            cmd_base_policy,
            args_base_policy,
        ),
        Command(
            "eval-tasks",
            "write the lm-eval task YAMLs for test and validation",
            cmd_eval_tasks,
            args_eval_tasks,
        ),
        Command(
            "calculations",
            "write the worked-numbers sheet (Markdown and CSV)",
            cmd_calculations,
            args_calculations,
        ),
        Command(
            "plan",
            "the power and cost of every declared hypothesis, before any run",
            cmd_plan,
            args_plan,
        ),
        Command(
            "train",
            "train one (cell, seed) run; resumes if interrupted",
            training_job.run,
            training_job.add_arguments,
            served=True,
            servable=training_job.servable,
        ),
        Command(
            "evaluate",
            "evaluate every checkpoint of a run (or the base policy)",
            evaluation_job.run,
            evaluation_job.add_arguments,
            served=True,
            servable=evaluation_job.servable,
        ),
        Command(
            "diagnostics",
            "per-step and per-run diagnostics of one run's rollout log",
            diagnostics_job.run,
            diagnostics_job.add_arguments,
            served=True,
        ),
        Command(
            "design",
            "check the config and write the design the analysis jobs read",
            cmd_design,
            args_design,
        ),
        Command(
            "select", "choose a stage's winner on the validation split", cmd_select, args_select
        ),
        # The analysis and figure jobs too: pandas, SciPy, matplotlib and seaborn cost 3-4 s of a
        # figure job's 8 here (2026-12-03).
        Command(
            "tables",
            "result and objective tables (CSV, Markdown, LaTeX)",
            cmd_tables,
            args_tables,
            served=True,
        ),
        Command("figures", "every figure (PNG and PDF)", cmd_figures, args_figures, served=True),
        Command(
            "reading",
            "the report's reading: verdicts on the hypotheses, then the effects",
            cmd_reading,
            args_reading,
            served=True,
        ),
        Command(
            "pooled",
            "tables, verdicts and reading pooled over the base-policy draws",
            cmd_pooled,
            args_pooled,
            served=True,
        ),
        Command(
            "pooled-figures",
            "figures pooled over the base-policy draws: verdicts, each stage's effects",
            cmd_pooled_figures,
            args_pooled_figures,
            served=True,
        ),
        Command(
            "study-look",
            "judge a sequential study's look, append it to its ledger, write the next look",
            cmd_study_look,
            args_study_look,
        ),
        Command(
            "push",
            "the push of every objective on the same samples",
            cmd_push,
            args_push,
            served=True,
        ),
        Command(
            "push-report",
            "table and figure of the push",
            cmd_push_report,
            args_push_report,
            served=True,
        ),
        Command(
            "token-weights",
            "figure of the worked example's per-token weights",
            cmd_token_weights,
            args_token_weights,
            served=True,
        ),
        Command(
            "calibrate",
            "time a few training steps and an evaluation here; project the DAG's cost",
            cmd_calibrate,
            args_calibrate,
        ),
        Command(
            "disk", "the disk a run's checkpoints need under each retention", cmd_disk, args_disk
        ),
        Command(
            "schema",
            "write the config schema's training and compute sections from their declarations",
            cmd_schema,
            args_schema,
        ),
        Command("worker", "the local job worker: serve, where, stop", cmd_worker, args_worker),
    )
}
# What the worker may run: the served commands' parsers and jobs.
SERVED_JOBS: dict[str, worker.Job] = {
    name: worker.Job(c.parser, c.job) for name, c in COMMANDS.items() if c.served
}


def parser() -> argparse.ArgumentParser:
    """The whole CLI: one subcommand per command."""
    p = argparse.ArgumentParser(prog="grpo-ablation", description="The rules' entry points.")
    sub = p.add_subparsers(dest="command", required=True)
    for c in COMMANDS.values():
        c.arguments(sub.add_parser(c.name, help=c.help, description=c.help))
    return p


def main(argv: list[str] | None = None) -> None:
    """``grpo-ablation <command> ...``: set up the process, then run the command in the job
    worker where it may serve it (``GRPO_WORKER``), else in this process."""
    args = sys.argv[1:] if argv is None else list(argv)
    if args and args[0] in COMMANDS:
        # Only prefetch talks to the hub; pins before torch's import (a worker started from this
        # process inherits both).
        bootstrap(offline=COMMANDS[args[0]].offline)
    a = parser().parse_args(args)
    command = COMMANDS[a.command]
    if command.may_serve(a) and worker.wanted(a.command):
        try:
            raise SystemExit(worker.run_job(a.command, args[args.index(a.command) + 1 :]))
        except worker.WorkerUnavailable as exc:
            print(f"job worker unavailable, running in this process: {exc}", file=sys.stderr)
    command.job(a)


if __name__ == "__main__":
    main()
