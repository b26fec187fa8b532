"""Result tables: one row per cell per stage, every comparison with its interval across seeds.

Pure functions turn per-run frames into tables; thin writers render them as CSV (numbers: mean,
low, high), Markdown and LaTeX (formatted ``mean [low, high]``). Accuracy is lm-eval's on the test
split; "best" is the best checkpoint of each seed *on test*, an optimistic number reported next to
the final one, never used to choose anything. Mean-zero advantages are not reported: they hold by
construction of group centering and say nothing about the run's health.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd

from grpo_ablation import pipeline
from grpo_ablation.analysis import efficiency
from grpo_ablation.analysis.efficiency import compute_at_steps, efficiency_table, run_efficiency
from grpo_ablation.analysis.stats import (
    CONFIDENCE,
    Interval,
    format_interval,
    paired_interval,
    t_interval,
)
from grpo_ablation.choices import EXTERNAL_PROTOCOL, GROUP_CATEGORIES
from grpo_ablation.layout import Tree

ACCURACY = {"greedy": "greedy_accuracy", "sampled": "sampled_accuracy"}
BASE_LABEL = "base policy (step 0)"
# Per-run quantities summarised as mean [95% t interval] over seeds.
RUN_QUANTITIES = (
    "greedy_final",
    "greedy_best",
    "sampled_final",
    "sampled_best",
    "length_correct",
    "length_incorrect",
    "length_correct_late",
    "length_incorrect_late",
    "test_length_incorrect",
    "truncation_rate",
    "ratio_clip_low",
    "ratio_clip_high",
    *(f"fraction_{c}" for c in GROUP_CATEGORIES),
    "zero_std_fraction",
    "weight_share_homogeneous",
    "generated_tokens",
    "wall_time_s",
    # the efficiency curve (analysis/efficiency.py): fit parameters of identified fits only
    "efficiency_identified",
    "efficiency_A",
    "efficiency_B",
    "efficiency_C_mid",
    "efficiency_C_mid_completions",
    "efficiency_auc",
)
# The quantities compared with each cell's reference, paired by seed (the results table's
# ``<quantity>_diff_*`` columns; the metrics a hypothesis may name), and what they are called.
PAIRED = {
    "greedy_final": "final greedy accuracy",
    "sampled_final": "final sampled accuracy",
    "length_incorrect_late": "incorrect-completion length, last ¼ of steps (tokens)",
    "test_length_incorrect": "incorrect-completion length on test, final (tokens)",
    "fraction_mixed": "mixed-group fraction",
    "efficiency_auc": "area under the efficiency curve (mean sampled accuracy over training)",
    "efficiency_A": "efficiency fit: asymptote A",
    "efficiency_log10_C_mid": "efficiency fit: log10 C_mid (generated tokens to half the gain)",
}
# The efficiency fit's parameters: defined for identified fits only.
EFFICIENCY = efficiency.FIT_PARAMETERS
# The contrasts the effect plots and the report's reading show, in panel order.
EFFECTS = {
    q: PAIRED[q]
    for q in (
        "greedy_final",
        "sampled_final",
        "length_incorrect_late",
        "fraction_mixed",
        "efficiency_auc",
    )
}
# lm-eval built-in benchmarks (evaluation.external_benchmarks): extra columns external_<task>_final,
# labelled as such, never the headline.
EXTERNAL_PREFIX = "external_"
# The words every results.json uses for an external benchmark (one definition, in choices.py).
EXTERNAL_LABEL = EXTERNAL_PROTOCOL


def _externals(checkpoint: dict[str, Any]) -> dict[str, float]:
    """``external_<task>`` -> value of one checkpoint's external benchmarks (NaN when missing)."""
    return {
        f"{EXTERNAL_PREFIX}{task}": math.nan if e.get("value") is None else float(e["value"])
        for task, e in checkpoint.get("external_benchmarks", {}).items()
    }


# -- loading (thin: files -> frames) -----------------------------------------------------------
def _checkpoints(summary: Path) -> list[dict[str, Any]]:
    return json.loads(summary.read_text())["checkpoints"]


