"""The analysis's inputs, read from the results tree (``grpo_ablation.layout``) into frames: one
row per run (final and best test accuracy, diagnostics, budget, efficiency fit), per checkpoint,
per training step and per efficiency-curve point; the base policy's accuracy; each cell's
objective record. A run's group size G and update epochs μ come from the design
(``run_training``), which holds them; the run's records only copy them."""

from __future__ import annotations

import io
import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from grpo_ablation.analysis.efficiency import compute_at_steps, run_efficiency
from grpo_ablation.design.ablation import Design, cell_label, cell_recipe
from grpo_ablation.design.options import TrainingConfig
from grpo_ablation.layout import BUDGET, OBJECTIVE, OBJECTIVE_TEXT, TABLE, Tree

ACCURACY = {"greedy": "greedy_accuracy", "sampled": "sampled_accuracy"}
# lm-eval built-in benchmarks (evaluation.external_benchmarks): extra columns external_<task>_final,
# labelled as such, never the headline.
EXTERNAL_PREFIX = "external_"


def externals(checkpoint: dict[str, Any]) -> dict[str, float]:
    """``external_<task>`` -> value of one checkpoint's external benchmarks (NaN when missing)."""
    return {
        f"{EXTERNAL_PREFIX}{task}": math.nan if e.get("value") is None else float(e["value"])
        for task, e in checkpoint.get("external_benchmarks", {}).items()
    }


def _checkpoints(summary: Path) -> list[dict[str, Any]]:
    return json.loads(summary.read_text())["checkpoints"]


def run_training(design: Design, cell: str) -> TrainingConfig:
    """A cell's training config (``Design.training_config``: G, μ and every other option its
    runs trained with; the seed does not change them)."""
    return design.training_config(design.parse_cell(cell), design.seeds[0])


def load_curves(exp: Path, design: Design, rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Test accuracy per (stage, cell, seed, step), the base policy prepended as step 0;
    ``generation_step`` is the step in generation batches (optimizer steps / μ), on which runs of
    different update epochs line up at the same completions."""
    tree = Tree(exp)
    base = _checkpoints(Path(tree.base_summary()))[0]
    out = []
    for r in rows:
        mu = int(run_training(design, r["cell"]).num_iterations)
        for seed in design.seeds_of(r["cell"]):
            ckpts = _checkpoints(Path(tree.summary(r["cell"], seed)))
            for is_base, c in [(True, base), *((False, c) for c in ckpts)]:
                step = 0 if is_base else int(c["step"])
                out.append(
                    {
                        "stage": r["stage"],
                        "cell": r["cell"],
                        "seed": int(seed),
                        "step": step,
                        "generation_step": step // mu,
                        "is_base": is_base,
                        **{k: c[v] for k, v in ACCURACY.items()},
                    }
                )
    return pd.DataFrame(out)


POINT_COLUMNS = ["step", "generated_tokens", "completions", "accuracy", "stage", "cell", "seed"]


def load_efficiency_points(exp: Path, design: Design, rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Every run's efficiency-curve points with the compute spent by then: (stage, cell, seed,
    step, accuracy, generated_tokens, completions)."""
    tree, frames = Tree(exp), []
    for r in rows:
        group_size = int(run_training(design, r["cell"]).group_size)
        for seed in design.seeds_of(r["cell"]):
            curve = json.loads(Path(tree.curve(r["cell"], seed)).read_text())
            points = pd.DataFrame(curve["points"]).sort_values("step")
            steps = pd.read_csv(tree.steps(r["cell"], seed))
            at = compute_at_steps(steps, group_size, points["step"].tolist())
            frames.append(
                at.assign(
                    accuracy=points["accuracy"].to_numpy(),
                    stage=r["stage"],
                    cell=r["cell"],
                    seed=int(seed),
                )
            )
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=POINT_COLUMNS)


