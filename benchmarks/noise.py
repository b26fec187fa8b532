"""Noise of the contrasts: how wide the stage 1-2 intervals are under two ways of measuring.

The study's verdicts rest on paired differences between cells over seeds; their per-seed SD
sets the interval half-width and so the seeds a verdict needs. ``sampled_noise`` compares two
accuracies scored on the same checkpoints (mean@k against the exact sampled accuracy);
``crn_gain`` compares two finished experiments that differ only in their random streams
(common random numbers: keyed sampling against one stream). Both report per contrast the 95%
half-width and the per-seed SD, and their medians.
"""

from __future__ import annotations

import csv
import json
import statistics
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from grpo_ablation.analysis.stats import Interval

SAMPLED_METRICS = {"mean@k": "sampled_mean_at_k", "exact": "sampled_exact"}
NOISE_STAGES = ("std_scaling", "aggregation")

# (stage, cell, quantity) -> {"half_width": ..., "sd": ...}
Noise = dict[tuple[str, str, str], dict[str, float]]


def _noise(iv: Interval) -> dict[str, float]:
    """Half-width of a paired t interval over seeds and the per-seed SD of the differences."""
    from grpo_ablation.analysis.stats import sd_of_interval

    return {"half_width": iv.half_width, "sd": sd_of_interval(iv)}


def _medians(noise: Iterable[dict[str, float]]) -> dict[str, float]:
    """Median half-width and median per-seed SD over contrasts."""
    noise = list(noise)
    return {key: statistics.median(n[key] for n in noise) for key in ("half_width", "sd")}


def sampled_noise(
    exp_dir: Path,
    config: Path = Path("config/config.yaml"),
    stages: tuple[str, ...] = NOISE_STAGES,
) -> dict[str, Any]:
    """The exact sampled accuracy against mean@k on the same checkpoints: per contrast of the
    stages, the 95% interval half-width and the per-seed SD of the paired differences with each,
    side by side (a finished experiment evaluated with ``sampled_metric: exact``)."""
    import yaml
    from snakemake.utils import validate

    from grpo_ablation.analysis.stats import paired_interval
    from grpo_ablation.design.ablation import Design, read_winners

    cfg = yaml.safe_load(config.read_text())
    validate(cfg, "workflow/schemas/config.schema.yaml")  # fills the defaults
    if len(cfg["seeds"]) < 2:
        return {
            "benchmark": "sampled_noise",
            "skipped": f"{config} runs {len(cfg['seeds'])} seed per base policy: no per-seed SD",
        }
    winners = read_winners(sorted((exp_dir / "selection").glob("*.json")))
    rows = Design.of(cfg).rows(winners, list(stages))
    finals: dict[str, dict[str, dict[int, float]]] = {m: {} for m in SAMPLED_METRICS}
    for r in rows:
        for seed in cfg["seeds"]:
            summary = exp_dir / f"eval/{r['cell']}/seed={seed}/test/summary.json"
            final = json.loads(summary.read_text())["checkpoints"][-1]
            for m, key in SAMPLED_METRICS.items():
                finals[m].setdefault(r["cell"], {})[int(seed)] = float(final[key])
    contrasts = []
    for r in rows:
        if r["cell"] == r["reference"]:
            continue
        row: dict[str, Any] = {"stage": r["stage"], "cell": r["cell"]}
        for m in SAMPLED_METRICS:
            a, b = finals[m][r["cell"]], finals[m][r["reference"]]
            iv = paired_interval(a, b)
            row[m] = {"diff": iv.mean, **_noise(iv)}
        contrasts.append(row)
    medians = {m: _medians(c[m] for c in contrasts) for m in SAMPLED_METRICS}
    return {
        "benchmark": "sampled_noise",
        "experiment": str(exp_dir),
        "seeds": len(cfg["seeds"]),
        "contrasts": contrasts,
        "median_half_width": {m: medians[m]["half_width"] for m in SAMPLED_METRICS},
        "median_sd": {m: medians[m]["sd"] for m in SAMPLED_METRICS},
        "ratio": medians["mean@k"]["half_width"] / medians["exact"]["half_width"],
        "target": "median half-width of stage 1-2 contrasts >= 2x narrower (with all of issue 21)",
    }


def _contrast_noise(exp_dir: Path, stages: tuple[str, ...] = NOISE_STAGES) -> Noise:
    """(stage, cell, quantity) -> 95% half-width and per-seed SD of the paired difference, from a
    finished experiment's effect tables (``figures/<stage>/effects.csv``)."""
    from grpo_ablation.analysis.stats import Interval

    out: Noise = {}
    for stage in stages:
        with (exp_dir / f"figures/{stage}/effects.csv").open() as fh:
            for row in csv.DictReader(fh):
                if row["is_reference"] == "True" or row["low"] in ("", "nan"):
                    continue
                iv = Interval(
                    float(row["mean"]), float(row["low"]), float(row["high"]), int(row["n"])
                )
                out[(stage, row["cell"], row["quantity"])] = _noise(iv)
    return out


def crn_gain(before: Path, after: Path) -> dict[str, Any]:
    """Common random numbers: the stage 1-2 contrasts of two finished six-seed defaults that differ
    only in ``training.sampler`` / ``evaluation.sampler`` (stream before, keyed after), side by
    side: per quantity the median 95% half-width and per-seed SD, and their ratios."""
    missing = [str(p) for p in (before, after) if not (p / "figures").is_dir()]
    if missing:
        return {
            "benchmark": "crn_gain",
            "skipped": f"no finished experiment at {missing}: run the default with "
            "--config experiment=default_stream 'training={sampler: stream}' "
            "'evaluation={sampler: stream}' and ask for its stage 1-2 figures/<stage>/effects.csv",
        }
    a, b = _contrast_noise(before), _contrast_noise(after)
    common = sorted(a.keys() & b.keys())
    if not common:
        return {
            "benchmark": "crn_gain",
            "skipped": f"no stage 1-2 contrast has an interval in both {before} and {after} "
            "(it needs two seeds or more under one base policy)",
        }
    per_quantity = {}
    for q in sorted({q for _, _, q in common}):
        keys = [k for k in common if k[2] == q]
        med = {side: _medians(d[k] for k in keys) for side, d in (("before", a), ("after", b))}
        per_quantity[q] = {
            "contrasts": len(keys),
            **med,
            "ratio": med["before"]["half_width"] / med["after"]["half_width"],
            "narrower": sum(b[k]["half_width"] < a[k]["half_width"] for k in keys),
        }
    return {
        "benchmark": "crn_gain",
        "before": str(before),
        "after": str(after),
        "quantities": per_quantity,
        "contrasts": [
            {"stage": k[0], "cell": k[1], "quantity": k[2], "before": a[k], "after": b[k]}
            for k in common
        ],
        "target": "median stage 1-2 half-width >= 2x narrower (before / after)",
    }
