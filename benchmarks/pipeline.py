"""The workflow as a whole: planning its DAG, and where a finished pipeline's time and memory go.

``dag_scaling`` times Snakemake's dry run as the grid grows, the cost paid before any job
starts. The others read a finished pipeline (``records``): ``pipeline_overhead`` how busy its job
slots and cores were, ``dag_floor`` its wall time against the pure compute of its jobs (what
scheduling, start-up and I/O add), ``memory`` each rule's peak RSS (what a cluster job of
that rule must request).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.records import eval_dir, pipeline_wall, read_job_benchmarks, subtrees, timings
from grpo_ablation.layout import WALL_TIME


def _count_jobs(text: str) -> int:
    """The ``total <n>`` line of Snakemake's dry-run job table (-1 without one)."""
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "total" and parts[1].isdigit():
            return int(parts[1])
    return -1


def dag_scaling(sizes: tuple[int, ...] = (10, 100, 1000, 5000)) -> dict[str, Any]:
    """Dry-run time of the default design with as many seeds as give about ``n`` jobs."""
    import yaml

    base = yaml.safe_load(Path("config/config.yaml").read_text())
    rows = []
    with tempfile.TemporaryDirectory() as tmp:

        def dry_run(seeds: int) -> tuple[int, float]:
            cfg = {**base, "seeds": list(range(seeds)), "results_dir": tmp}
            path = Path(tmp) / f"grid{seeds}.yaml"
            path.write_text(yaml.safe_dump(cfg, sort_keys=False))
            cmd = [
                sys.executable,
                "-m",
                "snakemake",
                "-n",
                "--quiet",
                "all",
                "--cores",
                "2",
                "--configfile",
                str(path),
            ]
            started = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, text=True)
            elapsed = time.perf_counter() - started
            if proc.returncode:
                raise RuntimeError(proc.stderr[-2000:])
            return _count_jobs(proc.stdout + proc.stderr), elapsed

        # Jobs grow linearly with seeds: measure one and two seeds, then size each grid.
        one, two = dry_run(1)[0], dry_run(2)[0]
        per_seed, fixed = two - one, 2 * one - two
        for n in sizes:
            jobs, elapsed = dry_run(max(1, round((n - fixed) / per_seed)))
            rows.append({"target_jobs": n, "jobs": jobs, "dry_run_s": elapsed})
    return {
        "benchmark": "dag_scaling",
        "what": "wall time of `snakemake -n` for grids of about 10 to 5,000 jobs",
        "target": "1,000 jobs in <= 10 s",
        "rows": rows,
    }


def pipeline_overhead(exp_dir: Path, cores: int = 2) -> dict[str, Any]:
    """Wall time of a finished pipeline against the sum of its jobs' compute, and core use."""
    jobs = read_job_benchmarks(exp_dir)
    wall = pipeline_wall(jobs)
    job_wall = float(jobs["wall_s"].sum())
    return {
        "benchmark": "pipeline_overhead",
        "what": "sum of job wall times / (cores x pipeline wall time), and CPU time / (cores x wall)",
        "target": "utilisation >= 0.75",
        "experiment": str(exp_dir),
        "pipeline_wall_s": wall,
        "jobs": len(jobs),
        "sum_job_wall_s": job_wall,
        "slot_utilisation": job_wall / (cores * wall),
        "cpu_utilisation": float(jobs["cpu_s"].sum() / (cores * wall)),
    }


def dag_floor(exp_dir: Path, cores: int = 2) -> dict[str, Any]:
    """A finished pipeline's wall time against its floor: the pure compute of its jobs, summed
    from their own timers (each run's training loop, ``wall_time.json``; generation inside every
    evaluation, ``timing.json`` ``generate_s``; the base policy's SFT, ``sft_seconds`` times its
    threads), divided by the cores. Wall time: first job start to last job end (Snakemake's
    benchmark files; the DAG's own planning, a few seconds, is outside)."""
    folders = subtrees(exp_dir)
    runs = sorted(p for f in folders for p in f.glob(f"runs/**/{WALL_TIME}"))
    train_s = sum(sum(json.loads(p.read_text())) for p in runs)
    generate_s = sum(
        json.loads(p.read_text()).get("generate_s", 0.0)
        for f in folders
        for p in f.glob("eval/**/timing.json")
    )
    bases = [
        json.loads(p.read_text()).get("stats", {})
        for f in folders
        for p in f.glob("base/base_policy.json")
    ]
    # the base policies' SFT, in core-seconds (each runs on num_threads cores)
    sft_core_s = sum(
        float(b.get("sft_seconds") or 0.0) * int(b.get("config", {}).get("num_threads", 1))
        for b in bases
    )
    floor = (train_s + generate_s + sft_core_s) / cores
    jobs = read_job_benchmarks(exp_dir)
    wall = pipeline_wall(jobs)
    return {
        "benchmark": "dag_floor",
        "what": "pipeline wall time / floor (training loops + generation + SFT, / cores)",
        "target": "<= 1.5 (and the six-seed default <= 600 s on 2 cores)",
        "experiment": str(exp_dir),
        "runs": len(runs),
        "jobs": len(jobs),
        "train_s": train_s,
        "generate_s": generate_s,
        "base_policies": len(bases),
        "sft_core_s": sft_core_s,
        "floor_s": floor,
        "wall_s": wall,
        "wall_over_floor": wall / floor,
    }


def memory(exp_dir: Path) -> dict[str, Any]:
    """Peak RSS per rule (max over its jobs), from the benchmark files; for jobs run in the local
    worker, the child's own peak counts: an evaluation's (timing.json) and a training run's
    (run_info.json, measured by the process that trained)."""
    jobs = read_job_benchmarks(exp_dir)
    for i, job in jobs[jobs["rule"] == "evaluate"].iterrows():
        child = [t.get("max_rss_mb", 0.0) for t in timings(eval_dir(job["folder"], job["job"]))]
        jobs.loc[i, "max_rss_mb"] = max([job["max_rss_mb"], *child])
    for i, job in jobs[jobs["rule"] == "train"].iterrows():
        # benchmarks/train/<cell>/seed=<s>.tsv -> runs/<cell>/seed=<s>/run_info.json
        run = job["folder"] / "runs" / Path(job["job"]).relative_to("train").with_suffix("")
        info = json.loads((run / "run_info.json").read_text())
        trained = (info.get("peak_memory") or {}).get("host_rss_mb") or 0.0
        jobs.loc[i, "max_rss_mb"] = max(job["max_rss_mb"], trained)
    peak = jobs.groupby("rule")["max_rss_mb"].max().sort_values(ascending=False)
    return {
        "benchmark": "memory",
        "what": "peak RSS per rule (MB)",
        "experiment": str(exp_dir),
        "peak_rss_mb": {k: float(v) for k, v in peak.items()},
    }
