"""The GPU check: what the first GPU node lent to the project must report, in one command.

    make gpu-check                                   # a node with one GPU, the pins installed
    python -m benchmarks.gpu_check --wheels DIR      # a node with its own torch and no index
    python -m benchmarks.gpu_check --cpu             # the same checks here

It needs no download: unless ``--model PATH`` names a model folder (SmolLM2 converted by
``make setup-smollm2``'s prefetch, or a hub snapshot), it builds its models here. On the SmolLM2
preset at its GPU size (``config/smollm2.yaml`` then ``config/smollm2_gpu.yaml``, merged key by
key as Snakemake merges them: G = 8, 16 prompts a step, 128 tokens), in a work folder of its own:

``figures`` (reported):
- ``cost_probe``: ``grpo-ablation cost-probe``'s measurement in float32 and in bfloat16 (seconds
  of a steady training step, the first step's warm-up, a checkpoint save, peak memory, tokens per
  second generated and scored-and-trained, the preset's projected GPU-hours, the jobs it would
  refuse). Its
  built-in model is a random Qwen2 at SmolLM2-135M's shape (576 wide, 30 layers, 9 heads, 3 KV
  heads, 49,152 embedding rows): every completion runs to its cap, so a step's time and memory are
  the preset's upper bound, not its typical step.
- ``options``: on a GPU (``--options``; none under ``--cpu``, where each would add a training to a
  test that runs twice in CI), each option of issue 65 timed alone as a short training of the same
  model and shape (``OPTION_PROBES``: TF32, a static KV cache, the static cache compiled, bfloat16
  weights for generation, scoring passes of 16 completions, and TF32, the compiled static cache
  and bfloat16 weights combined), with its steady step, tokens per second of generation and of
  the update, peak memory, the preset's GPU-hours recomputed at its steps (the evaluation as the
  probe of its precision measured it), and the share of its step-0 completions identical to that
  probe's (keyed sampling: 1.0 where the option changes no token); and ``packed``:
  ``PACKED_RUNS`` runs trained at once on the one device (``resources.runs_per_gpu``), their mean
  steady step and the preset's GPU-hours packed. The table closes with the targets: a step at
  most ``STEP_TARGET_S`` s, bfloat16 no slower than float32 (autocast, or bfloat16 weights for
  generation: the probes that change the precision alone). The options add a training alone each
  (the compiled ones their compile too): where one call's time is short, run the checks with
  ``--options none`` and the timings in a second call with ``--timings-only`` (the probes, the
  options, the CPU reference).
- ``cost_probe_cpu``: the same probe in float32 on the CPU for ``--cpu-reference-steps`` steps,
  the reference the device's figures are read against (beside the checks' runs, not alone: an
  upper bound of the CPU's time).
- ``bf16_vs_fp32``: the step-0 loss, advantages, gradient norm and completions of one cell trained
  from one base policy in each precision.
- ``device_vs_cpu``: the default's first ``--default-steps`` steps (``config/config.yaml``, the
  character GPT-2) on this device and on the CPU from one warm start: per metric, the largest
  difference; the share of identical completions per step; the final weights' difference.

``checks`` (required; the exit status is non-zero when one fails):
- ``signal``: the checks' base policy gives mixed groups and a non-zero gradient in the reference
  run. Without it the checks below compare weights that never moved. The built-in model here is a small Qwen2
  stand-in warm-started on the preset's task (``CHECK_MODEL``); with ``--model`` the model itself.
- ``cost_probe``: the peak memory is of the device's kind, in each precision.
- ``same_step_zero``: two cells of one seed draw the same step-0 completions (keyed sampling), in
  each precision.
- ``kill_and_resume``: a job killed after its first checkpoint resumes to the end; its rollouts
  and final weights equal the uninterrupted run's bitwise in float32, and in bfloat16 its weights
  lie within ``BF16_RESUME_TOLERANCE`` of the run's own change of them.
- ``evaluation_twice``: a checkpoint evaluated twice gives a byte-identical results.json.

Training runs as the train job runs it (``grpo-ablation train`` in a process of its own); the
timings run alone, the other runs two or four at a time. Evaluation is limited to one batch of
rows per task (``evaluation.limit``). ``--cpu`` runs everything on the CPU (the CPU preset
alone unless ``--configfile`` says otherwise; the test suite runs it on the cluster-shaped CPU
config). ``--vllm`` generates and evaluates with vLLM (``--out`` another file); where vLLM is not
installed the record says so and the check runs without it. ``--wheels DIR`` first installs a
folder written by ``make gpu-wheels`` into a folder of its own with no index (``--site``) and
runs with it on the path, beside the node's own torch and transformers. It needs the pinned
libraries, not the installed package: run from the checkout, it puts ``src`` on the path of
itself and of the jobs it starts.
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
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, replace
from importlib import metadata
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
# The package from this checkout: a GPU node has only its site packages, so the functions here
# (and the tests that call them) import it from src/, as the jobs main() starts do.
SRC = str(ROOT / "src")
if SRC not in sys.path:
    sys.path.insert(0, SRC)
GPU_CONFIGS = [Path("config/smollm2.yaml"), Path("config/smollm2_gpu.yaml")]
# vLLM for generation in training (TRL colocate) and for evaluation, as a config would ask.
VLLM = {
    "training": {"generation_backend": "vllm"},
    "evaluation": {"backend": "vllm", "batch_size": "auto"},
}
CPU_CONFIGS = [Path("config/smollm2.yaml")]
DEFAULT_CONFIG = Path("config/config.yaml")
PACKAGES = ("torch", "transformers", "trl", "accelerate", "lm-eval", "datasets", "vllm", "gguf")
DTYPES = ("float32", "bfloat16")
KILL_STEPS, KILL_AT = 3, 1  # the resumed run's length and the checkpoint it is killed after
# The built-in models (no --model). For the timing, SmolLM2-135M-Instruct's shape, random.
TIMING_MODEL = {
    "seed": 0,
    "hidden_size": 576,
    "num_layers": 30,
    "num_heads": 9,
    "num_kv_heads": 3,
    "intermediate_size": 1536,
    "embedding_rows": 49152,
}
# For the checks, a Qwen2 small enough to warm-start in seconds until its groups are mixed at the
# preset's temperature (the random one's groups are all incorrect: every gradient is zero).
CHECK_MODEL = {"seed": 0, "hidden_size": 128, "num_layers": 4, "num_heads": 4, "num_kv_heads": 2}
CHECK_SFT = {"sft_steps": 100, "sft_lr": 3.0e-3}
# The default's warm start, cut (1,200 steps in the config): enough for mixed groups.
DEFAULT_SFT_STEPS, DEFAULT_STEPS = 300, 5
# bfloat16 resume: the resumed run's weights within this share of the run's own change of them.
BF16_RESUME_TOLERANCE = 0.01
# Issue 65's options, each timed alone on top of a precision's probe (keys of the compute section,
# or of the training section where TrainingConfig declares them: with_options), and the runs a GPU
# packs for the packing figure (resources.runs_per_gpu).
OPTION_PROBES = {
    "tf32": {"dtype": "float32", "tf32": True},
    "static_cache": {"dtype": "float32", "generation_cache": "static"},
    "static_compiled": {"dtype": "float32", "generation_cache": "static_compiled"},
    "bf16_weights": {"dtype": "bfloat16", "generation_weights": "bfloat16"},
    # the scoring passes in micro-batches (item 3): the peak against the one-pass probe's
    "scoring_16": {"dtype": "float32", "scoring_batch_size": 16},
    "combined": {
        "dtype": "bfloat16",
        "generation_weights": "bfloat16",
        "generation_cache": "static_compiled",
        "tf32": True,
    },
}
PACKED_RUNS = 4
# The keys by which a bfloat16 probe differs from float32's in precision alone (the target's).
PRECISION_KEYS = {"dtype", "generation_weights"}
# The issue's target for a training step at the SmolLM2 GPU preset's shape (from 3.74 s).
STEP_TARGET_S = 1.0


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


def with_model(
    config: dict[str, Any], model: Path | None, stand_in: dict[str, Any], folder: Path
) -> dict[str, Any]:
    """The config on the model folder ``model`` as it is, or (None) on a Qwen2 stand-in of shape
    ``stand_in`` (its ``sft_*`` keys: the warm start) built in ``folder``, with the task's word
    problems written there too: nothing read from outside the work folder."""
    config = json.loads(json.dumps(config))
    config.pop("stand_in", None)
    if model is not None:
        config["base_policy"] = {"kind": "hub", "name": str(model)}
        return config
    shape = {k: v for k, v in stand_in.items() if not k.startswith("sft_")}
    sft = {k: v for k, v in stand_in.items() if k.startswith("sft_")}
    config["base_policy"] = {"kind": "hub", "name": str(folder / "model"), **sft}
    config["stand_in"] = shape
    config["task"]["dataset_path"] = str(folder / "word_problems")
    return config


def with_dtype(config: dict[str, Any], dtype: str) -> dict[str, Any]:
    return {**config, "compute": {**config["compute"], "dtype": dtype}}


def with_device(config: dict[str, Any], device: str) -> dict[str, Any]:
    return {**config, "compute": {**config["compute"], "device": device}}


def with_options(config: dict[str, Any], **options: Any) -> dict[str, Any]:
    """The config with each option in its section: the training section's where TrainingConfig
    declares the key, the compute section's otherwise."""
    from dataclasses import fields

    from grpo_ablation.design.options import TrainingConfig

    declared = {f.name for f in fields(TrainingConfig)}
    training = {k: v for k, v in options.items() if k in declared}
    compute = {k: v for k, v in options.items() if k not in declared}
    return {
        **config,
        "compute": {**config["compute"], **compute},
        "training": {**config.get("training", {}), **training},
    }


