"""Write envs/grpo-gpu.yaml from envs/gpu-vllm.lock.txt (`make gpu-lock` runs it): the pins go
into the yaml itself, because Snakemake builds a conda environment from a copy of the yaml in
another folder, where a `-r` file next to it would not be found, and hashes only the yaml."""

from pathlib import Path

HERE = Path(__file__).parent
HEADER = """\
# Conda environment of jobs on GPU nodes when a config uses vLLM (training.generation_backend or
# evaluation.backend vllm): the workflow picks it instead of grpo.yaml (pipeline.conda_env).
# Written by `make gpu-lock` from gpu-vllm.lock.txt (every package resolved for Python 3.13 on
# x86-64 Linux; gpu-vllm.in says which pins differ from requirements.txt and why); do not edit.
# Resolved here, not installed: vLLM's wheels are CUDA builds, and no GPU machine was available.
name: grpo-ablation-gpu
channels:
  - conda-forge
  - nodefaults
dependencies:
  - python=3.13
  - pip
  - pip:
"""


def pins(lock: str) -> list[str]:
    return [line.strip() for line in lock.splitlines() if "==" in line and not line.startswith("#")]


if __name__ == "__main__":
    lines = pins((HERE / "gpu-vllm.lock.txt").read_text())
    (HERE / "grpo-gpu.yaml").write_text(HEADER + "".join(f"      - {p}\n" for p in lines))
