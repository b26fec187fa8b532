"""The GPU check: what the first GPU machine lent to the project must show, in one command.

    make gpu-check                          # on a node with one GPU, the GPU pins and envs/smollm2.txt
    python -m benchmarks.gpu_check --cpu    # the same checks here (config/smollm2.yaml on CPU)

On the SmolLM2 preset at its GPU size (``config/smollm2.yaml`` then ``config/smollm2_gpu.yaml``,
merged key by key as Snakemake merges them), in a work folder of its own:

1. ``environment``: GPU, driver, torch and its CUDA build, the pinned libraries' versions.
2. ``calibration``: ``grpo-ablation calibrate``'s measurement for ``--steps`` steps (seconds per
   training step at the preset's shape, its evaluation, peak memory of the kind the device has,
   the checkpoint's dtypes) and the jobs it would refuse to submit.
3. ``same_step_zero``: two cells of one seed draw the same step-0 completions (keyed sampling).
4. ``kill_and_resume``: a training job killed after its first checkpoint resumes to the end; its
   rollouts and final weights are compared with the uninterrupted run of the same cell and seed.
5. ``evaluation_twice``: a checkpoint evaluated twice gives a byte-identical results.json.

Training runs as the train job runs it (``grpo-ablation train`` in a process of its own), so the
check's process holds no GPU memory while another trains. Evaluation is limited to one batch of
rows per task (``evaluation.limit`` = its batch size) so the whole check stays under 10 minutes
on one GPU. One JSON (``--out``) holds every figure; the exit status is non-zero when a check
fails. ``--cpu`` runs everything on the CPU (the CPU preset alone unless ``--configfile`` says
otherwise): the test suite runs it on the cluster-shaped CPU config, so a GPU machine runs it
without edits. ``--vllm`` generates and evaluates with vLLM (colocated in training; evaluation
batch size ``auto``), the GPU environment's path (``--out`` another file). Identical step-0
completions across cells and byte-identical evaluations are required everywhere (common random
numbers and the evaluation's reproducibility rest on them); the resumed run's bitwise identity
with the uninterrupted one is required on CPU and reported on a GPU (kernels may differ between
runs). It needs the pinned libraries, not the installed package: run from the checkout, it puts
``src`` on the path of itself and of the jobs it starts (the GPU environment, envs/grpo-gpu.yaml,
does not install the project).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, replace
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
GPU_CONFIGS = [Path("config/smollm2.yaml"), Path("config/smollm2_gpu.yaml")]
# vLLM for generation in training (TRL colocate) and for evaluation, as a config would ask.
VLLM = {
    "training": {"generation_backend": "vllm"},
    "evaluation": {"backend": "vllm", "batch_size": "auto"},
}
CPU_CONFIGS = [Path("config/smollm2.yaml")]
PACKAGES = ("torch", "transformers", "trl", "accelerate", "lm-eval", "datasets", "vllm", "gguf")
KILL_STEPS, KILL_AT = 3, 1  # the resumed run's length and the checkpoint it is killed after


def merged_config(paths: list[Path], cpu: bool, vllm: bool = False) -> dict[str, Any]:
    """The configs merged as Snakemake merges ``--configfile A B`` (the later wins, key by key),
    with the device forced to the CPU under ``--cpu`` and vLLM turned on under ``vllm``."""
    from snakemake.utils import update_config

    config: dict[str, Any] = {}
    for path in paths:
        update_config(config, yaml.safe_load(Path(path).read_text()))
    if cpu:
        config.setdefault("compute", {})["device"] = "cpu"
    if vllm:
        update_config(config, VLLM)
    # One batch of rows per task: the check times a batch, it does not measure accuracy (32 rows
    # where the engine sizes its own batches).
    ev = config.setdefault("evaluation", {})
    size = ev.get("batch_size", 32)
    ev["limit"] = size if isinstance(size, int) else 32
    return config


def environment(device: str, dtype: str) -> dict[str, Any]:
    """What ran the check: the job record's device fields and every pinned library's version."""
    from grpo_ablation.compute import device_info

    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return {**device_info(device, dtype), "python": platform.python_version(), **versions}


def train_job(base: str, data: Path, out: Path, training: Any, config: dict) -> subprocess.Popen:
    """One training run as the train rule runs it: ``grpo-ablation train`` in its own process."""
    cmd = [
        sys.executable,
        "-m",
        "grpo_ablation.cli",
        "train",
        "--base",
        base,
        "--data",
        str(data),
        "--out",
        str(out),
        "--training",
        json.dumps(asdict(training)),
        "--task",
        json.dumps(config["task"]),
        "--compute",
        json.dumps(config["compute"]),
        "--threads",
        str(config.get("threads_per_job", 1)),
    ]
    log = (out.parent / f"{out.name}.log").open("w")
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)


def finish(proc: subprocess.Popen, what: str) -> None:
    if proc.wait() != 0:
        raise RuntimeError(
            f"{what} failed (exit {proc.returncode}); see its .log in the work folder"
        )


def completions(run: Path, step: int | None = None) -> list[tuple]:
    """Every rollout of a run (of one step) as (step, group, completion index, text)."""
    from grpo_ablation.training.rollout_log import read_rollouts

    rows = read_rollouts(run / "rollouts")
    if step is not None:
        rows = rows[rows["step"] == step]
    cols = ["step", "group_index", "completion_index", "completion"]
    return [tuple(r) for r in rows[cols].itertuples(index=False)]


def weight_difference(a: Path, b: Path) -> float:
    """The largest absolute difference between two checkpoints' weights (0.0: identical)."""
    from safetensors.torch import load_file

    wa, wb = load_file(a / "model.safetensors"), load_file(b / "model.safetensors")
    if wa.keys() != wb.keys():
        return float("inf")
    return max(float((wa[k].float() - wb[k].float()).abs().max()) for k in wa)


