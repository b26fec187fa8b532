"""Append-only rollout log: one row per completion of every generation step, one file per rank.

Rows keep the prompt id and the group index from sampling through scoring and logging, so group
membership survives any later filtering. Files are gzip JSONL; gzip members concatenate, so each
generation step appends one member and a crash loses at most the step being written. A member is
compressed in one call with no timestamp in its header (``_member``), so the same rows give the
same bytes, and a step costs one append instead of a gzip stream opened and closed.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

ROLLOUT_FIELDS = (
    "step",  # optimizer step at which the completions were generated (0-based)
    "rank",
    "prompt_id",
    "group_index",  # index of the group in the generation batch
    "completion_index",  # index within its group, 0..G-1
    "prompt",
    "completion",
    "reward",  # None when scoring failed
    "scoring_failure",  # None, or the reason scoring failed
    "correct",  # None when scoring failed
    "length",  # completion length in tokens (eos included)
    "truncated",  # generation stopped at the max completion length (no eos)
    "advantage",
    "group_category",
    "in_loss",  # counted by the loss (False: a zero-variance group under zero_variance filter)
    # zero_variance resample: the generation batch of the step it came from (0: the first), and
    # whether its group entered the step's training batch (always True otherwise)
    "generation_batch",
    "in_batch",
)


# json.dumps(row, sort_keys=True), without building an encoder per row
_ENCODE = json.JSONEncoder(sort_keys=True).encode


def _member(rows: Iterable[dict[str, Any]]) -> bytes:
    """One gzip member of JSONL rows (wbits 31: a gzip header with mtime 0; level 9, gzip's)."""
    text = "".join([_ENCODE(row) + "\n" for row in rows])
    return zlib.compress(text.encode("utf-8"), level=9, wbits=31)


def rank_path(directory: Path, rank: int) -> Path:
    return directory / f"rank{rank}.jsonl.gz"


class RolloutLog:
    def __init__(self, directory: Path, rank: int) -> None:
        self.path = rank_path(directory, rank)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def append(self, rows: list[dict[str, Any]]) -> None:
        for row in rows:
            missing = set(ROLLOUT_FIELDS) - row.keys()
            if missing:
                raise ValueError(f"rollout row lacks fields {sorted(missing)}")
        with self.path.open("ab") as fh:
            fh.write(_member(rows))

    def truncate_after(self, step: int) -> int:
        """Drop rows generated at optimizer step >= ``step`` (used when resuming from the
        checkpoint of that step). Returns the number of rows dropped."""
        if not self.path.exists():
            return 0
        rows = list(read_rows([self.path]))
        kept = [r for r in rows if r["step"] < step]
        tmp = self.path.with_suffix(".tmp")
        tmp.write_bytes(_member(kept))
        tmp.replace(self.path)
        return len(rows) - len(kept)


def read_rows(paths: Iterable[Path]) -> Iterator[dict[str, Any]]:
    for path in paths:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    yield json.loads(line)


def read_rollouts(directory: Path):
    """All ranks' rows as a DataFrame, ordered by step, group and completion."""
    import pandas as pd

    frame = pd.DataFrame(list(read_rows(sorted(directory.glob("rank*.jsonl.gz")))))
    if frame.empty:
        return pd.DataFrame(columns=list(ROLLOUT_FIELDS))
    return frame.sort_values(["step", "group_index", "completion_index"]).reset_index(drop=True)
