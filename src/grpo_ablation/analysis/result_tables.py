"""Result tables: one row per cell per stage, every comparison with its interval across seeds.

Pure functions turn per-run frames into tables; thin writers render them as CSV (numbers: mean,
low, high), Markdown and LaTeX (formatted ``mean [low, high]``). Accuracy is lm-eval's on the test
split; "best" is the best checkpoint of each seed *on test*, an optimistic number reported next to
the final one, never used to choose anything. Mean-zero advantages are not reported: they hold by
construction of group centering and say nothing about the run's health.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from grpo_ablation.analysis import efficiency
from grpo_ablation.analysis.efficiency import efficiency_table
from grpo_ablation.analysis.loading import (
    EXTERNAL_PREFIX,
    base_accuracy,
    objectives_table,
)
from grpo_ablation.analysis.render import html_view, interval, number, to_latex, to_markdown
from grpo_ablation.analysis.stats import (
    CONFIDENCE,
    Interval,
    paired_interval,
    t_interval,
)
from grpo_ablation.design.ablation import Design, cell_label
from grpo_ablation.design.hypotheses import EXPLORATORY, contrast_key
from grpo_ablation.design.quantities import DISPLAY, EFFECTS, PAIRED, RUN_QUANTITIES
from grpo_ablation.evaluation.scoring import EXTERNAL_PROTOCOL
from grpo_ablation.layout import TABLE

BASE_LABEL = "base policy (step 0)"
# The words every results.json uses for an external benchmark (one definition, in evaluation/scoring.py).
EXTERNAL_LABEL = EXTERNAL_PROTOCOL


# -- the tables (pure) -------------------------------------------------------------------------
def _put(row: dict[str, Any], name: str, iv: Interval) -> None:
    row[f"{name}_mean"], row[f"{name}_low"], row[f"{name}_high"] = iv.mean, iv.low, iv.high
    row[f"{name}_n"] = iv.n  # seeds with a finite value (or seed pairs, for a difference)


def results_table(runs: pd.DataFrame, base: dict[str, float]) -> pd.DataFrame:
    """One row per cell per stage (plus the base policy per stage): mean and 95% t interval over
    seeds of every quantity, and the paired difference to the cell's reference in its stage."""
    table = []
    for stage, of_stage in runs.groupby("stage", sort=False):
        base_row: dict[str, Any] = {
            "stage": stage,
            "cell": BASE_LABEL,
            "is_reference": False,
            "reference": "",
            "n_seeds": 0,
        }
        for name, value in base.items():
            _put(base_row, f"{name}_final", Interval(value, math.nan, math.nan, 1))
        table.append(base_row)
        for cell, of_cell in of_stage.groupby("cell", sort=False):
            # Each cell's own reference: a crossed stage has one per value of its other axes.
            ref_path = of_cell["reference"].iloc[0]
            ref = of_stage[of_stage["cell"] == ref_path].set_index("seed")
            row: dict[str, Any] = {
                "stage": stage,
                "cell": cell,
                "is_reference": cell == ref_path,
                "reference": ref_path,
                "n_seeds": of_cell["seed"].nunique(),
            }
            external = sorted(c for c in of_cell.columns if c.startswith(EXTERNAL_PREFIX))
            for q in (*RUN_QUANTITIES, *external):
                if q in of_cell:
                    _put(row, q, t_interval(of_cell[q].astype(float)))
            by_seed = of_cell.set_index("seed")
            for q in PAIRED:
                iv = paired_interval(by_seed[q].to_dict(), ref[q].to_dict())
                _put(row, f"{q}_diff", iv)
            singles = of_cell["singles"].iloc[0] if "singles" in of_cell else ()
            for q in PAIRED if singles else ():
                # Non-additivity: Δ(both changes) − Σ Δ(each change alone), seed by seed.
                alone = [of_stage[of_stage["cell"] == c].set_index("seed")[q] for c in singles]
                values = {
                    s: by_seed[q][s] - ref[q][s] - sum(a[s] - ref[q][s] for a in alone)
                    for s in by_seed.index
                    if s in ref.index and all(s in a.index for a in alone)
                }
                _put(row, f"{q}_interaction", t_interval(values.values()))
            table.append(row)
    return pd.DataFrame(table)


def base_of(table: pd.DataFrame) -> dict[str, float]:
    """The base policy's accuracies a results table was given (``results_table``'s ``base``), read
    from its base row: every ``<name>_final`` it holds with one unit, in the order given."""
    row = table[table["cell"] == BASE_LABEL].iloc[0]
    names = [c.removesuffix("_final_n") for c in table.columns if c.endswith("_final_n")]
    return {n: float(row[f"{n}_final_mean"]) for n in names if row[f"{n}_final_n"] == 1}