def load_steps(exp: Path, rows: list[dict[str, Any]], seeds: Iterable[int]) -> pd.DataFrame:
    """The per-step diagnostics of every run, tagged with stage, cell and seed."""
    tree, frames = Tree(exp), []
    for r in rows:
        for seed in seeds:
            f = pd.read_csv(tree.steps(r["cell"], seed))
            frames.append(f.assign(stage=r["stage"], cell=r["cell"], seed=int(seed)))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def load_runs(
    exp: Path, design: Design, rows: list[dict[str, Any]], *, fitted: bool = False
) -> pd.DataFrame:
    """One row per (stage, cell, seed): final and best test accuracy, diagnostics, budget, and
    the efficiency summary of its curve (``efficiency.run_efficiency``: the fit, identified or
    not, and the area under the curve and late accuracy every run has). ``fitted``: read that
    summary from the tables job's ``efficiency_fits`` of ``exp`` instead of fitting again (the
    fits of a draw cost up to a minute; the numbers read back are the ones written)."""
    base_R0 = base_accuracy(exp)["sampled"]
    tree, out = Tree(exp), []
    fits = read_fits(Path(tree.table(TABLE["efficiency_fits"]))) if fitted else None
    for r in rows:
        group_size = int(run_training(design, r["cell"]).group_size)
        for seed in design.seeds_of(r["cell"]):
            ckpts = _checkpoints(Path(tree.summary(r["cell"], seed)))
            diag = json.loads(Path(tree.diagnostics_summary(r["cell"], seed)).read_text())
            final = max(ckpts, key=lambda c: c["step"])
            row: dict[str, Any] = {**r, "seed": int(seed), "final_step": int(final["step"])}
            for name, key in ACCURACY.items():
                row[f"{name}_final"] = final[key]
                row[f"{name}_best"] = max(c[key] for c in ckpts)
            for key, value in diag.items():
                if not isinstance(value, dict):
                    row[key.replace("/", "_")] = value
            if fits is not None and (r["cell"], int(seed)) not in fits:
                raise ValueError(
                    f"{tree.table(TABLE['efficiency_fits'])} has no fit of {r['cell']} seed "
                    f"{seed}: the tables of {exp} are not this design's; run its tables job again"
                )
            # from the run's budget: a study's records keep the seconds apart from the numbers
            budget = json.loads((Path(tree.run(r["cell"], seed)) / BUDGET).read_text())
            row["wall_time_s"] = budget["wall_time_s"]
            if fits is None:
                row.update(_efficiency(exp, r["cell"], seed, group_size, base_R0))
            else:
                row.update(fits[r["cell"], int(seed)])
            row["test_length_incorrect"] = final.get("sampled_incorrect_tokens", math.nan)
            row.update((f"{k}_final", v) for k, v in externals(final).items())
            out.append(row)
    return pd.DataFrame(out)


def _efficiency(exp: Path, cell: str, seed: int, group_size: int, R0: float) -> dict:
    """The run's efficiency summary from its curve (headline sampled accuracy, so R0 is the base
    policy's sampled accuracy) and the compute its diagnostics count."""
    tree = Tree(exp)
    curve = json.loads(Path(tree.curve(cell, seed)).read_text())
    steps = pd.read_csv(tree.steps(cell, seed))
    return run_efficiency(curve["points"], steps, group_size, R0)


# The efficiency fit's text columns (``run_efficiency``): read back as text, "" included.
FIT_TEXT = ("efficiency_status", "efficiency_reason")


def read_fits(path: Path) -> dict[tuple[str, int], dict[str, Any]]:
    """The efficiency summary of each (cell, seed) as ``run_efficiency`` returned it, from the
    ``efficiency_fits`` table the tables job wrote (its reason text as written, "" included)."""
    table = read_table(path, text=FIT_TEXT)
    columns = [c for c in table.columns if c.startswith("efficiency_")]
    return {
        (str(cell), int(seed)): dict(zip(columns, values, strict=True))
        for cell, seed, *values in table[["cell", "seed", *columns]].itertuples(index=False)
    }


