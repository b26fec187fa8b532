"""Checkpoint retention: only the newest checkpoint keeps optimizer/scheduler state, every
checkpoint keeps its weights, a killed run still resumes to the uninterrupted result, and the disk
estimate is right on worked numbers."""

import json
import signal
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from conformance import G, digit_reward
from run_driver import start_driver
from safetensors.torch import load_file
from transformers import TrainerCallback

from grpo_ablation.design import disk
from grpo_ablation.design.disk import adamw_bytes_per_param, checkpoint_disk_bytes
from grpo_ablation.design.options import TrainingConfig
from grpo_ablation.training.retention import KeepOptimizerStateOfNewest, prune_optimizer_state
from grpo_ablation.training.rollout_log import read_rollouts
from grpo_ablation.training.train import train

torch.set_num_threads(1)
TINY = dict(group_size=G, prompts_per_step=2, max_completion_length=6)
RESUME_STATE = ("optimizer.pt", "scheduler.pt")


def _with_optimizer(checkpoints: Path) -> list[int]:
    return sorted(
        int(p.name.split("-")[1])
        for p in checkpoints.glob("checkpoint-*")
        if any((p / f).exists() for f in RESUME_STATE)
    )


class Probe(TrainerCallback):
    """Runs after the retention callback: records which checkpoints hold optimizer state."""

    def __init__(self) -> None:
        self.seen: list[list[int]] = []

    def on_save(self, args, state, control, **kwargs):
        self.seen.append(_with_optimizer(Path(args.output_dir)))


def test_only_the_newest_checkpoint_keeps_optimizer_state(setup, tmp_path):
    model, data = setup
    probe = Probe()
    cfg = TrainingConfig(max_steps=6, save_steps=2, **TINY)
    # train() keeps optimizer state in the newest checkpoint only by default.
    train(model, data, tmp_path, cfg, reward_func=digit_reward, callbacks=[probe])
    checkpoints = tmp_path / "checkpoints"
    assert probe.seen == [[2], [4], [6]], "after every save only the newest holds optimizer state"
    for step in (2, 4, 6):
        ckpt = checkpoints / f"checkpoint-{step}"
        for kept in ("model.safetensors", "config.json", "trainer_state.json", "rng_state.pth"):
            assert (ckpt / kept).exists(), (step, kept)
        assert all((ckpt / f).exists() == (step == 6) for f in RESUME_STATE), step
    assert json.loads((tmp_path / "run_info.json").read_text())["checkpoints"] == [2, 4, 6]
    # The estimate's model on real files: weights float32 (4 B/param), AdamW moments float32
    # (8 B/param); the files add headers and per-tensor `step` scalars only.
    weights = load_file(checkpoints / "checkpoint-6" / "model.safetensors")
    n = sum(t.numel() for t in weights.values())
    size = (checkpoints / "checkpoint-6" / "model.safetensors").stat().st_size
    assert 4 * n <= size < 4 * n + 64 * 1024
    size = (checkpoints / "checkpoint-6" / "optimizer.pt").stat().st_size
    assert 8 * n <= size < 8 * n + 64 * 1024


@pytest.mark.slow  # runs the smoke DAG, or kills and resumes a run
def test_a_killed_run_with_pruned_checkpoints_resumes_to_the_same_result(setup, tmp_path):
    model, data = setup
    training = {**TINY, "max_steps": 12, "save_steps": 4}
    ref = tmp_path / "uninterrupted"
    done = start_driver(model, data, ref, training)
    assert done.wait(timeout=300) == 0, done.stderr.read()[-3000:]
    assert _with_optimizer(ref / "checkpoints") == [12]

    run = tmp_path / "killed"
    proc = start_driver(model, data, run, training, sleep=0.3)
    ckpts = run / "checkpoints"
    deadline = time.time() + 300
    # Wait until checkpoint-8 is complete and checkpoint-4 has lost its optimizer state.
    while not (
        (ckpts / "checkpoint-8" / "trainer_state.json").exists() and _with_optimizer(ckpts) == [8]
    ):
        assert proc.poll() is None and time.time() < deadline, "run ended before its checkpoint"
        time.sleep(0.05)
    time.sleep(0.5)  # past the checkpoint: its later rollouts must be discarded on resume
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (run / "run_info.json").exists(), "the run finished before it was killed"
    assert _with_optimizer(ckpts) == [8] and (ckpts / "checkpoint-4" / "model.safetensors").exists()
    done = start_driver(model, data, run, training)
    assert done.wait(timeout=300) == 0, done.stderr.read()[-3000:]

    assert read_rollouts(ref / "rollouts").equals(read_rollouts(run / "rollouts"))
    for step in (4, 8, 12):
        wa = load_file(ref / "checkpoints" / f"checkpoint-{step}" / "model.safetensors")
        wb = load_file(run / "checkpoints" / f"checkpoint-{step}" / "model.safetensors")
        assert all(torch.equal(wa[k], wb[k]) for k in wa), step
    assert _with_optimizer(ckpts) == [12]


