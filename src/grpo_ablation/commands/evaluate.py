"""``grpo-ablation evaluate``: every checkpoint of a run (or the base policy), the ``evaluate``
rule's job."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

from grpo_ablation.commands import json_value, threads_argument
from grpo_ablation.evaluation.seeding import evaluation_seed
from grpo_ablation.layout import RUN_INFO, Evaluation, checkpoint

HELP = "evaluate every checkpoint of a run (or the base policy)"
SERVED = True


def add_arguments(p: argparse.ArgumentParser) -> None:
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--run", type=Path, help="run directory")
    group.add_argument("--base", type=Path, help="base_policy.json (evaluated as step 0)")
    p.add_argument("--tasks", type=Path, required=True, help="the lm-eval tasks' folder")
    p.add_argument(
        "--out", type=Path, required=True, help="the evaluation folder (a summary per split)"
    )
    p.add_argument(
        "--evaluation", type=json_value, required=True, help="evaluation config as JSON or a file"
    )
    threads_argument(p)
    p.add_argument(
        "--draw", type=int, default=None, help="the base policy's draw (keys its evaluation seed)"
    )


def servable(a: argparse.Namespace) -> bool:
    """Not with external benchmarks: lm-eval's whole task index runs in a process of its own."""
    return not a.evaluation["external_benchmarks"]


def run(a: argparse.Namespace) -> None:
    """Evaluate every checkpoint of a run (or the base policy as step 0) on the test split, the
    final one on validation, and (a run) the calibration's probabilities."""
    from grpo_ablation.evaluation.evaluate import (
        EvaluationOptions,
        evaluate_checkpoints,
        write_curve,
    )
    from grpo_ablation.process import bootstrap

    bootstrap(threads=a.threads)
    ev = a.evaluation
    revision = None
    if a.base:
        info = json.loads(a.base.read_text())
        model, revision = info["model"], info.get("revision")
        checkpoints: list[tuple[int, Path | str]] = [(0, model)]
        seed = evaluation_seed(ev["seed"], draw=a.draw)
    else:
        info = json.loads((a.run / RUN_INFO).read_text())
        checkpoints = [(s, checkpoint(a.run, s)) for s in info["checkpoints"]]
        seed = evaluation_seed(ev["seed"], run_seed=info["training_config"]["seed"])
    options = EvaluationOptions.of(ev, seed=seed, revision=revision)
    folder = Evaluation(a.out)
    # External benchmarks (lm-eval's own gsm8k, ...) score the test-split checkpoints only.
    external = ev["external_benchmarks"] or None
    test, validation = (Path(folder.split(s)) for s in ("test", "validation"))
    evaluate_checkpoints(checkpoints, a.tasks / "test", test, options, external=external)
    evaluate_checkpoints(checkpoints[-1:], a.tasks / "validation", validation, options)
    if a.run:  # P(correct) of the prompts each saved policy was sampled on in training
        from grpo_ablation.evaluation.calibration import measure

        settings = asdict(options)
        limit = settings.pop("limit")
        measure(a.run, Path(info["base_model"]), a.tasks, a.out, **settings)
        # the curve on the rows the checkpoints and the base policy were scored on
        write_curve(a.run, info, a.tasks / "test", a.out, {**settings, "limit": limit})
