"""The report's verdict on each hypothesis the config declared before the run (the declarations,
checked before any job: ``design/hypotheses.py``).

A hypothesis compares one cell of a stage with that cell's reference in the stage, on one of the
paired quantities of the results table, paired by unit (Δ = cell − reference). Two kinds:

- ``directional``: a predicted direction (``lower`` or ``higher``) and a minimum effect of interest
  δ ≥ 0. With s the predicted sign, two one-sided paired t tests: *support* rejects s·Δ ≤ δ,
  *refute* rejects s·Δ ≥ δ (the data rule out an effect of interest in the predicted direction).
- ``equivalence``: a margin m > 0. *Support* is TOST (the 90% interval inside ±m at α = 0.05);
  *refute* rejects |Δ| ≤ m on the side the data lie (its p doubled for the two sides: the 95%
  interval wholly outside ±m). An interval that includes zero is never read as an equivalence.

The verdict rule: the 2·m p-values of the m declared hypotheses (support and refute of each) form
one Holm family at α = 0.05. A hypothesis is *supported* or *refuted* when its test rejects after
the correction, else *inconclusive*; the probability that any verdict of the family is wrong is at
most α, whatever the true effects (a true effect exactly at δ makes both nulls of a hypothesis
true: one family keeps that case at α too, where separate families would allow 2α).

Each verdict comes with the design's power (``design/power.py``): the minimum detectable effect
at its number of units and the units it would need, from the per-unit SD observed after the run
and from the SD the config declares before it (``power.sd``).

Every contrast not declared is *exploratory*: the reading counts those whose 95% interval excludes
zero next to the number expected by chance with no effect at all, each distinct comparison once (a
cell shared by two stages compares the same runs: the later stage's row is a *repeat*). A contrast
that an axis changes by construction (G on the mixed-group fraction) is a *manipulation check*,
not a finding.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from grpo_ablation.analysis import marks
from grpo_ablation.analysis.stats import (
    holm,
    mixed_fraction_at,
    one_sided_p,
    sample_sd,
    t_interval,
    tost_p,
)
from grpo_ablation.design import power as _power
from grpo_ablation.design.ablation import Design, cell_label
from grpo_ablation.design.axes import BY_NAME
from grpo_ablation.design.hypotheses import (
    ALPHA,
    EXPLORATORY,
    NEGATIVE,
    PUSH,
    Hypothesis,
    Plan,
    contrast,
    contrast_key,
    declared,
    design_power,
    family_level,
    push_choices,
)
from grpo_ablation.layout import Tree

VERDICT_COLUMNS = [
    "id",
    "kind",
    "stage",
    "cell",
    "reference",
    "metric",
    "policy",
    "prediction",
    # the declaration the prediction reads (design.hypotheses.Hypothesis): the drawing's bounds
    # and predicted region
    *marks.DECLARATION,
    "unit",
    "n",
    "mean",
    "low90",
    "high90",
    "test",
    "p",
    "p_holm",
    "p_refute",
    "p_refute_holm",
    "verdict",
    # the design's power (design/power.py), after the run from the observed per-unit SD and
    # before it from the declared one (power.sd); ``level`` is the one-sided test's Holm bound
    "level",
    "expected",
    "sd",
    "power",
    "mde",
    "units_needed",
    "minutes_needed",
    "units_needed_upper",
    "units_declared",
    "sd_declared",
    "sd_declared_df",
    "power_declared",
    "mde_declared",
    "units_needed_declared",
    "source",
]


def _paired(runs: pd.DataFrame, row: dict[str, str], metric: str) -> list[float]:
    of_stage = runs[runs["stage"] == row["stage"]]
    cell = of_stage[of_stage["cell"] == row["cell"]].set_index("seed")[metric]
    ref = of_stage[of_stage["cell"] == row["reference"]].set_index("seed")[metric]
    seeds = sorted(set(cell.index) & set(ref.index))
    return [float(cell[s]) - float(ref[s]) for s in seeds]


def _tests(h: Hypothesis, xs: list[float]) -> tuple[float, float]:
    """(support p, refute p) of one hypothesis from its per-unit differences (cell − reference)."""
    if h.kind == "equivalence":
        above = one_sided_p(xs, h.margin, +1)  # Δ > m
        below = one_sided_p(xs, -h.margin, -1)  # Δ < −m
        refute = min(1.0, 2 * min(above, below)) if math.isfinite(above + below) else math.nan
        return tost_p(xs, h.margin), refute
    signed = [h.direction * d for d in xs]
    return one_sided_p(signed, h.minimum_effect, +1), one_sided_p(signed, h.minimum_effect, -1)


def judge(
    hypotheses: list[Hypothesis], diffs: dict[str, list[float]], alpha: float = ALPHA
) -> dict[str, dict[str, Any]]:
    """id -> the test, its numbers and the verdict, from each hypothesis's per-unit paired
    differences (cell − reference): support and refute of every hypothesis in one Holm family."""
    raw = {h.id: _tests(h, diffs[h.id]) for h in hypotheses}
    flat = holm([p for h in hypotheses for p in raw[h.id]])
    adjusted = {h.id: (flat[2 * i], flat[2 * i + 1]) for i, h in enumerate(hypotheses)}
    # A test without a p-value (fewer than two units, no spread) leaves the family.
    tests = sum(math.isfinite(p) for p in flat)
    family = f"Holm across the {tests} tests of the {len(hypotheses)} hypotheses"
    out = {}
    for h in hypotheses:
        xs = diffs[h.id]
        iv90 = t_interval(xs, 1 - 2 * alpha)
        (p_sup, p_ref), (a_sup, a_ref) = raw[h.id], adjusted[h.id]
        supported, refuted = a_sup < alpha, a_ref < alpha
        verdict = "supported" if supported else "refuted" if refuted else "inconclusive"
        p, p_adj = (p_ref, a_ref) if refuted else (p_sup, a_sup)
        if h.kind == "equivalence":
            test = f"TOST, margin ±{h.margin:g}" + (
                " (rejects equivalence: the 95% interval outside the margin)" if refuted else ""
            )
        else:
            test = "one-sided paired t " + (
                "(rejects an effect of interest)" if refuted else "(the predicted effect)"
            )
        out[h.id] = {
            "n": iv90.n,
            "mean": iv90.mean,
            "low90": iv90.low,
            "high90": iv90.high,
            "test": f"{test}, {family}",
            "p": p,
            "p_holm": p_adj,
            "p_refute": p_ref,
            "p_refute_holm": a_ref,
            "verdict": verdict if iv90.defined else "inconclusive",
        }
    return out


def power_columns(
    hypotheses: list[Hypothesis],
    diffs: dict[str, list[float]],
    design: Design,
    alpha: float = ALPHA,
    unit: str = "seed",
) -> dict[str, dict[str, Any]]:
    """id -> the power columns of VERDICT_COLUMNS: after the run from each hypothesis's observed
    per-unit SD at its units, before it from the SD the config declares (``power.sd``) at the
    design's units, and the wall minutes of the units needed (``power.minutes_per_unit``)."""
    plan = Plan.of(design)
    level = family_level(hypotheses, alpha)
    out = {}
    for h in hypotheses:
        n = len([x for x in diffs[h.id] if math.isfinite(x)])
        sd = sample_sd(diffs[h.id])
        after = design_power(h, sd, n, level)
        # An SD on few degrees of freedom is itself uncertain: the units needed at the upper
        # bound of its 95% interval, σ ≤ s·√(df / χ²_{0.025, df}), say how far off it may be.
        upper = design_power(h, sd * _power.sd_upper_factor(n - 1), n, level) if n >= 2 else {}
        declared = plan.declared_sd(h)
        units, unit = plan.units_of(h)
        before = design_power(h, declared, units, level)
        out[h.id] = {
            "unit": "replicate" if h.on_push else unit,
            "level": level,
            "expected": h.expected_effect,
            "sd": sd,
            **after,
            "minutes_needed": plan.minutes(after["units_needed"], h),
            "units_needed_upper": upper.get("units_needed", math.nan),
            "units_declared": f"{units} {unit}s",
            "sd_declared": declared,
            "sd_declared_df": plan.sd_df.get(h.metric, math.nan),
            **{f"{k}_declared": v for k, v in before.items()},
        }
    return out