def _checkpoint(root: Path, step: int, *, complete=True, weights=True, extra=()) -> Path:
    ckpt = root / f"checkpoint-{step}"
    ckpt.mkdir(parents=True)
    names = ["optimizer.pt", "scheduler.pt", "rng_state.pth", "scaler.pt", *extra]
    names += ["model.safetensors"] if weights else []
    names += ["trainer_state.json"] if complete else []
    for name in names:
        (ckpt / name).parent.mkdir(parents=True, exist_ok=True)
        (ckpt / name).write_text("x")
    return ckpt


def test_pruning_spares_the_newest_unfinished_and_weightless_checkpoints(tmp_path, caplog):
    fsdp = ("optimizer_0/__0_0.distcp", "optimizer_0_rank0.bin", "optimizer.bin")
    deepspeed = (
        "global_step4/mp_rank_00_model_states.pt",
        "global_step4/bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt",
        "latest",
    )
    old = _checkpoint(tmp_path, 2, extra=fsdp)
    ds = _checkpoint(tmp_path, 4, extra=deepspeed)
    zero3 = _checkpoint(tmp_path, 5, weights=False, extra=("global_step5/x_optim_states.pt",))
    newest = _checkpoint(tmp_path, 6)
    writing = _checkpoint(tmp_path, 8, complete=False)
    later = _checkpoint(tmp_path, 10)  # newer than the save being handled: not ours to judge

    # policy "all" does nothing; other processes than the saving one do nothing
    KeepOptimizerStateOfNewest("all").on_save(
        SimpleNamespace(output_dir=str(tmp_path), should_save=True),
        SimpleNamespace(global_step=6),
        None,
    )
    KeepOptimizerStateOfNewest().on_save(
        SimpleNamespace(output_dir=str(tmp_path), should_save=False),
        SimpleNamespace(global_step=6),
        None,
    )
    assert (old / "optimizer.pt").exists() and (ds / "global_step4").exists()

    cb = KeepOptimizerStateOfNewest()
    with caplog.at_level("WARNING"):
        cb.on_save(
            SimpleNamespace(output_dir=str(tmp_path), should_save=True),
            SimpleNamespace(global_step=6),
            None,
        )
    left = {p.name: sorted(q.name for q in p.iterdir()) for p in tmp_path.iterdir()}
    keep = ["model.safetensors", "rng_state.pth", "scaler.pt", "trainer_state.json"]
    assert left["checkpoint-2"] == keep
    assert left["checkpoint-4"] == sorted([*keep, "latest"])
    assert (zero3 / "global_step5").exists() and "no standalone weights" in caplog.text
    for untouched in (newest, writing, later):
        assert (untouched / "optimizer.pt").exists() and (untouched / "scheduler.pt").exists()
    # checkpoint-2: optimizer.pt, scheduler.pt and 3 FSDP names; checkpoint-4: the 2 + global_step4
    assert len(cb.deleted) == 5 + 3
    assert prune_optimizer_state(tmp_path / "missing", 6) == []
    with pytest.raises(ValueError, match="unknown optimizer-state policy"):
        KeepOptimizerStateOfNewest("oldest")


def test_adamw_keeps_its_moments_in_the_parameter_dtype():
    for dtype in (torch.bfloat16, torch.float32):
        p = torch.nn.Parameter(torch.ones(3, dtype=dtype))
        opt = torch.optim.AdamW([p])
        p.grad = torch.ones_like(p)
        opt.step()
        assert opt.state[p]["exp_avg"].dtype == opt.state[p]["exp_avg_sq"].dtype == dtype
    assert adamw_bytes_per_param("bfloat16") == 4 and adamw_bytes_per_param("float32") == 8


def test_disk_estimate_on_worked_numbers():
    # 1,000 params, bf16 weights (2 B) and moments (4 B), 5 checkpoints, 21 runs:
    # all = 21 x 5 x 6 x 1,000; newest = 21 x (5 x 2 + 4) x 1,000; peak adds one more state per run
    assert checkpoint_disk_bytes(1000, 2, 4, 5, 21, "all") == 630_000
    assert checkpoint_disk_bytes(1000, 2, 4, 5, 21, "newest") == 294_000
    assert checkpoint_disk_bytes(1000, 2, 4, 5, 21, "newest", peak=True) == 378_000
    assert checkpoint_disk_bytes(1000, 2, 4, 5, 21, "all", peak=True) == 630_000
    assert (
        checkpoint_disk_bytes(1000, 4, 8, 1, 1, "newest")
        == checkpoint_disk_bytes(1000, 4, 8, 1, 1, "all")
        == 12_000
    )
    with pytest.raises(ValueError):
        checkpoint_disk_bytes(1000, 2, 4, 5, 21, "some")
    # Qwen2.5-0.5B (494,032,768 parameters) in bfloat16, the cluster preset: 5 checkpoints x 21 runs
    n = 494_032_768
    assert checkpoint_disk_bytes(n, 2, 4, 5, 21, "newest") == 294 * n == 145_245_633_792
    assert checkpoint_disk_bytes(n, 2, 4, 5, 21, "all") == 630 * n == 311_240_643_840
    out = disk.disk_report(n, "bfloat16", None, checkpoints_per_run=5, runs=21)
    assert (
        "newest: 145,245,633,792 B = 145.2 GB" in out
        and "all:    311,240,643,840 B = 311.2 GB" in out
    )