def kill_after_checkpoint(proc: subprocess.Popen, run: Path, step: int) -> bool:
    """SIGKILL the job once checkpoint ``step`` is complete; False if it ended before."""
    done = run / "checkpoints" / f"checkpoint-{step}" / "trainer_state.json"
    while not _complete_json(done):  # written in place: exists before it is whole
        if proc.poll() is not None:
            return False
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return not (run / "run_info.json").exists()


def _complete_json(path: Path) -> bool:
    try:
        json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return False
    return True


def run_checks(config: dict[str, Any], work: Path, steps: int, exact: bool) -> dict[str, Any]:
    """Every check of the module docstring in ``work``; ``exact``: bitwise identity required."""
    from grpo_ablation.compute import resolve_device
    from grpo_ablation.design.ablation import Design
    from grpo_ablation.design.checks import evaluation_config
    from grpo_ablation.evaluation.evaluate import EvaluationOptions, evaluate_checkpoints
    from grpo_ablation.layout import BASE_INFO
    from grpo_ablation.training.calibrate import dag_shape, measure, project, refusals
    from grpo_ablation.training.train import checkpoint_dtypes, last_checkpoint

    checks: dict[str, Any] = {}
    started = time.perf_counter()
    m = measure(config, steps, work / "calibrate")
    device = resolve_device(config["compute"]["device"])
    p = project(m, dag_shape(config))
    cal = work / "calibrate"
    checks["calibration"] = {
        "passed": m.peak_memory_kind == ("gpu" if device == "cuda" else "host RSS"),
        "measured": asdict(m),
        "checkpoint_dtypes": checkpoint_dtypes(last_checkpoint(cal / "run")),
        "over_limit": refusals(m, p, config),
        "seconds": time.perf_counter() - started,
    }
    base = str(cal / BASE_INFO)  # the base policy as the train job reads it
    data = cal / "data"

    # Two cells of one seed: the baseline and a cell that changes both axes.
    design = Design.of(config)
    reference = replace(
        design.training_config(design.baseline(), seed=0), max_steps=KILL_STEPS, save_steps=1
    )
    other = replace(reference, std_scaling="none", aggregation="constant", max_steps=1)
    started = time.perf_counter()
    jobs = {"reference": reference, "other_cell": other}
    for name, cfg in jobs.items():
        finish(train_job(base, data, work / name, cfg, config), f"training {name}")
    a, b = completions(work / "reference", 0), completions(work / "other_cell", 0)
    checks["same_step_zero"] = {
        "passed": bool(a) and a == b,
        "completions": len(a),
        "cells": [f"{c.std_scaling}/{c.aggregation}" for c in jobs.values()],
        "seconds": time.perf_counter() - started,
    }

    started = time.perf_counter()
    run = work / "killed"
    killed = kill_after_checkpoint(train_job(base, data, run, reference, config), run, KILL_AT)
    finish(train_job(base, data, run, reference, config), "the resumed run")
    final = f"checkpoints/checkpoint-{KILL_STEPS}"
    same_rollouts = completions(run) == completions(work / "reference")
    difference = weight_difference(work / "reference" / final, run / final)
    resumed = killed and (run / "run_info.json").exists()
    checks["kill_and_resume"] = {
        "passed": resumed and (not exact or (same_rollouts and difference == 0.0)),
        "killed_after_checkpoint": KILL_AT if killed else None,
        "same_rollouts_as_uninterrupted": same_rollouts,
        "max_abs_weight_difference": difference,
        "seconds": time.perf_counter() - started,
    }

    # The task folders calibrate wrote, evaluated as the evaluation job does.
    options = EvaluationOptions.of(evaluation_config(config))
    checkpoint = work / "reference" / final
    started = time.perf_counter()
    results = []
    for copy in ("a", "b"):
        evaluate_checkpoints(
            [(KILL_STEPS, checkpoint)], cal / "tasks" / "test", work / f"eval_{copy}", options
        )
        results.append((work / f"eval_{copy}" / f"step={KILL_STEPS}" / "results.json").read_bytes())
    checks["evaluation_twice"] = {
        "passed": results[0] == results[1],
        "backend": options.backend,
        "rows_per_task": options.limit,
        "seconds": time.perf_counter() - started,
    }
    return checks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true", help="run every check on the CPU")
    parser.add_argument("--configfile", type=Path, nargs="+", help="configs, merged in order")
    parser.add_argument("--steps", type=int, default=4, help="training steps to calibrate")
    parser.add_argument(
        "--work", type=Path, help="keep the check's runs here (default: a temp dir)"
    )
    parser.add_argument("--out", type=Path, default=Path("results/gpu_check.json"))
    parser.add_argument("--vllm", action="store_true", help="generate and evaluate with vLLM")
    a = parser.parse_args(argv)
    paths = a.configfile or (CPU_CONFIGS if a.cpu else GPU_CONFIGS)
    config = merged_config(paths, a.cpu, a.vllm)
    # The package from this checkout, here and in the jobs it starts.
    src = str(ROOT / "src")
    sys.path.insert(0, src)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")]))
    from grpo_ablation.compute import resolve_device
    from grpo_ablation.training.calibrate import load_config

    with tempfile.TemporaryDirectory() as tmp:
        work = a.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        (work / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        config = load_config(work / "config.yaml")  # validated, defaults filled in
        device = resolve_device(config["compute"]["device"])
        started = time.perf_counter()
        record = {
            "configs": [str(p) for p in paths],
            "vllm": a.vllm,
            "environment": environment(device, config["compute"]["dtype"]),
            "checks": run_checks(config, work, a.steps, exact=device == "cpu"),
        }
    record["seconds"] = time.perf_counter() - started
    record["passed"] = all(c["passed"] for c in record["checks"].values())
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(record, indent=2) + "\n")
    for name, check in record["checks"].items():
        print(f"{'PASS' if check['passed'] else 'FAIL'}  {name}  ({check['seconds']:.0f} s)")
    print(f"{a.out}: {record['seconds']:.0f} s in all")
    return 0 if record["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
