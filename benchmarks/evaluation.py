"""Evaluation jobs: how much of their time is generation, and what the efficiency curves add.

An evaluation job's useful work is generating completions; the rest (process start, imports,
model loads) is overhead the local job worker exists to remove. ``evaluation_overhead`` reads
that share from a finished pipeline, ``evaluation_modes`` measures it directly for one run in
process, with a cold worker and a warm one. ``curve_cost`` prices the efficiency curves: the
time evaluation jobs spend scoring curve policies, and the disk their weights hold.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from benchmarks.records import ROOT, eval_dir, read_job_benchmarks, subtrees, timings
from grpo_ablation.design.options import EvaluationConfig
from grpo_ablation.layout import STEP_RESULTS

MODES = ("in_process", "cold_worker", "warm_worker")


def evaluation_overhead(exp_dir: Path) -> dict[str, Any]:
    """Share of evaluation job time spent outside generation (start, imports, model loads).

    Per job and pooled over all jobs (1 - total generation / total job wall): with the local
    job worker the first job also waits for the worker's start-up, which the pooled share
    counts and the median hides.
    """
    jobs = read_job_benchmarks(exp_dir)
    rows = []
    for job in jobs[jobs["rule"] == "evaluate"].itertuples():
        job_timings = timings(eval_dir(job.folder, job.job))
        gen = sum(t["generate_s"] for t in job_timings)
        rows.append(
            {
                "job": job.job,
                "wall_s": job.wall_s,
                "generate_s": gen,
                "in_worker": all(t.get("in_worker", False) for t in job_timings),
                "outside_generation": 1 - gen / job.wall_s,
            }
        )
    shares = [r["outside_generation"] for r in rows]
    total_wall = sum(r["wall_s"] for r in rows)
    return {
        "benchmark": "evaluation_overhead",
        "what": "1 - generation time / evaluation job wall time",
        "target": "<= 0.25",
        "experiment": str(exp_dir),
        "jobs_in_worker": sum(r["in_worker"] for r in rows),
        "median_outside_generation": statistics.median(shares) if shares else None,
        "pooled_outside_generation": (
            1 - sum(r["generate_s"] for r in rows) / total_wall if total_wall else None
        ),
        "jobs": rows,
    }


def evaluation_modes(exp_dir: Path, repeats: int = 3) -> dict[str, Any]:
    """One run's evaluation job in-process, with a cold worker and a warm one, interleaved.

    Each job is the rules' command (``grpo.py evaluate``) timed from outside; the share outside
    generation is 1 - generate_s / wall. Cold: a fresh worker (private TMPDIR) that the job starts.
    """
    run = next(p.parent for p in sorted((exp_dir / "runs").rglob("run_info.json")))
    first = json.loads(next((exp_dir / "eval" / "base" / "test").rglob(STEP_RESULTS)).read_text())
    # every option resolved, as the job receives the section (checks.evaluation_config)
    resolved = EvaluationConfig(
        batch_size=first["batch_size"],
        seed=first["seeds"]["random_seed"],
        limit=first["limit"],
        backend=first["backend"],
    )
    evaluation = asdict(resolved) | {"device": first["device"], "dtype": first["dtype"]}
    cli = ROOT / "workflow" / "scripts" / "grpo.py"

    def evaluate(out: Path, env: dict[str, str]) -> float:
        """Wall seconds of one evaluation job, as the rule runs it."""
        started = time.perf_counter()
        subprocess.run(
            [
                sys.executable,
                str(cli),
                "evaluate",
                "--run",
                str(run),
                "--tasks",
                str(exp_dir / "tasks"),
                "--out",
                str(out),
                "--evaluation",
                json.dumps(evaluation),
            ],
            env=env,
            capture_output=True,
            check=True,
        )
        return time.perf_counter() - started

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeats):
            for mode in MODES:
                out = Path(tmp) / f"{mode}{i}"
                # the worker is found through its socket under TMPDIR: a private one keeps it cold
                worker_tmp = Path(tmp) / (f"cold{i}" if mode == "cold_worker" else "warm")
                worker_tmp.mkdir(exist_ok=True)
                env = {
                    **os.environ,
                    "TMPDIR": str(worker_tmp),
                    "GRPO_WORKER_IDLE": "600",
                    "GRPO_WORKER": "off" if mode == "in_process" else "on",
                }
                if mode == "warm_worker" and i == 0:  # start the shared worker outside the timing
                    evaluate(Path(tmp) / "warm-up", env)
                wall = evaluate(out, env)
                gen = sum(t["generate_s"] for t in timings(out))
                rows.append(
                    {
                        "mode": mode,
                        "repeat": i,
                        "wall_s": wall,
                        "generate_s": gen,
                        "outside_generation": 1 - gen / wall,
                    }
                )
        from grpo_ablation.worker import stop

        for sock in Path(tmp).rglob("*.sock"):
            stop(sock)
    median = {
        m: statistics.median(r["outside_generation"] for r in rows if r["mode"] == m) for m in MODES
    }
    return {
        "benchmark": "evaluation_modes",
        "what": "share outside generation of one run's evaluation job (median), by mode",
        "target": "<= 0.25",
        "run": str(run),
        "median_outside_generation": median,
        "rows": rows,
    }


def curve_cost(exp_dir: Path) -> dict[str, Any]:
    """What the efficiency curves cost a finished pipeline: the seconds its evaluation jobs spent
    scoring curve policies (each curve.json's own timer), as a share of the summed wall time of
    its jobs, and the disk their weights hold."""
    folders = subtrees(exp_dir)
    curves = [json.loads(p.read_text()) for f in folders for p in f.glob("eval/**/curve.json")]
    curve_s = sum(c["seconds"] for c in curves)
    snapshot_bytes = sum(
        p.stat().st_size for f in folders for p in f.glob("runs/**/curve/step-*/*") if p.is_file()
    )
    job_wall = float(read_job_benchmarks(exp_dir)["wall_s"].sum())
    return {
        "benchmark": "curve_cost",
        "what": "seconds scoring curve policies over the summed wall time of every job of the "
        "DAG (the last run of each; a partial rerun is costed against the whole DAG)",
        "target": "<= 0.15",
        "experiment": str(exp_dir),
        "runs": len(curves),
        "points": sum(len(c["points"]) for c in curves),
        "curve_s": curve_s,
        "sum_job_wall_s": job_wall,
        "share_of_job_time": curve_s / job_wall,
        "snapshot_mb": snapshot_bytes / 2**20,
    }
