"""Diff two results directories of the pipeline numerically: are two runs bitwise the same?

    python notes/cpu_numerics.py RESULTS_A RESULTS_B [--verbose]

Each side is a ``results_dir`` (or one experiment folder under it). Compared:

- ``*.safetensors``: every tensor, bitwise (raw bytes), with the largest absolute difference;
- ``*.pt``/``*.pth`` (optimizer, scheduler, RNG states): their tensors and numbers, bitwise;
- ``*.json``, ``*.jsonl``, ``*.jsonl.gz``: every leaf, with the other side's root folder written
  as ``<ROOT>`` so absolute paths do not count; volatile keys (timings, dates, hosts, pids) skip;
- ``*.csv``: every cell by column name (volatile columns skip);
- anything else (``*.md``): line by line.

Benchmarks, logs, timing files and figures are skipped. Exit status 0 when nothing compared differs.
The headline lines give the base policy's weights and greedy accuracy, the checkpoints'
weights, the rollout logs, the training metrics and the evaluation summaries' accuracies, as the CPU-reproducibility notes quote them.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import math
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SKIP_PARTS = {"benchmarks", "logs", ".snakemake"}
# README.md: trl's model card lists its tags in set order (it changes between identical runs).
SKIP_NAMES = {"timing.json", "wall_time.json", "training_args.bin", "README.md"}
# Figures carry a creation date and are drawn from the numbers compared here.
# The tables' .md and .tex hold results.csv's numbers with wall times that cannot be told apart.
SKIP_SUFFIXES = (".pdf", ".png", ".svg", ".tex", "tables/results.md")
# Leaves that legitimately differ between two runs of the same computation.
VOLATILE_KEY = re.compile(
    r"(^|_|/)(time|times|timing|date|seconds|wall|elapsed|duration|pid|host|hostname|"
    r"start_time|end_time|total_evaluation_time_seconds|git_hash|git_commit|timestamp|"
    r"date_time|runtime|samples_per_second|steps_per_second|flos|total_flos)($|_|/)",
    re.IGNORECASE,
)


@dataclass
class FileDiff:
    path: str
    kind: str
    n_items: int = 0
    n_diff: int = 0
    max_abs: float = 0.0
    examples: list[str] = field(default_factory=list)

    @property
    def same(self) -> bool:
        return self.n_diff == 0

    def note(self, what: str, abs_diff: float = math.nan) -> None:
        self.n_diff += 1
        if not math.isnan(abs_diff):
            self.max_abs = max(self.max_abs, abs_diff)
        if len(self.examples) < 3:
            self.examples.append(what)


def experiment_root(path: Path) -> Path:
    """The experiment folder: ``path`` itself, or its only child holding a ``base`` folder."""
    if (path / "base").is_dir() or (path / "runs").is_dir():
        return path
    found = [p for p in path.iterdir() if p.is_dir() and (p / "base").is_dir()]
    if len(found) != 1:
        raise SystemExit(f"{path}: expected one experiment folder, found {[p.name for p in found]}")
    return found[0]


def compared_files(root: Path) -> set[str]:
    out = set()
    for p in root.rglob("*"):
        rel = p.relative_to(root)
        if (
            p.is_file()
            and not SKIP_PARTS & set(rel.parts)
            and p.name not in SKIP_NAMES
            and not rel.as_posix().endswith(SKIP_SUFFIXES)
        ):
            out.add(rel.as_posix())
    return out


# ----------------------------------------------------------------------------- leaves


def leaves(obj: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(key path, value) of every leaf of a JSON-like (or torch-state) object."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from leaves(v, f"{prefix}/{k}")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from leaves(v, f"{prefix}/{i}")
    else:
        yield prefix, obj


def compare_leaves(diff: FileDiff, a: Any, b: Any, where: str = "") -> None:
    la = {k: v for k, v in leaves(a, where) if not VOLATILE_KEY.search(k)}
    lb = {k: v for k, v in leaves(b, where) if not VOLATILE_KEY.search(k)}
    for key in sorted(la.keys() | lb.keys()):
        diff.n_items += 1
        va, vb = la.get(key, "<missing>"), lb.get(key, "<missing>")
        if _is_tensor(va) or _is_tensor(vb):
            _compare_tensor(diff, key, va, vb)
        elif _is_array(va) or _is_array(vb):
            if not (_is_array(va) and _is_array(vb)) or va.tobytes() != vb.tobytes():
                diff.note(f"{key}: arrays differ")
        elif isinstance(va, float) and isinstance(vb, float):
            if va.hex() != vb.hex() and not (math.isnan(va) and math.isnan(vb)):
                diff.note(f"{key}: {va!r} != {vb!r}", abs(va - vb))
        elif va != vb:
            diff.note(f"{key}: {str(va)[:60]!r} != {str(vb)[:60]!r}")


def _is_tensor(x: Any) -> bool:
    return type(x).__name__ == "Tensor"


def _compare_tensor(diff: FileDiff, key: str, a: Any, b: Any) -> None:
    if not (_is_tensor(a) and _is_tensor(b)):
        diff.note(f"{key}: tensor vs {type(b if _is_tensor(a) else a).__name__}")
        return
    if a.dtype != b.dtype or a.shape != b.shape:
        diff.note(f"{key}: {a.dtype}{tuple(a.shape)} vs {b.dtype}{tuple(b.shape)}")
        return
    ca, cb = a.detach().contiguous().cpu(), b.detach().contiguous().cpu()
    if ca.numel() and ca.view(-1).view(_bits(ca.dtype)).ne(cb.view(-1).view(_bits(cb.dtype))).any():
        gap = float((ca.double() - cb.double()).abs().max()) if ca.is_floating_point() else math.nan
        diff.note(f"{key}: max |a-b| = {gap:.3g}", gap)


def _is_array(x: Any) -> bool:
    """A numpy array (RNG states hold some)."""
    return type(x).__name__ == "ndarray"


def _bits(dtype: Any) -> Any:
    """An integer dtype of the same width, so a bitwise view compares NaNs and -0.0 exactly."""
    import torch

    return {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[dtype.itemsize]


# ----------------------------------------------------------------------------- readers


def _json_lines(path: Path, roots: tuple[str, str], side: int) -> list[Any]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt") as f:
        text = f.read()
    text = text.replace(roots[side], "<ROOT>")
    if path.name.endswith((".jsonl", ".jsonl.gz")):
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return [json.loads(text)]


def _csv_rows(path: Path, root: str) -> list[dict[str, str]]:
    return list(csv.DictReader(path.read_text().replace(root, "<ROOT>").splitlines()))


def _torch_state(path: Path) -> Any:
    import torch

    return torch.load(path, map_location="cpu", weights_only=False)


def _safetensors(path: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    return load_file(str(path))


def compare_file(rel: str, a: Path, b: Path, roots: tuple[str, str]) -> FileDiff:
    name = a.name
    if name.endswith(".safetensors"):
        diff = FileDiff(rel, "tensors")
        compare_leaves(diff, _safetensors(a), _safetensors(b))
    elif name.endswith((".pt", ".pth")):
        diff = FileDiff(rel, "torch")
        compare_leaves(diff, _torch_state(a), _torch_state(b))
    elif name.endswith(".csv"):  # rows by column name, so wall-time columns skip
        diff = FileDiff(rel, "csv")
        compare_leaves(diff, _csv_rows(a, roots[0]), _csv_rows(b, roots[1]))
    elif name.endswith((".json", ".jsonl", ".jsonl.gz")):
        diff = FileDiff(rel, "json")
        compare_leaves(diff, _json_lines(a, roots, 0), _json_lines(b, roots, 1))
    else:
        diff = FileDiff(rel, "text")
        ta = a.read_bytes().decode(errors="replace").replace(roots[0], "<ROOT>").splitlines()
        tb = b.read_bytes().decode(errors="replace").replace(roots[1], "<ROOT>").splitlines()
        for i in range(max(len(ta), len(tb))):
            diff.n_items += 1
            la, lb = (ta[i] if i < len(ta) else "<EOF>"), (tb[i] if i < len(tb) else "<EOF>")
            if la != lb:
                diff.note(f"line {i + 1}: {la[:50]!r} != {lb[:50]!r}")
    return diff


# ----------------------------------------------------------------------------- report

BASE_WEIGHTS = r"^base/.*\.safetensors$"
ROLLOUTS = r"rollouts/.*\.jsonl"
CHECKPOINT_WEIGHTS = r"checkpoint-\d+/model\.safetensors$"
METRICS = r"metrics\.jsonl$"
OPTIMIZER = r"optimizer\.pt$"
EVAL_SUMMARIES = r"^eval/.*summary\.json$"


def _greedy(root: Path, rel: str) -> str:
    path = root / rel
    if not path.exists():
        return "-"
    values = [c.get("greedy_accuracy") for c in json.loads(path.read_text()).get("checkpoints", [])]
    return ",".join(f"{v:.4g}" for v in values)


def headline(diffs: dict[str, FileDiff], roots: tuple[Path, Path]) -> list[str]:
    def group(pattern: str) -> str:
        hits = [d for rel, d in diffs.items() if re.search(pattern, rel)]
        same = sum(d.same for d in hits)
        return f"{same}/{len(hits)} identical" if hits else "none"

    summaries = sorted(
        rel for rel in diffs if rel.startswith("eval/") and rel.endswith("summary.json")
    )
    changed = [rel for rel in summaries if _greedy(roots[0], rel) != _greedy(roots[1], rel)]
    base = "eval/base/test/summary.json"
    return [
        f"base policy weights      : {group(BASE_WEIGHTS)}",
        f"base greedy acc (test)   : {_greedy(roots[0], base)} vs {_greedy(roots[1], base)}",
        f"rollout logs             : {group(ROLLOUTS)}",
        f"training metrics         : {group(METRICS)}",
        f"checkpoint weights       : {group(CHECKPOINT_WEIGHTS)}",
        f"optimizer states         : {group(OPTIMIZER)}",
        f"eval summaries           : {group(EVAL_SUMMARIES)}; "
        f"greedy accuracy differs in {len(changed)}/{len(summaries)}",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", type=Path)
    parser.add_argument("b", type=Path)
    parser.add_argument("--verbose", "-v", action="store_true", help="list every differing file")
    args = parser.parse_args(argv)
    roots = (experiment_root(args.a.resolve()), experiment_root(args.b.resolve()))
    fa, fb = compared_files(roots[0]), compared_files(roots[1])
    diffs = {}
    for rel in sorted(fa & fb):
        diffs[rel] = compare_file(
            rel, roots[0] / rel, roots[1] / rel, (str(roots[0]), str(roots[1]))
        )
    only = sorted(fa ^ fb)
    n_diff = sum(not d.same for d in diffs.values())
    print(
        f"{roots[0]} vs {roots[1]}: {len(diffs)} files compared, {n_diff} differ, "
        f"{len(only)} on one side only"
    )
    for line in headline(diffs, roots):
        print("  " + line)
    if args.verbose:
        for d in diffs.values():
            if not d.same:
                gap = f", max |a-b| {d.max_abs:.3g}" if d.max_abs else ""
                print(f"  DIFF {d.path} [{d.kind}] {d.n_diff}/{d.n_items}{gap}: {d.examples[0]}")
        for rel in only:
            print(f"  ONLY {rel}")
    return 1 if n_diff or only else 0


if __name__ == "__main__":
    sys.exit(main())
