"""Benchmarks that print ratios measured side by side in one run: ``make bench``.

Absolute times on a shared machine are noise; each figure here compares two things measured in
the same process, interleaved (A B A B ...), and reports the median ratio.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch


def _tiny_setup(root: Path, n_layer: int = 2, n_embd: int = 64) -> tuple[Path, list[dict]]:
    from transformers import GPT2Config, GPT2LMHeadModel

    from grpo_ablation.policy.tokenizer import build_char_tokenizer

    tok = build_char_tokenizer()
    torch.manual_seed(0)
    cfg = GPT2Config(
        n_layer=n_layer,
        n_embd=n_embd,
        n_head=4,
        n_positions=32,
        vocab_size=len(tok),
        bos_token_id=tok.eos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    model = GPT2LMHeadModel(cfg)
    model.generation_config.pad_token_id = tok.pad_token_id
    model.save_pretrained(root / "model")
    tok.save_pretrained(root / "model")
    rows = [
        {"prompt_id": f"p{a}_{b}", "prompt": f"{a}+{b}=", "answer": str(a + b)}
        for a in range(10)
        for b in range(10)
    ]
    return root / "model", rows


def _reward(prompts, completions, answer, **kwargs):
    return [
        1.0 if c.strip(".").startswith(a) else 0.0 for c, a in zip(completions, answer, strict=True)
    ]


def _one_run(
    kind: str,
    model_dir: Path,
    rows: list[dict],
    out: Path,
    steps: int,
    gradient_checkpointing: bool = False,
) -> float:
    """Steps per second of one training run of ``steps`` optimizer steps (setup excluded)."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from grpo_ablation.training.options import TrainingConfig
    from grpo_ablation.training.trainer import AblationGRPOTrainer

    args = GRPOConfig(
        output_dir=str(out),
        per_device_train_batch_size=32,
        num_generations=8,
        max_completion_length=10,
        max_steps=steps,
        learning_rate=5e-4,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        bf16=False,
        seed=0,
        disable_tqdm=True,
        logging_steps=1,
        disable_dropout=True,
        log_level="error",
        loss_type="grpo",
        scale_rewards="group" if kind == "stock" else "none",
        gradient_checkpointing=gradient_checkpointing,  # TRL's default is True, the project's False
    )
    common: dict[str, Any] = dict(
        model=AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32),
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=AutoTokenizer.from_pretrained(model_dir),
        reward_funcs=_reward,
    )
    if kind == "stock":
        trainer = GRPOTrainer(**common)
    else:
        options = TrainingConfig(group_size=8, max_completion_length=10)  # sample, sequence_mean
        trainer = AblationGRPOTrainer(**common, options=options, run_dir=out)
    started = time.perf_counter()
    trainer.train()
    return steps / (time.perf_counter() - started)


def _interleaved(runs: dict[str, Any], steps: int, repeats: int) -> dict[str, list[float]]:
    """Steps per second of each named run (``runs[name](model_dir, rows, out, steps)``), ``repeats``
    times, interleaved with the order alternating, after one warm-up run."""
    import contextlib
    import io

    sps: dict[str, list[float]] = {name: [] for name in runs}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        model_dir, rows = _tiny_setup(root)
        with contextlib.redirect_stdout(io.StringIO()):
            _one_run(
                "stock", model_dir, rows, root / "warmup", 5
            )  # first-call costs out of the way
        for r in range(repeats):
            # alternate the order, so drift within a pair does not favour either
            order = list(runs) if r % 2 == 0 else list(reversed(runs))
            with contextlib.redirect_stdout(io.StringIO()):
                for name in order:
                    sps[name].append(runs[name](model_dir, rows, root / f"{name}{r}", steps))
    return sps


def trainer_overhead(steps: int = 60, repeats: int = 6) -> dict[str, Any]:
    """Project trainer vs stock TRL GRPOTrainer, same model, batch and objective."""
    sps = _interleaved(
        {kind: lambda *a, kind=kind: _one_run(kind, *a) for kind in ("stock", "ours")},
        steps,
        repeats,
    )
    ratios = [o / s for o, s in zip(sps["ours"], sps["stock"], strict=True)]
    return {
        "benchmark": "trainer_overhead",
        "what": "steps/s of the project trainer / steps/s of stock TRL GRPOTrainer",
        "target": ">= 0.95",
        "ratio_median": statistics.median(ratios),
        "ratios": ratios,
        "stock_steps_per_s": sps["stock"],
        "project_steps_per_s": sps["ours"],
        "config": {"steps": steps, "repeats": repeats, "batch": 32, "G": 8, "max_len": 10},
    }


