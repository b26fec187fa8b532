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
    task = json.loads(a.task)
    if task.get("kind", "addition") == "math":
        from grpo_ablation import math_task

        # The hub data set is read here only: HF_DATASETS_OFFLINE is lifted for this command.
        os.environ.pop("HF_DATASETS_OFFLINE", None)
        os.environ.pop("HF_HUB_OFFLINE", None)
        manifest = math_task.write_splits(math_task.MathTaskConfig.from_dict(task), a.out)
    else:
        from grpo_ablation.task import TaskConfig, write_splits

        manifest = write_splits(TaskConfig.from_dict(_task_fields(task)), a.out)
    print(json.dumps(manifest, indent=2))


def _task_fields(task: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in task.items() if k != "kind"}


def cmd_base_policy(a: argparse.Namespace) -> None:
    base = json.loads(a.base)
    kind = base.pop("kind", "local")
    a.out.mkdir(parents=True, exist_ok=True)
    if kind == "hub":
        info = {"kind": "hub", "model": base["name"], "stats": None}
    else:
        from grpo_ablation.base_policy import BasePolicyConfig, warm_start

        _threads(a.threads)
        stats = warm_start(BasePolicyConfig.from_dict(base), a.splits, a.out / "model")
        info = {"kind": "local", "model": str(a.out / "model"), "stats": stats}
    (a.out / "base_policy.json").write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")


def _base_model(path: Path) -> str:
    return json.loads(path.read_text())["model"]


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
    from grpo_ablation.settings import from_dict
    from grpo_ablation.train import TrainingConfig, train

    _threads(a.threads)
    cfg = from_dict(TrainingConfig, json.loads(a.training), "training")
    task = json.loads(a.task)
    reward = None  # train() builds the addition reward from the task fields
    if task.get("kind", "addition") == "math":
        from grpo_ablation.math_task import MathTaskConfig, make_reward_function

        reward = make_reward_function(MathTaskConfig.from_dict(task))
        # A hub base model is fetched by the training job (the cluster has hub access).
        os.environ.pop("HF_HUB_OFFLINE", None)
    train(Path(_base_model(a.base)), a.data, a.out, cfg, _task_fields(task),
          reward_func=reward, callbacks=_fault_callbacks())  # fmt: skip


def cmd_eval_tasks(a: argparse.Namespace) -> None:
    from grpo_ablation.evaluate import write_task

    ev = json.loads(a.evaluation)
    for split in ("test", "validation"):
        write_task(a.data / f"{split}.jsonl", a.tasks / split, f"arith_{split}",
                   ev["max_gen_toks"], ev["k"], ev["temperature"])  # fmt: skip


def _fail_first_attempt() -> None:
    marker = os.environ.get(FAIL_EVAL_ONCE_ENV)
    if marker and not Path(marker).exists():
        Path(marker).write_text("failed once\n")
        raise RuntimeError(f"injected evaluation failure ({FAIL_EVAL_ONCE_ENV}={marker})")


def cmd_evaluate(a: argparse.Namespace) -> None:
    from grpo_ablation.evaluate import evaluate_checkpoints

    _fail_first_attempt()
    _threads(a.threads)
    ev = json.loads(a.evaluation)
    if a.base:
        checkpoints = [(0, Path(_base_model(a.base)))]
    else:
        info = json.loads((a.run / "run_info.json").read_text())
        checkpoints = [(s, a.run / "checkpoints" / f"checkpoint-{s}") for s in info["checkpoints"]]
    options = dict(batch_size=ev["batch_size"], device=ev["device"], seed=ev["seed"], limit=ev["limit"])
    if ev.get("lm_eval_tasks"):
        from grpo_ablation.math_task import evaluate_builtin_tasks

        # Standard tasks (gsm8k, minerva_math) fetch their data and models from the hub.
        os.environ.pop("HF_HUB_OFFLINE", None)
        os.environ.pop("HF_DATASETS_OFFLINE", None)
        named = [(s, str(p)) for s, p in checkpoints]
        evaluate_builtin_tasks(named, ev["lm_eval_tasks"], a.out / "test", **options)
        # Built-in tasks have test sets only: the validation record says so instead of scoring
        # the math validation split with the addition task's answer regex.
        (a.out / "validation").mkdir(parents=True, exist_ok=True)
        note = {"step": checkpoints[-1][0], "greedy_accuracy": None,
                "note": "evaluation.lm_eval_tasks: no validation evaluation"}  # fmt: skip
        (a.out / "validation" / "summary.json").write_text(json.dumps({"checkpoints": [note]}) + "\n")
        return
    evaluate_checkpoints(checkpoints, a.tasks / "test", a.out / "test", **options)
    evaluate_checkpoints(checkpoints[-1:], a.tasks / "validation", a.out / "validation", **options)


