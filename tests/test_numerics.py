"""CPU numerics pins: set before torch is imported, a user's own value wins, `native` sets none."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

from grpo_ablation import numerics

X86_AVX2 = platform.machine().lower() in ("x86_64", "amd64") and numerics.has_avx2()


def pins_in_a_fresh_process(env: dict[str, str]) -> dict:
    code = (
        "import json, os; from grpo_ablation.numerics import pin_cpu_numerics; "
        "returned = pin_cpu_numerics(); import torch; "
        "print(json.dumps({'returned': returned, 'capability': torch.backends.cpu.get_cpu_capability(),"
        " 'env': {k: os.environ.get(k) for k in ('ATEN_CPU_CAPABILITY', 'MKL_CBWR')}}))"
    )
    clean = {
        k: v for k, v in os.environ.items() if k not in (*numerics.CPU_PINS, numerics.MODE_ENV)
    }
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # starts processes of its own
@pytest.mark.skipif(not X86_AVX2, reason="the pins apply to x86-64 CPUs with AVX2 only")
def test_the_pins_choose_avx2_kernels_and_mkls_portable_branch():
    got = pins_in_a_fresh_process({})
    assert got["env"] == numerics.CPU_PINS == got["returned"]
    assert got["capability"] == "AVX2"


@pytest.mark.slow  # starts processes of its own
@pytest.mark.skipif(not X86_AVX2, reason="the pins apply to x86-64 CPUs with AVX2 only")
def test_a_users_own_setting_wins_and_native_sets_nothing():
    got = pins_in_a_fresh_process({"MKL_CBWR": "AUTO"})
    assert got["env"] == {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AUTO"}
    got = pins_in_a_fresh_process({numerics.MODE_ENV: "native"})
    assert got["returned"] == {} and got["env"] == {"ATEN_CPU_CAPABILITY": None, "MKL_CBWR": None}
