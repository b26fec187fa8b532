"""One evaluation job (the ``evaluate`` rule): its arguments and what it runs. The CLI and the
job worker both run it (``grpo_ablation.cli.COMMANDS``)."""

from __future__ import annotations

import argparse
import hashlib
import json
from dataclasses import asdict
from pathlib import Path

from grpo_ablation.layout import RUN_INFO, Evaluation, checkpoint


def add_arguments(p: argparse.ArgumentParser) -> None:
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--run", type=Path, help="run directory")
    group.add_argument("--base", type=Path, help="base_policy.json (evaluated as step 0)")
    p.add_argument("--tasks", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--evaluation", required=True, help="evaluation config as JSON")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument(
        "--draw", type=int, default=None, help="the base policy's draw (keys its evaluation seed)"
    )


def evaluation_seed(seed: int, *, run_seed: int | None = None, draw: int | None = None) -> int:
    """The seed one evaluation job runs with (lm-eval's four seeds, the keyed sampler's keys):
    ``evaluation.seed`` mixed with the unit evaluated, so that units do not share their
    sampled-metric noise (the analysis takes the noise of its units as independent).

    A run's evaluation (every checkpoint, the validation split, the curve policies) is keyed by its
    run seed (``design.run_seed``: a function of (draw, seed)), so the cells of one (draw, seed)
    keep common random numbers, as they do in training, and differ from every other (draw, seed);
    a base policy's by its draw. The single base policy of a config without draws keeps
    ``evaluation.seed`` itself. The mixing is a hash with a tag per kind, so a run seed never
    meets a draw's seed; 32 bits, numpy's seed range."""
    if run_seed is not None and draw is not None:
        raise ValueError("an evaluation is keyed by a run seed or by a draw, not both")
    if run_seed is None and draw is None:
        return int(seed)
    kind, value = ("run", run_seed) if run_seed is not None else ("draw", draw)
    digest = hashlib.sha256(f"evaluation,{int(seed)},{kind},{int(value)}".encode()).digest()
    return int.from_bytes(digest[:4], "little")


def servable(a: argparse.Namespace) -> bool:
    """Not with external benchmarks: lm-eval's whole task index runs in a process of its own."""
    return not json.loads(a.evaluation).get("external_benchmarks")


def run(a: argparse.Namespace) -> None:
    """Evaluate every checkpoint of a run (or the base policy as step 0) on the test split, the
    final one on validation, and (a run) the calibration's probabilities."""
    from grpo_ablation.evaluation.evaluate import EvaluationOptions, evaluate_checkpoints
    from grpo_ablation.process import bootstrap

    bootstrap(threads=a.threads)
    ev = json.loads(a.evaluation)
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
    external = ev.get("external_benchmarks") or None
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


def write_curve(run: Path, info: dict, tasks: Path, out: Path, options: dict) -> None:
    """The run's efficiency curve, ``out/curve/curve.json``: its curve policies scored on the test
    split (training.curve_points), or, where it saved none, its checkpoints' test values."""
    from grpo_ablation.evaluation.evaluate import evaluate_curve

    folder = Evaluation(out)
    policies = sorted((int(s), run / p) for s, p in info.get("curve_policies", {}).items())
    if policies:
        options = {k: v for k, v in options.items() if k != "revision"}
        evaluate_curve(policies, tasks, Path(folder.curve_folder()), **options)
        return
    summary = json.loads(Path(folder.summary("test")).read_text())["checkpoints"]
    curve = {
        "metric": summary[0]["sampled_metric"],
        "task": "checkpoints (test summary)",
        "points": [
            {"step": c["step"], "accuracy": c["sampled_accuracy"], "policy": c["checkpoint"]}
            for c in summary
        ],
        "seconds": 0.0,
    }
    Path(folder.curve_folder()).mkdir(parents=True, exist_ok=True)
    Path(folder.curve()).write_text(json.dumps(curve, indent=2) + "\n")
