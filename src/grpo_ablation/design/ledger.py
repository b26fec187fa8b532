"""A study's ledger: one line per look, chained, its last line pinned by a head file.

``studies/<experiment>/ledger.jsonl`` (tracked, beside the registration: ``design/registration.py``)
opens with the registration's SHA-256 and holds one line per look (``analysis/study.py`` judges
them); ``ledger.head`` beside it holds the last line's number and hash. Plain files and hashes:
the DAG reads it before any job."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_ablation.design.hypotheses import CONTINUE
from grpo_ablation.design.problems import InputError


class LedgerError(InputError):
    """The ledger refuses a look, or was edited."""


def sha256_file(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _line(entry: dict[str, Any]) -> str:
    return json.dumps(entry, sort_keys=True, separators=(",", ":"))


def _sha(line: str) -> str:
    return hashlib.sha256(line.encode()).hexdigest()


@dataclass
class Ledger:
    """``ledger.jsonl`` and its head, ``ledger.head`` beside it ("<look> <SHA-256 of the last
    line>"), both committed with each look. Line 0 holds the registration's SHA-256; line k is
    look k, chained to the line before by its hash. Refused when read: a line out of order or off
    the chain (an earlier line edited), or a last line that is not the one the head records (the
    last line edited, the ledger cut back and judged again, or rewritten with its chain
    recomputed). What the two files cannot show is both rewritten together: the study's commits
    are the record of that."""

    path: Path

    @property
    def head(self) -> Path:
        return self.path.with_suffix(".head")

    def _lines(self) -> list[str]:
        if not self.path.exists():
            if self.head.exists():
                raise LedgerError(f"{self.path} is missing but its head {self.head} is not")
            return []
        lines = self.path.read_text().splitlines()
        previous = ""
        for k, line in enumerate(lines):
            entry = json.loads(line)
            if entry.get("look") != k or entry.get("previous") != previous:
                raise LedgerError(
                    f"{self.path}: line {k + 1} is not look {k} chained to the line before it: "
                    "the ledger was edited, and a study's earlier looks cannot be rewritten"
                )
            previous = _sha(line)
        recorded = self.head.read_text().split() if self.head.exists() else []
        if recorded != [str(len(lines) - 1), previous]:
            raise LedgerError(
                f"{self.path}: its last line is not the one its head {self.head} records "
                f"({' '.join(recorded) or 'no head'}): the ledger was edited, cut back or "
                "rewritten; restore both files from the study's commits"
            )
        return lines

    def registration(self) -> str:
        """The SHA-256 of the registration the ledger opens with."""
        lines = self._lines()
        if not lines:
            raise LedgerError(f"{self.path} has no registration line: register the study first")
        return json.loads(lines[0])["registration"]

    def entries(self) -> list[dict[str, Any]]:
        """Every look recorded, in order (the registration line left out)."""
        return [json.loads(line) for line in self._lines()[1:]]

    def _write(self, lines: list[str]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text("".join(line + "\n" for line in lines))
        self.head.write_text(f"{len(lines) - 1} {_sha(lines[-1])}\n")

    def open(self, registration: str) -> None:
        """Line 0: the registration's SHA-256 (refused over a ledger that holds another)."""
        lines = self._lines()
        if lines:
            if json.loads(lines[0])["registration"] != registration:
                raise LedgerError(f"{self.path} opens with another registration")
            return
        self._write([_line({"look": 0, "previous": "", "registration": registration})])

    def append(self, entry: dict[str, Any], look: int) -> dict[str, Any]:
        """Record ``entry`` (without ``look`` and ``previous``) as look ``look``: the next one,
        or one in the ledger judged again, which is kept as it is when it is the same and refused
        otherwise."""
        lines = self._lines()
        if not lines:
            raise LedgerError(f"{self.path} has no registration line: register the study first")
        done = [json.loads(line) for line in lines[1:]]
        body = {k: v for k, v in entry.items() if k not in ("look", "previous")}
        if look <= len(done):
            recorded = done[look - 1]
            # compared as the ledger writes them: a NaN statistic equals itself there
            same = {k: v for k, v in recorded.items() if k not in ("look", "previous")}
            if _line(same) != _line(body):
                raise LedgerError(
                    f"look {look} is in the ledger with other numbers or tables; the ledger "
                    "keeps the first"
                )
            return recorded
        if look != len(done) + 1:
            raise LedgerError(f"look {look} cannot come before look {len(done) + 1}")
        record = {**body, "look": look, "previous": _sha(lines[-1])}
        self._write([*lines, _line(record)])
        return record


def open_hypotheses(record: dict[str, Any]) -> list[str]:
    """The hypotheses a look left open (those the next look trains cells for)."""
    return [h for h, v in record["decisions"].items() if v == CONTINUE]
