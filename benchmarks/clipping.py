"""Population against sample std with and without gradient clipping, on the default's draws.

    python -m benchmarks.clipping --draws 9 10 --work /tmp/clipping

For each draw: the default's warm start (``config/config.yaml``, that draw's seed), then the
default's baseline cell trained for its 100 steps with sample and with population std, once
clipped at the Trainer's 1.0 and once unclipped (``training.max_grad_norm: 0``), each checkpoint
evaluated as the evaluation job does (greedy and exact sampled accuracy on the test split). It
prints, per draw and clipping: the steps where clipping bound (sample, population), the share of
identical completions and the first step where the two runs' completions part, the final weights'
largest difference, and population − sample on each accuracy. Without clipping the two
objectives differ by a constant factor Adam absorbs up to its ε; with it, by a factor of each
step's own. One seed a draw; the runs of a draw share their keyed random numbers.
"""

from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from benchmarks.gpu_check import ROOT, completions, metrics, prepare_base, train, weight_difference

SCALINGS = ("sample", "population")
BOUNDS = (1.0, 0.0)


def evaluate(config: dict[str, Any], base: Path, run: Path) -> dict[str, float]:
    """The run's last checkpoint evaluated on the test split as the evaluation job does."""
    from grpo_ablation.design.checks import evaluation_config
    from grpo_ablation.evaluation.evaluate import EvaluationOptions, evaluate_checkpoints
    from grpo_ablation.evaluation.task_folders import write_split_tasks
    from grpo_ablation.layout import STEP_RESULTS, checkpoint_step, step_folder
    from grpo_ablation.tasks import get_task
    from grpo_ablation.training.train import last_checkpoint

    ev, task = evaluation_config(config), get_task(config["task"])
    tasks = base / "tasks"
    if not tasks.exists():
        write_split_tasks(base / "data", tasks, task.kind, ev, task.answer_rule, task.chat_template)
    checkpoint = last_checkpoint(run)
    step = checkpoint_step(checkpoint)
    evaluate_checkpoints(
        [(step, checkpoint)], tasks / "test", run / "eval", EvaluationOptions.of(ev)
    )
    result = json.loads((step_folder(run / "eval", step) / STEP_RESULTS).read_text())
    return {k: v for k, v in result.items() if k.endswith("_accuracy") and isinstance(v, float)}


def draw_runs(config: dict[str, Any], draw: int, work: Path) -> dict[str, Any]:
    from grpo_ablation.design.ablation import Design
    from grpo_ablation.process import in_own_process

    config = {**config, "base_policy": {**config["base_policy"], "draws": [draw]}}
    in_own_process(prepare_base, config, work, None)
    design = Design.of(config)
    reference = design.training_config(design.baseline(), seed=0, draw=draw)
    runs = {(s, c): work / f"std={s}" / f"max_grad_norm={c:g}" for s in SCALINGS for c in BOUNDS}
    with ThreadPoolExecutor(max_workers=2) as pool:
        for f in [
            pool.submit(
                train, work, out, replace(reference, std_scaling=s, max_grad_norm=c), config
            )
            for (s, c), out in runs.items()
        ]:
            f.result()
    accuracy = {key: evaluate(config, work, out) for key, out in runs.items()}
    report: dict[str, Any] = {"draw": draw}
    for c in BOUNDS:
        a, b = (runs[s, c] for s in SCALINGS)
        ra, rb = completions(a), completions(b)
        same = ra["completion"].astype(str).values == rb["completion"].astype(str).values
        parted = ra.loc[~same, "step"]
        report[f"max_grad_norm={c:g}"] = {
            "clipped_steps": {
                s: sum(m["grad_norm"] > c for m in metrics(runs[s, c])) if c else 0
                for s in SCALINGS
            },
            "identical_completions": float(same.mean()),
            "first_step_apart": int(parted.min()) if len(parted) else None,
            "max_abs_weight_difference": weight_difference(
                *(r / "checkpoints" / f"checkpoint-{reference.max_steps}" for r in (a, b))
            ),
            "population_minus_sample": {
                k: accuracy["population", c][k] - accuracy["sample", c][k]
                for k in accuracy["sample", c]
            },
            "accuracy": {s: accuracy[s, c] for s in SCALINGS},
        }
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, nargs="+", default=[9, 10])
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--out", type=Path)
    a = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "src"))
    from grpo_ablation.design.schema import load_config

    a.work.mkdir(parents=True, exist_ok=True)
    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    (a.work / "config.yaml").write_text(yaml.safe_dump(config))
    config = load_config(a.work / "config.yaml")
    reports = [draw_runs(config, d, a.work / f"draw={d}") for d in a.draws]
    text = json.dumps(reports, indent=2)
    print(text)
    if a.out:
        a.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