def load_curves(exp: Path, rows: list[dict[str, Any]], seeds: Iterable[int]) -> pd.DataFrame:
    """Test accuracy per (stage, cell, seed, step), the base policy prepended as step 0;
    ``generation_step`` is the step in generation batches (optimizer steps / μ), on which runs of
    different update epochs line up at the same completions."""
    tree = Tree(exp)
    base = _checkpoints(Path(tree.base_summary()))[0]
    out = []
    for r in rows:
        for seed in seeds:
            ckpts = _checkpoints(Path(tree.summary(r["cell"], seed)))
            record = Path(tree.objective(r["cell"], seed))
            mu = (
                int(json.loads(record.read_text()).get("num_iterations", 1))
                if record.exists()
                else 1
            )
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


def load_efficiency_points(
    exp: Path, rows: list[dict[str, Any]], seeds: Iterable[int]
) -> pd.DataFrame:
    """Every run's efficiency-curve points with the compute spent by then: (stage, cell, seed,
    step, accuracy, generated_tokens, completions)."""
    tree, frames = Tree(exp), []
    for r in rows:
        for seed in seeds:
            curve = json.loads(Path(tree.curve(r["cell"], seed)).read_text())
            summary = Path(tree.diagnostics(r["cell"], seed, "summary.json"))
            group_size = json.loads(summary.read_text())["objective"]["group_size"]
            points = pd.DataFrame(curve["points"]).sort_values("step")
            steps = pd.read_csv(tree.diagnostics(r["cell"], seed, "steps.csv"))
            at = compute_at_steps(steps, int(group_size), points["step"].tolist())
            frames.append(
                at.assign(
                    accuracy=points["accuracy"].to_numpy(),
                    stage=r["stage"],
                    cell=r["cell"],
                    seed=int(seed),
                )
            )
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def load_steps(exp: Path, rows: list[dict[str, Any]], seeds: Iterable[int]) -> pd.DataFrame:
    """The per-step diagnostics of every run, tagged with stage, cell and seed."""
    tree, frames = Tree(exp), []
    for r in rows:
        for seed in seeds:
            f = pd.read_csv(tree.diagnostics(r["cell"], seed, "steps.csv"))
            frames.append(f.assign(stage=r["stage"], cell=r["cell"], seed=int(seed)))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def load_runs(exp: Path, rows: list[dict[str, Any]], seeds: Iterable[int]) -> pd.DataFrame:
    """One row per (stage, cell, seed): final and best test accuracy, diagnostics, budget, and
    the efficiency fit of its curve (``efficiency.run_efficiency``)."""
    base_R0 = base_accuracy(exp)["sampled"]
    tree, out = Tree(exp), []
    for r in rows:
        for seed in seeds:
            ckpts = _checkpoints(Path(tree.summary(r["cell"], seed)))
            diag = json.loads(Path(tree.diagnostics(r["cell"], seed, "summary.json")).read_text())
            final = max(ckpts, key=lambda c: c["step"])
            row: dict[str, Any] = {**r, "seed": int(seed), "final_step": int(final["step"])}
            for name, key in ACCURACY.items():
                row[f"{name}_final"] = final[key]
                row[f"{name}_best"] = max(c[key] for c in ckpts)
            for key, value in diag.items():
                if not isinstance(value, dict):
                    row[key.replace("/", "_")] = value
            row["wall_time_s"] = diag["budget"]["wall_time_s"]
            row.update(_efficiency(exp, r["cell"], seed, diag, base_R0))
            row["test_length_incorrect"] = final.get("sampled_incorrect_tokens", math.nan)
            row.update((f"{k}_final", v) for k, v in _externals(final).items())
            out.append(row)
    return pd.DataFrame(out)


def _efficiency(exp: Path, cell: str, seed: int, diag: dict[str, Any], R0: float) -> dict:
    """The run's efficiency summary from its curve (headline sampled accuracy, so R0 is the base
    policy's sampled accuracy) and the compute its diagnostics count."""
    tree = Tree(exp)
    curve = json.loads(Path(tree.curve(cell, seed)).read_text())
    steps = pd.read_csv(tree.diagnostics(cell, seed, "steps.csv"))
    group_size = int(diag["objective"]["group_size"])
    return run_efficiency(curve["points"], steps, group_size, R0)


