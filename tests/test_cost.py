"""The expected time said before the first job (design/cost.py), from worked numbers."""

from __future__ import annotations

import pytest

from grpo_ablation.design import cost

RUN = "results/default/draw=9/benchmarks"


def test_a_jobs_kind_is_its_benchmark_path_without_wildcards():
    assert cost.kind(f"{RUN}/evaluate/std=none/agg=constant/G=8/seed=0.tsv") == "evaluate"
    assert cost.kind(f"{RUN}/evaluate/base.tsv") == "evaluate/base"
    assert cost.kind(f"{RUN}/select/std_scaling.tsv") == "select/std_scaling"
    assert cost.kind("results/default/benchmarks/splits.tsv") == "splits"
    assert cost.kind("results/default/logs/splits.log") is None


def test_the_estimate_spreads_each_kinds_median_over_the_cores():
    measured = {"train": [10.0, 30.0, 20.0], "evaluate": [5.0], "evaluate/base": [4.0, 6.0]}
    planned = [("train", 1)] * 4 + [("evaluate", 2)] * 2 + [("evaluate/base", 1), ("design", 1)]
    e = cost.estimate(planned, measured, cores=2)
    # core-seconds: 4 trainings × 20 s (the median) + 2 evaluations × 5 s × 2 threads
    # + 1 × 5 s = 105, over 2 cores 52.5 s; one job at a time 80 + 10 + 5 = 95 s
    assert (e.jobs, e.seconds, e.serial_seconds) == (8, pytest.approx(52.5), pytest.approx(95.0))
    assert e.unmeasured == {"design": 1}
    assert e.sentence() == (
        "8 jobs planned: about 52 s on 2 cores (one job at a time: 2 min), from the median job "
        "time of each rule in earlier runs on this machine; not counted, never measured here: "
        "design ×1."
    )
    # a job holds at most every core: 4 threads on 2 cores count as 2
    assert cost.estimate([("evaluate", 4)], measured, cores=2).seconds == pytest.approx(5.0)


def test_without_earlier_runs_there_is_no_estimate(tmp_path):
    e = cost.estimate([("train", 1)] * 3, cost.measured_seconds(tmp_path), cores=8)
    assert e.sentence() == (
        "3 jobs planned; no earlier run on this machine measured their rules, so no estimate yet."
    )


def test_earlier_runs_are_read_from_every_experiment(tmp_path):
    header = "s\th:m:s\tmax_rss\n"
    for exp, seconds in (("a", 12.5), ("b", 7.5)):
        f = tmp_path / exp / "draw=1/benchmarks/train/std=none/agg=constant/G=8/seed=0.tsv"
        f.parent.mkdir(parents=True)
        f.write_text(header + f"{seconds}\t0:00:12\t100\n")
    (tmp_path / "a/benchmarks").mkdir()
    (tmp_path / "a/benchmarks/splits.tsv").write_text(header + "0.5\t0:00:00\t10\n")
    assert cost.measured_seconds(tmp_path) == {"train": [12.5, 7.5], "splits": [0.5]}
