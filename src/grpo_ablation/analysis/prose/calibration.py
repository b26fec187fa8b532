"""The reading of the mixed-group calibration (``analysis/calibration.py``'s table)."""

from __future__ import annotations

import pandas as pd


def calibration_reading(table: pd.DataFrame) -> str:
    """One paragraph: how many cells' observed mixed fractions fall outside their prediction,
    next to the number expected by chance, and the group-size predictions."""
    if table.empty:
        return (
            "**Mixed-group calibration**: not measured (the task's accepted completions are not "
            "enumerable, so no P(correct) is measured apart from the groups)."
        )
    # A cell in several stages (a shared reference) is one check, counted once.
    table = table.drop_duplicates("cell")
    outside = table[~table["within"]]
    n = len(table)
    text = (
        f"**Mixed-group calibration** (each group predicted from its prompt's exact P(correct) "
        f"under the policy that sampled it, measured without the group; "
        f"``tables/calibration.csv``): {len(outside)} of {n} cells outside their 95% prediction "
        f"interval ({0.05 * n:.1f} expected by chance if the cells were independent checks; they "
        "are not: the cells of a seed share its step-0 groups, sampled from the base policy on "
        "the same prompts with the same keyed noise, and stay coupled while their policies "
        "agree, so one chance miss shows in many cells)"
    )
    if not outside.empty:
        text += ": " + "; ".join(
            f"{r.cell} observed {r.observed:.3f}, predicted {r.predicted:.3f} "
            f"[{r.predicted_low:.3f}, {r.predicted_high:.3f}]"
            for r in outside.itertuples()
        )
    text += "."
    other_g = table.dropna(subset=["predicted_from_reference"])
    if not other_g.empty:
        text += (
            " From the reference cell's probabilities at another group size: "
            + "; ".join(
                f"{r.cell} predicted {r.predicted_from_reference:.3f}, observed {r.observed:.3f}"
                for r in other_g.itertuples()
            )
            + " (the same prompts' p under the reference's policies: exact at step 0, an "
            + ("approximation later, where the runs' policies differ).")
        )
    return text