def environment(device: str, dtype: str) -> dict[str, Any]:
    """What ran the check: the job record's device fields and every pinned library's version."""
    from grpo_ablation.device import device_info

    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return {**device_info(device, dtype), "python": platform.python_version(), **versions}


def train_job(base: Path, out: Path, training: Any, config: dict) -> subprocess.Popen:
    """One training run as the train rule runs it: ``grpo-ablation train`` in its own process,
    on the base policy and splits of the folder ``base`` (``prepare_base``)."""
    cmd = [
        sys.executable,
        "-m",
        "grpo_ablation.cli",
        "train",
        "--base",
        str(base / "base_policy.json"),
        "--data",
        str(base / "data"),
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
    out.parent.mkdir(parents=True, exist_ok=True)
    log = (out.parent / f"{out.name}.log").open("w")
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)


def finish(proc: subprocess.Popen, what: str) -> None:
    if proc.wait() != 0:
        raise RuntimeError(
            f"{what} failed (exit {proc.returncode}); see its .log in the work folder"
        )


def train(base: Path, out: Path, training: Any, config: dict) -> None:
    finish(train_job(base, out, training, config), f"training {out}")


def prepare_base(config: dict[str, Any], work: Path, max_sft_steps: int | None) -> dict:
    """The config's content (prefetch), splits and base policy in ``work``, as the DAG's first
    jobs make them; run in a process of its own, so that it holds no GPU memory after."""
    from grpo_ablation.policy.prefetch import prefetch
    from grpo_ablation.process import bootstrap
    from grpo_ablation.tasks import get_task
    from grpo_ablation.training.cost_probe import build_base

    bootstrap(threads=config.get("threads_per_job", 1))
    prefetch(config)
    get_task(config["task"]).write_splits(work / "data")
    return build_base(config, work, max_sft_steps)


