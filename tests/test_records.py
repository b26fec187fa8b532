"""A study's records (``design/records.py``): what each finished draw leaves in the study's tracked
folder, checked against the registration and the ledger before a look reads it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_registration import registered

from grpo_ablation.design.ablation import Design
from grpo_ablation.design.ledger import Ledger, sha256_file
from grpo_ablation.design.records import (
    BUDGET_TIMING,
    RecordError,
    numbers_sha,
    read_records,
    record_folder,
    record_paths,
    recorded_draws,
    study_records,
    write_records,
)
from grpo_ablation.design.registration import registration_file
from grpo_ablation.layout import LEDGER, RECORDS


def finished_draw(design: Design, rows: list[dict], folder: Path, seconds: float) -> Path:
    """A draw's folder holding every file its records copy: each file its own path as content; a
    diagnostics summary with its budget, which took ``seconds``."""
    numbers, timing = record_paths(design, rows)
    for rel in [*numbers, *timing]:
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if rel.startswith("diagnostics/"):
            budget = {"completions": 64, "wall_time_s": seconds, "attempts": 1}
            path.write_text(json.dumps({"clip_fraction": 0.1, "budget": budget}))
        elif rel.endswith("budget.json"):
            path.write_text(json.dumps({"completions": 64, "wall_time_s": seconds}))
        else:
            path.write_text(rel)
    return folder


@pytest.fixture
def study(tmp_path):
    config = registered(tmp_path)
    design = Design.of(config)
    rows = [{"cell": design.baseline().path}, {"cell": "std_scaling=none"}]
    return design, rows, sha256_file(registration_file(config))


def test_a_draw_records_its_numbers_and_keeps_its_seconds_apart(study, tmp_path):
    design, rows, registration = study
    out = record_folder(study_records(design), 12)
    runs = {}
    for seconds in (31.5, 47.25):  # the same draw trained twice: its seconds differ
        draw = finished_draw(design, rows, tmp_path / f"run{seconds}" / "draw=12", seconds)
        runs[seconds] = write_records(design, rows, draw, out, registration)
    assert runs[31.5]["numbers"] == runs[47.25]["numbers"]
    assert runs[31.5]["timing"] != runs[47.25]["timing"]
    assert numbers_sha(runs[31.5]) == numbers_sha(runs[47.25])
    numbers, timing = record_paths(design, rows)
    assert "eval/base/test/summary.json" in numbers and "tables/efficiency_fits.csv" in numbers
    assert len(timing) == 2 * len(design.seeds) and all(t.endswith("budget.json") for t in timing)
    diagnostics = next(p for p in numbers if p.startswith("diagnostics/"))
    recorded = json.loads((out / diagnostics).read_text())
    assert recorded["budget"] == {"completions": 64} and not set(BUDGET_TIMING) & set(recorded)
    assert json.loads((out / timing[0]).read_text())["wall_time_s"] == 47.25
    assert read_records(out, registration) == runs[47.25]


def test_an_unfinished_draw_is_not_recorded(study, tmp_path):
    design, rows, registration = study
    draw = finished_draw(design, rows, tmp_path / "draw=12", 1.0)
    (draw / "tables" / "efficiency_fits.csv").unlink()
    with pytest.raises(RecordError, match=r"efficiency_fits\.csv.*not finished"):
        write_records(design, rows, draw, record_folder(study_records(design), 12), registration)


def test_records_are_refused_when_changed_or_another_studys(study, tmp_path):
    design, rows, registration = study
    out = record_folder(study_records(design), 12)
    draw = finished_draw(design, rows, tmp_path / "draw=12", 1.0)
    write_records(design, rows, draw, out, registration)
    with pytest.raises(RecordError, match="another registration"):
        read_records(out, "0" * 64)
    summary = out / "eval/base/test/summary.json"
    summary.write_text("edited")
    with pytest.raises(RecordError, match=r"summary\.json is changed since its draw was recorded"):
        read_records(out, registration)
    summary.unlink()
    with pytest.raises(RecordError, match=r"summary\.json is missing"):
        read_records(out, registration)


def test_the_recorded_draws_are_the_ones_a_fresh_clone_does_not_train(study, tmp_path):
    """Draws with records are read; a draw a look was judged on must keep the numbers the ledger
    holds of it, and its records."""
    design, rows, registration = study
    ledger = Ledger(study_records(design) / LEDGER)
    records = {}
    for d in (12, 13):
        draw = finished_draw(design, rows, tmp_path / f"draw={d}", 1.0)
        out = record_folder(study_records(design), d)
        records[d] = write_records(design, rows, draw, out, registration)
    assert recorded_draws(study_records(design), [12, 13, 14, 15], ledger) == [12, 13]
    look = {"decisions": {}, "records": {str(d): numbers_sha(records[d]) for d in (12, 13)}}
    ledger.append(look, 1)
    assert recorded_draws(study_records(design), [12, 13, 14, 15], ledger) == [12, 13]
    # a draw's records rewritten whole, hashes and all, with other numbers
    out = record_folder(study_records(design), 13)
    (out / "tables/efficiency_fits.csv").write_text("other fits")
    manifest = json.loads((out / RECORDS).read_text())
    manifest["numbers"]["tables/efficiency_fits.csv"] = sha256_file(
        out / "tables/efficiency_fits.csv"
    )
    (out / RECORDS).write_text(json.dumps(manifest))
    with pytest.raises(RecordError, match="draw 13's numbers are not the ones the ledger judged"):
        recorded_draws(study_records(design), [12, 13], ledger)
    (out / RECORDS).unlink()
    with pytest.raises(RecordError, match="ledger judged a look on draw 13"):
        recorded_draws(study_records(design), [12, 13], ledger)
