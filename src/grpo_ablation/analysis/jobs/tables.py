"""The tables job: every number of a draw's analysis, computed once, written as ``layout.TABLES``.

The results, objectives, hypotheses, calibration, coupling and efficiency tables; the effects
table (the effect plots' numbers with each contrast's role and each manipulation check's
prediction, one long table with a stage column); the per-run table (every run's quantities, which
the analysis over draws reads); and what the figures draw (each run's efficiency
fit, the efficiency-curve points with their compute, the test-accuracy curves, the per-step
diagnostics and the calibration groups). The figures job (``jobs.figures.write_figures``) and the
reading (``jobs.reading.write_reading``) read these files and compute nothing again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from grpo_ablation.analysis import calibration, coupling, hypotheses, loading
from grpo_ablation.analysis.hypotheses import push_records, verdicts_table
from grpo_ablation.analysis.prose.verdicts import verdicts_reading
from grpo_ablation.analysis.render import html_view, to_rst
from grpo_ablation.analysis.result_tables import effects_table, write_tables
from grpo_ablation.design.ablation import Design
from grpo_ablation.design.hypotheses import declared, planned_roles
from grpo_ablation.layout import TABLE, TABLES, draw_number

# The keys of a run in the efficiency fits table; its other columns are ``run_efficiency``'s.
FIT_KEYS = ["stage", "cell", "seed"]


# The keys of a run in the efficiency fits table; its other columns are ``run_efficiency``'s.
FIT_KEYS = ["stage", "cell", "seed"]


def effects(exp: Path, design: Design, rows: list[dict[str, Any]], results: Path) -> pd.DataFrame:
    """The effects table of every stage (``result_tables.effects_table``) from the results table as
    written (``results``: read back exactly), with the roles design.json's plan declared
    (``planned_roles``; repeats found against every stage of ``rows``) and the manipulation
    checks' predictions."""
    titles = {r["stage"]: design.stage_title(r["stage"]) for r in rows}
    return effects_table(
        loading.read_results(results),
        titles,
        planned_roles(design, rows),
        hypotheses.manipulation_predictions(exp, design, rows),
    )


def write_all(exp: Path, design: Design, winners: dict[str, Any], out: Path) -> list[Path]:
    """Every file of ``layout.TABLES`` under ``out``, for the design's rows with ``winners``;
    refuses to have written any other set (the DAG declares exactly these)."""
    rows, seeds = design.rows(winners), design.seeds
    runs = loading.load_runs(exp, design, rows)  # read (and fitted) once, used by every table
    epochs = {r["cell"]: int(loading.run_training(design, r["cell"]).num_iterations) for r in rows}
    groups = calibration.load_groups(exp, rows, seeds)
    paths = [
        *write_tables(exp, design, rows, runs, out),
        *write_verdicts(design, rows, runs, out, exp),
        *calibration.write_calibration(groups, out),
        *coupling.write_coupling(exp, rows, seeds, out, epochs),
    ]
    fits = runs[[*FIT_KEYS, *(c for c in runs.columns if c.startswith("efficiency_"))]]
    frames = {
        "effects": effects(exp, design, rows, out / TABLE["results"]),
        "runs": loading.runs_table(runs, draw_number(exp)),
        "efficiency_fits": fits,
        "efficiency_points": loading.load_efficiency_points(exp, design, rows),
        "accuracy_curves": loading.load_curves(exp, design, rows),
        "training_steps": loading.load_steps(exp, rows, seeds),
        "calibration_groups": groups,
    }
    for key, frame in frames.items():
        frame.to_csv(out / TABLE[key], index=False)
        paths.append(out / TABLE[key])
    written = [p.name for p in paths]
    if sorted(written) != sorted(TABLES):
        raise RuntimeError(f"the tables job wrote {written}, not layout.TABLES {list(TABLES)}")
    return paths


def write_verdicts(
    design: Design, rows: list[dict[str, Any]], runs: pd.DataFrame, out: Path, exp: Path
) -> list[Path]:
    """hypotheses.csv, hypotheses.rst (the verdicts' reading, then the table) and hypotheses.html
    (its view) under ``out``, from the design's rows and their runs (and the push record of
    ``exp``, the draw's folder)."""
    verdicts = verdicts_table(declared(design), runs, rows, design, push_records(design, [exp]))
    out.mkdir(parents=True, exist_ok=True)
    verdicts.to_csv(out / TABLE["hypotheses"], index=False)
    text = verdicts_reading(verdicts)
    (out / TABLE["hypotheses_rst"]).write_text(text + "\n" + to_rst(verdicts))
    view = html_view(text, verdicts, out / TABLE["hypotheses"])
    (out / TABLE["hypotheses_html"]).write_text(view)
    return [out / TABLE[k] for k in ("hypotheses", "hypotheses_rst", "hypotheses_html")]
