"""A real SLURM (Debian's slurmctld/slurmd/munge on this machine, as root, brought up by
``benchmarks.local_slurm``) runs the smoke config end to end through `snakemake --profile
slurm`: every non-local job goes through sbatch, a two-process training job cancelled with
scancel is resubmitted and the rerun completes the DAG; evaluation jobs packed into one allocation
share a job worker; a training job requeued as on preemption resumes within the same run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import faults_env, remade_inputs
from test_slurm_threads import local_rules

from benchmarks.local_slurm import CPU_PARTITION, Cluster, unavailable_reason

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = Path(sys.executable).with_name("snakemake")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    c = Cluster(tmp_path_factory.mktemp("slurm"))
    c.up()
    yield c
    c.down()


def _snakemake(results: Path, logs: Path) -> list[str]:
    # One seed and the stages the smoke config's hypotheses name (std scaling, its stage-1
    # checkpoint, aggregation after it, dr_grpo with the push): every kind of job the DAG submits,
    # without the stages that differ from these only in training options (the local smoke tests
    # run those): with them this test took 877 s in CI, without them 623 s beside other jobs.
    # Every training job runs two processes (torchrun, gloo) inside its allocation.
    off = ("group_size", "kl", "update_epochs", "zero_variance", "trl_menu")
    override = results.parent / "one_seed.yaml"
    override.write_text(
        f"results_dir: {results}\nseeds: [0]\ncompute:\n  processes_per_train_job: 2\n"
        # the smoke config asks for no GPU: every job to the CPU partition (not the default)
        + f"slurm: {{cpu_partition: {CPU_PARTITION}}}\n"
        + "stages:\n"
        + "".join(f"  {stage}: {{enabled: false}}\n" for stage in off)
    )
    return [
        str(SNAKEMAKE),
        "--profile",
        "profiles/slurm",
        "--configfile",
        "config/smoke.yaml",
        str(override),
        # No slurmdbd here: squeue, polled early (MinJobAge 300 >= 3 x 2 s keeps squeue).
        "--slurm-status-command",
        "squeue",
        "--slurm-init-seconds-before-status-checks",
        "2",
        "--slurm-keep-successful-logs",
        "--slurm-logdir",
        str(logs),
        # no accounts here (a SLURM run without slurm.account is refused otherwise)
        "--slurm-no-account",
    ]


def test_the_smoke_config_runs_through_slurm_and_survives_scancel(cluster, tmp_path):
    results, logs = tmp_path / "results", tmp_path / "slurm_logs"
    # Jobs inherit the submitting environment: the venv's python must come first on PATH.
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "OMP_NUM_THREADS": "1",
    }
    # Slow training steps (tests/inject) so that a job can be cancelled between its checkpoints:
    # it is cancelled once checkpoint-2 of its 4 steps is complete.
    slow = faults_env(env, GRPO_FAULT_STEP_SLEEP="2")
    first = _start(_snakemake(results, logs), slow)
    cancelled = saved = None
    partitions = set()
    deadline = time.time() + 600
    while cancelled is None and first.poll() is None and time.time() < deadline:
        partitions |= {job["partition"] for job in cluster.jobs()}
        for job in cluster.jobs():
            if job["state"] != "RUNNING" or "rule_train_wildcards_" not in job["comment"]:
                continue
            # comment: rule_train_wildcards_std=..._agg=..._G=4_<seed>
            cell, seed = job["comment"].split("_wildcards_", 1)[1].rsplit("_", 1)
            run = (
                results
                / "smoke/runs"
                / cell.replace("_agg=", "/agg=").replace("_G=", "/G=")
                / f"seed={seed}"
            )
            ckpt = run / "checkpoints/checkpoint-2"
            if (ckpt / "trainer_state.json").exists() and not (run / "run_info.json").exists():
                cancelled, saved = job, (run, (ckpt / "model.safetensors").stat().st_mtime_ns)
                subprocess.run(["scancel", job["id"]], check=True)
                break
        time.sleep(0.3)
    out, _ = first.communicate(timeout=900)
    assert cancelled is not None, f"no training job was seen between checkpoints:\n{out[-3000:]}"
    assert partitions == {CPU_PARTITION}, partitions  # slurm.cpu_partition, not the default

    second = subprocess.run(
        _snakemake(results, logs),
        cwd=ROOT,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=900,
    )
    assert second.returncode == 0, second.stdout[-4000:]

    exp = results / "smoke"
    runs = sorted(exp.glob("runs/**/run_info.json"))
    evals = sorted(exp.glob("eval/std=*/**/test/summary.json"))
    assert len(runs) >= 4 and len(evals) == len(runs)
    assert (exp / "eval/base/test/summary.json").exists()
    assert (exp / "calculations/calculations.md").exists()
    # Two processes per cell, the cancelled one included: both ranks' rollout rows, each once.
    from grpo_ablation.training.rollout_log import read_rollouts

    for info in runs:
        run = info.parent
        assert json.loads((run / "objective.json").read_text())["num_processes"] == 2
        rows = read_rollouts(run / "rollouts")
        assert set(rows["rank"]) == {0, 1}
        assert not rows.duplicated(["step", "group_index", "completion_index"]).any()
        assert len(rows) == json.loads((run / "budget.json").read_text())["completions"]

    # Every non-local job went through sbatch (the plugin logs each job under rule_<name>/);
    # local rules never did.
    submitted = {p.name: p for p in logs.iterdir()}
    assert len(list(submitted["rule_train"].iterdir())) == len(runs)
    # Evaluation rules form the group "evaluation": one job per allocation unless packed.
    evaluation_logs = [f for d in logs.glob("group_evaluation*") for f in d.rglob("*.log")]
    assert len(evaluation_logs) == len(evals) + 1  # + the base policy's
    assert "rule_base_policy" in submitted
    assert not {f"rule_{r}" for r in local_rules()} & set(submitted)
    slurm_logs = list(logs.rglob("*.log"))
    ctld = cluster.ctld_log.read_text()
    batch_jobs = set(re.findall(r"_slurm_rpc_submit_batch_job: JobId=(\d+)", ctld))
    assert {p.stem for p in slurm_logs} <= batch_jobs

    # Evaluation packed per allocation: the same evaluation jobs, 8 to an sbatch, sharing the
    # allocation's job worker (start-up paid once per allocation, not per job).
    from benchmarks.packing import packed_evaluation

    packed = packed_evaluation(_snakemake(results, logs), exp, logs, env, ROOT)
    print(json.dumps(packed))
    n = packed["evaluation_jobs"]
    assert packed["sbatch_before"] == len(evals) + 1 == n
    # Packs form per DAG evaluation: the stage-1 checkpoint adds stage 2's jobs later, in a pack
    # of their own, so 5 jobs took 2 submissions here, not one.
    assert packed["sbatch_after"] < n
    assert packed["jobs_in_worker"]["packed"] == n
    # Within a pack the jobs after the first find the allocation's worker warm: at least one job
    # per pack pays the start-up, the others far less (the figures are printed above; on the
    # smoke config's tiny model the thin client's own start dominates what remains).
    walls = packed["job_wall_s"]["packed"]
    assert len(walls) == n and walls[0] < walls[-1] / 2, walls

    # The cancelled two-process run resumed from its checkpoint-2 (kept as it was) to the end.
    run, mtime = saved
    assert (run / "checkpoints/checkpoint-2/model.safetensors").stat().st_mtime_ns == mtime
    assert json.loads((run / "run_info.json").read_text())["checkpoints"] == [2, 4]

    # The cancelled job was submitted again (a retry in the first run or the rerun) and finished.
    resubmitted = [d for d in submitted["rule_train"].iterdir() if len(list(d.glob("*.log"))) > 1]
    assert resubmitted, "the cancelled training job was never resubmitted"
    assert cancelled["id"] in {p.stem for d in resubmitted for p in d.glob("*.log")}


def test_a_requeued_training_job_resumes_and_the_workflow_finishes(cluster, request, tmp_path):
    """Preemption as SLURM does it: the running job is requeued (``scontrol requeue``, the
    profile submits with --requeue). The same Snakemake invocation waits for it and finishes,
    and the job resumed from its complete checkpoint instead of training again. The splits and
    base policy are the session's smoke run's (the test above submits their jobs)."""
    results, logs = tmp_path / "results", tmp_path / "slurm_logs"
    # asked for here, after `cluster`: where SLURM is missing the test skips before building it
    request.getfixturevalue("smoke_pipeline").copy_inputs(results / "smoke")
    run = results / "smoke/runs/std=sample/agg=sequence_mean/G=4/seed=0"
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "OMP_NUM_THREADS": "1",
    }
    command = [*_snakemake(results, logs), str(run / "run_info.json")]
    command[command.index(str(results.parent / "one_seed.yaml"))] = str(_one_process(results))
    first = _start(command, faults_env(env, GRPO_FAULT_STEP_SLEEP="2"))
    requeued = saved = None
    deadline = time.time() + 600
    while requeued is None and first.poll() is None and time.time() < deadline:
        ckpt = run / "checkpoints/checkpoint-2"
        between = (ckpt / "trainer_state.json").exists() and not (run / "run_info.json").exists()
        for job in cluster.jobs() if between else []:
            if job["state"] == "RUNNING" and "rule_train_wildcards_" in job["comment"]:
                saved = (ckpt / "model.safetensors").stat().st_mtime_ns
                subprocess.run(["scontrol", "requeue", job["id"]], check=True)
                requeued = job["id"]
        time.sleep(0.3)
    assert requeued is not None, "no training job was seen between its checkpoints"
    # SLURM holds a requeued job for about two minutes (its begin time); release it now.
    for _ in range(100):
        states = [j["state"] for j in cluster.jobs() if j["id"] == requeued]
        if states == ["PENDING"]:
            subprocess.run(["scontrol", "update", f"JobId={requeued}", "StartTime=now"], check=True)
            break
        time.sleep(0.2)
    out, _ = first.communicate(timeout=600)
    assert first.returncode == 0, out[-4000:]
    assert not remade_inputs(out), out[-4000:]
    # checkpoint-2 as it was (a fresh start would have written it again), and the run complete.
    assert (run / "checkpoints/checkpoint-2/model.safetensors").stat().st_mtime_ns == saved
    assert json.loads((run / "run_info.json").read_text())["checkpoints"] == [2, 4]


def _start(command: list[str], env: dict[str, str]) -> subprocess.Popen:
    """Snakemake running in the background, its output captured."""
    return subprocess.Popen(
        command, cwd=ROOT, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )


def _one_process(results: Path) -> Path:
    override = results.parent / "one_process.yaml"
    override.write_text(f"results_dir: {results}\nseeds: [0]\n")
    return override