def base_accuracy(exp: Path) -> dict[str, float]:
    base = _checkpoints(Path(Tree(exp).base_summary()))[0]
    return {**{name: float(base[key]) for name, key in ACCURACY.items()}, **_externals(base)}


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


DISPLAY = {  # column of the Markdown/LaTeX table -> (quantity, how to show it)
    "final greedy acc.": ("greedy_final", "interval"),
    "Δ final greedy vs ref.": ("greedy_final_diff", "diff"),
    "best greedy acc.": ("greedy_best", "interval"),
    "final sampled accuracy": ("sampled_final", "interval"),
    "Δ final sampled vs ref.": ("sampled_final_diff", "diff"),
    "best sampled accuracy": ("sampled_best", "interval"),
    "length correct, last ¼ of steps": ("length_correct_late", "interval1"),
    "length incorrect, last ¼ of steps": ("length_incorrect_late", "interval1"),
    "Δ length incorrect vs ref.": ("length_incorrect_late_diff", "diff"),
    "test length incorrect (final, sampled)": ("test_length_incorrect", "interval1"),
    "Δ test length incorrect vs ref.": ("test_length_incorrect_diff", "diff"),
    "all-correct": ("fraction_all_correct", "mean"),
    "all-incorrect": ("fraction_all_incorrect", "mean"),
    "mixed": ("fraction_mixed", "mean"),
    "Δ mixed vs ref.": ("fraction_mixed_diff", "diff"),
    "failed scoring": ("fraction_failed_scoring", "mean"),
    "ratio clip low": ("ratio_clip_low", "mean"),
    "ratio clip high": ("ratio_clip_high", "mean"),
    "truncation": ("truncation_rate", "interval"),
    "efficiency AUC": ("efficiency_auc", "interval"),
    "Δ efficiency AUC vs ref.": ("efficiency_auc_diff", "diff"),
    "fits identified": ("efficiency_identified", "mean"),
    "asymptote A": ("efficiency_A", "interval"),
    "Δ A vs ref.": ("efficiency_A_diff", "diff"),
    "C_mid (tokens)": ("efficiency_C_mid", "int"),
    "Δ log10 C_mid vs ref.": ("efficiency_log10_C_mid_diff", "diff"),
    "generated tokens": ("generated_tokens", "int"),
    "wall time s": ("wall_time_s", "int"),
}


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
                row[col] = f"{mean:.3f}"
                continue
            if how == "diff" and r["is_reference"]:
                row[col] = "reference"
                continue
            n = int(r[f"{q}_n"])
            iv = Interval(float(mean), float(r[f"{q}_low"]), float(r[f"{q}_high"]), n)
            if how in ("interval", "diff"):
                row[col] = format_interval(iv, 3, signed=how == "diff")
            elif how == "interval1":
                row[col] = format_interval(iv, 1)
            elif how == "int":
                row[col] = f"{mean:.0f}"
            else:
                row[col] = f"{mean:.3f}"
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
EXPLORATORY = "exploratory"


def contrast_key(stage: str, cell: str, quantity: str) -> str:
    """How roles and predictions name one contrast: ``stage|cell|quantity``."""
    return f"{stage}|{cell}|{quantity}"


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
    ``titles`` names each stage (``pipeline.stage_title``) for the reading; ``roles`` maps
    ``stage|cell|quantity`` to a declared hypothesis or a manipulation check
    (``hypotheses.contrast_roles``); every other contrast is exploratory. ``predicted`` gives a
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
                    "label": pipeline.cell_label(r["cell"]),
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


def _effect_interval(row: pd.Series) -> Interval:
    return Interval(float(row["mean"]), float(row["low"]), float(row["high"]), int(row["n"]))


def _effect_text(row: pd.Series) -> str:
    iv = _effect_interval(row)
    digits = 2 if "length" in str(row["quantity"]) else 3
    way = "higher" if iv.mean > 0 else "lower"
    return f"{way} {row['metric']}, {format_interval(iv, digits, signed=True)}"