def completions(run: Path, step: int | None = None):
    """Every rollout of a run (of one step), in the order of the log."""
    from grpo_ablation.training.rollout_log import read_rollouts

    rows = read_rollouts(run / "rollouts")
    return rows if step is None else rows[rows["step"] == step].reset_index(drop=True)


def texts(rows) -> list[tuple]:
    cols = ["step", "group_index", "completion_index", "completion"]
    return [tuple(map(str, r)) for r in rows[cols].itertuples(index=False)]


def metrics(run: Path) -> list[dict[str, Any]]:
    from grpo_ablation.layout import METRICS_LOG

    return [json.loads(line) for line in (run / METRICS_LOG).read_text().splitlines()]


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


def cost_probe(config: dict[str, Any], steps: int, work: Path) -> dict[str, Any]:
    """The cost probe's measurement, the preset's projection and refusals, and a pass when the peak
    memory is of the device's kind."""
    from grpo_ablation.device import resolve_device
    from grpo_ablation.training.cost_probe import dag_shape, measure, project, refusals
    from grpo_ablation.training.train import checkpoint_dtypes, last_checkpoint

    started = time.perf_counter()
    m = measure(config, steps, work)
    p = project(m, dag_shape(config))
    device = resolve_device(config["compute"]["device"])
    return {
        "passed": m.peak_memory_kind == ("gpu" if device == "cuda" else "host RSS"),
        "measured": asdict(m),
        "peak_memory_gib": m.peak_memory_bytes / 1024**3,
        "projected": p,
        "checkpoint_dtypes": checkpoint_dtypes(last_checkpoint(work / "run")),
        "over_limit": refusals(m, p, config),
        "seconds": time.perf_counter() - started,
    }


def trained_alone(config: dict[str, Any], steps: int, work: Path) -> dict[str, Any]:
    """The probe's training alone (no evaluation: the options change training only), with the
    task's splits and content in ``work`` as the probe has them; in a process of its own."""
    from grpo_ablation.policy.prefetch import prefetch
    from grpo_ablation.process import in_own_process
    from grpo_ablation.tasks import get_task
    from grpo_ablation.training.cost_probe import train_steps

    prefetch(config)
    get_task(config["task"]).write_splits(work / "data")
    return in_own_process(train_steps, config, steps, work)


def option_probe(
    config: dict[str, Any], steps: int, work: Path, probe: dict[str, Any], probe_run: Path
) -> dict[str, Any]:
    """One compute option's training alone, priced as ``probe`` (the cost probe of its precision,
    whose run is ``probe_run``) with its training figures: its figures shaped as the probe's, and
    the share of its step-0 completions identical to the probe's."""
    from grpo_ablation.training.cost_probe import (
        Measurement,
        dag_shape,
        project,
        training_times,
    )

    trained = trained_alone(config, steps, work)
    peak = trained["peak"]
    on_gpu = peak.gpu_allocated_bytes is not None
    m = replace(
        Measurement(**probe["measured"]),
        **training_times(trained),
        peak_memory_bytes=peak.gpu_allocated_bytes if on_gpu else peak.host_rss_bytes,
        train_peak_gpu_bytes=peak.gpu_allocated_bytes,
    )
    ours, theirs = completions(work / "run", 0), completions(probe_run, 0)
    same = (ours["completion"].astype(str).values == theirs["completion"].astype(str).values).mean()
    return {
        "compute": config["compute"],
        "measured": asdict(m),
        "peak_memory_gib": m.peak_memory_bytes / 1024**3,
        "projected": project(m, dag_shape(config)),
        "identical_step0_completions": float(same),
    }


