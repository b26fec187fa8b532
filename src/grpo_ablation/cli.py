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
    from grpo_ablation.task import TaskConfig, write_splits

    manifest = write_splits(TaskConfig.from_dict(_task_fields(json.loads(a.task))), a.out)
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


def cmd_train(a: argparse.Namespace) -> None:
    from grpo_ablation.settings import from_dict
    from grpo_ablation.train import TrainingConfig, train

    _threads(a.threads)
    cfg = from_dict(TrainingConfig, json.loads(a.training), "training")
    train(Path(_base_model(a.base)), a.data, a.out, cfg, _task_fields(json.loads(a.task)))


def cmd_eval_tasks(a: argparse.Namespace) -> None:
    from grpo_ablation.evaluate import write_task

    ev = json.loads(a.evaluation)
    for split in ("test", "validation"):
        write_task(a.data / f"{split}.jsonl", a.tasks / split, f"arith_{split}",
                   ev["max_gen_toks"], ev["k"], ev["temperature"])  # fmt: skip


def cmd_evaluate(a: argparse.Namespace) -> None:
    from grpo_ablation.evaluate import evaluate_checkpoints

    _threads(a.threads)
    ev = json.loads(a.evaluation)
    if a.base:
        checkpoints = [(0, Path(_base_model(a.base)))]
    else:
        info = json.loads((a.run / "run_info.json").read_text())
        checkpoints = [(s, a.run / "checkpoints" / f"checkpoint-{s}") for s in info["checkpoints"]]
    options = dict(batch_size=ev["batch_size"], device=ev["device"], seed=ev["seed"], limit=ev["limit"])
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

    a = parser.parse_args(argv)
    a.func(a)


if __name__ == "__main__":
    sys.exit(main())
