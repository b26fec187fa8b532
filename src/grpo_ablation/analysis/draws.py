"""Base-policy draws: the analysis pooled over draws.

A draw is one local base policy (``base_policy.draws`` lists their seeds); every cell runs every
seed under each draw, in its own folder ``draw=<d>/``, analysed there as a one-base-policy
experiment. Cells are paired within a draw (same base policy, same seed). Pooled over draws, the
unit is the draw: each draw contributes the mean of its seeds per cell, and a contrast's interval
is the t interval over the draws' mean paired differences. In a balanced design this is the
interval of the grand mean under Δ_ds = μ + u_d + e_ds (draw effect u, seed noise e): the variance
of the draw means over D estimates σ_u²/D + σ_e²/(D·S) without bias, with D − 1 degrees of
freedom. It carries the between-draw variation that an interval over all D·S runs treated as
exchangeable would leave out, so an effect it resolves holds beyond the one base policy it was
found on. The same collapse feeds the declared hypotheses' tests.

Whether a contrast differs between draws (a draw × cell interaction) is tested only where every
draw has at least two seeds: a one-way ANOVA of the per-(draw, seed) paired differences, the
between-draw mean square over the within-draw one (``interaction_test``). With one seed a draw
each draw's difference is a single run, and its spread between draws cannot be told apart from
seed noise: no claim about it is made.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from grpo_ablation.analysis import hypotheses, loading, result_tables
from grpo_ablation.analysis.stats import paired_differences, paired_interval, sample_sd
from grpo_ablation.design.ablation import Design, cell_label, read_winners
from grpo_ablation.design.hypotheses import (
    EXPLORATORY,
    REPEAT,
    planned_rows,
)
from grpo_ablation.design.quantities import EFFECTS, OUTCOME_DEPENDENT, PAIRED
from grpo_ablation.design.records import draw_source, study_records
from grpo_ablation.layout import (
    TABLE,
    Tree,
)

UNIT = "draw"
# The level of the draw × cell interaction test (one contrast at a time, no correction: the
# reading sets the count of contrasts below it next to the count expected by chance).
ALPHA = 0.05


def draw_rows(design: Design, draw: int, folder: Path | None = None) -> list[dict[str, Any]]:
    """The design rows of one draw, with the winners its own selections chose (read from
    ``folder``, by default where the analysis over draws reads the draw)."""
    exp = draw_source(design, draw) if folder is None else folder
    sources = {src for s in design.stages for src in s.sources()}
    paths = [Path(Tree(exp).selection(src)) for src in sorted(sources)]
    return design.rows(read_winners([p for p in paths if p.exists()]))


@dataclass(frozen=True)
class DrawInputs:
    """What the analysis over draws reads of one draw: its rows (design.json's plan), its runs
    (one row per run: ``loading.with_rows``), the base policy's accuracies and the manipulation
    checks' predictions."""

    rows: list[dict[str, Any]]
    runs: pd.DataFrame
    base: dict[str, float]
    predicted: dict[str, float]

    @classmethod
    def of_tables(cls, design: Design, draw: int) -> DrawInputs:
        """From the draw's tables (the tables job's files the pooled rule declares): the per-run
        table, the results table's base row and the effects table's predictions; no run's
        files."""
        tree = Tree(design.draw_dir(draw))
        runs = loading.read_runs(Path(tree.table(TABLE["runs"])))
        rows = planned_rows(design, loading.compared_rows(runs))
        return cls(
            rows,
            loading.with_rows(runs, rows),
            result_tables.base_of(loading.read_results(Path(tree.table(TABLE["results"])))),
            result_tables.predictions_of(loading.read_table(Path(tree.table(TABLE["effects"])))),
        )

    @classmethod
    def of_records(cls, design: Design, draw: int) -> DrawInputs:
        """From a study's records of the draw (``design/records.py``: the run files its look
        reads, listed and hashed in its records.json), the same numbers as ``of_tables``: its
        runs pass through the per-run table's CSV, as they would through the draw's tables."""
        folder = draw_source(design, draw)
        rows = draw_rows(design, draw)
        runs = loading.load_runs(folder, design, rows, fitted=True)
        text = loading.runs_table(runs, draw).to_csv(index=False)
        return cls(
            rows,
            loading.with_rows(loading.read_runs(io.StringIO(text)), rows),
            loading.base_accuracy(folder),
            hypotheses.manipulation_predictions(folder, design, rows),
        )

    @classmethod
    def read(cls, design: Design, draw: int) -> DrawInputs:
        """``of_records`` in a sequential study (a fresh clone has only its records), else
        ``of_tables``."""
        return (
            cls.of_records(design, draw) if study_records(design) else cls.of_tables(design, draw)
        )


def load_draws(design: Design) -> pd.DataFrame:
    """One row per (draw, stage, cell, seed): every draw's runs (``DrawInputs.read``)."""
    frames = [DrawInputs.read(design, d).runs for d in design.draws]
    return pd.concat(frames, ignore_index=True)


def draw_means(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (stage, cell, draw): the mean over the draw's seeds of every numeric quantity
    (NaN values left out; for a paired quantity, the seeds where every cell of the stage has it).
    ``seed`` holds the draw, so the seed-paired results table and hypothesis tests pair cells
    within a draw and take the draw as their unit."""
    keys = ["stage", "cell", "draw"]
    # A paired quantity missing for one cell of a (stage, draw, seed) is dropped for every cell
    # there, so each cell's draw mean covers the same seeds and the difference of two draw means
    # is the draw's mean paired difference.
    runs = runs.copy()
    # With one seed a draw (the default) the efficiency fit's parameters are left out: a fit is
    # missing where it is not identified, which would blank the whole stage, and the results
    # table pairs each cell with its reference draw by draw anyway. With several seeds a draw
    # they pair stage-wide as every paired quantity does. The fit-free efficiency summaries
    # (efficiency_auc, efficiency_late) exist for every run and are ordinary paired quantities.
    one_seed = bool((runs.groupby("draw")["seed"].nunique() <= 1).all())
    for q in (q for q in PAIRED if not (one_seed and q in OUTCOME_DEPENDENT)):
        if q in runs:
            gap = (
                runs[q].isna().groupby([runs["stage"], runs["draw"], runs["seed"]]).transform("any")
            )
            runs.loc[gap, q] = float("nan")
    numeric = [
        c
        for c in runs.columns
        if c not in (*keys, "seed")
        and pd.api.types.is_numeric_dtype(runs[c])
        and not pd.api.types.is_bool_dtype(runs[c])
    ]
    other = [c for c in runs.columns if c not in (*keys, "seed", *numeric)]
    grouped = runs.groupby(keys, sort=False)
    out = grouped[other].first().join(grouped[numeric].mean()).reset_index()
    return out.assign(seed=out["draw"])


def base_means(inputs: Iterable[DrawInputs]) -> dict[str, float]:
    """The base policies' accuracy, mean over draws."""
    per_draw = [i.base for i in inputs]
    return {k: float(np.nanmean([b.get(k, math.nan) for b in per_draw])) for k in per_draw[0]}


def mean_predictions(inputs: Iterable[DrawInputs]) -> dict[str, float]:
    """Each manipulation check's prediction, mean over draws (NaN where a draw has none)."""
    predicted = [i.predicted for i in inputs]
    keys = dict.fromkeys(k for p in predicted for k in p)
    return {k: float(np.mean([p.get(k, math.nan) for p in predicted])) for k in keys}


def per_draw_contrasts(runs: pd.DataFrame) -> pd.DataFrame:
    """Each contrast of ``EFFECTS`` within each draw: mean [95% t interval] over its seeds
    (undefined with one seed) and the standard deviation of its seeds' paired differences (NaN
    with one), one row per (stage, cell, quantity, draw)."""
    out = []
    for (stage, draw), of in runs.groupby(["stage", "draw"], sort=False):
        for cell, of_cell in of.groupby("cell", sort=False):
            ref_path = of_cell["reference"].iloc[0]
            if cell == ref_path:
                continue
            ref = of[of["cell"] == ref_path].set_index("seed")
            mine = of_cell.set_index("seed")
            for q in EFFECTS:
                iv = paired_interval(mine[q].to_dict(), ref[q].to_dict())
                diffs = paired_differences(mine[q].to_dict(), ref[q].to_dict()).values()
                finite = [d for d in diffs if math.isfinite(d)]
                out.append(
                    {
                        "stage": stage,
                        "cell": cell,
                        "label": cell_label(cell),
                        "reference": ref_path,
                        "quantity": q,
                        "draw": int(draw),
                        "mean": iv.mean,
                        "low": iv.low,
                        "high": iv.high,
                        "n": iv.n,
                        "sd": sample_sd(finite),
                    }
                )
    return pd.DataFrame(out)


def anova_from_summaries(groups: Iterable[tuple[float, int, float]]) -> dict[str, float]:
    """One-way ANOVA F test from each group's (mean, n, standard deviation), groups of unequal
    size allowed: F = MS_between / MS_within, MS_between = Σ n_g (m_g − m)² / (G − 1) about the
    grand mean m = Σ n_g m_g / N, MS_within = Σ (n_g − 1) s_g² / (N − G), with (G − 1, N − G)
    degrees of freedom. NaN (F and p) with fewer than two groups, a group of fewer than two
    values, or no spread within groups (the ratio is then undefined, and nothing is claimed)."""
    from scipy import stats as scipy_stats

    groups = [(float(m), float(n), float(sd)) for m, n, sd in groups]
    if any(not (n >= 2 and math.isfinite(m) and math.isfinite(sd)) for m, n, sd in groups):
        return {"F": math.nan, "df_between": math.nan, "df_within": math.nan, "p": math.nan}
    G, N = len(groups), int(sum(n for _, n, _ in groups))
    out = {"F": math.nan, "df_between": G - 1, "df_within": N - G, "p": math.nan}
    if G < 2:
        return out
    grand = sum(n * m for m, n, _ in groups) / N
    between = sum(n * (m - grand) ** 2 for m, n, _ in groups) / (G - 1)
    within = sum((n - 1) * sd**2 for _, n, sd in groups) / (N - G)
    if within <= 0:
        return out
    F = between / within
    return {**out, "F": F, "p": float(scipy_stats.f.sf(F, G - 1, N - G))}


def interaction_test(differences: Mapping[Any, Iterable[float]]) -> dict[str, float]:
    """The draw × cell interaction of one contrast: the one-way ANOVA (``anova_from_summaries``)
    of its per-(draw, seed) paired differences, ``differences`` mapping each draw to its seeds'
    differences (NaN left out). A small p: the contrast differs between draws by more than its
    seeds vary within a draw."""
    summaries = []
    for values in differences.values():
        xs = [float(v) for v in values if math.isfinite(float(v))]
        sd = sample_sd(xs)
        summaries.append((float(np.mean(xs)) if xs else math.nan, len(xs), sd))
    return anova_from_summaries(summaries)


def consistency(effects: pd.DataFrame, within: pd.DataFrame) -> pd.DataFrame:
    """Per pooled contrast (``result_tables.effects_table`` rows of the differences): in how many draws
    the draw's mean difference has the pooled sign, whether the effect holds across draws (the
    pooled interval excludes zero and every draw agrees in sign), the fewest seeds of a draw, and
    the p-value of the draw × cell interaction (``anova_from_summaries`` on ``within``'s per-draw
    mean, n and sd; NaN unless every draw has two seeds or more)."""
    out = []
    role = effects["role"] if "role" in effects else pd.Series(EXPLORATORY, effects.index)
    diffs = effects[
        ~effects["is_reference"].astype(bool)
        & effects["quantity"].isin(EFFECTS)
        # each comparison of the same runs once (the stage that first makes it)
        & ~role.fillna(EXPLORATORY).str.startswith(REPEAT)
    ]
    for _, e in diffs.iterrows():
        mine = within[
            (within["stage"] == e["stage"])
            & (within["cell"] == e["cell"])
            & (within["quantity"] == e["quantity"])
        ]
        sign = np.sign(e["mean"])
        agree = int((np.sign(mine["mean"]) == sign).sum()) if sign else 0
        n = mine["n"] if "n" in mine else pd.Series(1, index=mine.index)
        sd = mine["sd"] if "sd" in mine else pd.Series(math.nan, index=mine.index)
        test = anova_from_summaries(zip(mine["mean"], n, sd, strict=True))
        out.append(
            {
                "stage": e["stage"],
                "cell": e["cell"],
                "label": e["label"],
                "quantity": e["quantity"],
                "mean": e["mean"],
                "low": e["low"],
                "high": e["high"],
                "role": e.get("role", EXPLORATORY),
                "draws": len(mine),
                "same_sign": agree,
                "holds_across_draws": bool(e["excludes_zero"]) and agree == len(mine),
                "seeds_per_draw": int(n.min()) if len(mine) else 0,
                "interaction_p": test["p"],
            }
        )
    return pd.DataFrame(out)
