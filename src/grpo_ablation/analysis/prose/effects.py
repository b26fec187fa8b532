"""The report's reading of the contrasts, written from the numbers of the effect table: one
paragraph per stage, declared contrasts named, manipulation checks listed, exploratory exclusions
counted beside the number expected by chance."""

from __future__ import annotations

import math

import pandas as pd

from grpo_ablation.analysis.result_tables import CHANCE
from grpo_ablation.analysis.stats import (
    Interval,
    format_interval,
    sd_of_interval,
)
from grpo_ablation.design.ablation import cell_label
from grpo_ablation.design.hypotheses import EXPLORATORY, NEGATIVE, REPEAT


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


def _control_text(rows: pd.DataFrame, unit: str) -> str:
    """A negative control's contrasts: equal by construction, so the SD of their paired
    differences over units is the noise floor of any contrast of the design (an interval that
    excludes zero here points at a problem, not a finding)."""
    labels = ", ".join(dict.fromkeys(f"``{label}``" for label in rows["label"]))
    spreads = []
    for _, r in rows.iterrows():
        iv = _effect_interval(r)
        sd = sd_of_interval(iv)
        digits = 2 if "length" in str(r["quantity"]) else 3
        flag = " (excludes zero: check the control)" if iv.excludes_zero() else ""
        spreads.append(f"{r['metric']} {sd:.{digits}f}{flag}")
    return (
        f"Negative control {labels} (equal to the reference by construction, not counted as "
        f"exploratory): the per-{unit} SD of its paired differences, a floor of the null spread "
        "of a contrast here (a lower bound: these runs share their random numbers and stay "
        "closer than objectives that really differ): " + "; ".join(spreads) + "."
    )


def _chance(n: int) -> str:
    return f"{CHANCE * n:.2f} expected by chance with no effect at all"


# What a paired difference pairs on, per unit of replication: a seed within one base policy, or a
# base-policy draw (the pooled analysis, where each draw contributes the mean of its seeds).
PAIRING = {
    "seed": "on the same seed",
    "draw": "in the same base-policy draw, each draw's mean over its seeds",
}


def _contrasts(of_stage: pd.DataFrame) -> pd.DataFrame:
    return of_stage[~of_stage["is_reference"].astype(bool)]


def _defined(contrasts: pd.DataFrame) -> pd.DataFrame:
    """The contrasts with an interval."""
    defined = [_effect_interval(r).defined for _, r in contrasts.iterrows()]
    return contrasts[pd.Series(defined, index=contrasts.index, dtype=bool)]


def _opening(stage: str, of_stage: pd.DataFrame, unit: str) -> str:
    """A stage's first sentence: what its contrasts compare, over how many units."""
    refs = list(dict.fromkeys(cell_label(str(r)) for r in of_stage["reference"]))
    # A crossed stage compares each cell with the reference value at its own other values.
    reference = "the reference ``" + "`` / ``".join(refs) + "``"
    title = str(of_stage["stage_title"].iloc[0]) if "stage_title" in of_stage else stage
    seeds = sorted({int(n) for n in _contrasts(of_stage)["n"]}) or [0]
    seed_text = " or ".join(map(str, seeds)) + (f" {unit}" if seeds == [1] else f" {unit}s")
    return (
        f"**{title[0].upper() + title[1:]}**: paired differences to {reference} over "
        f"{seed_text} (cell minus reference {PAIRING[unit]}, mean [95% t interval])."
    )


# The sentences about a stage's contrasts with an interval, one per role, in this order; each
# None where the stage has no contrast of it.
def _declared(defined: pd.DataFrame, unit: str) -> str | None:
    declared = defined[defined["role"].str.startswith("hypothesis")]
    if declared.empty:
        return None
    ids = ", ".join(f"``{r[len('hypothesis ') :]}``" for r in declared["role"])
    return f"Declared, judged above: {ids}."


def _checks(defined: pd.DataFrame, unit: str) -> str | None:
    checks = defined[defined["role"] == "manipulation check"]
    if checks.empty:
        return None
    return (
        "Manipulation checks (the varied axis changes these by construction; not findings): "
        + "; ".join(_check_text(r) for _, r in checks.iterrows())
        + "."
    )


