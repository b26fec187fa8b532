"""Entry points the Snakemake rules call: ``python -m grpo_ablation.cli <command> ...``.

Each command is a thin adapter from files and JSON arguments to a library function.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any


def _threads(n: int | None) -> None:
    if n:
        import torch

        torch.set_num_threads(n)


def cmd_splits(a: argparse.Namespace) -> None:
    from grpo_ablation.tasks import get_task

    manifest = get_task(json.loads(a.task)).write_splits(a.out)
    print(json.dumps(manifest, indent=2))


def cmd_prefetch(a: argparse.Namespace) -> None:
    """Fill the Hugging Face cache on the submit host: model, data set, built-in benchmark data."""
    from grpo_ablation.policy.prefetch import prefetch

    record = prefetch(json.loads(a.config))
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    print(json.dumps(record, indent=2))


def cmd_base_policy(a: argparse.Namespace) -> None:
    from grpo_ablation.policy.pretrained import build_base_policy
    from grpo_ablation.tasks import get_task

    a.out.mkdir(parents=True, exist_ok=True)
    _threads(a.threads)
    info = build_base_policy(
        json.loads(a.base),
        get_task(json.loads(a.task)),
        a.splits,
        a.out / "model",
        json.loads(a.compute),
    )
    (a.out / "base_policy.json").write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")


def _base_model(path: Path) -> tuple[str, str | None]:
    """(model directory or hub id, hub revision) of the base policy."""
    info = json.loads(path.read_text())
    return info["model"], info.get("revision")


# Fault-injection hooks for tests/test_faults.py (unset in normal runs): slow every training step
# so a test can kill the job between checkpoints; fail the first evaluation attempt once.
STEP_SLEEP_ENV = "GRPO_FAULT_STEP_SLEEP"
FAIL_EVAL_ONCE_ENV = "GRPO_FAULT_FAIL_EVAL_ONCE"


def _fault_callbacks() -> list[Any]:
    seconds = float(os.environ.get(STEP_SLEEP_ENV) or 0)
    if not seconds:
        return []
    import time

    from transformers import TrainerCallback

    class Sleep(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            time.sleep(seconds)

    return [Sleep()]


def cmd_train(a: argparse.Namespace) -> None:
    from grpo_ablation.compute import resolve_device
    from grpo_ablation.settings import from_dict
    from grpo_ablation.training.launch import relaunch
    from grpo_ablation.training.train import TrainingConfig, train

    compute = json.loads(a.compute)
    processes = int(compute.get("processes_per_train_job", 1))
    # N > 1: this process becomes `accelerate launch` of the same command (N copies of it).
    relaunch(
        [sys.argv[0], *sys.argv[1:]],
        processes,
        compute.get("accelerate_config", "ddp"),
        resolve_device(compute["device"]),
        compute["dtype"],
    )
    # The job's threads are shared by its processes.
    _threads(max(1, a.threads // int(os.environ.get("WORLD_SIZE", 1))))
    cfg = from_dict(TrainingConfig, json.loads(a.training), "training")
    model, revision = _base_model(a.base)
    train(
        model,
        a.data,
        a.out,
        cfg,
        json.loads(a.task),
        callbacks=_fault_callbacks(),
        device=compute["device"],
        dtype=compute["dtype"],
        revision=revision,
        keep_optimizer_state=compute["keep_optimizer_state"],
    )


def cmd_eval_tasks(a: argparse.Namespace) -> None:
    from grpo_ablation.evaluation.evaluate import write_split_tasks
    from grpo_ablation.tasks import get_task

    task = get_task(json.loads(a.task))
    write_split_tasks(
        a.data, a.tasks, task.kind, json.loads(a.evaluation), task.answer_rule, task.chat_template
    )


def _fail_first_attempt() -> None:
    marker = os.environ.get(FAIL_EVAL_ONCE_ENV)
    if marker and not Path(marker).exists():
        Path(marker).write_text("failed once\n")
        raise RuntimeError(f"injected evaluation failure ({FAIL_EVAL_ONCE_ENV}={marker})")


def cmd_evaluate(a: argparse.Namespace) -> None:
    from grpo_ablation.compute import resolve_device
    from grpo_ablation.evaluation.evaluate import evaluate_checkpoints

    _fail_first_attempt()
    _threads(a.threads)
    ev = json.loads(a.evaluation)
    revision = None
    if a.base:
        model, revision = _base_model(a.base)
        checkpoints: list[tuple[int, Path | str]] = [(0, model)]
    else:
        info = json.loads((a.run / "run_info.json").read_text())
        checkpoints = [(s, a.run / "checkpoints" / f"checkpoint-{s}") for s in info["checkpoints"]]
    options = dict(
        batch_size=ev["batch_size"],
        device=resolve_device(ev["device"]),
        dtype=ev["dtype"],
        seed=ev["seed"],
        limit=ev["limit"],
        revision=revision,
        backend=ev.get("backend", "hf"),
    )
    # External benchmarks (lm-eval's own gsm8k, ...) score the test-split checkpoints only.
    evaluate_checkpoints(
        checkpoints,
        a.tasks / "test",
        a.out / "test",
        external=ev.get("external_benchmarks") or None,
        **options,
    )
    evaluate_checkpoints(checkpoints[-1:], a.tasks / "validation", a.out / "validation", **options)


def cmd_select(a: argparse.Namespace) -> None:
    from grpo_ablation import pipeline
    from grpo_ablation.axes import BY_NAME

    config = json.loads(a.config)
    stage = pipeline.get_stage(config, a.stage)
    by_value: dict[str, list[dict[str, Any]]] = {}
    for path in a.inputs:
        cell = pipeline.parse_cell(config, path.split("/eval/", 1)[1].split("/seed=", 1)[0])
        final = json.loads(Path(path).read_text())["checkpoints"][-1]
        by_value.setdefault(BY_NAME[stage.primary].spell(cell[stage.primary]), []).append(final)
    choice = pipeline.select_winner(by_value, stage.selection_metric, stage.name)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(choice, indent=2) + "\n")
    print(json.dumps(choice))


def cmd_calculations(a: argparse.Namespace) -> None:
    from grpo_ablation.objective.calculations import write_sheet

    for path in write_sheet(a.out):
        print(path)


def cmd_diagnostics(a: argparse.Namespace) -> None:
    from grpo_ablation.analysis.diagnostics import write_run_diagnostics

    for path in write_run_diagnostics(a.run, a.out):
        print(path)


def _report_inputs(a: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    from grpo_ablation.pipeline import read_winners

    return json.loads(a.config), read_winners([p for p in a.selection if p.exists()])


def cmd_tables(a: argparse.Namespace) -> None:
    from grpo_ablation.analysis.tables import write_tables

    config, winners = _report_inputs(a)
    for path in write_tables(a.exp, config, winners, a.out):
        print(path)


def cmd_figures(a: argparse.Namespace) -> None:
    from grpo_ablation.analysis.figures import write_figures

    config, winners = _report_inputs(a)
    for path in write_figures(a.exp, config, winners, a.out, a.stage):
        print(path)


def cmd_reading(a: argparse.Namespace) -> None:
    from grpo_ablation.analysis.tables import write_reading

    print(write_reading(a.effects, a.out))


def cmd_token_weights(a: argparse.Namespace) -> None:
    from grpo_ablation.analysis.figures import write_weight_figure

    for path in write_weight_figure(a.out):
        print(path)


def main(argv: list[str] | None = None) -> None:
    # Compute jobs work offline, from the cache the prefetch rule filled (a user's own setting
    # wins; nothing here ever unsets it). Only `prefetch` talks to the hub.
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] != "prefetch":
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    parser = argparse.ArgumentParser(prog="grpo-ablation", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("splits", help="write the fixed splits and their manifest")
    p.add_argument("--task", required=True, help="task config as JSON")
    p.add_argument("--out", type=Path, required=True)
    p.set_defaults(func=cmd_splits)

    p = sub.add_parser("prefetch", help="fill the Hugging Face cache (runs on the submit host)")
    p.add_argument(
        "--config", required=True, help="sections task, base_policy, evaluation, stand_in as JSON"
    )
    p.add_argument("--out", type=Path, required=True, help="the prefetch record (JSON)")
    p.set_defaults(func=cmd_prefetch)

    p = sub.add_parser(
        "base-policy", help="build and warm-start the base policy (or name a hub model)"
    )
    p.add_argument("--base", required=True, help="base_policy config as JSON")
    p.add_argument("--task", required=True, help="task config as JSON")
    p.add_argument(
        "--compute", default='{"device": "auto", "dtype": "float32"}', help="compute config as JSON"
    )
    p.add_argument("--splits", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--threads", type=int, default=1)
    p.set_defaults(func=cmd_base_policy)

    p = sub.add_parser("train", help="train one (cell, seed) run; resumes if interrupted")
    p.add_argument("--base", type=Path, required=True, help="base_policy.json")
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--training", required=True, help="TrainingConfig as JSON")
    p.add_argument("--task", default="{}", help="task config as JSON (prompts and reward)")
    p.add_argument("--compute", required=True, help="device, dtype, keep_optimizer_state as JSON")
    p.add_argument("--threads", type=int, default=1)
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("eval-tasks", help="write the lm-eval task YAMLs for test and validation")
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--tasks", type=Path, required=True)
    p.add_argument("--evaluation", required=True, help="evaluation config as JSON")
    p.add_argument("--task", required=True, help="task config as JSON (answer rule, chat template)")
    p.set_defaults(func=cmd_eval_tasks)

    p = sub.add_parser("evaluate", help="evaluate every checkpoint of a run (or the base policy)")
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--run", type=Path, help="run directory")
    group.add_argument("--base", type=Path, help="base_policy.json (evaluated as step 0)")
    p.add_argument("--tasks", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--evaluation", required=True, help="evaluation config as JSON")
    p.add_argument("--threads", type=int, default=1)
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("select", help="choose a stage's winner on the validation split")
    p.add_argument("--stage", required=True)
    p.add_argument("--config", required=True, help="config sections stages, training as JSON")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("inputs", nargs="+")
    p.set_defaults(func=cmd_select)

    p = sub.add_parser("calculations", help="write the worked-numbers sheet (Markdown and CSV)")
    p.add_argument("out", type=Path)
    p.set_defaults(func=cmd_calculations)

    p = sub.add_parser(
        "diagnostics", help="per-step and per-run diagnostics of one run's rollout log"
    )
    p.add_argument("--run", type=Path, required=True, help="run directory")
    p.add_argument("--out", type=Path, required=True)
    p.set_defaults(func=cmd_diagnostics)

    for name, func, what in (
        ("tables", cmd_tables, "result and objective tables (CSV, Markdown, LaTeX)"),
        ("figures", cmd_figures, "every figure (PNG and PDF)"),
    ):
        p = sub.add_parser(name, help=what)
        p.add_argument("--exp", type=Path, required=True, help="experiment directory")
        p.add_argument(
            "--config", required=True, help="config sections seeds, stages, training as JSON"
        )
        p.add_argument(
            "--selection",
            type=Path,
            action="append",
            default=[],
            help="selection/<stage>.json of a stage whose winner another stage takes (repeatable)",
        )
        p.add_argument("--out", type=Path, required=True)
        if name == "figures":
            p.add_argument(
                "--stage", help="only this stage's figures, written directly under --out"
            )
        p.set_defaults(func=func)

    p = sub.add_parser(
        "reading", help="the report's reading of the effects (which intervals exclude zero)"
    )
    p.add_argument("--effects", type=Path, nargs="+", required=True, help="stages' effects.csv")
    p.add_argument("--out", type=Path, required=True, help="the reading (reStructuredText)")
    p.set_defaults(func=cmd_reading)

    p = sub.add_parser("token-weights", help="figure of the worked example's per-token weights")
    p.add_argument("--out", type=Path, required=True)
    p.set_defaults(func=cmd_token_weights)

    a = parser.parse_args(argv)
    # External benchmarks load lm-eval's whole task index: they evaluate in their own process.
    if a.command == "evaluate" and not json.loads(a.evaluation).get("external_benchmarks"):
        from grpo_ablation.evaluation import worker as eval_worker

        if eval_worker.wanted():
            try:
                raise SystemExit(eval_worker.run_job(sys.argv[1:] if argv is None else argv))
            except eval_worker.WorkerUnavailable as exc:
                print(
                    f"evaluation worker unavailable, evaluating in this process: {exc}",
                    file=sys.stderr,
                )
    a.func(a)


if __name__ == "__main__":
    sys.exit(main())