def packed_probe(
    config: dict[str, Any], steps: int, work: Path, probe: dict[str, Any]
) -> dict[str, Any]:
    """``PACKED_RUNS`` runs of ``config`` trained at once on the device: their mean steady step,
    and the preset's GPU-hours with its train jobs packed so (``probe``: the cost probe of the
    config's precision, alone)."""
    from grpo_ablation.policy.prefetch import prefetch
    from grpo_ablation.tasks import get_task
    from grpo_ablation.training.cost_probe import Measurement, dag_shape, packed_steps, project

    prefetch(config)
    get_task(config["task"]).write_splits(work / "data")
    step_s = packed_steps(config, steps, work, PACKED_RUNS)
    m = replace(Measurement(**probe["measured"]), packed_runs=PACKED_RUNS, packed_step_s=step_s)
    shape = dag_shape(config) | {"runs_per_gpu": PACKED_RUNS}
    return {
        "runs": PACKED_RUNS,
        "packed_step_s": step_s,
        "alone_step_s": m.train_step_s,
        "projected": project(m, shape),
    }


def cell_runs(config: dict[str, Any], base: Path, work: Path) -> None:
    """In ``work``: the reference cell for KILL_STEPS steps (a checkpoint each step), a cell that
    changes both axes for one, and the reference killed after checkpoint KILL_AT and resumed."""
    from grpo_ablation.design.ablation import Design

    design = Design.of(config)
    reference = replace(
        design.training_config(design.baseline(), seed=0), max_steps=KILL_STEPS, save_steps=1
    )
    train(base, work / "reference", reference, config)
    other = replace(reference, std_scaling="none", aggregation="constant", max_steps=1)
    train(base, work / "other_cell", other, config)
    run = work / "killed"
    killed = kill_after_checkpoint(train_job(base, run, reference, config), run, KILL_AT)
    (work / "killed.json").write_text(json.dumps({"killed_after_checkpoint": killed}))
    train(base, run, reference, config)


def resume_check(work: Path, base_model: Path, exact: bool) -> dict[str, Any]:
    final = f"checkpoints/checkpoint-{KILL_STEPS}"
    run, reference = work / "killed", work / "reference"
    killed = json.loads((work / "killed.json").read_text())["killed_after_checkpoint"]
    same = texts(completions(run)) == texts(completions(reference))
    difference = weight_difference(reference / final, run / final)
    update = weight_difference(base_model, reference / final)
    resumed = killed and (run / "run_info.json").exists()
    within = difference == 0.0 if exact else difference <= BF16_RESUME_TOLERANCE * update
    return {
        "passed": bool(resumed and within and (same or not exact)),
        "required": "bitwise" if exact else f"weights within {BF16_RESUME_TOLERANCE} of the update",
        "killed_after_checkpoint": KILL_AT if killed else None,
        "same_rollouts_as_uninterrupted": same,
        "max_abs_weight_difference": difference,
        "max_abs_weight_update": update,
    }


def step_zero(work: Path) -> dict[str, Any]:
    a, b = texts(completions(work / "reference", 0)), texts(completions(work / "other_cell", 0))
    return {"passed": bool(a) and a == b, "completions": len(a)}


def signal_check(run: Path) -> dict[str, Any]:
    """Mixed groups and a non-zero gradient in the reference run: the resume and precision
    comparisons then compare weights that moved (a base policy whose groups are all incorrect
    gives zero advantages, a zero gradient and weights that never change)."""
    steps = metrics(run)
    moved = [m["groups/mixed"] > 0 and m["grad_norm"] > 0 for m in steps]
    first = steps[0]
    return {
        "passed": any(moved),
        "steps_with_signal": sum(moved),
        "steps": len(steps),
        "step_0_groups": {k.split("/")[1]: first[k] for k in first if k.startswith("groups/")},
        "step_0_grad_norm": first["grad_norm"],
        "step_0_reward": first["reward"],
    }


def precision_figures(fp32: Path, bf16: Path) -> dict[str, Any]:
    """bfloat16 against float32 at step 0 of one cell from one base policy."""
    a, b = completions(fp32, 0), completions(bf16, 0)
    same = (a["completion"].astype(str) == b["completion"].astype(str)).tolist()
    ma, mb = metrics(fp32)[0], metrics(bf16)[0]

    def pair(key: str) -> dict[str, float]:
        x, y = float(ma[key]), float(mb[key])
        return {"float32": x, "bfloat16": y, "abs_diff": abs(x - y)}

    return {
        "completions": len(same),
        "identical_completions": sum(same) / max(1, len(same)),
        "max_abs_advantage_diff": float((a["advantage"] - b["advantage"]).abs().max()),
        "max_abs_advantage_diff_where_identical": float(
            (a["advantage"] - b["advantage"]).abs()[same].max() if any(same) else float("nan")
        ),
        "loss": pair("loss"),
        "grad_norm": pair("grad_norm")
        | {
            "rel_diff": abs(float(ma["grad_norm"]) - float(mb["grad_norm"]))
            / max(abs(float(ma["grad_norm"])), 1e-30)
        },
        "entropy": pair("entropy"),
    }


