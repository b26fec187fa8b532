"""Faults lose nothing (pipeline level, local executor): a training job SIGKILLed mid-run resumes
from its last checkpoint and ends where an uninterrupted run ends; a failed evaluation is retried
without retraining; an interrupted run is never taken for complete; rerunning a cell from scratch
reproduces its rollout log and evaluation results exactly; run_info.json records the provenance."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from conftest import faults_env, remade_inputs

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = Path(sys.executable).with_name("snakemake")
CELL = "std=sample/agg=sequence_mean/G=4"
RUN = f"smoke/runs/{CELL}/seed=0"
EVAL = f"smoke/eval/{CELL}/seed=0"
STEPS = 6


def _config(path: Path, results: Path) -> Path:
    cfg = yaml.safe_load((ROOT / "config/smoke.yaml").read_text())
    cfg.update(results_dir=str(results), seeds=[0])
    cfg["training"].update(max_steps=STEPS, save_steps=2)
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def _env(**extra: str) -> dict[str, str]:
    # Rules call `python`: the interpreter running the tests must come first on PATH.
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    return {**os.environ, "PATH": path, "OMP_NUM_THREADS": "1", **extra}


def snakemake(
    results: Path,
    *targets: str,
    env: dict[str, str] | None = None,
    wait: bool = True,
    extra: tuple[str, ...] = (),
) -> subprocess.CompletedProcess | subprocess.Popen:
    config = _config(results.parent / f"{results.name}.yaml", results)
    cmd = [
        str(SNAKEMAKE),
        "--cores",
        "1",
        "--configfile",
        str(config),
        "--workflow-profile",
        "none",
        *extra,
        *[str(results / t) for t in targets],
    ]
    kwargs = dict(
        cwd=ROOT, env=env or _env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    if not wait:
        return subprocess.Popen(cmd, **kwargs)
    return subprocess.run(cmd, **kwargs, timeout=600)


@pytest.fixture(scope="module")
def reference(smoke_pipeline, tmp_path_factory) -> dict:
    """An uninterrupted train + evaluate whose first evaluation attempt is made to fail."""
    results = tmp_path_factory.mktemp("reference") / "results"
    smoke_pipeline.copy_inputs(results / "smoke")
    trained = snakemake(results, f"{RUN}/run_info.json")
    assert trained.returncode == 0, trained.stdout[-3000:]
    assert not remade_inputs(trained.stdout), trained.stdout[-3000:]
    run = results / RUN
    mtimes = {p: p.stat().st_mtime_ns for p in run.rglob("*") if p.is_file()}
    marker = results.parent / "eval_failed_once"
    env = faults_env(_env(), GRPO_FAULT_FAIL_EVAL_ONCE=str(marker))
    # Retries come from the profile (profiles/slurm: 2); locally, from the command line.
    evaluated = snakemake(results, f"{EVAL}/test/summary.json", env=env, extra=("--retries", "1"))
    return {"results": results, "mtimes": mtimes, "marker": marker, "eval": evaluated}


def test_a_failed_evaluation_is_retried_without_retraining(reference):
    evaluated, results = reference["eval"], reference["results"]
    assert evaluated.returncode == 0, evaluated.stdout[-3000:]
    assert reference["marker"].exists(), "the injected failure never fired"
    assert "Trying to restart job" in evaluated.stdout, evaluated.stdout[-3000:]
    assert (results / EVAL / "test" / "summary.json").exists()
    now = {p: p.stat().st_mtime_ns for p in (results / RUN).rglob("*") if p.is_file()}
    assert now == reference["mtimes"], "training outputs were touched by the evaluation retry"
    assert "rule train:" not in evaluated.stdout, "the evaluation retry retrained"


def _pid_of_train(out: Path) -> int | None:
    """The python process of the train job writing to ``out`` (found by its command line)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"train" in argv and str(out).encode() in argv and any(b"python" in a for a in argv[:1]):
            return int(proc.name)
    return None


