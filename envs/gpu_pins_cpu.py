"""Write the GPU nodes' pin set for a CPU venv (`make test-gpu-pins`) into a folder:
requirements.txt, this folder's requirements.txt with each pin that gpu-vllm.lock.txt also names
at the lock's version (transformers 5.17.0), and constraints.txt, the lock's pins, so that the
packages pip pulls in (huggingface-hub, tokenizers, ...) take the lock's versions too. The
versions are declared once, in the lock; nothing here names one. vLLM and its CUDA packages are
never asked for (constraints install nothing), and torch is the CPU build of the lock's version.

Usage: python envs/gpu_pins_cpu.py DIR
"""

import re
import sys
from pathlib import Path

from write_gpu_env import pins

HERE = Path(__file__).parent
PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([^\s;#]+)")
# The lock is resolved for Python 3.13; these of its versions need Python >= 3.12 and the venv is
# 3.11 (the CPU torch wheel here is cp311 only), so pip picks them. None is the code under test
# (torch's graph library, scipy, matplotlib's contours). Another such pin in a new lock makes
# pip stop with "No matching distribution found for NAME==VERSION": add NAME here.
NOT_ON_PYTHON_311 = {"contourpy", "networkx", "scipy"}
# PyPI's Linux torch wheel is the CUDA build; the local CPU one carries this label. Asking for it
# keeps pip from ever downloading the CUDA one (as it does when it backtracks). PyPI has no
# "+cpu" build: on a machine without the local wheel, give pip PyTorch's CPU index
# (PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu make test-gpu-pins).
CPU_TORCH = "+cpu"


def name(text: str) -> str:
    """The package name in PEP 503's normal form (``tensorboardX`` and ``tensorboardx`` agree)."""
    return re.sub(r"[-_.]+", "-", text).lower()


def locked(lock: str) -> dict[str, str]:
    return {name(n): v for n, v in (p.split(";")[0].split("==") for p in pins(lock))}


def gpu_requirements(requirements: str, lock: str) -> str:
    versions = locked(lock)
    out = []
    for line in requirements.splitlines():
        m = PIN.match(line)
        if m:
            version = versions.get(name(m[1]), m[2])
            if name(m[1]) == "torch":
                version += CPU_TORCH
            if version != m[2]:
                line = f"{m[1]}=={version}  # {m[2]} in requirements.txt"
        out.append(line)
    return "\n".join(out) + "\n"


def gpu_constraints(lock: str) -> str:
    return "".join(f"{n}=={v}\n" for n, v in locked(lock).items() if n not in NOT_ON_PYTHON_311)


if __name__ == "__main__":
    out = Path(sys.argv[1])
    lock = (HERE / "gpu-vllm.lock.txt").read_text()
    (out / "requirements.txt").write_text(
        gpu_requirements((HERE / "requirements.txt").read_text(), lock)
    )
    (out / "constraints.txt").write_text(gpu_constraints(lock))