def gradient_checkpointing(steps: int = 60, repeats: int = 6) -> dict[str, Any]:
    """What TRL's default gradient checkpointing costs the project trainer (off by default in
    the project's compute section; it changes no number, tests/test_training_run.py)."""
    sps = _interleaved(
        {
            f"checkpointing={on}": lambda *a, on=on: _one_run("ours", *a, gradient_checkpointing=on)
            for on in (False, True)
        },
        steps,
        repeats,
    )
    ratios = [
        off / on
        for off, on in zip(sps["checkpointing=False"], sps["checkpointing=True"], strict=True)
    ]
    return {
        "benchmark": "gradient_checkpointing",
        "what": "steps/s with gradient checkpointing off / on (project trainer)",
        "target": "> 1 (off is the default)",
        "ratio_median": statistics.median(ratios),
        "ratios": ratios,
        "steps_per_s": sps,
        "config": {"steps": steps, "repeats": repeats, "batch": 32, "G": 8, "max_len": 10},
    }


def dag_scaling(sizes: tuple[int, ...] = (10, 100, 1000, 5000)) -> dict[str, Any]:
    """Dry-run time of the default design with as many seeds as give about ``n`` jobs."""
    import subprocess
    import sys

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

        # Jobs grow linearly with seeds: calibrate on one and two seeds, then size each grid.
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


def subtrees(exp_dir: Path) -> list[Path]:
    """The experiment folder and, with base-policy draws, each draw's folder (draw=<d>/)."""
    return [exp_dir, *sorted(exp_dir.glob("draw=*"))]


def one_draw(exp_dir: Path) -> Path:
    """A one-base-policy folder: the experiment itself, or its first draw's folder."""
    return next(iter(sorted(exp_dir.glob("draw=*"))), exp_dir)


def read_job_benchmarks(exp_dir: Path):
    """One row per job from Snakemake's ``benchmark:`` files (every draw's too): rule, wall s,
    cpu s, peak RSS, and the job's end (file mtime) and start (end - wall); ``folder`` is the
    experiment or draw folder the job belongs to, ``job`` its path under ``benchmarks/``."""
    import pandas as pd

    rows = []
    for folder in subtrees(exp_dir):
        root = folder / "benchmarks"
        for path in sorted(root.rglob("*.tsv")):
            frame = pd.read_csv(path, sep="\t")
            last = frame.iloc[-1]
            end = path.stat().st_mtime
            rule = path.relative_to(root).parts[0].removesuffix(".tsv")
            rows.append(
                {
                    "folder": folder,
                    "rule": rule,
                    "job": str(path.relative_to(root)),
                    "wall_s": float(last["s"]),
                    "cpu_s": float(last["cpu_time"]),
                    "max_rss_mb": float(last["max_rss"]),
                    "end": end,
                    "start": end - float(last["s"]),
                }
            )
    return pd.DataFrame(rows)


def pipeline_wall(jobs) -> float:
    """First job start to last job end (Snakemake's benchmark files)."""
    return float(jobs["end"].max() - jobs["start"].min())


def pipeline_overhead(exp_dir: Path, cores: int = 2) -> dict[str, Any]:
    """Wall time of a finished pipeline against the sum of its jobs' compute, and core use."""
    jobs = read_job_benchmarks(exp_dir)
    if jobs.empty:
        raise FileNotFoundError(
            f"no benchmark files under {exp_dir}/benchmarks: run the pipeline first"
        )
    wall = pipeline_wall(jobs)
    return {
        "benchmark": "pipeline_overhead",
        "what": "sum of job wall times / (cores x pipeline wall time), and CPU time / (cores x wall)",
        "target": "utilisation >= 0.75",
        "experiment": str(exp_dir),
        "pipeline_wall_s": wall,
        "jobs": len(jobs),
        "sum_job_wall_s": float(jobs["wall_s"].sum()),
        "slot_utilisation": float(jobs["wall_s"].sum() / (cores * wall)),
        "cpu_utilisation": float(jobs["cpu_s"].sum() / (cores * wall)),
    }