def test_a_killed_training_job_resumes_to_the_same_result(smoke_pipeline, reference, tmp_path):
    from safetensors.torch import load_file

    from grpo_ablation.training.rollout_log import read_rollouts

    results = tmp_path / "results"
    smoke_pipeline.copy_inputs(results / "smoke")
    run = results / RUN
    slow = faults_env(_env(), GRPO_FAULT_STEP_SLEEP="1.0")
    proc = snakemake(results, f"{RUN}/run_info.json", env=slow, wait=False)
    deadline = time.time() + 300
    while not (run / "checkpoints" / "checkpoint-2" / "trainer_state.json").exists():
        assert proc.poll() is None and time.time() < deadline, "train ended before its checkpoint"
        time.sleep(0.1)
    time.sleep(1.5)  # past the checkpoint: the rollouts logged after it must be discarded
    pid = _pid_of_train(run)
    assert pid is not None, "could not find the train job's process"
    os.kill(pid, signal.SIGKILL)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode != 0, out[-2000:]
    assert not (run / "run_info.json").exists()

    # Incomplete outputs are never taken for complete ones: the train job is due again.
    dry = snakemake(results, f"{RUN}/run_info.json", extra=("-n",))
    assert dry.returncode == 0 and "rule train:" in dry.stdout, dry.stdout[-2000:]

    rerun = snakemake(results, f"{RUN}/run_info.json")
    assert rerun.returncode == 0, rerun.stdout[-3000:]
    assert not remade_inputs(rerun.stdout), rerun.stdout[-3000:]
    ref = reference["results"] / RUN
    assert read_rollouts(ref / "rollouts").equals(read_rollouts(run / "rollouts"))
    metrics = [(ref / "metrics.jsonl").read_text(), (run / "metrics.jsonl").read_text()]
    final = [json.loads(m.splitlines()[-1]) for m in metrics]
    assert {k: v for k, v in final[0].items() if "time" not in k and "runtime" not in k} == {
        k: v for k, v in final[1].items() if "time" not in k and "runtime" not in k
    }
    wa = load_file(ref / "checkpoints" / f"checkpoint-{STEPS}" / "model.safetensors")
    wb = load_file(run / "checkpoints" / f"checkpoint-{STEPS}" / "model.safetensors")
    assert all((wa[k] == wb[k]).all() for k in wa)


def test_rerunning_a_cell_from_scratch_reproduces_it_and_records_provenance(
    smoke_pipeline, reference, tmp_path
):
    from grpo_ablation.training.rollout_log import read_rollouts

    results = tmp_path / "results"
    smoke_pipeline.copy_inputs(results / "smoke")
    done = snakemake(results, f"{EVAL}/test/summary.json")
    assert done.returncode == 0, done.stdout[-3000:]
    assert not remade_inputs(done.stdout), done.stdout[-3000:]
    ref = reference["results"]
    assert read_rollouts(ref / RUN / "rollouts").equals(read_rollouts(results / RUN / "rollouts"))
    for step_dir in sorted((ref / EVAL / "test").glob("step=*")):
        a = json.loads((step_dir / "results.json").read_text())
        b = json.loads((results / EVAL / "test" / step_dir.name / "results.json").read_text())
        assert {k: v for k, v in a.items() if k not in ("checkpoint", "test")} == {
            k: v for k, v in b.items() if k not in ("checkpoint", "test")
        }
        same = (results / EVAL / "test" / step_dir.name / "samples.jsonl").read_text()
        assert (step_dir / "samples.jsonl").read_text().replace(str(ref), "") == same.replace(
            str(results), ""
        )

    info = json.loads((results / RUN / "run_info.json").read_text())
    assert len(info["git_commit"]) == 40 or info["git_commit"] == "unknown"
    assert len(info["training_config_hash"]) >= 16
    manifest = json.loads((results / "smoke" / "data" / "manifest.json").read_text())
    assert info["split_hashes"] == {s: v["sha256"] for s, v in manifest["splits"].items()}
    for lib in ("torch", "transformers", "trl"):
        assert info["library_versions"].get(lib), lib
