"""How much does a replicated reference buy under common random numbers? Measure, over the draws of
a finished study (or any design whose stage runs its reference k times a seed), the correlation
of a cell's run with its reference's run of the same seed (shared random numbers: ρ₁) and with a
reference run of another seed (ρ₀), and the SDs of the per-draw differences the plan prices:
cell − same-seed reference, cell − mean of the k reference runs.

    python notes/reference_correlation.py results/study_reduced/design.json \\
        --stage aggregation --cell std=sample/agg=constant/G=8 \\
        --reference std=sample/agg=sequence_mean/G=8

Runs of equal variance σ² across draws: Var(c − r_same) = 2σ²(1 − ρ₁), Var(c − r_other) =
Var(r_i − r_j) = 2σ²(1 − ρ₀), σ² the mean of the runs' variances over draws. The plan's
``design.hypotheses.replication_factor`` takes ρ₁ and ρ₀; the measured ratio
SD(c − mean)/SD(c − r_same) is printed beside it as a check.
"""

from __future__ import annotations

import argparse
import itertools
import math
from pathlib import Path

import pandas as pd

from grpo_ablation.analysis.draws import load_draws
from grpo_ablation.design.ablation import Design
from grpo_ablation.design.hypotheses import replication_factor


def measure(
    runs: pd.DataFrame, stage: str, cell: str, reference: str, metric: str
) -> dict[str, float]:
    """ρ₁, ρ₀ and the SDs of the differences of ``metric`` over draws (one row per draw)."""
    rows = runs[runs["stage"] == stage]
    wide = rows[rows["cell"].isin([cell, reference])].pivot_table(
        index="draw", columns=["cell", "seed"], values=metric
    )
    ref_seeds = sorted(s for c, s in wide.columns if c == reference)
    (cell_seed,) = [s for c, s in wide.columns if c == cell]
    c = wide[(cell, cell_seed)]
    refs = {s: wide[(reference, s)] for s in ref_seeds}
    others = [s for s in ref_seeds if s != cell_seed]
    var = pd.concat([c, *refs.values()], axis=1).var(ddof=1).mean()
    v_same = (c - refs[cell_seed]).var(ddof=1)
    v_other = (
        pd.concat(
            [(c - refs[s]) for s in others]
            + [(refs[a] - refs[b]) for a, b in itertools.combinations(ref_seeds, 2)],
            axis=1,
        )
        .var(ddof=1)
        .mean()
    )
    rho1, rho0 = 1 - v_same / (2 * var), 1 - v_other / (2 * var)
    mean_diff = c - pd.concat(refs.values(), axis=1).mean(axis=1)
    k = len(ref_seeds)
    return {
        "draws": len(c),
        "sd_same_seed": math.sqrt(v_same),
        "sd_vs_mean": float(mean_diff.std(ddof=1)),
        "measured_ratio": float(mean_diff.std(ddof=1) / math.sqrt(v_same)),
        "rho_same_seed": rho1,
        "rho_other_seed": rho0,
        "planned_ratio": replication_factor(k, rho1, rho0),
        "independent_ratio": replication_factor(k),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("design", type=Path, help="a finished design's design.json")
    p.add_argument("--stage", required=True)
    p.add_argument("--cell", required=True, help="the cell compared with the replicated reference")
    p.add_argument("--reference", required=True, help="the stage's reference cell")
    p.add_argument(
        "--metrics", nargs="+", default=["greedy_final", "sampled_final", "length_incorrect_late"]
    )
    a = p.parse_args()
    runs = load_draws(Design.load(a.design))
    table = pd.DataFrame({m: measure(runs, a.stage, a.cell, a.reference, m) for m in a.metrics}).T
    print(table.to_string(float_format=lambda x: f"{x:.4g}"))


if __name__ == "__main__":
    main()