def _excluding(rows: pd.DataFrame) -> str:
    return "; ".join(
        f"``{label}``: " + " and ".join(_effect_text(r) for _, r in of_cell.iterrows())
        for label, of_cell in rows.groupby("label", sort=False)
    )


def _check_text(row: pd.Series) -> str:
    """A manipulation check: its measured difference next to the value its axis predicts."""
    iv = _effect_interval(row)
    text = f"``{row['label']}``: {row['metric']} {format_interval(iv, 3, signed=True)}"
    predicted = row.get("predicted", math.nan)
    if pd.isna(predicted):
        return text + ", no computed prediction"
    inside = iv.defined and iv.low <= predicted <= iv.high
    return (
        f"{text}, predicted {predicted:+.3f} if both runs drew their groups from one "
        f"distribution of per-prompt success probabilities "
        f"({'inside' if inside else 'outside'} the interval)"
    )


def _chance(n: int) -> str:
    return f"{CHANCE * n:.2f} expected by chance with no effect at all"


# What a paired difference pairs on, per unit of replication: a seed within one base policy, or a
# base-policy draw (the pooled analysis, where each draw contributes the mean of its seeds).
PAIRING = {
    "seed": "on the same seed",
    "draw": "in the same base-policy draw, each draw's mean over its seeds",
}


def effects_reading(effects: pd.DataFrame, opening: str = "", unit: str = "seed") -> str:
    """The report's reading (reStructuredText), written from the numbers of ``effects_table``,
    after ``opening`` (the verdicts on the declared hypotheses): one paragraph per stage. Declared
    contrasts are named, not counted again; manipulation checks are listed as such; the
    exploratory contrasts whose 95% interval excludes zero are given with their direction, and
    their number next to the number expected by chance (no correction for multiplicity, and
    contrasts sharing a reference are not independent). Never hand-written, so it cannot drift
    from the results."""
    role = effects["role"] if "role" in effects else pd.Series(EXPLORATORY, index=effects.index)
    effects = effects.assign(role=role.fillna(EXPLORATORY))
    paragraphs = [opening.strip()] if opening.strip() else []
    explored = excluded = 0
    for stage, of_stage in effects.groupby("stage", sort=False):
        contrasts = of_stage[~of_stage["is_reference"].astype(bool)]
        refs = list(dict.fromkeys(pipeline.cell_label(str(r)) for r in of_stage["reference"]))
        # A crossed stage compares each cell with the reference value at its own other values.
        reference = "the reference ``" + "`` / ``".join(refs) + "``"
        title = str(of_stage["stage_title"].iloc[0]) if "stage_title" in of_stage else str(stage)
        seeds = sorted({int(n) for n in contrasts["n"]}) or [0]
        seed_text = " or ".join(map(str, seeds)) + (f" {unit}" if seeds == [1] else f" {unit}s")
        parts = [
            f"**{title[0].upper() + title[1:]}**: paired differences to {reference} over "
            f"{seed_text} (cell minus reference {PAIRING[unit]}, mean [95% t interval])."
        ]
        if contrasts.empty:
            paragraphs.append(f"{parts[0]} The stage has no cell besides its reference.")
            continue
        defined = contrasts[[_effect_interval(r).defined for _, r in contrasts.iterrows()]]
        if defined.empty:
            parts.append(
                f"None of its {len(contrasts)} contrasts has an interval (one {unit}, or no "
                "finite value): nothing here can be read as an effect."
            )
            paragraphs.append(" ".join(parts))
            continue
        declared = defined[defined["role"].str.startswith("hypothesis")]
        if not declared.empty:
            ids = ", ".join(f"``{r[len('hypothesis ') :]}``" for r in declared["role"])
            parts.append(f"Declared, judged above: {ids}.")
        checks = defined[defined["role"] == "manipulation check"]
        if not checks.empty:
            parts.append(
                "Manipulation checks (the varied axis changes these by construction; not "
                "findings): " + "; ".join(_check_text(r) for _, r in checks.iterrows()) + "."
            )
        free = defined[defined["role"] == EXPLORATORY]
        hits = free[free["excludes_zero"].astype(bool)]
        explored, excluded = explored + len(free), excluded + len(hits)
        if not free.empty and hits.empty:
            parts.append(
                f"Exploratory: no interval excludes zero, all {len(free)} contrasts include it "
                f"({_chance(len(free))})."
            )
        elif not hits.empty:
            parts.append(
                f"Exploratory: {len(hits)} of {len(free)} contrasts "
                f"{'excludes' if len(hits) == 1 else 'exclude'} zero ({_chance(len(free))}): "
                + _excluding(hits)
                + "."
            )
            rest = len(free) - len(hits)
            if rest:
                others = "one includes" if rest == 1 else f"{rest} include"
                parts.append(
                    f"The other {others} zero: no difference from the reference is resolved "
                    f"there at this number of {unit}s."
                )
        if (defined["low"] == 0).all() and (defined["high"] == 0).all():
            parts.append(
                f"Every difference is exactly zero on every {unit}: these cells' numbers equal "
                "the reference's."
            )
        undefined = len(contrasts) - len(defined)
        if undefined:
            parts.append(
                f"{undefined} {'contrast has' if undefined == 1 else 'contrasts have'} no "
                "interval (fewer than two finite values)."
            )
        paragraphs.append(" ".join(parts))
    if explored:
        paragraphs.append(
            f"**Exploratory contrasts in all**: {excluded} of {explored} exclude zero, "
            f"{_chance(explored)} (95% intervals, no correction for multiplicity; contrasts "
            "that share a reference are not independent, so the count by chance varies more "
            "than a binomial's). An exploratory exclusion is a lead for a hypothesis declared "
            "before another run, not a conclusion."
        )
    return "\n\n".join(paragraphs) + "\n"


