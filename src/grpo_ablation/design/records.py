"""A study's records: what each finished draw leaves in the study's tracked folder.

``studies/<experiment>/draw=<d>/`` holds, at the paths they have in the draw's folder, the files
the pooled job and the look read of that draw (``record_paths``), and ``records.json``, written
last: the registration's SHA-256 and each file's SHA-256, the numbers apart from the seconds.
A study's looks read every draw from here, so a fresh clone with no ``results/`` continues a
study from its commits: the DAG trains only the draws without records (``recorded_draws``), and
each ledger line holds the SHA-256 of each draw's numbers (``numbers_sha``), which a rerun of the
draw reproduces byte for byte (the seconds it took are kept apart, in its timing files)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from grpo_ablation.design.ledger import Ledger, sha256_file
from grpo_ablation.design.problems import InputError
from grpo_ablation.layout import BUDGET, RECORDS, Tree, draw_number

# What the diagnostics summary copies from a run's budget that a rerun does not reproduce: the
# seconds and the attempts they took. Recorded in the run's budget.json, a timing file.
BUDGET_TIMING = ("wall_time_s", "attempts")


class RecordError(InputError):
    """A draw's records are not the study's, or were changed after they were written."""


def record_folder(study: Path, draw: int) -> Path:
    """A draw's records in the study's folder: ``draw=<d>``, as in the results tree."""
    return Path(Tree(study).draw(draw))


def study_records(design: Any) -> Path | None:
    """A sequential study's tracked folder (``registration.study_folder``); None for a design
    without looks."""
    from grpo_ablation.design.registration import study_folder

    plan = design.sections.get("study") or {}
    if not plan.get("looks"):
        return None
    return study_folder({"experiment": design.folder().name, "study": plan})


def draw_source(design: Any, draw: int) -> Path:
    """Where the analysis over draws reads a draw: in a study, its records, so a look on a fresh
    clone reads what the draw's own run read; else the draw's folder."""
    study = study_records(design)
    return design.draw_dir(draw) if study is None else record_folder(study, draw)


def record_paths(design: Any, rows: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """The numbers and the timing files of a draw, relative to its folder: the base policy's and
    every run's test summary, every run's diagnostics summary and objective record, the stages'
    selections, the efficiency fits (the tables job's); the runs' budgets (their seconds)."""
    from grpo_ablation.layout import TABLE

    tree, runs = Tree("."), _runs(design, rows)
    sources = sorted({src for s in design.stages for src in s.sources()})
    numbers = [
        tree.base_summary(),
        *(p for c, s in runs for p in (tree.summary(c, s), tree.diagnostics_summary(c, s))),
        *(tree.objective(c, s) for c, s in runs),
        *(tree.selection(src) for src in sources),
        tree.table(TABLE["efficiency_fits"]),
    ]
    timing = [f"{tree.run(c, s)}/{BUDGET}" for c, s in runs]
    return [p.removeprefix("./") for p in numbers], [p.removeprefix("./") for p in timing]


def _runs(design: Any, rows: list[dict[str, Any]]) -> list[tuple[str, int]]:
    return [(c, s) for c in dict.fromkeys(r["cell"] for r in rows) for s in design.seeds_of(c)]


def _diagnostics(design: Any, rows: list[dict[str, Any]]) -> set[str]:
    """The draw's diagnostics summaries, relative to its folder: recorded without the seconds."""
    tree = Tree(".")
    return {tree.diagnostics_summary(c, s).removeprefix("./") for c, s in _runs(design, rows)}


def numbers_sha(manifest: dict[str, Any]) -> str:
    """The SHA-256 of a draw's numbers (their files' hashes, in a canonical line): what a ledger
    line records of each draw it was judged on."""
    line = json.dumps(manifest["numbers"], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(line.encode()).hexdigest()


def _copy(source: Path, target: Path, untimed: bool) -> None:
    """``source`` to ``target``; ``untimed``: a diagnostics summary, its budget's seconds left out."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if not untimed:
        shutil.copyfile(source, target)
        return
    summary = json.loads(source.read_text())
    summary["budget"] = {k: v for k, v in summary["budget"].items() if k not in BUDGET_TIMING}
    target.write_text(json.dumps(summary, indent=2) + "\n")


def write_records(
    design: Any, rows: list[dict[str, Any]], draw_dir: Path, out: Path, registration: str
) -> dict[str, Any]:
    """Copy a draw's records from its folder ``draw_dir`` into ``out`` (emptied first), the
    diagnostics summaries without the budget's seconds, and write ``records.json`` last."""
    numbers, timing = record_paths(design, rows)
    missing = [p for p in [*numbers, *timing] if not (draw_dir / p).exists()]
    if missing:
        raise RecordError(f"{draw_dir} lacks {missing[:5]}: its draw is not finished")
    if out.exists():
        shutil.rmtree(out)
    untimed = _diagnostics(design, rows)
    for rel in [*numbers, *timing]:
        _copy(draw_dir / rel, out / rel, rel in untimed)
    manifest = {
        "draw": draw_number(draw_dir),
        "registration": registration,
        "numbers": {rel: sha256_file(out / rel) for rel in numbers},
        "timing": {rel: sha256_file(out / rel) for rel in timing},
    }
    (out / RECORDS).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def read_records(folder: Path, registration: str) -> dict[str, Any]:
    """A draw's records manifest, checked: the study's registration, every file as written."""
    manifest = json.loads((folder / RECORDS).read_text())
    if manifest.get("registration") != registration:
        raise RecordError(
            f"{folder / RECORDS} belongs to another registration than the study's: a draw of "
            "another design cannot enter this study"
        )
    for rel, sha in {**manifest["numbers"], **manifest["timing"]}.items():
        path = folder / rel
        if not path.exists() or sha256_file(path) != sha:
            raise RecordError(
                f"{path} is {'missing' if not path.exists() else 'changed'} since its draw was "
                f"recorded ({folder / RECORDS}): restore it from the study's commits"
            )
    return manifest


def recorded_draws(study: Path, draws: list[int], ledger: Ledger) -> list[int]:
    """The draws of ``draws`` with records in ``study``, each checked (``read_records``) and
    checked against every ledger line judged on it; a draw a look was judged on must have its
    records."""
    registration = ledger.registration()
    used: dict[int, str] = {}
    for entry in ledger.entries():
        used.update((int(d), sha) for d, sha in entry.get("records", {}).items())
    out = []
    for d in draws:
        folder = record_folder(study, d)
        if not (folder / RECORDS).exists():
            if d in used:
                raise RecordError(
                    f"{folder / RECORDS} is missing, and the ledger judged a look on draw {d}: "
                    "restore the draw's records from the study's commits"
                )
            continue
        manifest = read_records(folder, registration)
        if d in used and numbers_sha(manifest) != used[d]:
            raise RecordError(
                f"{folder / RECORDS}: draw {d}'s numbers are not the ones the ledger judged a "
                "look on; restore them from the study's commits"
            )
        out.append(d)
    return out
