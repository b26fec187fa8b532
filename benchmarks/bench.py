"""Benchmarks that print ratios measured side by side in one run: ``make bench``.

Absolute times on a shared machine are noise; each figure here compares two things measured in
the same process, interleaved (A B A B ...), and reports the median ratio (the trainer's also
the mean over processes with its 95% interval, read against its target).

This module is the command line: the table of benchmarks and the summaries written from their
results. The benchmarks live by what they measure: ``trainer`` (training throughput),
``warm_start`` (what the warm start's thread count buys),
``pipeline`` (the DAG's planning, a finished pipeline's time and memory), ``evaluation``
(evaluation jobs' overhead and the efficiency curves' cost), ``packing`` (evaluation packed per
SLURM allocation) and ``noise`` (how wide the contrasts' intervals are); ``records`` reads what a
finished experiment recorded.
"""

from __future__ import annotations

import argparse
import csv
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from benchmarks.evaluation import curve_cost, evaluation_modes, evaluation_overhead
from benchmarks.noise import SAMPLED_METRICS, crn_gain, sampled_noise
from benchmarks.packing import SIDES, slurm_packing
from benchmarks.pipeline import dag_floor, dag_scaling, memory, pipeline_overhead
from benchmarks.real_model import bench_cost, bench_level
from benchmarks.records import one_draw
from benchmarks.trainer import gradient_checkpointing, trainer_overhead
from benchmarks.warm_start import warm_start_threads


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
    suite: dict[str, Callable[[], dict[str, Any]]] = {
        "trainer_overhead": trainer_overhead,
        "gradient_checkpointing": gradient_checkpointing,
        "warm_start_threads": warm_start_threads,
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
        "real_model_level": bench_level,
        "real_model_cost": bench_cost,
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
        if "skipped" in r:  # a benchmark that could not run here says why, and nothing else
            add(name, "skipped", r["skipped"])
        elif name == "trainer_overhead":
            add(name, "project / stock TRL steps per s (median)", r["ratio_median"], r["target"])
            low, high = r["ratio_ci95"]
            add(
                name,
                f"mean over {len(r['per_process'])} processes [95% CI]: {r['verdict']}",
                f"{r['ratio_mean']:.3f} [{low:.3f}, {high:.3f}]",
                r["target"],
            )
        elif name == "gradient_checkpointing":
            add(
                name, "steps per s, checkpointing off / on (median)", r["ratio_median"], r["target"]
            )
        elif name == "warm_start_threads":
            add(
                name,
                "SFT steps per s, two 1-thread at once / one 2-thread (median)",
                r["ratio_median"],
                r["target"],
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
        elif name == "crn_gain":
            for q, d in r["quantities"].items():
                for side in ("before", "after"):
                    add(name, f"median half-width {q}, {side}", d[side]["half_width"])
                add(name, f"half-width before / after {q} (median)", d["ratio"], r["target"])
        elif name == "memory":
            for rule, mb in r["peak_rss_mb"].items():
                add(name, f"peak RSS of rule {rule} (MB)", mb)
        elif name == "real_model_level":
            for row in r["rows"]:
                s = row["sampled"]
                level = f"level ({row['steps']}, {row['max_operand']})"
                add(name, f"{level}: groups mixed at T={row['temperature']}", s["mixed"])
                add(
                    name,
                    f"{level}: sampled accuracy / at the cap",
                    f"{s['accuracy']:.3g} / {s['at_cap']:.3g}",
                )
            add(name, "recommended level (steps, max_operand)", str(r["recommended"]), r["target"])
        elif name == "real_model_cost":
            for lengths, medians in r["medians"].items():
                for v, m in medians.items():
                    add(
                        name,
                        f"{v}, {lengths} lengths: s per step (generation + rest)",
                        f"{m['step_s']:.3g} ({m['generation_s']:.3g} + {m['rest_s']:.3g})",
                    )
                for k in ("keyed/stream step_s", "keyed/stock step_s"):
                    add(
                        name,
                        f"{k}, {lengths} lengths (median)",
                        r["ratios"][lengths][k],
                        r["target"],
                    )
        elif name == "slurm_packed_evaluation":
            add(
                name,
                f"sbatch submissions for {r['evaluation_jobs']} evaluation jobs: one each / packed",
                f"{r['sbatch_before']} / {r['sbatch_after']}",
                r["target"],
            )
            for how in SIDES:
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