def device_figures(device_run: Path, cpu_run: Path) -> dict[str, Any]:
    """The default's first steps on the device against the CPU: per logged metric the largest
    absolute difference over the steps, the share of identical completions per step, the final
    weights' largest difference."""
    from grpo_ablation.training.train import last_checkpoint

    ma, mb = metrics(device_run), metrics(cpu_run)
    skip = {"step", "step_time", "epoch"}
    diffs: dict[str, float] = {}
    for x, y in zip(ma, mb, strict=True):
        for key in sorted(set(x) - skip):
            if isinstance(x[key], int | float) and isinstance(y.get(key), int | float):
                diffs[key] = max(diffs.get(key, 0.0), abs(float(x[key]) - float(y[key])))
    a, b = completions(device_run), completions(cpu_run)
    a["same"] = a["completion"].astype(str).values == b["completion"].astype(str).values
    per_step = a.groupby("step")["same"].mean()
    final = last_checkpoint(device_run).relative_to(device_run)
    return {
        "steps": len(ma),
        "max_abs_metric_diff": diffs,
        "identical_completions_per_step": [float(v) for v in per_step],
        "final_max_abs_weight_difference": weight_difference(device_run / final, cpu_run / final),
    }


class Record:
    """The check's record, written to ``out`` after every part: a part that raises is recorded
    by name (a first GPU run reports every part it could run), and a run killed at its time
    limit keeps what it measured before."""

    def __init__(self, out: Path, head: dict[str, Any]) -> None:
        self.out = out
        self.data = {**head, "figures": {}, "checks": {}, "errors": {}, "seconds": {}}
        out.parent.mkdir(parents=True, exist_ok=True)

    def part(self, name: str, fn: Any, *args: Any) -> Any:
        started = time.perf_counter()
        try:
            return fn(*args)
        except Exception as error:
            self.data["errors"][name] = f"{type(error).__name__}: {error}"
            traceback.print_exc()
            return None
        finally:
            self.data["seconds"][name] = time.perf_counter() - started
            self.save()

    def save(self) -> None:
        checks, errors = self.data["checks"], self.data["errors"]
        self.data["passed"] = all(c["passed"] for c in checks.values()) and not errors
        self.out.write_text(json.dumps(self.data, indent=2) + "\n")


def run_checks(
    record: Record,
    timing: dict[str, Any],
    checked: dict[str, Any],
    default: dict[str, Any],
    work: Path,
    steps: int,
    default_steps: int,
    default_sft_steps: int,
    cpu_reference_steps: int = 2,
    options: list[str] | None = None,
    packed: bool = False,
    with_checks: bool = True,
) -> None:
    """Every figure and check of the module docstring, in ``work``, into ``record``; ``options``:
    the names of ``OPTION_PROBES`` to time, ``packed``: whether to time ``PACKED_RUNS`` at once;
    ``with_checks`` False: the timings alone (the probes, the options, the CPU reference)."""
    from grpo_ablation.design.ablation import Design
    from grpo_ablation.device import resolve_device
    from grpo_ablation.process import in_own_process

    device = resolve_device(timing["compute"]["device"])
    figures, checks = record.data["figures"], record.data["checks"]
    fp32, bf16 = (work / "checks" / d for d in DTYPES)
    with ThreadPoolExecutor(max_workers=4) as pool:
        # The default's warm start is CPU work on one thread: beside the timings, not in them.
        default_base = (
            pool.submit(in_own_process, prepare_base, default, work / "default", default_sft_steps)
            if with_checks
            else None
        )
        cal = figures["cost_probe"] = {}
        for d in DTYPES:
            part = record.part(
                f"cost_probe_{d}",
                cost_probe,
                with_dtype(timing, d),
                steps,
                work / f"cost_probe_{d}",
            )
            if part is not None:
                cal[d] = part
        checks["cost_probe"] = {
            "passed": len(cal) == len(DTYPES) and all(c["passed"] for c in cal.values())
        }
        # The options and the packing, timed alone like the probes (each against its precision's).
        figures["options"] = {}
        for name in options or []:
            dtype = OPTION_PROBES[name]["dtype"]
            if dtype not in cal:
                continue
            part = record.part(
                f"option_{name}",
                option_probe,
                with_options(timing, **OPTION_PROBES[name]),
                steps,
                work / f"option_{name}",
                cal[dtype],
                work / f"cost_probe_{dtype}" / "run",
            )
            if part is not None:
                figures["options"][name] = part
        preset = timing["compute"]["dtype"]
        if packed and preset in cal:
            figures["packed"] = record.part(
                "packed", packed_probe, timing, steps, work / "packed", cal[preset]
            )
        runs = {}
        if cpu_reference_steps:
            reference = with_device(with_dtype(timing, "float32"), "cpu")
            runs["cost_probe_cpu"] = pool.submit(
                in_own_process, cost_probe, reference, cpu_reference_steps, work / "cost_probe_cpu"
            )

        base_info = (
            record.part("checks_base", in_own_process, prepare_base, checked, work / "checks", None)
            if with_checks
            else None
        )
        if base_info is not None:
            runs |= {
                f"runs_{d}": pool.submit(
                    cell_runs, with_dtype(checked, d), work / "checks", work / "checks" / d
                )
                for d in DTYPES
            }
        if default_base and record.part("default_base", default_base.result) is not None:
            design = Design.of(default)
            cfg = replace(
                design.training_config(design.baseline(), seed=0),
                max_steps=default_steps,
                save_steps=default_steps,
            )
            runs |= {
                f"default_{name}": pool.submit(
                    train, work / "default", work / "default" / name, cfg, with_device(default, d)
                )
                for name, d in {"device": device, "cpu": "cpu"}.items()
            }
        for name, future in runs.items():
            result = record.part(name, future.result)
            if name == "cost_probe_cpu":
                figures[name] = result

    if base_info is not None:
        checks["signal"] = record.part("signal", signal_check, fp32 / "reference") or {
            "passed": False
        }
        zero = (
            record.part(
                "same_step_zero", lambda: {d: step_zero(work / "checks" / d) for d in DTYPES}
            )
            or {}
        )
        checks["same_step_zero"] = {
            **zero,
            "passed": bool(zero) and all(v["passed"] for v in zero.values()),
        }
        resume = (
            record.part(
                "kill_and_resume",
                lambda: {
                    d: resume_check(work / "checks" / d, Path(base_info["model"]), d == "float32")
                    for d in DTYPES
                },
            )
            or {}
        )
        checks["kill_and_resume"] = {
            **resume,
            "passed": bool(resume) and all(v["passed"] for v in resume.values()),
        }
        figures["bf16_vs_fp32"] = record.part(
            "bf16_vs_fp32", precision_figures, fp32 / "reference", bf16 / "reference"
        )
        checks["evaluation_twice"] = record.part(
            "evaluation_twice", evaluation_twice, checked, work
        ) or {"passed": False}
    if with_checks:
        figures["device_vs_cpu"] = record.part(
            "device_vs_cpu", device_figures, work / "default" / "device", work / "default" / "cpu"
        )