def cmd_select(a: argparse.Namespace) -> None:
    from grpo_ablation.pipeline import select_winner

    by_value: dict[str, list[dict[str, Any]]] = {}
    for path in a.inputs:
        std = next(seg.split("=", 1)[1] for seg in Path(path).parts if seg.startswith("std="))
        final = json.loads(Path(path).read_text())["checkpoints"][-1]
        by_value.setdefault(std, []).append(final)
    choice = select_winner(by_value, a.metric)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(choice, indent=2) + "\n")
    print(json.dumps(choice))


def cmd_calculations(a: argparse.Namespace) -> None:
    from grpo_ablation.calculations import write_sheet

    for path in write_sheet(a.out):
        print(path)


def cmd_diagnostics(a: argparse.Namespace) -> None:
    from grpo_ablation.diagnostics import write_run_diagnostics

    for path in write_run_diagnostics(a.run, a.out):
        print(path)


def _report_inputs(a: argparse.Namespace) -> tuple[dict[str, Any], Path | None]:
    selection = a.selection if a.selection and a.selection.exists() else None
    return json.loads(a.config), selection


def cmd_tables(a: argparse.Namespace) -> None:
    from grpo_ablation.tables import write_tables

    config, selection = _report_inputs(a)
    for path in write_tables(a.exp, config, selection, a.out):
        print(path)


def cmd_figures(a: argparse.Namespace) -> None:
    from grpo_ablation.figures import write_figures

    config, selection = _report_inputs(a)
    for path in write_figures(a.exp, config, selection, a.out, a.stage):
        print(path)


def cmd_token_weights(a: argparse.Namespace) -> None:
    from grpo_ablation.figures import write_weight_figure

    for path in write_weight_figure(a.out):
        print(path)


def main(argv: list[str] | None = None) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    parser = argparse.ArgumentParser(prog="grpo-ablation", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("splits", help="write the fixed splits and their manifest")
    p.add_argument("--task", required=True, help="task config as JSON")
    p.add_argument("--out", type=Path, required=True)
    p.set_defaults(func=cmd_splits)

    p = sub.add_parser("base-policy", help="build and warm-start the base policy (or name a hub model)")
    p.add_argument("--base", required=True, help="base_policy config as JSON")
    p.add_argument("--splits", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--threads", type=int, default=1)
    p.set_defaults(func=cmd_base_policy)

    p = sub.add_parser("train", help="train one (cell, seed) run; resumes if interrupted")
    p.add_argument("--base", type=Path, required=True, help="base_policy.json")
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--training", required=True, help="TrainingConfig as JSON")
    p.add_argument("--task", default="{}", help="task config as JSON (the reward)")
    p.add_argument("--threads", type=int, default=1)
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("eval-tasks", help="write the lm-eval task YAMLs for test and validation")
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--tasks", type=Path, required=True)
    p.add_argument("--evaluation", required=True, help="evaluation config as JSON")
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

    p = sub.add_parser("select", help="choose the stage-1 winner on the validation split")
    p.add_argument("--metric", required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("inputs", nargs="+")
    p.set_defaults(func=cmd_select)

    p = sub.add_parser("calculations", help="write the worked-numbers sheet (Markdown and CSV)")
    p.add_argument("out", type=Path)
    p.set_defaults(func=cmd_calculations)

    p = sub.add_parser("diagnostics", help="per-step and per-run diagnostics of one run's rollout log")
    p.add_argument("--run", type=Path, required=True, help="run directory")
    p.add_argument("--out", type=Path, required=True)
    p.set_defaults(func=cmd_diagnostics)

    for name, func, what in (("tables", cmd_tables, "result and objective tables (CSV, Markdown, LaTeX)"),
                             ("figures", cmd_figures, "every figure (PNG and PDF)")):  # fmt: skip
        p = sub.add_parser(name, help=what)
        p.add_argument("--exp", type=Path, required=True, help="experiment directory")
        p.add_argument("--config", required=True, help="config sections seeds, stages, training as JSON")
        p.add_argument("--selection", type=Path, help="selection/stage1.json (when stage 2 needs it)")
        p.add_argument("--out", type=Path, required=True)
        if name == "figures":
            p.add_argument("--stage", help="only this stage's figures, written directly under --out")
        p.set_defaults(func=func)

    p = sub.add_parser("token-weights", help="figure of the worked example's per-token weights")
    p.add_argument("--out", type=Path, required=True)
    p.set_defaults(func=cmd_token_weights)

    a = parser.parse_args(argv)
    # Built-in lm-eval tasks fetch from the hub, which the worker's libraries were imported to
    # refuse (they read HF_*_OFFLINE once, at import): those evaluate in their own process.
    if a.command == "evaluate" and not json.loads(a.evaluation).get("lm_eval_tasks"):
        from grpo_ablation import eval_worker

        if eval_worker.wanted():
            try:
                raise SystemExit(eval_worker.run_job(sys.argv[1:] if argv is None else argv))
            except eval_worker.WorkerUnavailable as exc:
                print(f"evaluation worker unavailable, evaluating in this process: {exc}",
                      file=sys.stderr)  # fmt: skip
    a.func(a)


if __name__ == "__main__":
    sys.exit(main())
