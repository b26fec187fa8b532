"""The launcher of a multi-process training job: compute.dtype decides the precision under every
accelerate preset (a preset file's own mixed_precision never does)."""

from __future__ import annotations

import pytest

from grpo_ablation.training.launch import PRESETS, accelerate_command


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize(("dtype", "expected"), [("float32", "no"), ("bfloat16", "bf16")])
def test_every_preset_runs_at_the_configured_precision(preset, dtype, expected):
    """Parsed and resolved as `accelerate launch` itself does (its config file merged in)."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser

    cmd = accelerate_command(["train.py"], 2, preset, "cuda", dtype, 12345)
    assert cmd[1] == "launch"
    args, _, _ = _validate_launch_command(launch_command_parser().parse_args(cmd[2:]))
    assert args.mixed_precision == expected
    assert args.num_processes == 2