def _controls(defined: pd.DataFrame, unit: str) -> str | None:
    controls = defined[defined["role"] == NEGATIVE]
    return None if controls.empty else _control_text(controls, unit)


def _repeats(defined: pd.DataFrame, unit: str) -> str | None:
    repeats = defined[defined["role"].str.startswith(REPEAT)]
    if repeats.empty:
        return None
    where = dict.fromkeys(
        f"``{r['label']}`` ({r['role'][len(REPEAT) + 1 :]})" for _, r in repeats.iterrows()
    )
    return (
        "Repeats (the same runs against the same reference as in an earlier stage, one "
        "contrast counted there): " + ", ".join(where) + "."
    )


def _exploratory(defined: pd.DataFrame, unit: str) -> str | None:
    """The exploratory contrasts: those whose interval excludes zero, beside the number expected
    by chance, then how many include it."""
    free = defined[defined["role"] == EXPLORATORY]
    hits = free[free["excludes_zero"].astype(bool)]
    if free.empty:
        return None
    if hits.empty:
        return (
            f"Exploratory: no interval excludes zero, all {len(free)} contrasts include it "
            f"({_chance(len(free))})."
        )
    text = (
        f"Exploratory: {len(hits)} of {len(free)} contrasts "
        f"{'excludes' if len(hits) == 1 else 'exclude'} zero ({_chance(len(free))}): "
        + _excluding(hits)
        + "."
    )
    rest = len(free) - len(hits)
    if rest:
        others = "one includes" if rest == 1 else f"{rest} include"
        text += (
            f" The other {others} zero: no difference from the reference is resolved there at "
            f"this number of {unit}s."
        )
    return text


def _all_zero(defined: pd.DataFrame, unit: str) -> str | None:
    if not ((defined["low"] == 0).all() and (defined["high"] == 0).all()):
        return None
    return (
        f"Every difference is exactly zero on every {unit}: these cells' numbers equal the "
        "reference's."
    )


SENTENCES = (_declared, _checks, _controls, _repeats, _exploratory, _all_zero)


def stage_paragraph(stage: str, of_stage: pd.DataFrame, unit: str = "seed") -> str:
    """One stage's paragraph of the reading: its opening, then a sentence per role of its
    contrasts (``SENTENCES``), then how many have no interval."""
    opening, contrasts = _opening(stage, of_stage, unit), _contrasts(of_stage)
    if contrasts.empty:
        return f"{opening} The stage has no cell besides its reference."
    defined = _defined(contrasts)
    if defined.empty:
        return (
            f"{opening} None of its {len(contrasts)} contrasts has an interval (one {unit}, or no "
            "finite value): nothing here can be read as an effect."
        )
    parts = [opening, *filter(None, (sentence(defined, unit) for sentence in SENTENCES))]
    undefined = len(contrasts) - len(defined)
    if undefined:
        parts.append(
            f"{undefined} {'contrast has' if undefined == 1 else 'contrasts have'} no "
            "interval (fewer than two finite values)."
        )
    return " ".join(parts)


def _in_all(explored: int, excluded: int) -> str:
    """The closing paragraph: the exploratory exclusions of every stage counted together."""
    return (
        f"**Exploratory contrasts in all**: {excluded} of {explored} distinct contrasts "
        f"exclude zero, {_chance(explored)} (95% intervals, no correction for multiplicity; "
        "each comparison of the same runs counted once, declared ones never; contrasts "
        "that share a reference are not independent, so the count by chance varies more "
        "than a binomial's). An exploratory exclusion is a lead for a hypothesis declared "
        "before another run, not a conclusion."
    )


def effects_reading(effects: pd.DataFrame, opening: str = "", unit: str = "seed") -> str:
    """The report's reading (reStructuredText), written from the numbers of ``effects_table``,
    after ``opening`` (the verdicts on the declared hypotheses): one paragraph per stage
    (``stage_paragraph``), then the exploratory exclusions counted over every stage. Declared
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
        paragraphs.append(stage_paragraph(str(stage), of_stage, unit))
        defined = _defined(_contrasts(of_stage))
        free = defined[defined["role"] == EXPLORATORY]
        explored += len(free)
        excluded += int(free["excludes_zero"].astype(bool).sum())
    if explored:
        paragraphs.append(_in_all(explored, excluded))
    return "\n\n".join(paragraphs) + "\n"
