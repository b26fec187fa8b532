"""Several training runs on one GPU (resources.runs_per_gpu): what each GPU job asks for, what a
pack asks SLURM for, what is refused, and the price the cost probe and the plan put on it."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from grpo_ablation.design.packing import (
    asks_for_gpu,
    gpu_job_resources,
    pack_group,
    packing_problems,
    train_resources,
)
from grpo_ablation.training.cost_probe import Measurement, memory_plan, project

ROOT = Path(__file__).resolve().parents[1]
PACKED = {"runs_per_gpu": 4}


def test_at_one_run_per_gpu_every_job_asks_what_it_asked_before():
    assert train_resources({}, 1) == {"gpu": 1} == train_resources({"runs_per_gpu": 1}, 1)
    assert gpu_job_resources({}, 1) == {"gpu": 1} and pack_group({}) is None
    assert train_resources(PACKED, 0) == {"gpu": 0}, "a CPU run packs nothing"


def test_a_packed_train_job_asks_for_a_slot_and_the_others_for_every_slot_of_their_gpus():
    train = train_resources(PACKED, 1)
    assert train == {"gpu": 0, "gres": "gpu:1", "gpu_slots": 1}
    assert gpu_job_resources(PACKED, 1) == {"gpu": 1, "gpu_slots": 4}
    assert gpu_job_resources(PACKED, 0) == {"gpu": 0}
    assert pack_group(PACKED) == "training"
    # the SLURM refusal still counts it as a GPU job (its partition must be set)
    assert asks_for_gpu(train) and asks_for_gpu({"gpu": 2}) and not asks_for_gpu({"gpu": 0})


def test_a_pack_of_four_asks_slurm_for_one_gpu_and_four_times_the_cpus_and_memory():
    """Snakemake sums a group's integer resources over jobs that run side by side and keeps its
    strings; the SLURM executor turns the GRES into --gres and asks for no --gpus."""
    from snakemake.resources import GroupResources, Resources
    from snakemake_executor_plugin_slurm.utils import set_gres_string

    job = {"runtime": 120, "mem_mb": 16000, "cpus_per_task": 8, **train_resources(PACKED, 1)}
    pack = [SimpleNamespace(resources=dict(job), pipe_group=None) for _ in range(4)]
    asked = GroupResources.basic_layered([pack], Resources(), run_local=False)
    assert asked["gres"] == "gpu:1" and asked["gpu"] == 0
    assert asked["cpus_per_task"] == 32 and asked["mem_mb"] == 64000
    assert asked["runtime"] == 120, "side by side: the runtime of one job"

    class Resources_(dict):
        __getattr__ = dict.get

    assert set_gres_string(SimpleNamespace(resources=Resources_(asked))) == " --gres=gpu:1"


def test_packing_is_refused_where_it_cannot_pack_naming_the_fix():
    from grpo_ablation.design.checks import check_packing
    from grpo_ablation.design.schema import load_config

    config = load_config(ROOT / "config/cluster.yaml")
    config["resources"] |= PACKED
    check_packing(config)  # one GPU and one process per run
    config["compute"]["processes_per_train_job"] = 2
    with pytest.raises(ValueError, match=r"runs_per_gpu 4 packs runs of one GPU .* asks for 2"):
        check_packing(config)
    config["resources"]["gpus_per_train_job"] = 0
    check_packing(config)  # runs on the CPU: nothing to pack
    assert packing_problems(PACKED, {"training": 4, "evaluation": 8}) == []
    assert packing_problems({}, {}) == []
    (problem,) = packing_problems(PACKED, {"evaluation": 8})
    assert "packs one job per sbatch: add --group-components training=4" in problem


def _measured(**packed) -> Measurement:
    return Measurement(
        train_setup_s=40,
        train_step_s=2.0,
        sft_step_s=0,
        eval_checkpoint_s=30,
        eval_validation_s=10,
        weights_bytes=1,
        optimizer_bytes=1,
        peak_memory_bytes=10 * 1024**3,
        peak_memory_kind="gpu",
        train_peak_gpu_bytes=10 * 1024**3,
        gpu_total_bytes=80 * 1024**3,
        train_warmup_s=10,
        train_save_s=1,
        **packed,
    )


SHAPE = {
    "cells": 3,
    "runs": 12,
    "max_steps": 201,
    "checkpoints_per_run": 4,
    "sft_steps": 0,
    "train_gpus": 1,
    "eval_gpus": 1,
}


def test_the_projection_prices_a_pack_at_its_measured_step_or_at_no_gain():
    alone = project(_measured(), SHAPE)
    run = 40 + 10 + 200 * 2.0 + 4 * 1  # 454 s
    evaluation = 4 * 30 + 10
    assert alone["train_run_s"] == run
    assert alone["wall_hours_one_gpu"] == pytest.approx((30 + 10 + 12 * (run + evaluation)) / 3600)
    # Four runs measured side by side at 3 s a step: each run takes longer, four share the GPU.
    packed = project(_measured(packed_runs=4, packed_step_s=3.0), SHAPE | PACKED)
    run4 = 40 + 10 + 200 * 3.0 + 4 * 1  # 654 s
    assert packed["train_run_s"] == run4 and packed["packing"] == "measured"
    gpu = 30 + 10 + 12 * run4 / 4 + 12 * evaluation
    assert packed["gpu_hours"] == pytest.approx(gpu / 3600)
    assert packed["wall_hours_one_gpu"] == pytest.approx(gpu / 3600)
    assert packed["wall_hours_one_gpu"] < alone["wall_hours_one_gpu"]
    # Not measured at this N: priced as if the runs gained nothing (each N times as long).
    guess = project(_measured(), SHAPE | PACKED)
    assert guess["train_run_s"] == 4 * run and guess["packing"] == "no gain assumed"
    assert guess["gpu_hours"] == pytest.approx(alone["gpu_hours"])


def test_the_memory_plan_gives_each_packed_run_its_share_of_the_card():
    from grpo_ablation.design.options import ComputeConfig, TrainingConfig

    m, training, compute = _measured(), TrainingConfig(), ComputeConfig()
    assert memory_plan(m, training, compute, 80, runs_per_gpu=4) == []  # 4 x 10 <= 72 GiB
    (line,) = memory_plan(m, training, compute, 80, runs_per_gpu=8)
    assert "8 runs packed on a GPU are projected to need 80.0 GiB of a 80 GiB GPU" in line
    assert "resources.runs_per_gpu: 7" in line


def test_the_plan_prices_the_study_on_one_gpu_with_packing(tmp_path, capsys):
    """`grpo-ablation plan --cost-probe`: the probe's DAG on one GPU, alone and packed as the
    config asks (the GPU-hours per unit follow the packing)."""
    from dataclasses import asdict

    from grpo_ablation import cli

    probe = tmp_path / "cost_probe.json"
    record = {
        "measured": asdict(_measured(packed_runs=4, packed_step_s=3.0)),
        "dag": SHAPE | {"base_policies": 1},
        "projection": project(_measured(), SHAPE),
    }
    probe.write_text(json.dumps(record))
    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    texts = {}
    for n in (1, 4):
        config["resources"] = {**config.get("resources", {}), "runs_per_gpu": n}
        path = tmp_path / f"config{n}.yaml"
        path.write_text(yaml.safe_dump(config))
        out = tmp_path / f"plan{n}.md"
        cli.main(["plan", "--configfile", str(path), "--cost-probe", str(probe), "--out", str(out)])
        texts[n] = out.read_text()
    capsys.readouterr()
    alone = project(_measured(), SHAPE)
    packed = project(_measured(packed_runs=4, packed_step_s=3.0), SHAPE | PACKED)
    assert f"{alone['wall_hours_one_gpu']:.2f} h on one GPU, one run at a time" in texts[1]
    assert (
        f"{packed['wall_hours_one_gpu']:.2f} h on one GPU with 4 runs packed on it "
        "(resources.runs_per_gpu; a run 10.9 min packed against 7.6 alone, measured)"
    ) in texts[4]


def test_the_cost_probe_measures_a_pack_by_training_n_runs_at_once(tmp_path, monkeypatch):
    """packed_steps trains the reference cell N times side by side, each in a process and folder
    of its own reading the probe's splits, and reports the mean of their steady steps."""
    import threading

    from grpo_ablation.training import cost_probe

    (tmp_path / "data").mkdir()
    started, lock, barrier = [], threading.Lock(), threading.Barrier(3, timeout=30)

    def trained(fn, config, steps, folder):
        assert fn is cost_probe.train_steps and (folder / "data").resolve() == tmp_path / "data"
        barrier.wait()  # all three at once, or the barrier times out
        with lock:
            started.append(folder)
        return {"times": {"step_s": 1.0 + int(folder.name)}}

    monkeypatch.setattr(cost_probe, "in_own_process", trained)
    assert cost_probe.packed_steps({}, 3, tmp_path, 3) == 2.0
    assert sorted(f.name for f in started) == ["0", "1", "2"]


