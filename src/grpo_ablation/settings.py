"""Small helpers for the documented configuration dataclasses."""

from __future__ import annotations

import dataclasses
import hashlib
import json
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