def evaluation_twice(config: dict[str, Any], work: Path) -> dict[str, Any]:
    """The float32 reference's last checkpoint evaluated twice on the test split's task folders,
    as the evaluation job does."""
    from grpo_ablation.design.checks import evaluation_config
    from grpo_ablation.evaluation.evaluate import EvaluationOptions, evaluate_checkpoints
    from grpo_ablation.evaluation.task_folders import write_split_tasks
    from grpo_ablation.layout import STEP_RESULTS, step_folder
    from grpo_ablation.layout import checkpoint as checkpoint_path
    from grpo_ablation.tasks import get_task

    base, ev, task = work / "checks", evaluation_config(config), get_task(config["task"])
    write_split_tasks(
        base / "data", base / "tasks", task.kind, ev, task.answer_rule, task.chat_template
    )
    options = EvaluationOptions.of(ev)
    checkpoint = checkpoint_path(base / DTYPES[0] / "reference", KILL_STEPS)
    results = []
    for copy in ("a", "b"):
        out = work / f"eval_{copy}"
        evaluate_checkpoints([(KILL_STEPS, checkpoint)], base / "tasks" / "test", out, options)
        results.append((step_folder(out, KILL_STEPS) / STEP_RESULTS).read_bytes())
    return {
        "passed": results[0] == results[1],
        "backend": options.backend,
        "rows_per_task": options.limit,
    }