def objectives_table(exp: Path, cells: Iterable[str], seeds: Iterable[int]) -> pd.DataFrame:
    """Appendix: each cell's objective record as text (from its first seed), and whether every
    seed recorded the same objective (library versions included)."""
    seeds = sorted(seeds)
    out = []
    for cell in dict.fromkeys(cells):
        runs = [Path(Tree(exp).run(cell, s)) for s in seeds]
        records = {(r / "objective.json").read_text() for r in runs}
        out.append(
            {
                "cell": cell,
                "label": pipeline.cell_label(cell),
                "recipe": f"{r.name}: {r.source}" if (r := pipeline.cell_recipe(cell)) else "",
                "same_across_seeds": len(records) == 1,
                "objective": (runs[0] / "objective.md").read_text().strip(),
            }
        )
    return pd.DataFrame(out)


# -- rendering ---------------------------------------------------------------------------------
def to_markdown(frame: pd.DataFrame) -> str:
    def cell(v: Any) -> str:
        return str(v).replace("|", "\\|").replace("\n", " ")

    head = "| " + " | ".join(cell(c) for c in frame.columns) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    body = ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([head, rule, *body]) + "\n"


_TEX = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "Δ": r"$\Delta$",
    "≥": r"$\geq$",
    "·": r"$\cdot$",
}


def tex_escape(text: Any) -> str:
    return "".join(_TEX.get(ch, ch) for ch in str(text))


def to_latex(
    frame: pd.DataFrame, caption: str, label: str, wrap: dict[str, str] | None = None
) -> str:
    """A booktabs ``table``; ``wrap`` gives p{} widths for long text columns."""
    wrap = wrap or {}
    spec = "".join(f"p{{{wrap[c]}}}" if c in wrap else "l" for c in frame.columns)
    lines = [
        r"\begin{table}[htbp]",
        r"\centering",
        r"\scriptsize",
        rf"\caption{{{tex_escape(caption)}}}",
        rf"\label{{{label}}}",
        rf"\begin{{tabular}}{{{spec}}}",
        r"\toprule",
        " & ".join(tex_escape(c) for c in frame.columns) + r" \\",
        r"\midrule",
    ]
    lines += [
        " & ".join(tex_escape(v) for v in row) + r" \\" for row in frame.itertuples(index=False)
    ]
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"


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
        f"**Scoring failed** in {row[col]:.0%} of the groups of `{row['cell']}` (mean over seeds): "
        "those groups carried no reward signal."
        for _, row in flagged.iterrows()
    ]


