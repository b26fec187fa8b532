"""The reading of the compute efficiency (``analysis/efficiency.py``'s table)."""

from __future__ import annotations

import math

import pandas as pd

from grpo_ablation.analysis.efficiency import CONTRASTS, FIT_PARAMETERS
from grpo_ablation.analysis.stats import Interval


def _diff(row: pd.Series, q: str) -> tuple[float, float, float, int]:
    n = row[f"{q}_diff_n"]
    return (
        float(row[f"{q}_diff_mean"]),
        float(row[f"{q}_diff_low"]),
        float(row[f"{q}_diff_high"]),
        0 if pd.isna(n) else int(n),
    )


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
    from grpo_ablation.design.ablation import cell_label

    if table.empty:
        return ""
    runs, fit = int(table["runs"].sum()), int(table["identified"].sum())
    reasons: dict[str, int] = {}
    for text in table["not_identified"].dropna():
        for part in filter(None, str(text).split("; ")):
            reason, _, n = part.rpartition(" (")
            reasons[reason] = reasons.get(reason, 0) + int(n.rstrip(")"))
    why = "; ".join(f"{r}: {n}" for r, n in sorted(reasons.items(), key=lambda x: -x[1]))
    parts = [
        f"**Compute efficiency** (the ScaleRL curve R(C) = R0 + (A − R0) / (1 + (C_mid / C)^B) "
        "fitted to each run's test sampled accuracy against the tokens it had generated, R0 the "
        f"base policy's): {fit} of {runs} runs have an identified fit"
        + (f" (not identified: {why})" if why else "")
        + ". The late accuracy (mean sampled accuracy over a run's curve points in the late "
        f"window, the last quarter of its steps) is defined for every run and pairs them {unit} by {unit}. A and log10 C_mid "
        "exist only for identified fits, a selection that depends on the outcome: their "
        f"differences pair identified fits {unit} by {unit} and describe, they are not tests."
    ]
    tested = excluded = missing_late = missing_fit = 0
    first: dict[tuple[str, str], str] = {}
    for stage, of_stage in table.groupby("stage", sort=False):
        texts = []
        for _, r in of_stage[~of_stage["is_reference"].astype(bool)].iterrows():
            pair = (str(r["cell"]), str(r["reference"]))
            if first.setdefault(pair, str(stage)) != stage:
                texts.append(f"``{r['cell']}`` (repeat of {first[pair]}, counted there)")
                continue
            counted = (cell_label(pair[0]), cell_label(pair[1])) not in declared
            cell = []
            for q in ("efficiency_late", *FIT_PARAMETERS):
                mean, low, high, n = _diff(r, q)
                if n < 2 or not math.isfinite(low):
                    if q in FIT_PARAMETERS:
                        missing_fit += 1
                    else:
                        missing_late += 1
                    continue
                tests = counted and q not in FIT_PARAMETERS
                hit = tests and Interval(mean, low, high, n).excludes_zero()
                tested += tests
                excluded += hit
                cell.append(
                    f"{CONTRASTS[q]} {mean:+.3f} [{low:+.3f}, {high:+.3f}] ({n} pairs"
                    + (", excludes zero)" if hit else ")")
                    + (
                        " (declared, or a negative control: not counted)"
                        if not counted and q == "efficiency_late"
                        else ""
                    )
                )
            if cell:
                texts.append(f"``{r['cell']}`` " + ", ".join(cell))
        if texts:
            parts.append(f"{stage}: " + "; ".join(texts) + ".")
    if tested:
        parts.append(
            f"Of these {tested} distinct exploratory late-accuracy intervals {excluded} exclude "
            "zero, "
            f"{(1 - confidence) * tested:.2f} expected by chance with no effect at all "
            "(exploratory, no correction for multiplicity)."
        )
    if missing_late:
        parts.append(
            f"{missing_late} differences of the late accuracy have no interval (fewer than two "
            f"{unit}s)."
        )
    if missing_fit:
        parts.append(
            f"{missing_fit} differences of A or log10 C_mid have no interval (fewer than two "
            f"{unit}s where both fits are identified)."
        )
    return " ".join(parts) + "\n"