def display_table(table: pd.DataFrame) -> pd.DataFrame:
    """Formatted strings for Markdown and LaTeX; intervals read ``mean [low, high]``."""
    external = sorted(
        {
            c[: -len("_final_mean")]
            for c in table.columns
            if c.startswith(EXTERNAL_PREFIX) and c.endswith("_final_mean")
        }
    )
    columns = {
        **DISPLAY,
        **{
            f"{q[len(EXTERNAL_PREFIX) :]} ({EXTERNAL_LABEL})": (f"{q}_final", "interval")
            for q in external
        },
    }
    out = []
    for _, r in table.iterrows():
        row = {
            "stage": r["stage"],
            "cell": r["cell"] + (" (ref.)" if r.get("is_reference") else ""),
            "seeds": int(r["n_seeds"]) if r["n_seeds"] else "",
        }
        for col, (q, how) in columns.items():
            mean = r.get(f"{q}_mean", math.nan)
            if mean is None or (isinstance(mean, float) and math.isnan(mean)):
                row[col] = ""
                continue
            if r["cell"] == BASE_LABEL:
                row[col] = number(q, mean)
                continue
            if how == "diff" and r["is_reference"]:
                row[col] = "reference"
                continue
            if how in ("interval", "diff"):
                row[col] = _shown(r, q, signed=how == "diff")
            else:
                row[col] = number(q, mean)
        out.append(row)
    return pd.DataFrame(out)


EFFECT_COLUMNS = [
    "stage",
    "stage_title",
    "cell",
    "label",
    "reference",
    "is_reference",
    "quantity",
    "metric",
    "mean",
    "low",
    "high",
    "n",
    "excludes_zero",
    "role",
    "predicted",
]


# With no effect anywhere, a 95% interval excludes zero with probability 1 − 0.95.
CHANCE = 1 - CONFIDENCE


def effects_table(
    table: pd.DataFrame,
    titles: dict[str, str] | None = None,
    roles: dict[str, str] | None = None,
    predicted: dict[str, float] | None = None,
) -> pd.DataFrame:
    """The effect plots' numbers, long: one row per (stage, cell, quantity of EFFECTS), copied from
    the results table's paired-difference columns so that plot and table always agree. The
    reference keeps its row (its difference to itself: 0 on every seed), flagged ``is_reference``.
    ``titles`` names each stage (``Design.stage_title``) for the reading; ``roles`` maps
    ``stage|cell|quantity`` to a declared hypothesis or a manipulation check
    (``design.hypotheses.contrast_roles``); every other contrast is exploratory. ``predicted`` gives a
    manipulation check's predicted difference (``hypotheses.manipulation_predictions``)."""
    rows = []
    # A recipe cell's interaction comes after the differences (the figure draws only those).
    kinds = [(f"{q}_diff", q, metric) for q, metric in EFFECTS.items()] + [
        (f"{q}_interaction", f"{q}_interaction", f"interaction (non-additivity) of {metric}")
        for q, metric in EFFECTS.items()
    ]
    for _, r in table[table["cell"] != BASE_LABEL].iterrows():
        for column, q, metric in kinds:
            n = r.get(f"{column}_n", math.nan)
            if pd.isna(n) or (column.endswith("_interaction") and not n):
                continue
            iv = Interval(
                float(r[f"{column}_mean"]),
                float(r[f"{column}_low"]),
                float(r[f"{column}_high"]),
                int(n),
            )
            rows.append(
                {
                    "stage": r["stage"],
                    "stage_title": (titles or {}).get(r["stage"], r["stage"]),
                    "cell": r["cell"],
                    "label": cell_label(r["cell"]),
                    "reference": r["reference"],
                    "is_reference": bool(r["is_reference"]),
                    "quantity": q,
                    "metric": metric,
                    "mean": iv.mean,
                    "low": iv.low,
                    "high": iv.high,
                    "n": iv.n,
                    "excludes_zero": iv.excludes_zero(),
                    "role": (roles or {}).get(
                        key := contrast_key(r["stage"], r["cell"], q), EXPLORATORY
                    ),
                    "predicted": (predicted or {}).get(key, math.nan),
                }
            )
    return pd.DataFrame(rows, columns=EFFECT_COLUMNS)


def predictions_of(effects: pd.DataFrame) -> dict[str, float]:
    """The manipulation checks' predictions an effects table was given (``effects_table``'s
    ``predicted``): ``stage|cell|quantity`` -> value, where it holds one."""
    held = effects[effects["predicted"].notna()]
    keys = zip(held["stage"], held["cell"], held["quantity"], held["predicted"], strict=True)
    return {contrast_key(s, c, q): float(v) for s, c, q, v in keys}


# -- writing -----------------------------------------------------------------------------------
RESULTS_CAPTION = (
    "Test accuracy (lm-eval) per cell and stage: mean over seeds with a 95% Student-t interval "
    "(undefined with one seed); Δ is the paired difference to the cell's reference in its stage on the "
    "same seed. Best is the best checkpoint on test (optimistic). Lengths in tokens: training "
    "lengths over the last quarter of the steps from the rollout log (eos counted), test length "
    "of the incorrect sampled completions of the final checkpoint from lm-eval's samples (eos not "
    "counted). Group fractions, ratio clipping (PPO clip of the probability ratio) and truncation "
    "(generation stopped at the max completion length) are over the whole run, from the rollout "
    "log and metrics; budget is the consumed one. Accuracy is scored by the task's declared "
    "answer rule under the training protocol; columns marked external are lm-eval's built-in "
    "benchmarks with their own prompts and answer extraction, not comparable with the headline."
)