def dag_floor(exp_dir: Path, cores: int = 2) -> dict[str, Any]:
    """A finished pipeline's wall time against its floor: the pure compute of its jobs, summed
    from their own timers (each run's training loop, ``wall_time.json``; generation inside every
    evaluation, ``timing.json`` ``generate_s``; the base policy's SFT, ``sft_seconds`` times its
    threads), divided by the cores. Wall time: first job start to last job end (Snakemake's
    benchmark files; the DAG's own planning, a few seconds, is outside)."""
    folders = subtrees(exp_dir)
    runs = sorted(p for f in folders for p in f.glob("runs/**/wall_time.json"))
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
    jobs = read_job_benchmarks(exp_dir)
    return {
        "benchmark": "curve_cost",
        "what": "seconds scoring curve policies over the summed wall time of every job of the "
        "DAG (the last run of each; a partial rerun is costed against the whole DAG)",
        "target": "<= 0.15",
        "experiment": str(exp_dir),
        "runs": len(curves),
        "points": sum(len(c["points"]) for c in curves),
        "curve_s": curve_s,
        "sum_job_wall_s": float(jobs["wall_s"].sum()),
        "share_of_job_time": curve_s / float(jobs["wall_s"].sum()),
        "snapshot_mb": snapshot_bytes / 2**20,
    }


def _eval_dir(exp_dir: Path, job: str) -> Path:
    """``evaluate/<cell>/seed=<s>.tsv`` or ``evaluate/base.tsv`` (rule ``evaluate_base``, filed
    under ``evaluate/``) -> the job's eval directory."""
    return exp_dir / "eval" / Path(*Path(job).with_suffix("").parts[1:])


def _timings(eval_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(t.read_text()) for t in eval_dir.rglob("timing.json")]