@pytest.mark.slow  # starts Snakemake
def test_a_dry_run_through_slurm_packs_four_train_jobs_to_a_group(tmp_path):
    """The cluster preset packed 4 runs to a GPU: every train job in a group `training` of at
    most 4, each asking for one slot and the GPU partition; evaluation takes all 4 slots."""
    import os
    import re
    import subprocess
    import sys

    packed = tmp_path / "packed.yaml"
    packed.write_text("resources:\n  runs_per_gpu: 4\n")
    env = {k: v for k, v in os.environ.items() if k != "SNAKEMAKE_PROFILE"}
    env |= {"HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"
    cmd = [str(Path(sys.executable).with_name("snakemake")), "-n", "--profile", "profiles/slurm"]
    cmd += ["--group-components", "training=4", "--configfile", "config/cluster.yaml"]
    cmd += [str(packed), "--config", f"results_dir={tmp_path / 'results'}"]
    cmd += ["slurm={account: acct, gpu_partition: gpuq, cpu_partition: cpuq}"]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    blocks = re.split(r"^\S.*Group job (\w+) \(jobs in lexicogr\. order\):$", out, flags=re.M)
    groups = list(zip(blocks[1::2], blocks[2::2], strict=True))
    packs = [
        re.findall(r"^ +rule train:", body, re.M) for name, body in groups if name == "training"
    ]
    assert sum(map(len, packs)) == 21 and max(map(len, packs)) == 4  # the preset's 21 runs
    trains = re.findall(r"^ +rule train:\n(?:.*\n)*? +resources: (.*)$", out, re.M)
    assert len(trains) == 21
    for line in trains:
        assert "gpu=0, gres=gpu:1, gpu_slots=1" in line and "slurm_partition=gpuq" in line
    evaluations = re.findall(r"^ +rule evaluate:\n(?:.*\n)*? +resources: (.*)$", out, re.M)
    assert evaluations and all("gpu=1, gpu_slots=4" in e for e in evaluations)