def push_differences(h: Hypothesis, design: Design, records: list[dict[str, Any]]) -> list[float]:
    """A push hypothesis's per-replicate differences (cell − reference) at its policy, over the
    push records given (one per draw: each draw's replicates are units of their own)."""
    cell, ref = push_choices(h, design)
    quantity = PUSH[h.metric][0]
    out = []
    for record in records:
        steps = [p["step"] for p in record["policies"]]
        step = 0 if h.policy == "base" else max(steps)
        if step not in steps or (h.policy == "final" and step == 0):
            raise ValueError(f"hypothesis {h.id!r}: the push record holds no {h.policy} policy")
        policy = next(p for p in record["policies"] if p["step"] == step)
        out += [
            r["choices"][cell]["push"][quantity] - r["choices"][ref]["push"][quantity]
            for r in policy["replicates"]
        ]
    return out


def differences(
    hypotheses: list[Hypothesis],
    runs: pd.DataFrame,
    rows: list[dict[str, str]],
    design: Design,
    push: list[dict[str, Any]] | None = None,
) -> dict[str, list[float]]:
    """id -> each hypothesis's per-unit paired differences (cell − reference): by seed or draw
    from ``runs``, by push replicate from the ``push`` records for a push hypothesis."""
    return {
        h.id: push_differences(h, design, push or [])
        if h.on_push
        else _paired(runs, contrast(h, rows, design), h.metric)
        for h in hypotheses
    }


