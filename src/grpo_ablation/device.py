"""Device and precision of training and evaluation jobs: the choices the config section
``compute`` offers (declared by ``grpo_ablation.design.options.ComputeConfig``), the device a job
resolves them to, what it records of the machine (driver, GPU, peak memory) and the process's
threads.

``device: auto`` takes CUDA when torch sees a GPU and the CPU otherwise; ``device: cuda`` on a
machine without one is an error, never a silent fall-back to a CPU run that would take days.
``dtype`` is the compute precision: in training the autocast precision of forward and backward
passes over float32 master weights and optimizer state (bfloat16 weights would round away the
small updates of RL fine-tuning), so checkpoints hold float32 weights; in evaluation the precision
the checkpoint is loaded in.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from typing import Any

from grpo_ablation.hub import OFFLINE_VARS


def set_threads(n: int | None) -> None:
    """torch's intra-op threads for this job (the rule's ``threads``)."""
    if n:
        import torch

        torch.set_num_threads(n)


DEVICES = ("auto", "cpu", "cuda")
DTYPES = ("float32", "bfloat16")
# Plain DDP, or a preset of config/accelerate/ (grpo_ablation.training.launch).
ACCELERATE_PRESETS = ("ddp", "zero2", "zero3", "fsdp")
# Launch presets whose processes hold shards of the weights (a rank-0 save would be partial).
SHARDED_PRESETS = ("zero3", "fsdp")
# Where a run keeps optimizer and scheduler state (grpo_ablation.training.retention).
OPTIMIZER_STATE_POLICIES = ("newest", "all")


class DeviceError(RuntimeError):
    """The config asks for a device this machine does not have."""


# The NVIDIA driver a CUDA build of torch needs (the major version of the build -> the oldest
# driver branch that runs it): the pinned torch 2.13.0's Linux wheel and the GPU lock are CUDA 13
# builds, which need driver >= 580 and a Turing or newer GPU (docs/cluster.md names the pin to
# change for older clusters).
DRIVER_FOR_CUDA = {12: 525, 13: 580}


def driver_version() -> str | None:
    """The NVIDIA driver nvidia-smi reports, or None where there is none."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        return out.stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return None


def driver_advice(torch_cuda: str | None, found: str | None) -> str:
    """What to check when CUDA is unavailable: the driver this torch build needs against the one
    found."""
    if torch_cuda is None:
        return "this torch is a CPU build: install a CUDA build on GPU nodes (envs/gpu-vllm.in)"
    needed = DRIVER_FOR_CUDA.get(int(torch_cuda.split(".")[0]))
    need = f"NVIDIA driver >= {needed}" if needed else "a driver that supports it"
    if found is None:
        return f"it needs {need}; nvidia-smi found no driver on this machine"
    too_old = needed is not None and int(found.split(".")[0]) < needed
    verdict = "too old" if too_old else "new enough: look for a GPU hidden from the job"
    return f"it needs {need}; the driver found is {found} ({verdict})"


def resolve_device(requested: str) -> str:
    """``cpu`` or ``cuda`` for a configured ``auto|cpu|cuda``; refuses CUDA without a GPU."""
    import torch

    if requested not in DEVICES:
        raise ValueError(f"compute.device must be one of {DEVICES}, got {requested!r}")
    available = torch.cuda.is_available()
    if requested == "cuda" and not available:
        raise DeviceError(
            "compute.device is 'cuda' but torch finds no CUDA device on this machine "
            f"(torch {torch.__version__}, built for CUDA {torch.version.cuda}: "
            f"{driver_advice(torch.version.cuda, driver_version())}); submit the job to a GPU "
            "node, or set compute.device to 'cpu' or 'auto'"
        )
    if requested == "auto":
        return "cuda" if available else "cpu"
    return requested


def check_dtype(name: str) -> str:
    if name not in DTYPES:
        raise ValueError(f"compute.dtype must be one of {DTYPES}, got {name!r}")
    return name


def device_info(device: str, dtype: str) -> dict[str, Any]:
    """What ran the job: device, GPU model, driver and CUDA versions (recorded in run_info.json)."""
    import platform

    import torch

    from grpo_ablation.numerics import CPU_PINS

    info: dict[str, Any] = {
        "device": device,
        "dtype": dtype,
        "master_weights": "float32",
        "host": platform.node(),
        "cpu": platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "gpu_model": None,
        "gpu_count": 0,
        "driver_version": None,
        # Compute jobs read the hub cache only (the prefetch rule filled it): recorded as proof.
        "offline": {k: os.environ.get(k) for k in OFFLINE_VARS},
        # Kernel choice (grpo_ablation.numerics): the same pins give the same numbers on any CPU.
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "cpu_numerics": {k: os.environ.get(k) for k in CPU_PINS},
    }
    if device == "cuda":
        info["gpu_model"] = torch.cuda.get_device_name(0)
        info["gpu_count"] = torch.cuda.device_count()
        info["driver_version"] = driver_version() or "unknown (nvidia-smi unavailable)"
    return info


@dataclass(frozen=True)
class PeakMemory:
    """This process's peak memory so far, in bytes."""

    host_rss_bytes: int  # the resident set, training or evaluation and everything else included
    gpu_allocated_bytes: int | None  # torch's peak allocated CUDA memory; None without CUDA

    @property
    def host_rss_mb(self) -> float:
        return self.host_rss_bytes / 2**20

    @property
    def gpu_allocated_mb(self) -> float | None:
        return None if self.gpu_allocated_bytes is None else self.gpu_allocated_bytes / 2**20

    def megabytes(self) -> dict[str, float | None]:
        """Both in MiB, under the keys run_info.json records them with (``peak_memory``)."""
        return {"host_rss_mb": self.host_rss_mb, "gpu_allocated_mb": self.gpu_allocated_mb}


def gpu_total_bytes() -> int | None:
    """The memory of this process's GPU, or None without CUDA."""
    import torch

    return (
        int(torch.cuda.get_device_properties(0).total_memory) if torch.cuda.is_available() else None
    )


def peak_memory() -> PeakMemory:
    """The peak memory of this process, measured by the process that did the work (a job
    worker's client process would see only itself)."""
    import resource

    import torch

    gpu = int(torch.cuda.max_memory_allocated()) if torch.cuda.is_available() else None
    # ru_maxrss is in KiB on Linux.
    return PeakMemory(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, gpu)