def install_wheels(wheels: Path, site: Path) -> None:
    """The folder's wheels into ``site`` with no index and no dependency resolution (the folder
    holds what the node lacks; the node holds the rest), once per manifest."""
    manifest = (wheels / "manifest.json").read_bytes()
    stamp = site / ".manifest.json"
    if stamp.exists() and stamp.read_bytes() == manifest:
        return
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps"]
    cmd += ["--no-compile", "--upgrade", "--target", str(site), *map(str, wheels.glob("*.whl"))]
    subprocess.run(cmd, check=True)
    stamp.write_bytes(manifest)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true", help="run every check on the CPU")
    parser.add_argument("--configfile", type=Path, nargs="+", help="configs, merged in order")
    parser.add_argument("--model", type=Path, help="a model folder (default: built here)")
    parser.add_argument("--steps", type=int, default=4, help="training steps the cost probe times")
    parser.add_argument("--default-steps", type=int, default=DEFAULT_STEPS)
    parser.add_argument("--default-sft-steps", type=int, default=DEFAULT_SFT_STEPS)
    parser.add_argument(
        "--cpu-reference-steps", type=int, default=2, help="the CPU probe's steps (0: none)"
    )
    parser.add_argument(
        "--work", type=Path, help="keep the check's runs here (default: a temp dir)"
    )
    parser.add_argument("--out", type=Path, default=Path("results/gpu_check.json"))
    parser.add_argument("--vllm", action="store_true", help="generate and evaluate with vLLM")
    parser.add_argument(
        "--timings-only",
        action="store_true",
        help="the probes, the options and the CPU reference, not the checks (a second run)",
    )
    parser.add_argument(
        "--options",
        help=f"options to time, comma-separated, of {', '.join(OPTION_PROBES)}, and "
        "packed; all (the default on a GPU) or none (the default with --cpu)",
    )
    parser.add_argument("--wheels", type=Path, help="a folder of `make gpu-wheels` to install")
    parser.add_argument("--site", type=Path, default=ROOT / ".site-torch", help="where to")
    a = parser.parse_args(argv)
    if a.wheels and str(a.site) not in os.environ.get("PYTHONPATH", ""):
        install_wheels(a.wheels, a.site)
        path = os.pathsep.join(filter(None, [str(a.site), os.environ.get("PYTHONPATH")]))
        os.environ["PYTHONPATH"] = path
        os.execv(sys.executable, [sys.executable, "-m", "benchmarks.gpu_check", *sys.argv[1:]])
    vllm = a.vllm and find_spec("vllm") is not None
    paths = a.configfile or (CPU_CONFIGS if a.cpu else GPU_CONFIGS)
    config = merged_config(paths, a.cpu, vllm)
    # The package from this checkout, here and in the jobs it starts.
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [SRC, os.environ.get("PYTHONPATH")]))
    from grpo_ablation.design.schema import load_config
    from grpo_ablation.device import resolve_device

    with tempfile.TemporaryDirectory() as tmp:
        work = (a.work or Path(tmp)).resolve()
        work.mkdir(parents=True, exist_ok=True)

        def validated(name: str, c: dict[str, Any]) -> dict[str, Any]:
            (work / f"{name}.yaml").write_text(yaml.safe_dump(c, sort_keys=False))
            return load_config(work / f"{name}.yaml")  # validated, defaults filled in

        if a.configfile:  # the configs' own model and base policy
            timing = checked = validated("config", config)
        else:
            timing = validated(
                "timing", with_model(config, a.model, TIMING_MODEL, work / "timing_model")
            )
            checked = validated(
                "checked",
                with_model(config, a.model, CHECK_MODEL | CHECK_SFT, work / "check_model"),
            )
        default = yaml.safe_load((ROOT / DEFAULT_CONFIG).read_text())
        default["threads_per_job"] = 1
        default = validated(
            "default", with_device(default | {"compute": default.get("compute", {})}, "cpu")
        )
        device = resolve_device(timing["compute"]["device"])
        started = time.perf_counter()
        record = Record(
            a.out,
            {
                "configs": [str(p) for p in paths],
                "model": str(a.model) if a.model else "built-in",
                "vllm": vllm,
                "vllm_note": None
                if find_spec("vllm")
                else "vLLM is not installed here: the check ran without it",
                "environment": environment(device, timing["compute"]["dtype"]),
            },
        )
        run_checks(
            record,
            timing,
            checked,
            default,
            work,
            a.steps,
            a.default_steps,
            a.default_sft_steps,
            a.cpu_reference_steps,
            *chosen_options(a.options, device, vllm),
            not a.timings_only,
        )
    record.data["seconds"]["all"] = time.perf_counter() - started
    record.save()
    print(table(record.data))
    print(f"{a.out}: {record.data['seconds']['all']:.0f} s in all")
    return 0 if record.data["passed"] else 1


def chosen_options(given: str | None, device: str, vllm: bool = False) -> tuple[list[str], bool]:
    """``--options`` as (the names of OPTION_PROBES, whether to time the packing): all on a GPU
    unless told, none on the CPU. With vLLM generating, those of transformers' generate (which a
    vLLM run refuses) and the packing (an engine's memory share per run) are left out."""
    every = [*OPTION_PROBES, "packed"]
    if given is None:
        given = "all" if device == "cuda" else "none"
    choices = {"all": every, "none": []}
    names = choices[given] if given in choices else [n.strip() for n in given.split(",")]
    unknown = [n for n in names if n not in every]
    if unknown:
        raise SystemExit(f"gpu_check: unknown --options {unknown}; expected some of {every}")
    if vllm:
        from grpo_ablation.design.options import GENERATE_OPTIONS

        names = [
            n for n in names if n in OPTION_PROBES and not {*OPTION_PROBES[n]} & {*GENERATE_OPTIONS}
        ]
    return [n for n in names if n != "packed"], "packed" in names


def probe_line(c: dict[str, Any]) -> str:
    """One cost probe's figures: the steady step beside the warm-up and a save, the peak, the
    tokens per second of generation and of the rest of the step, the preset's GPU-hours."""
    m = c["measured"]

    def rate(key: str) -> str:
        return f"{m[key]:.0f}" if m.get(key) else "n/a"

    return (
        f"{m['train_step_s']:.3f} s (first step {m.get('train_warmup_s') or 0:.2f} s, save "
        f"{m.get('train_save_s') or 0:.2f} s), peak {c['peak_memory_gib']:.2f} GiB "
        f"({m['peak_memory_kind']}), tokens/s generation {rate('generation_tokens_per_s')} vs "
        f"update {rate('update_tokens_per_s')}; preset {c['projected']['gpu_hours']:.1f} GPU-h"
    )