def evaluation_overhead(exp_dir: Path) -> dict[str, Any]:
    """Share of evaluation job time spent outside generation (start, imports, model loads).

    Per job and pooled over all jobs (1 - total generation / total job wall): with the local
    job worker the first job also waits for the worker's start-up, which the pooled share
    counts and the median hides.
    """
    jobs = read_job_benchmarks(exp_dir)
    rows = []
    for job in jobs[jobs["rule"] == "evaluate"].itertuples():
        timings = _timings(_eval_dir(job.folder, job.job))
        gen = sum(t["generate_s"] for t in timings)
        rows.append(
            {
                "job": job.job,
                "wall_s": job.wall_s,
                "generate_s": gen,
                "in_worker": all(t.get("in_worker", False) for t in timings),
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
    import os
    import subprocess
    import sys

    run = next(p.parent for p in sorted((exp_dir / "runs").rglob("run_info.json")))
    first = json.loads(next((exp_dir / "eval" / "base" / "test").rglob("results.json")).read_text())
    evaluation = {
        "batch_size": first["batch_size"],
        "device": first["device"],
        "dtype": first["dtype"],
        "seed": first["seeds"]["random_seed"],
        "limit": first["limit"],
        "external_benchmarks": [],
    }
    cli = Path(__file__).resolve().parents[1] / "workflow" / "scripts" / "grpo.py"

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
            for mode in ("in_process", "cold_worker", "warm_worker"):
                out = Path(tmp) / f"{mode}{i}"
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
                gen = sum(timing["generate_s"] for timing in _timings(out))
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
        m: statistics.median(r["outside_generation"] for r in rows if r["mode"] == m)
        for m in ("in_process", "cold_worker", "warm_worker")
    }
    return {
        "benchmark": "evaluation_modes",
        "what": "share outside generation of one run's evaluation job (median), by mode",
        "target": "<= 0.25",
        "run": str(run),
        "median_outside_generation": median,
        "rows": rows,
    }


def memory(exp_dir: Path) -> dict[str, Any]:
    """Peak RSS per rule (max over its jobs), from the benchmark files; for jobs run in the local
    worker, the child's own peak counts: an evaluation's (timing.json) and a training run's
    (run_info.json, measured by the process that trained)."""
    jobs = read_job_benchmarks(exp_dir)
    for i, job in jobs[jobs["rule"] == "evaluate"].iterrows():
        child = [t.get("max_rss_mb", 0.0) for t in _timings(_eval_dir(job["folder"], job["job"]))]
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


PACK = 8  # evaluation jobs per allocation in the packed run (profiles/slurm: group-components)
PACKING_FLAGS = ["--group-components", f"evaluation={PACK}", "--resources", "eval_slots=1"]


def _submissions(logs: Path, prefix: str) -> int:
    """sbatch submissions the SLURM plugin logged under ``<logs>/<prefix>*/`` (one log each; a
    group job's folder is ``group_<group>_<rules>``)."""
    return sum(len(list(d.rglob("*.log"))) for d in logs.glob(f"{prefix}*") if d.is_dir())


def packed_evaluation(
    snakemake: list[str], exp: Path, logs: Path, env: dict[str, str], cwd: Path
) -> dict[str, Any]:
    """The evaluation jobs of a finished SLURM run, run again packed ``PACK`` to an allocation.

    ``snakemake`` is the command that ran the experiment through ``--profile slurm`` (with
    ``--slurm-logdir logs``). Before: one sbatch per evaluation job, each paying its own start-up.
    After: one sbatch per pack, whose jobs share the allocation's job worker.
    """
    import subprocess

    before = evaluation_overhead(exp)
    # The evaluation rules are the group "evaluation": unpacked, one allocation per job.
    submitted = _submissions(logs, "group_evaluation")
    done = subprocess.run(
        [*snakemake, "--forcerun", "evaluate", "evaluate_base", *PACKING_FLAGS],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if done.returncode:
        raise RuntimeError(
            f"packed evaluation run failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
    after = evaluation_overhead(exp)
    jobs = len(before["jobs"])  # the base policy's (benchmarks/evaluate/base.tsv) included
    return {
        "benchmark": "slurm_packed_evaluation",
        "what": f"evaluation jobs through a single-node SLURM: one sbatch each vs {PACK} per allocation",
        "target": "fewer submissions, shorter evaluation jobs",
        "evaluation_jobs": jobs,
        "sbatch_before": submitted,
        "sbatch_after": _submissions(logs, "group_evaluation") - submitted,
        "median_outside_generation": {
            "one per allocation": before["median_outside_generation"],
            "packed": after["median_outside_generation"],
        },
        "pooled_outside_generation": {
            "one per allocation": before["pooled_outside_generation"],
            "packed": after["pooled_outside_generation"],
        },
        "jobs_in_worker": {
            "one per allocation": before["jobs_in_worker"],
            "packed": after["jobs_in_worker"],
        },
        "job_wall_s": {
            "one per allocation": sorted(r["wall_s"] for r in before["jobs"]),
            "packed": sorted(r["wall_s"] for r in after["jobs"]),
        },
    }


def slurm_packing() -> dict[str, Any]:
    """Bring up the single-node SLURM, run the smoke config (one seed) through the SLURM
    profile, then its evaluation jobs packed (``packed_evaluation``). Needs root and Debian's
    slurm packages (``benchmarks.local_slurm``); otherwise says why it was skipped."""
    import os
    import subprocess
    import sys
    import tempfile

    from benchmarks.local_slurm import Cluster, unavailable_reason

    reason = unavailable_reason()
    if reason:
        return {"benchmark": "slurm_packed_evaluation", "skipped": reason}
    root = Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        results, logs = tmp / "results", tmp / "slurm_logs"
        override = tmp / "one_seed.yaml"
        override.write_text(f"results_dir: {results}\nseeds: [0]\n")
        cmd = [
            str(Path(sys.executable).with_name("snakemake")),
            "--profile",
            "slurm",
            "--configfile",
            str(root / "config/smoke.yaml"),
            str(override),
            "--slurm-status-command",
            "squeue",
            "--slurm-init-seconds-before-status-checks",
            "2",
            "--slurm-keep-successful-logs",
            "--slurm-logdir",
            str(logs),
        ]
        env = {
            **os.environ,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
            "OMP_NUM_THREADS": "1",
        }
        cluster = Cluster(tmp / "slurm")
        cluster.up()
        try:
            done = subprocess.run(
                cmd, cwd=root, env=env, capture_output=True, text=True, timeout=1800
            )
            if done.returncode:
                raise RuntimeError(
                    f"SLURM run failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
                )
            return packed_evaluation(cmd, results / "smoke", logs, env, root)
        finally:
            cluster.down()


def _count_jobs(text: str) -> int:
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "total" and parts[1].isdigit():
            return int(parts[1])
    return -1


SAMPLED_METRICS = {"mean@k": "sampled_mean_at_k", "exact": "sampled_exact"}


def sampled_noise(
    exp_dir: Path, config: Path = Path("config/config.yaml"), stages=("std_scaling", "aggregation")
) -> dict[str, Any]:
    """The exact sampled accuracy against mean@k on the same checkpoints: per contrast of the
    stages, the 95% interval half-width and the per-seed SD of the paired differences with each,
    side by side (a finished experiment evaluated with ``sampled_metric: exact``)."""
    import yaml
    from snakemake.utils import validate

    from grpo_ablation.analysis.stats import paired_differences, paired_interval
    from grpo_ablation.design import Design, read_winners

    cfg = yaml.safe_load(config.read_text())
    validate(cfg, "workflow/schemas/config.schema.yaml")  # fills the defaults
    if len(cfg["seeds"]) < 2:
        return {
            "benchmark": "sampled_noise",
            "skipped": f"{config} runs {len(cfg['seeds'])} seed per base policy: no per-seed SD",
        }
    winners = read_winners(sorted((exp_dir / "selection").glob("*.json")))
    rows = Design.of(cfg).rows(winners, list(stages))
    finals: dict[str, dict[str, dict[int, float]]] = {m: {} for m in SAMPLED_METRICS}
    for r in rows:
        for seed in cfg["seeds"]:
            summary = exp_dir / f"eval/{r['cell']}/seed={seed}/test/summary.json"
            final = json.loads(summary.read_text())["checkpoints"][-1]
            for m, key in SAMPLED_METRICS.items():
                finals[m].setdefault(r["cell"], {})[int(seed)] = float(final[key])
    contrasts = []
    for r in rows:
        if r["cell"] == r["reference"]:
            continue
        row: dict[str, Any] = {"stage": r["stage"], "cell": r["cell"]}
        for m in SAMPLED_METRICS:
            a, b = finals[m][r["cell"]], finals[m][r["reference"]]
            iv = paired_interval(a, b)
            row[m] = {
                "diff": iv.mean,
                "half_width": (iv.high - iv.low) / 2,
                "sd": statistics.stdev(paired_differences(a, b).values()),
            }
        contrasts.append(row)

    def median(m: str, key: str) -> float:
        return statistics.median(c[m][key] for c in contrasts)

    return {
        "benchmark": "sampled_noise",
        "experiment": str(exp_dir),
        "seeds": len(cfg["seeds"]),
        "contrasts": contrasts,
        "median_half_width": {m: median(m, "half_width") for m in SAMPLED_METRICS},
        "median_sd": {m: median(m, "sd") for m in SAMPLED_METRICS},
        "ratio": median("mean@k", "half_width") / median("exact", "half_width"),
        "target": "median half-width of stage 1-2 contrasts >= 2x narrower (with all of issue 21)",
    }


NOISE_STAGES = ("std_scaling", "aggregation")


def _contrast_noise(exp_dir: Path, stages=NOISE_STAGES) -> dict[tuple[str, str, str], dict]:
    """(stage, cell, quantity) -> 95% half-width and per-seed SD of the paired difference, from a
    finished experiment's effect tables (``figures/<stage>/effects.csv``)."""
    from scipy import stats

    out = {}
    for stage in stages:
        with (exp_dir / f"figures/{stage}/effects.csv").open() as fh:
            for row in csv.DictReader(fh):
                if row["is_reference"] == "True" or row["low"] in ("", "nan"):
                    continue
                n, half = int(row["n"]), (float(row["high"]) - float(row["low"])) / 2
                sd = half * n**0.5 / float(stats.t.ppf(0.975, n - 1))
                out[(stage, row["cell"], row["quantity"])] = {"half_width": half, "sd": sd}
    return out


def crn_gain(before: Path, after: Path) -> dict[str, Any]:
    """Common random numbers: the stage 1-2 contrasts of two finished six-seed defaults that differ
    only in ``training.sampler`` / ``evaluation.sampler`` (stream before, keyed after), side by
    side: per quantity the median 95% half-width and per-seed SD, and their ratios."""
    missing = [str(p) for p in (before, after) if not (p / "figures").is_dir()]
    if missing:
        return {
            "benchmark": "crn_gain",
            "skipped": f"no finished experiment at {missing}: run the default with "
            "--config experiment=default_stream 'training={sampler: stream}' "
            "'evaluation={sampler: stream}' and ask for its stage 1-2 figures/<stage>/effects.csv",
        }
    a, b = _contrast_noise(before), _contrast_noise(after)
    common = sorted(a.keys() & b.keys())
    if not common:
        return {
            "benchmark": "crn_gain",
            "skipped": f"no stage 1-2 contrast has an interval in both {before} and {after} "
            "(it needs two seeds or more under one base policy)",
        }
    quantities = sorted({q for _, _, q in common})
    per_quantity = {}
    for q in quantities:
        keys = [k for k in common if k[2] == q]
        med = {
            side: {m: statistics.median(d[k][m] for k in keys) for m in ("half_width", "sd")}
            for side, d in (("before", a), ("after", b))
        }
        per_quantity[q] = {
            "contrasts": len(keys),
            **med,
            "ratio": med["before"]["half_width"] / med["after"]["half_width"],
            "narrower": sum(b[k]["half_width"] < a[k]["half_width"] for k in keys),
        }
    return {
        "benchmark": "crn_gain",
        "before": str(before),
        "after": str(after),
        "quantities": per_quantity,
        "contrasts": [
            {"stage": k[0], "cell": k[1], "quantity": k[2], "before": a[k], "after": b[k]}
            for k in common
        ],
        "target": "median stage 1-2 half-width >= 2x narrower (before / after)",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("results/bench"))
    parser.add_argument("--only", nargs="*", default=None, help="benchmarks to run")
    parser.add_argument(
        "--experiment",
        type=Path,
        default=Path("results/default"),
        help="a finished pipeline run, for the pipeline, evaluation and memory figures",
    )
    parser.add_argument(
        "--before",
        type=Path,
        default=Path("results/default_stream"),
        help="crn_gain: the default run with training.sampler and evaluation.sampler stream",
    )
    a = parser.parse_args()
    torch.set_num_threads(1)
    suite = {
        "trainer_overhead": trainer_overhead,
        "gradient_checkpointing": gradient_checkpointing,
        "dag_scaling": dag_scaling,
        "pipeline_overhead": lambda: pipeline_overhead(a.experiment),
        "dag_floor": lambda: dag_floor(a.experiment),
        "curve_cost": lambda: curve_cost(a.experiment),
        "evaluation_overhead": lambda: evaluation_overhead(a.experiment),
        "evaluation_modes": lambda: evaluation_modes(one_draw(a.experiment)),
        "memory": lambda: memory(a.experiment),
        "sampled_noise": lambda: sampled_noise(one_draw(a.experiment)),
        "crn_gain": lambda: crn_gain(a.before, one_draw(a.experiment)),
        "slurm_packing": slurm_packing,
    }
    a.out.mkdir(parents=True, exist_ok=True)
    results = []
    for name, fn in suite.items():
        if a.only and name not in a.only:
            continue
        result = fn()
        results.append(result)
        print(json.dumps(result))
    (a.out / "bench.json").write_text(json.dumps(results, indent=2) + "\n")
    rows = summary_rows(results)
    with (a.out / "bench.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=["benchmark", "measure", "value", "target"])
        writer.writeheader()
        writer.writerows(rows)
    lines = ["| benchmark | measure | value | target |", "|---|---|---|---|"]
    lines += [f"| {r['benchmark']} | {r['measure']} | {r['value']} | {r['target']} |" for r in rows]
    (a.out / "bench.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def summary_rows(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One line per figure worth quoting, for the CSV and Markdown summaries."""
    rows: list[dict[str, Any]] = []

    def add(bench: str, measure: str, value: Any, target: str = "") -> None:
        value = f"{value:.3g}" if isinstance(value, float) else value
        rows.append({"benchmark": bench, "measure": measure, "value": value, "target": target})

    for r in results:
        name = r["benchmark"]
        if name == "trainer_overhead":
            add(name, "project / stock TRL steps per s (median)", r["ratio_median"], r["target"])
        elif name == "gradient_checkpointing":
            add(
                name, "steps per s, checkpointing off / on (median)", r["ratio_median"], r["target"]
            )
        elif name == "dag_scaling":
            for row in r["rows"]:
                add(name, f"dry run of {row['jobs']} jobs (s)", row["dry_run_s"], r["target"])
        elif name == "pipeline_overhead":
            add(name, "pipeline wall time (s)", r["pipeline_wall_s"])
            add(
                name,
                "job slots busy (sum of job wall / cores x wall)",
                r["slot_utilisation"],
                r["target"],
            )
            add(name, "CPU time / (cores x wall), sampled by Snakemake", r["cpu_utilisation"])
        elif name == "dag_floor":
            add(name, f"wall time of {r['runs']} runs, {r['jobs']} jobs (s)", r["wall_s"])
            add(name, "floor: training + generation + SFT, / cores (s)", r["floor_s"])
            add(name, "wall / floor", r["wall_over_floor"], r["target"])
        elif name == "curve_cost":
            add(name, f"scoring {r['points']} curve policies of {r['runs']} runs (s)", r["curve_s"])
            add(
                name,
                "curve seconds / summed job wall time",
                r["share_of_job_time"],
                r["target"],
            )
            add(name, "curve policies on disk (MB)", r["snapshot_mb"])
        elif name == "evaluation_overhead":
            add(
                name,
                "share of an evaluation job outside generation (median)",
                r["median_outside_generation"],
                r["target"],
            )
            add(
                name,
                "same, pooled over all evaluation jobs (worker start-up included)",
                r["pooled_outside_generation"],
                r["target"],
            )
        elif name == "evaluation_modes":
            for mode, share in r["median_outside_generation"].items():
                add(
                    name,
                    f"one run's evaluation job outside generation, {mode} (median)",
                    share,
                    r["target"],
                )
        elif name == "sampled_noise":
            for m in SAMPLED_METRICS:
                add(name, f"median stage 1-2 half-width, {m}", r["median_half_width"][m])
                add(name, f"median per-seed SD of the differences, {m}", r["median_sd"][m])
            add(name, "half-width mean@k / exact (median)", r["ratio"], r["target"])
        elif name == "crn_gain" and "skipped" in r:
            add(name, "skipped", r["skipped"])
        elif name == "crn_gain":
            for q, d in r["quantities"].items():
                for side in ("before", "after"):
                    add(name, f"median half-width {q}, {side}", d[side]["half_width"])
                add(name, f"half-width before / after {q} (median)", d["ratio"], r["target"])
        elif name == "memory":
            for rule, mb in r["peak_rss_mb"].items():
                add(name, f"peak RSS of rule {rule} (MB)", mb)
        elif name == "slurm_packed_evaluation" and "skipped" in r:
            add(name, "skipped", r["skipped"])
        elif name == "slurm_packed_evaluation":
            add(
                name,
                f"sbatch submissions for {r['evaluation_jobs']} evaluation jobs: one each / packed",
                f"{r['sbatch_before']} / {r['sbatch_after']}",
                r["target"],
            )
            for how in ("one per allocation", "packed"):
                add(
                    name,
                    f"evaluation job outside generation, {how} (median / pooled)",
                    f"{r['median_outside_generation'][how]:.3g} / {r['pooled_outside_generation'][how]:.3g}",
                )
                add(
                    name,
                    f"evaluation job wall s, {how}",
                    " ".join(f"{w:.2f}" for w in r["job_wall_s"][how]),
                )
    return rows


if __name__ == "__main__":
    main()
