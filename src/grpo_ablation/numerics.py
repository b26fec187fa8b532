"""CPU numerics that do not depend on which x86-64 CPU runs the job.

torch's CPU wheel picks its kernels by CPU: ATen's vectorized kernels (softmax, GELU, attention)
by instruction set (AVX-512 or AVX2), and the MKL it links (every matmul, exp and tanh) by vendor
and instruction set. Two machines then train different weights from the same commit and config.
Pinned before torch is imported, these choose one code path on every x86-64 CPU with AVX2 (Intel
since 2013, AMD since 2015): measured with notes/cpu_numerics.py. Results stay tied to the thread
count (``threads_per_job``), the torch wheel and the architecture (aarch64 differs).

A variable the user set wins (``os.environ.setdefault``); ``GRPO_CPU_NUMERICS=native`` sets none.
"""

from __future__ import annotations

import os
import platform
import sys

MODE_ENV = "GRPO_CPU_NUMERICS"
CPU_PINS = {
    # ATen's AVX2 kernels, not AVX-512 ones where the CPU has AVX-512.
    "ATEN_CPU_CAPABILITY": "avx2",
    # MKL's conditional numerical reproducibility: the one branch that is the same on Intel and
    # AMD (MKL ignores the AVX2 branch on AMD CPUs and runs its own kernels).
    "MKL_CBWR": "COMPATIBLE",
}


def has_avx2() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split() for line in f if line.startswith("flags")), [])
    except OSError:
        return False
    return "avx2" in flags and "fma" in flags


def pin_cpu_numerics() -> dict[str, str]:
    """Set the pins in this process's environment (inherited by its children); return them.

    Call it before torch is imported: torch and MKL read these variables once, at first use.
    """
    if os.environ.get(MODE_ENV, "pinned").lower() == "native":
        return {}
    if "torch" in sys.modules:
        print(f"warning: {__name__}.pin_cpu_numerics() after torch's import", file=sys.stderr)
    if platform.machine().lower() not in ("x86_64", "amd64") or not has_avx2():
        return {}  # other wheels and CPUs: nothing here applies (ATen would fault on avx2)
    for key, value in CPU_PINS.items():
        os.environ.setdefault(key, value)
    return {key: os.environ[key] for key in CPU_PINS}
