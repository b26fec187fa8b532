"""The reading of the coupling of the cells' samples (``analysis/coupling.py``'s table)."""

from __future__ import annotations

import pandas as pd


def coupling_reading(table: pd.DataFrame) -> str:
    """One paragraph: how long each stage's cells stay coupled to their reference."""
    if table.empty:
        return "**Coupling of the cells' samples**: no cell shares its reference's batch shape."
    excluded = table.loc[table["seeds"] == 0, "cell"].drop_duplicates().tolist()
    table = table[table["seeds"] > 0]
    parts = []
    for _, r in table.drop_duplicates(["cell", "reference"]).iterrows():
        first = r["first_difference_median"]
        when = (
            "identical throughout in most seeds"
            if first > r["last_step"]
            else f"first differ at step {first:g} (median over seeds)"
        )
        parts.append(
            f"{r['cell']} vs {r['reference']}: {r['identical_mean']:.0%} identical on average, "
            f"{r['identical_last']:.0%} at the last step; {when}"
        )
    if excluded:
        parts.append(
            f"not compared (another batch shape than the reference's): {', '.join(excluded)}"
        )
    return (
        "**Coupling of the cells' samples** (common random numbers: a completion's noise is named "
        "by seed, step, prompt, slot and position; ``tables/coupling.csv``): "
        + "; ".join(parts)
        + "."
    )