def write_tables(
    exp: Path, config: dict[str, Any], rows: list[dict[str, Any]], runs: pd.DataFrame, out: Path
) -> list[Path]:
    """results.{csv,md,tex} and objectives.{csv,md,tex} under ``out``, from the design's rows and
    their runs (``load_runs``)."""
    out.mkdir(parents=True, exist_ok=True)
    seeds = [int(s) for s in config["seeds"]]
    table = results_table(runs, base_accuracy(exp))
    table.to_csv(out / "results.csv", index=False)
    shown = display_table(table)
    flags = "".join(f"{line}\n\n" for line in scoring_flags(table))
    (out / "results.md").write_text(RESULTS_CAPTION + "\n\n" + flags + to_markdown(shown))
    (out / "results.tex").write_text(to_latex(shown, RESULTS_CAPTION, "tab:results"))
    write_efficiency(efficiency_table(table, runs), out)
    objectives = objectives_table(exp, [r["cell"] for r in rows], seeds)
    objectives.to_csv(out / "objectives.csv", index=False)
    caption = "Objective record of each cell (appendix): the effective objective of its runs."
    (out / "objectives.md").write_text(caption + "\n\n" + to_markdown(objectives))
    (out / "objectives.tex").write_text(
        to_latex(objectives, caption, "tab:objectives", wrap={"objective": "11cm"})
    )
    return [
        *(out / f"{n}.{e}" for n in ("results", "objectives") for e in ("csv", "md", "tex")),
        *(out / f"efficiency.{e}" for e in ("csv", "md")),
    ]


EFFICIENCY_CAPTION = (
    "Compute efficiency per cell: the ScaleRL fit of each run's test sampled accuracy against "
    "the tokens it generated (A the asymptote, B the steepness, C_mid the tokens to half the "
    "gain; mean [95% t interval] over identified fits), the area under the curve (mean accuracy "
    "over the run's completions, fit-free) and Δ to the reference."
)


def write_efficiency(table: pd.DataFrame, out: Path, caption: str = EFFICIENCY_CAPTION) -> None:
    """efficiency.csv (the numbers) and efficiency.md (formatted) under ``out``."""
    table.to_csv(out / "efficiency.csv", index=False)
    shown = []
    for _, r in table.iterrows():
        row = {"stage": r["stage"], "cell": r["cell"] + (" (ref.)" if r["is_reference"] else ""),
               "identified": f"{r['identified']} of {r['runs']}"}  # fmt: skip
        for col, q, digits in (("A", "efficiency_A", 3), ("B", "efficiency_B", 2),
                               ("AUC", "efficiency_auc", 3)):  # fmt: skip
            row[col] = _shown(r, q, digits)
        row["C_mid (tokens)"] = "" if pd.isna(r["efficiency_C_mid_mean"]) else (
            f"{r['efficiency_C_mid_mean']:.0f}")  # fmt: skip
        for q, name in efficiency.CONTRASTS.items():
            row[f"Δ {name}"] = "reference" if r["is_reference"] else _shown(r, f"{q}_diff", 3, True)
        row["not identified"] = r["not_identified"] if isinstance(r["not_identified"], str) else ""
        shown.append(row)
    (out / "efficiency.md").write_text(caption + "\n\n" + to_markdown(pd.DataFrame(shown)))


def _shown(r: pd.Series, q: str, digits: int, signed: bool = False) -> str:
    mean = r.get(f"{q}_mean", math.nan)
    if pd.isna(mean):
        return ""
    n = r.get(f"{q}_n", 0)
    iv = Interval(
        float(mean), float(r[f"{q}_low"]), float(r[f"{q}_high"]), 0 if pd.isna(n) else int(n)
    )
    return format_interval(iv, digits, signed=signed)
