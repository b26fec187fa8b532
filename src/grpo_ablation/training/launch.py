"""Several training processes for one cell: a launcher around the train command.

``compute.processes_per_train_job: N > 1`` makes a training job re-run itself as N processes:
``accelerate launch --num_processes N`` on GPUs (NCCL), ``torchrun`` on CPU (gloo; accelerate's
own launcher starts a single process there). The rule stays one shell line;
the launch happens here so that each job picks a free rendezvous port (two multi-process jobs on
one machine would otherwise both take accelerate's default 29500). ``compute.accelerate_config``
picks plain DDP (no file) or one of the shipped presets in ``config/accelerate/`` (DeepSpeed
ZeRO-2 and ZeRO-3, FSDP), as TRL's and open-r1's recipes use them.

The objective does not depend on N: the loss normaliser spans the whole generation batch of all
ranks (``trainer.py``), which the two-process conformance test checks.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
from pathlib import Path

from grpo_ablation.device import ACCELERATE_PRESETS as PRESETS

PRESET_DIR = Path(__file__).resolve().parents[3] / "config" / "accelerate"
# Set by torchrun (which accelerate launch uses for several GPUs) in every process it starts.
LAUNCHED_ENV = "LOCAL_RANK"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def accelerate_command(
    argv: list[str], processes: int, preset: str, device: str, dtype: str, port: int
) -> list[str]:
    """The ``accelerate launch`` command that runs ``argv`` (a script and its arguments) on
    ``processes`` processes of this machine."""
    if preset not in PRESETS:
        raise ValueError(f"compute.accelerate_config must be one of {PRESETS}, got {preset!r}")
    if device == "cpu" and preset != "ddp":
        raise ValueError(f"compute.accelerate_config {preset!r} needs GPUs; on CPU use 'ddp'")
    if device == "cpu":
        # `accelerate launch --cpu` starts ONE process whatever --num_processes says (its simple
        # launcher); torchrun starts N, and the trainer's PartialState(cpu=True) joins them (gloo).
        return [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node",
            str(processes),
            "--master_addr",
            "127.0.0.1",
            "--master_port",
            str(port),
            *argv,
        ]
    launcher = shutil.which("accelerate", path=str(Path(sys.executable).parent)) or "accelerate"
    cmd = [
        launcher,
        "launch",
        "--num_processes",
        str(processes),
        "--num_machines",
        "1",
        "--main_process_port",
        str(port),
        "--dynamo_backend",
        "no",
    ]
    if preset != "ddp":
        cmd += ["--config_file", str(PRESET_DIR / f"{preset}.yaml")]
    else:
        cmd += ["--multi_gpu"]
    # compute.dtype decides the precision under every preset: on the command line it overrides
    # a preset file's mixed_precision (which would otherwise force bf16 under float32).
    cmd += ["--mixed_precision", "bf16" if dtype == "bfloat16" else "no"]
    return [*cmd, *argv]


def relaunch(argv: list[str], processes: int, preset: str, device: str, dtype: str) -> None:
    """Replace this process by ``accelerate launch`` of the same command (returns only when
    there is nothing to do: one process, or already launched)."""
    if processes <= 1 or os.environ.get(LAUNCHED_ENV) is not None:
        return
    cmd = accelerate_command(argv, processes, preset, device, dtype, free_port())
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(cmd[0], cmd)
