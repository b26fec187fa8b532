"""The evaluation's seed (lm-eval's seeds, the keyed sampler's keys) is keyed by the unit evaluated:
a run by its run seed (so by (draw, seed)), a draw's base policy by its draw. Units do not share
their sampled-metric noise; the cells and checkpoints of one (draw, seed) do (common random
numbers for the paired differences)."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

import pytest

import grpo_ablation.evaluation.calibration
import grpo_ablation.evaluation.evaluate
import grpo_ablation.process
from grpo_ablation.commands import evaluate as job
from grpo_ablation.design.ablation import run_seed
from grpo_ablation.design.options import EvaluationConfig
from grpo_ablation.evaluation.seeding import evaluation_seed
from grpo_ablation.layout import RUN_INFO

DRAWS, SEEDS = range(3, 9), range(3)


def test_every_run_and_base_policy_has_its_own_evaluation_seed():
    runs = [evaluation_seed(0, run_seed=run_seed(s, d)) for d in DRAWS for s in SEEDS]
    bases = [evaluation_seed(0, draw=d) for d in DRAWS]
    assert len(set(runs + bases)) == len(runs) + len(bases)
    # Without draws: a run per seed, and the one base policy keeps evaluation.seed.
    alone = [evaluation_seed(0, run_seed=run_seed(s, None)) for s in range(10)]
    assert len(set(alone)) == 10 and evaluation_seed(7) == 7
    # A draw's seed never meets a run seed of the same number (the kinds are hashed apart).
    assert evaluation_seed(0, draw=3) != evaluation_seed(0, run_seed=3)
    # evaluation.seed still moves everything; numpy takes seeds below 2^32.
    assert evaluation_seed(1, run_seed=3) != evaluation_seed(0, run_seed=3)
    assert all(0 <= s < 2**32 for s in runs + bases)


def test_the_cells_of_one_draw_and_seed_share_their_evaluation_seed():
    # A function of (evaluation.seed, run seed) alone: every cell and checkpoint of the run seed.
    assert evaluation_seed(0, run_seed=run_seed(1, 4)) == evaluation_seed(0, run_seed=4001)
    with pytest.raises(ValueError):
        evaluation_seed(0, run_seed=1, draw=1)


def _run_job(argv: list[str], monkeypatch) -> list[int]:
    """The seeds job.run hands to every evaluation it starts (nothing evaluated)."""
    seeds: list[int] = []

    def record(*args, seed, **kwargs):
        seeds.append(seed)

    monkeypatch.setattr(grpo_ablation.process, "bootstrap", lambda **kw: None)
    monkeypatch.setattr(
        grpo_ablation.evaluation.evaluate,
        "evaluate_checkpoints",
        lambda checkpoints, tasks, out, options, **kw: record(seed=options.seed),
    )
    monkeypatch.setattr(grpo_ablation.evaluation.calibration, "measure", record)
    monkeypatch.setattr(
        grpo_ablation.evaluation.evaluate,
        "write_curve",
        lambda run, info, tasks, out, o: record(**o),
    )
    p = argparse.ArgumentParser()
    job.add_arguments(p)
    job.run(p.parse_args(argv))
    return seeds


# What the job receives: every evaluation option resolved (checks.evaluation_config).
EVALUATION = json.dumps(
    asdict(EvaluationConfig(batch_size=2)) | {"device": "cpu", "dtype": "float32"}
)


def test_a_run_is_evaluated_under_its_run_seed(tmp_path: Path, monkeypatch):
    run = tmp_path / "run"
    run.mkdir()
    info = {"training_config": {"seed": run_seed(2, 5)}, "checkpoints": [2, 4], "base_model": "b"}
    (run / RUN_INFO).write_text(json.dumps(info))
    argv = ["--run", str(run), "--tasks", str(tmp_path), "--out", str(tmp_path / "out")]
    seeds = _run_job([*argv, "--evaluation", EVALUATION], monkeypatch)
    # test, validation, calibration and curve: one seed, the run's
    assert seeds == [evaluation_seed(0, run_seed=5002)] * 4


def test_a_draws_base_policy_is_evaluated_under_its_draw(tmp_path: Path, monkeypatch):
    base = tmp_path / "base_policy.json"
    base.write_text(json.dumps({"model": str(tmp_path), "revision": None}))
    argv = ["--base", str(base), "--tasks", str(tmp_path), "--out", str(tmp_path / "out")]
    argv += ["--evaluation", EVALUATION]
    assert _run_job([*argv, "--draw", "6"], monkeypatch) == [evaluation_seed(0, draw=6)] * 2
    assert _run_job(argv, monkeypatch) == [0] * 2