def runs_table(runs: pd.DataFrame, draw: int | None) -> pd.DataFrame:
    """The per-run table the tables job writes (``runs.csv``): ``load_runs``' rows, each with its
    draw (empty without draws) first, without the rows' ``singles`` (design.json's plan holds
    them: ``design.hypotheses.planned_rows``)."""
    return runs.drop(columns="singles").assign(draw=draw)[
        ["draw", *(c for c in runs.columns if c != "singles")]
    ]


def read_runs(source: Path | io.StringIO) -> pd.DataFrame:
    """A per-run table (``runs_table``) as written: its keys and the fit's reasons as text."""
    return read_table(source, text=FIT_TEXT)


def compared_rows(runs: pd.DataFrame) -> list[list[str]]:
    """The (stage, cell, reference) of a frame's rows, each once, in order: what design.json's
    plan names a set of rows by (``planned_rows``)."""
    keys = runs[["stage", "cell", "reference"]].drop_duplicates(["stage", "cell"])
    return [list(map(str, k)) for k in keys.itertuples(index=False)]


def with_rows(runs: pd.DataFrame, rows: list[dict[str, Any]]) -> pd.DataFrame:
    """A per-run table as ``load_runs`` returned its rows (each row's ``singles`` after its
    reference), the draw last: what the analysis over draws pools."""
    singles = {(r["stage"], r["cell"]): r["singles"] for r in rows}
    out = runs.drop(columns="draw")
    at = list(out.columns).index("reference") + 1
    keys = zip(out["stage"], out["cell"], strict=True)
    out.insert(at, "singles", [singles[k] for k in keys])
    return out.assign(draw=runs["draw"])


# The results table's text columns: read as text whatever they hold (a stage named "NA" or "1").
TEXT_COLUMNS = ("stage", "cell", "reference")


def read_results(path: Path) -> pd.DataFrame:
    """The results table the tables job wrote (``results.csv``), as ``results_table`` made it:
    floats read back exactly (pandas writes the shortest repr that round-trips); the text
    columns as written, an empty one (the base policy's reference) the empty string it was."""
    return read_table(path)


def read_table(path: Path | io.StringIO, text: tuple[str, ...] = ()) -> pd.DataFrame:
    """Any table the tables job wrote (``layout.TABLES``), read back as ``read_results`` reads the
    results table: the text columns it has (stage, cell, reference, and ``text``) as written."""
    columns = (*TEXT_COLUMNS, *text)
    table = pd.read_csv(
        path, dtype=dict.fromkeys(columns, str), keep_default_na=False, na_values=[""]
    )
    present = [c for c in columns if c in table]
    table[present] = table[present].fillna("")
    return table


def base_accuracy(exp: Path) -> dict[str, float]:
    base = _checkpoints(Path(Tree(exp).base_summary()))[0]
    return {**{name: float(base[key]) for name, key in ACCURACY.items()}, **externals(base)}


def objectives_table(exp: Path, cells: Iterable[str], seeds: Iterable[int]) -> pd.DataFrame:
    """Appendix: each cell's objective record as text (from its first seed), and whether every
    seed recorded the same objective (library versions included)."""
    seeds = sorted(seeds)
    out = []
    for cell in dict.fromkeys(cells):
        runs = [Path(Tree(exp).run(cell, s)) for s in seeds]
        records = {(r / OBJECTIVE).read_text() for r in runs}
        out.append(
            {
                "cell": cell,
                "label": cell_label(cell),
                "recipe": f"{r.name}: {r.source}" if (r := cell_recipe(cell)) else "",
                "same_across_seeds": len(records) == 1,
                "objective": (runs[0] / OBJECTIVE_TEXT).read_text().strip(),
            }
        )
    return pd.DataFrame(out)
