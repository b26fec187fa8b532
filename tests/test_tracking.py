"""Live curves: a run with TensorBoard writes event files in its folder, named by its cell and
seed, with its objective record and its per-step scalars; tracking changes no result and, being a
resource of the train rule, makes no finished run out of date."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
import torch
import yaml
from conformance import G, digit_reward
from safetensors.torch import load_file

from grpo_ablation.design.options import TrainingConfig
from grpo_ablation.training import tracking
from grpo_ablation.training.rollout_log import read_rollouts
from grpo_ablation.training.train import train

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[1]
TINY = dict(group_size=G, prompts_per_step=2, max_completion_length=6, save_steps=2, max_steps=2)


def events(folder: Path) -> list:
    """Every event of the TFRecord files under ``folder`` (length, CRC, payload, CRC)."""
    from tensorboardX.proto.event_pb2 import Event

    out = []
    for path in sorted(folder.rglob("events.out.tfevents.*")):
        data, at = path.read_bytes(), 0
        while at < len(data):
            (length,) = struct.unpack("<Q", data[at : at + 8])
            event = Event()
            event.ParseFromString(data[at + 12 : at + 12 + length])
            out.append(event)
            at += 12 + length + 4
    return out


def test_a_run_with_tensorboard_writes_its_curves_and_record_in_its_folder(setup, tmp_path):
    model, data = setup
    plain = tmp_path / "runs/std=sample/agg=sequence_mean/G=4/seed=0"
    tracked = tmp_path / "tracked/runs/std=sample/agg=sequence_mean/G=4/seed=0"
    for out, report_to in ((plain, "none"), (tracked, "tensorboard")):
        train(
            model, data, out, TrainingConfig(**TINY), reward_func=digit_reward, report_to=report_to
        )
    assert not (plain / "tensorboard").exists()
    found = events(tracked / "tensorboard")
    scalars = {v.tag: e.step for e in found for v in e.summary.value if v.HasField("simple_value")}
    texts = {v.tag for e in found for v in e.summary.value if not v.HasField("simple_value")}
    assert {"train/loss", "train/groups/mixed"} <= scalars.keys() and max(scalars.values()) == 2
    assert any(t.startswith("objective") for t in texts), texts
    objective = json.loads((tracked / "objective.json").read_text())
    record = next(
        v.tensor.string_val[0].decode()
        for e in found
        for v in e.summary.value
        if v.tag.startswith("objective")
    )
    assert f'"aggregation": "{objective["aggregation"]}"' in record
    args = json.loads((tracked / "checkpoints/checkpoint-2/trainer_state.json").read_text())
    assert args["global_step"] == 2
    # the run is named by its cell and seed, the folder below runs/
    assert tracking.run_name(tracked) == "std=sample/agg=sequence_mean/G=4/seed=0"
    # and nothing it computes changes
    assert read_rollouts(plain / "rollouts").equals(read_rollouts(tracked / "rollouts"))
    weights = [
        load_file(o / "checkpoints/checkpoint-2/model.safetensors") for o in (plain, tracked)
    ]
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])


def test_an_unknown_tracker_is_named():
    with pytest.raises(ValueError, match=r"unknown \['tensorbord'\]"):
        tracking.parse("tensorbord")
    assert tracking.parse("none") == [] and tracking.parse("tensorboard,wandb") == [
        "tensorboard",
        "wandb",
    ]


def test_the_schema_lists_the_trackers_the_code_knows():
    schema = yaml.safe_load((ROOT / "workflow/schemas/config.schema.yaml").read_text())
    items = schema["properties"]["tracking"]["properties"]["report_to"]["items"]
    assert tuple(items["enum"]) == tracking.TRACKERS


@pytest.mark.slow  # runs the smoke DAG, or kills and resumes a run
def test_switching_tracking_on_makes_no_finished_run_out_of_date(smoke_pipeline):
    """The train rule takes report_to as a resource: not a rerun trigger."""
    from conftest import snakemake

    config = yaml.safe_load((ROOT / "config/smoke.yaml").read_text())
    config.update(results_dir=str(smoke_pipeline.root), tracking={"report_to": ["tensorboard"]})
    path = smoke_pipeline.root / "tracked.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    done = snakemake(path, "--dry-run")
    assert "Nothing to be done" in done.stdout + done.stderr, done.stdout[-3000:]
    shown = snakemake(path, "--dry-run", "--printshellcmds", "--forcerun", "train")
    assert "--report-to tensorboard" in shown.stdout