def targets(record: dict[str, Any]) -> list[tuple[str, str]]:
    """Issue 65's targets against a GPU's record: the fastest steady step of any probe or option
    (at most STEP_TARGET_S), and bfloat16's step against float32's (no slower: met where a probe
    that differs from float32's in precision alone is)."""
    f = record["figures"]
    if record["environment"]["device"] != "cuda":
        return []  # the targets are a GPU's
    steps = {f"{d}": c["measured"]["train_step_s"] for d, c in f["cost_probe"].items()}
    steps |= {name: c["measured"]["train_step_s"] for name, c in (f.get("options") or {}).items()}
    rows = []
    if steps:
        best = min(steps, key=steps.get)
        verdict = "met" if steps[best] <= STEP_TARGET_S else "not met"
        rows.append(
            (
                f"target: a step <= {STEP_TARGET_S} s",
                f"{verdict}: fastest {best} at {steps[best]:.3f} s",
            )
        )
    fp32, bf16 = (f["cost_probe"].get(d) for d in DTYPES)
    if fp32 and bf16:
        base = fp32["measured"]["train_step_s"]
        # The verdict reads the probes that differ from float32's in precision alone; one that
        # also turns on another option (combined) is printed beside it, not counted.
        alike = {"autocast": bf16["measured"]["train_step_s"] / base}
        others = {}
        for name, c in (f.get("options") or {}).items():
            probe = OPTION_PROBES[name]
            if probe["dtype"] == "bfloat16":
                precision_alone = set(probe) <= PRECISION_KEYS
                (alike if precision_alone else others)[name] = c["measured"]["train_step_s"] / base
        verdict = "met" if min(alike.values()) <= 1.0 else "not met"
        text = f"{verdict}: " + ", ".join(f"{n} {r:.2f}x" for n, r in alike.items())
        text += " float32's step"
        if others:
            text += " (with other options too: "
            text += ", ".join(f"{n} {r:.2f}x" for n, r in others.items()) + ")"
        rows.append(("target: bfloat16 no slower than float32", text))
    return rows


def table(record: dict[str, Any]) -> str:
    """The record's figures and checks as a short Markdown table."""
    env, f = record["environment"], record["figures"]
    rows = [
        (
            "device",
            f"{env['device']} {env.get('gpu_model') or ''} driver {env.get('driver_version')}",
        ),
        ("torch / CUDA build", f"{env['torch']} / {env['torch_cuda']}"),
        ("transformers / TRL", f"{env['transformers']} / {env['trl']}"),
        ("vLLM", record["vllm_note"] or f"{env['vllm']}, used: {record['vllm']}"),
    ]
    probes = {f"{env['device']}, {d}": c for d, c in f["cost_probe"].items()}
    if f.get("cost_probe_cpu"):
        probes["cpu reference, float32"] = f["cost_probe_cpu"]
    for name, c in probes.items():
        rows.append((f"steady step ({name})", probe_line(c)))
    for name, c in (f.get("options") or {}).items():
        options = ", ".join(f"{k} {v}" for k, v in OPTION_PROBES[name].items())
        rows.append(
            (
                f"steady step ({env['device']}, {name}: {options})",
                f"{probe_line(c)}; identical step-0 completions "
                f"{c['identical_step0_completions']:.1%}",
            )
        )
    packed = f.get("packed")
    if packed:
        p = packed["projected"]
        rows.append(
            (
                f"{packed['runs']} runs at once on one {env['device']}",
                f"{packed['packed_step_s']:.3f} s a step each (alone {packed['alone_step_s']:.3f}); "
                f"preset {p['gpu_hours']:.1f} GPU-h packed, {p['wall_hours_one_gpu']:.1f} h on "
                "one GPU",
            )
        )
    rows += targets(record)
    p = f.get("bf16_vs_fp32")
    if p:
        rows.append(
            (
                "bf16 vs fp32, step 0",
                f"loss diff {p['loss']['abs_diff']:.2e}, grad-norm rel diff "
                f"{p['grad_norm']['rel_diff']:.2e}, max adv diff {p['max_abs_advantage_diff']:.2e}, "
                f"identical completions {p['identical_completions']:.1%}",
            )
        )
    d = f.get("device_vs_cpu")
    if d:
        worst = sorted(d["max_abs_metric_diff"].items(), key=lambda kv: -kv[1])[:3]
        rows.append(
            (
                f"device vs CPU, {d['steps']} steps",
                f"identical completions {d['identical_completions_per_step']}, weights "
                f"{d['final_max_abs_weight_difference']:.2e}; largest: "
                + ", ".join(f"{k} {v:.2e}" for k, v in worst),
            )
        )
    for name, check in record["checks"].items():
        rows.append((f"check {name}", "PASS" if check["passed"] else "FAIL"))
    rows += [(f"error in {name}", text) for name, text in record["errors"].items()]
    return "\n".join(["| figure | value |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows)])


if __name__ == "__main__":
    sys.exit(main())