def scoring_flags(table: pd.DataFrame) -> list[str]:
    """A warning per cell whose groups failed scoring: such groups carry no reward signal, so the
    cell's numbers must not be read as an effect of its objective."""
    col = "fraction_failed_scoring_mean"
    if col not in table:
        return []
    flagged = table[table[col].fillna(0) > 0].drop_duplicates("cell")
    return [
        f"**Scoring failed** in {row[col]:.0%} of the groups of ``{row['cell']}`` "
        "(mean over seeds): those groups carried no reward signal."
        for _, row in flagged.iterrows()
    ]


def write_tables(
    exp: Path, design: Design, rows: list[dict[str, Any]], runs: pd.DataFrame, out: Path
) -> list[Path]:
    """results.{csv,md,tex,html} and objectives.{csv,md,tex,html} under ``out``, from the design's
    rows and their runs (``load_runs``)."""
    out.mkdir(parents=True, exist_ok=True)
    seeds = design.seeds
    table = results_table(runs, base_accuracy(exp))
    table.to_csv(out / TABLE["results"], index=False)
    shown = display_table(table)
    flags = "".join(f"{line}\n\n" for line in scoring_flags(table))
    (out / TABLE["results_md"]).write_text(RESULTS_CAPTION + "\n\n" + flags + to_markdown(shown))
    text = RESULTS_CAPTION + "\n\n" + flags
    (out / TABLE["results_html"]).write_text(html_view(text, shown, out / TABLE["results"]))
    (out / TABLE["results_tex"]).write_text(to_latex(shown, RESULTS_CAPTION, "tab:results"))
    write_efficiency(efficiency_table(table, runs), out)
    objectives = objectives_table(exp, [r["cell"] for r in rows], seeds)
    objectives.to_csv(out / TABLE["objectives"], index=False)
    caption = "Objective record of each cell (appendix): the effective objective of its runs."
    (out / TABLE["objectives_md"]).write_text(caption + "\n\n" + to_markdown(objectives))
    view = html_view(caption, objectives, out / TABLE["objectives"])
    (out / TABLE["objectives_html"]).write_text(view)
    (out / TABLE["objectives_tex"]).write_text(
        to_latex(objectives, caption, "tab:objectives", wrap={"objective": "11cm"})
    )
    return [
        *(
            out / TABLE[f"{n}{e}"]
            for n in ("results", "objectives")
            for e in ("", "_md", "_tex", "_html")
        ),
        *(out / TABLE[k] for k in ("efficiency", "efficiency_md", "efficiency_html")),
    ]


EFFICIENCY_CAPTION = (
    "Compute efficiency per cell: the ScaleRL fit of each run's test sampled accuracy against "
    "the tokens it generated (A the asymptote, B the steepness, C_mid the tokens to half the "
    "gain; mean [95% t interval] over identified fits), the area under the curve (mean accuracy "
    "over the run's completions, fit-free) and Δ to the reference."
)


def write_efficiency(table: pd.DataFrame, out: Path, caption: str = EFFICIENCY_CAPTION) -> None:
    """efficiency.csv (the numbers), efficiency.md (formatted) and efficiency.html (its view)
    under ``out``."""
    table.to_csv(out / TABLE["efficiency"], index=False)
    shown = []
    for _, r in table.iterrows():
        row = {
            "stage": r["stage"],
            "cell": r["cell"] + (" (ref.)" if r["is_reference"] else ""),
            "identified": f"{r['identified']} of {r['runs']}",
        }
        for col, q in (("A", "efficiency_A"), ("B", "efficiency_B"), ("AUC", "efficiency_auc")):
            row[col] = _shown(r, q)
        row["C_mid (tokens)"] = number("efficiency_C_mid", r["efficiency_C_mid_mean"])
        for q, name in efficiency.CONTRASTS.items():
            row[f"Δ {name}"] = "reference" if r["is_reference"] else _shown(r, f"{q}_diff", True)
        row["not identified"] = r["not_identified"] if isinstance(r["not_identified"], str) else ""
        shown.append(row)
    (out / TABLE["efficiency_md"]).write_text(caption + "\n\n" + to_markdown(pd.DataFrame(shown)))
    view = html_view(caption, pd.DataFrame(shown), out / TABLE["efficiency"])
    (out / TABLE["efficiency_html"]).write_text(view)


def _shown(r: pd.Series, q: str, signed: bool = False) -> str:
    """The ``{q}_mean`` [``_low``, ``_high``] of a table row as ``render.interval`` shows the
    quantity ``q``; blank without a mean."""
    mean = r.get(f"{q}_mean", math.nan)
    if pd.isna(mean):
        return ""
    n = r.get(f"{q}_n", 0)
    low, high = (float(r.get(f"{q}_{b}", math.nan)) for b in ("low", "high"))
    return interval(q, float(mean), low, high, 0 if pd.isna(n) else int(n), signed)
