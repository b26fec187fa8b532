"""The reading of the compute efficiency (``analysis/efficiency.py``'s table)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from grpo_ablation.analysis.efficiency import CONTRASTS, FIT_PARAMETERS
from grpo_ablation.analysis.stats import Interval
from grpo_ablation.design.ablation import cell_label


def _diff(row: pd.Series, q: str) -> tuple[float, float, float, int]:
    n = row[f"{q}_diff_n"]
    return (
        float(row[f"{q}_diff_mean"]),
        float(row[f"{q}_diff_low"]),
        float(row[f"{q}_diff_high"]),
        0 if pd.isna(n) else int(n),
    )


@dataclass
class Tally:
    """What the reading counts over the stages: the exploratory late-accuracy intervals and
    those that exclude zero, and the differences without an interval."""

    tested: int = 0
    excluded: int = 0
    missing_late: int = 0
    missing_fit: int = 0


def _opening(table: pd.DataFrame, unit: str) -> str:
    """The fits identified (and why the others are not), and what each quantity compares."""
    runs, fit = int(table["runs"].sum()), int(table["identified"].sum())
    reasons: dict[str, int] = {}
    for text in table["not_identified"].dropna():
        for part in filter(None, str(text).split("; ")):
            reason, _, n = part.rpartition(" (")
            reasons[reason] = reasons.get(reason, 0) + int(n.rstrip(")"))
    why = "; ".join(f"{r}: {n}" for r, n in sorted(reasons.items(), key=lambda x: -x[1]))
    return (
        f"**Compute efficiency** (the ScaleRL curve R(C) = R0 + (A − R0) / (1 + (C_mid / C)^B) "
        "fitted to each run's test sampled accuracy against the tokens it had generated, R0 the "
        f"base policy's): {fit} of {runs} runs have an identified fit"
        + (f" (not identified: {why})" if why else "")
        + ". The late accuracy (mean sampled accuracy over a run's curve points in the late "
        f"window, the last quarter of its steps) is defined for every run and pairs them {unit} "
        f"by {unit}. A and log10 C_mid exist only for identified fits, a selection that depends "
        f"on the outcome: their differences pair identified fits {unit} by {unit} and describe, "
        "they are not tests."
    )


def _cell_text(r: pd.Series, counted: bool, tally: Tally) -> str | None:
    """One cell's differences to its reference (late accuracy, A, log10 C_mid), each with its
    interval; the late accuracy counted as a test unless ``counted`` is False."""
    cell = []
    for q in ("efficiency_late", *FIT_PARAMETERS):
        mean, low, high, n = _diff(r, q)
        if n < 2 or not math.isfinite(low):
            if q in FIT_PARAMETERS:
                tally.missing_fit += 1
            else:
                tally.missing_late += 1
            continue
        tests = counted and q not in FIT_PARAMETERS
        hit = tests and Interval(mean, low, high, n).excludes_zero()
        tally.tested += tests
        tally.excluded += hit
        uncounted = not counted and q == "efficiency_late"
        cell.append(
            f"{CONTRASTS[q]} {mean:+.3f} [{low:+.3f}, {high:+.3f}] ({n} pairs"
            + (", excludes zero)" if hit else ")")
            + (" (declared, or a negative control: not counted)" if uncounted else "")
        )
    return f"``{r['cell']}`` " + ", ".join(cell) if cell else None


def _closing(tally: Tally, unit: str, confidence: float) -> list[str]:
    """The exploratory count beside the count expected by chance, and what has no interval."""
    parts = []
    if tally.tested:
        parts.append(
            f"Of these {tally.tested} distinct exploratory late-accuracy intervals "
            f"{tally.excluded} exclude zero, {(1 - confidence) * tally.tested:.2f} expected by "
            "chance with no effect at all (exploratory, no correction for multiplicity)."
        )
    if tally.missing_late:
        parts.append(
            f"{tally.missing_late} differences of the late accuracy have no interval (fewer than "
            f"two {unit}s)."
        )
    if tally.missing_fit:
        parts.append(
            f"{tally.missing_fit} differences of A or log10 C_mid have no interval (fewer than "
            f"two {unit}s where both fits are identified)."
        )
    return parts


def efficiency_reading(
    table: pd.DataFrame,
    unit: str = "seed",
    confidence: float = 0.95,
    declared: frozenset[tuple[str, str]] = frozenset(),
) -> str:
    """A paragraph on compute efficiency: identified fits, and per stage each cell's paired
    differences to its reference of the late accuracy (every run) with the count of intervals
    that exclude zero next to the count expected by chance, and of A and log10 C_mid (identified
    pairs only) as description, never counted as tests (``OUTCOME_DEPENDENT``). The AUC's
    contrasts are read with the other effects (it is one of the effect plot's quantities). Each
    comparison of the same runs (cell, reference) is counted once, in the first stage that makes
    it; ``declared`` (cell, reference labels) hold a hypothesis on the late accuracy, judged with
    the verdicts, or a negative control (equal by construction); neither is counted here."""
    if table.empty:
        return ""
    parts, tally = [_opening(table, unit)], Tally()
    first: dict[tuple[str, str], str] = {}
    for stage, of_stage in table.groupby("stage", sort=False):
        texts = []
        for _, r in of_stage[~of_stage["is_reference"].astype(bool)].iterrows():
            pair = (str(r["cell"]), str(r["reference"]))
            if first.setdefault(pair, str(stage)) != stage:
                texts.append(f"``{r['cell']}`` (repeat of {first[pair]}, counted there)")
                continue
            counted = (cell_label(pair[0]), cell_label(pair[1])) not in declared
            texts += filter(None, [_cell_text(r, counted, tally)])
        if texts:
            parts.append(f"{stage}: " + "; ".join(texts) + ".")
    return " ".join([*parts, *_closing(tally, unit, confidence)]) + "\n"
