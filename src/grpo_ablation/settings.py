"""Small helpers for the documented configuration dataclasses."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


def from_dict(cls: type[T], data: dict[str, Any] | None, section: str) -> T:
    """Build dataclass ``cls`` from ``data``, naming any key it does not know."""
    data = dict(data or {})
    known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(
            f"unknown key(s) {', '.join(map(repr, unknown))} in config section '{section}'; "
            f"known keys: {', '.join(sorted(known))}"
        )
    return cls(**data)


def config_hash(data: Any) -> str:
    """SHA-256 of the canonical JSON of ``data`` (dataclasses allowed)."""
    if dataclasses.is_dataclass(data) and not isinstance(data, type):
        data = dataclasses.asdict(data)
    blob = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


# The files that hold a model's weights (optimizer state and tokenizer files are not).
WEIGHT_FILES = ("*.safetensors", "pytorch_model*.bin")


def weight_files(folder: Path) -> list[Path]:
    """A local model folder's weight files, sorted: what identifies its weights (by name, size and
    mtime) for an evaluation's cache and for a run's record of its base model."""
    return sorted(f for pattern in WEIGHT_FILES for f in Path(folder).glob(pattern))
