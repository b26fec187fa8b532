"""How much noise does the exact sampled accuracy take out? For every contrast of the chosen stages,
the 95% interval half-width and the per-seed SD of the paired differences, computed from the same
checkpoints with mean@k (sampled) and with the exact expected accuracy, side by side.

    python notes/sampled_noise.py                       # results/default, stages 1-2
    python notes/sampled_noise.py --exp results/default --stages std_scaling aggregation group_size

Reads the finished experiment only (its evaluations must hold ``sampled_exact``: evaluated with
``evaluation.sampled_metric: exact``).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import pandas as pd
import yaml
from snakemake.utils import validate

from grpo_ablation import pipeline
from grpo_ablation.analysis import tables
from grpo_ablation.analysis.stats import paired_differences, paired_interval

ROOT = Path(__file__).resolve().parents[1]
METRICS = {"mean@k": "sampled_mean_at_k", "exact": "sampled_exact"}


def contrasts(exp: Path, config: dict, stages: list[str]) -> pd.DataFrame:
    winners = pipeline.read_winners(sorted((exp / "selection").glob("*.json")))
    rows = pipeline.design_rows(config, winners, only=stages)
    seeds = [int(s) for s in config["seeds"]]
    out = []
    finals: dict[str, dict[str, dict[int, float]]] = {m: {} for m in METRICS}
    for r in rows:
        for seed in seeds:
            summary = exp / f"eval/{r['cell']}/seed={seed}/test/summary.json"
            final = json.loads(summary.read_text())["checkpoints"][-1]
            for m, key in METRICS.items():
                finals[m].setdefault(r["cell"], {})[seed] = float(final[key])
    for r in rows:
        if r["cell"] == r["reference"]:
            continue
        row = {"stage": r["stage"], "cell": r["cell"]}
        for m in METRICS:
            a, b = finals[m][r["cell"]], finals[m][r["reference"]]
            iv = paired_interval(a, b)
            row[f"{m} diff"] = iv.mean
            row[f"{m} half-width"] = (iv.high - iv.low) / 2
            row[f"{m} SD"] = statistics.stdev(paired_differences(a, b).values())
        out.append(row)
    return pd.DataFrame(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--exp", type=Path, default=ROOT / "results/default")
    p.add_argument("--config", type=Path, default=ROOT / "config/config.yaml")
    p.add_argument("--stages", nargs="+", default=["std_scaling", "aggregation"])
    a = p.parse_args()
    config = yaml.safe_load(a.config.read_text())
    validate(config, str(ROOT / "workflow/schemas/config.schema.yaml"))  # fills the defaults
    frame = contrasts(a.exp, config, a.stages)
    print(tables.to_markdown(frame.round(4)))
    ratio = frame["mean@k half-width"].median() / frame["exact half-width"].median()
    print(
        f"\nmedian half-width: mean@k {frame['mean@k half-width'].median():.4f}, "
        f"exact {frame['exact half-width'].median():.4f} (ratio {ratio:.2f}); "
        f"median per-seed SD: mean@k {frame['mean@k SD'].median():.4f}, "
        f"exact {frame['exact SD'].median():.4f}; {len(frame)} contrasts, "
        f"{len(config['seeds'])} seeds"
    )


if __name__ == "__main__":
    main()
