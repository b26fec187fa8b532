"""Split files shared by every task: JSONL rows written once with their SHA-256, read back the
same way, and the manifest entries that make every task's manifest look alike."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

from grpo_ablation.layout import split_path


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def jsonl_bytes(rows: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows).encode()


def check_disjoint(splits: dict[str, list[dict[str, Any]]]) -> None:
    owner: dict[str, str] = {}
    for split, rows in splits.items():
        for row in rows:
            key = row["prompt_id"]
            if key in owner:
                raise ValueError(f"problem {key} is in both {owner[key]} and {split}")
            owner[key] = split


def write_split_files(
    splits: dict[str, list[dict[str, Any]]], out_dir: Path, requested: dict[str, int | None]
) -> dict[str, Any]:
    """Write ``<split>.jsonl`` for every split; return the manifest's per-split entries (file,
    SHA-256, rows written next to rows asked for (None: all the source has), difficulty
    histogram). Shared by every task, so manifests look alike."""
    out_dir.mkdir(parents=True, exist_ok=True)
    files: dict[str, Any] = {}
    for split, rows in splits.items():
        data = jsonl_bytes(rows)
        path = split_path(out_dir, split)
        path.write_bytes(data)
        hist = Counter(r["difficulty"] for r in rows)
        files[split] = {
            "file": path.name,
            "sha256": sha256(data),
            "count": len(rows),
            "requested": requested[split],
            "difficulty_histogram": {str(k): hist[k] for k in sorted(hist)},
        }
    return files


def read_split(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