def verdicts_table(
    hypotheses: list[Hypothesis],
    runs: pd.DataFrame,
    rows: list[dict[str, str]],
    design: Design,
    push: list[dict[str, Any]] | None = None,
    unit: str = "seed",
) -> pd.DataFrame:
    """One row per declared hypothesis, in declaration order (the columns of VERDICT_COLUMNS);
    ``push`` holds the push records (push.json, one per draw) a push hypothesis is judged on."""
    diffs = differences(hypotheses, runs, rows, design, push)
    return verdicts_of(hypotheses, diffs, rows, design, unit)


def verdicts_of(
    hypotheses: list[Hypothesis],
    diffs: dict[str, list[float]],
    rows: list[dict[str, str]],
    design: Design,
    unit: str = "seed",
) -> pd.DataFrame:
    """``verdicts_table`` from each hypothesis's per-unit paired differences (``differences``)."""
    compared = {h.id: contrast(h, rows, design) for h in hypotheses}
    judged = judge(hypotheses, diffs)
    powers = power_columns(hypotheses, diffs, design, unit=unit)
    out = [
        {
            "id": h.id,
            "kind": h.kind,
            "stage": h.stage,
            "cell": cell_label(compared[h.id]["cell"]),
            "reference": cell_label(compared[h.id]["reference"]),
            "metric": h.metric,
            "policy": h.policy,
            "prediction": h.prediction(),
            "direction": h.direction,
            "minimum_effect": h.minimum_effect,
            "margin": h.margin,
            **judged[h.id],
            **powers[h.id],
            "source": h.source,
        }
        for h in hypotheses
    ]
    return pd.DataFrame(out, columns=VERDICT_COLUMNS)


def _mixed_at_group_size(
    reference: dict[str, Any], cell: dict[str, Any], G_ref: int, G: int
) -> float:
    """Predicted Δ mixed fraction (cell − reference) if both runs' groups came from one
    distribution of per-prompt success probabilities: the larger groups predict the smaller ones'
    mixed fraction without a model (``stats.mixed_fraction_at``), and the other run's is observed."""

    def counts(summary: dict[str, Any]) -> dict[int, int]:
        return {int(k): int(n) for k, n in summary.get("groups_by_correct", {}).items()}

    if G_ref <= G:
        mine = counts(cell)
        return mixed_fraction_at(mine, G, G) - mixed_fraction_at(mine, G, G_ref)
    ref = counts(reference)
    return mixed_fraction_at(ref, G_ref, G) - mixed_fraction_at(ref, G_ref, G_ref)


# The value each manipulation check predicts, by (axis, quantity): from the diagnostics summaries
# of the reference run and the cell's run (same seed), and the two values of the axis.
PREDICTIONS = {("group_size", "fraction_mixed"): _mixed_at_group_size}


def manipulation_predictions(
    exp: Path, design: Design, rows: list[dict[str, str]]
) -> dict[str, float]:
    """``stage|cell|quantity`` -> the difference to the reference a manipulation check predicts
    (mean over seeds of the prediction from each seed's reference run)."""
    out: dict[str, float] = {}
    stages = {s.name: s for s in design.stages}
    for r in rows:
        cell, ref = (design.parse_cell(r[k]) for k in ("cell", "reference"))
        changed = [ax for ax in stages[r["stage"]].vary if cell[ax] != ref[ax]]
        if len(changed) != 1:
            continue
        (ax,) = changed
        for q in BY_NAME[ax].manipulates:
            predicted = [
                PREDICTIONS[(ax, q)](
                    *(
                        json.loads(Path(Tree(exp).diagnostics_summary(c, s)).read_text())
                        for c in (r["reference"], r["cell"])
                    ),
                    ref[ax],
                    cell[ax],
                )
                for s in design.seeds
            ]
            out[contrast_key(r["stage"], r["cell"], q)] = float(np.mean(predicted))
    return out


def uncounted_pairs(
    verdicts: pd.DataFrame, effects: pd.DataFrame, metric: str = "efficiency_late"
) -> frozenset:
    """(cell, reference) labels that no exploratory count of ``metric`` may include: the declared
    hypotheses on it (judged with the verdicts) and the negative controls (equal by construction;
    ``effects``' roles)."""
    of = verdicts[verdicts["metric"] == metric]
    declared = zip(of["cell"].astype(str), of["reference"].astype(str), strict=True)
    role = effects["role"] if "role" in effects else pd.Series(EXPLORATORY, effects.index)
    controls = effects[role == NEGATIVE]
    negative = (
        (cell_label(c), cell_label(r))
        for c, r in zip(controls["cell"], controls["reference"], strict=True)
    )
    return frozenset([*declared, *negative])


def push_records(design: Design, exps: list[Path]) -> list[dict[str, Any]]:
    """The push record (push.json of the baseline's first seed) of each experiment folder in
    ``exps`` (a draw's each), where a declared hypothesis is judged on the push; else none."""
    if not any(h.on_push for h in declared(design)):
        return []
    where = (Path(Tree(e).push(design.baseline().path, design.seeds[0])) for e in exps)
    return [json.loads(path.read_text()) for path in where]
