"""A metric is one registry entry and its computation (docs/design.md, "To add a metric"): added
to a copy of the package with nothing else changed, it reaches the results table, its formatted
columns and digits, the effect table and the metrics a hypothesis may name."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

from test_boundaries import ROOT
from test_tables_figures import CONFIG, OTHER, REF, run_rows

from grpo_ablation.design import hypotheses, quantities

# The one entry: a toy metric, best minus final greedy accuracy, paired and drawn.
ENTRY = """    Quantity(
        "greedy_gap",
        ACCURACY,
        "checkpoints",
        "greedy gap (best − final)",
        paired=True,
        effect=True,
        shown=(("greedy gap", INTERVAL), ("Δ greedy gap vs ref.", DIFF)),
    ),
"""
# What the copy's package makes of it: run in a fresh interpreter on the copy's src/.
FOLLOW = """
import json, sys
import pandas as pd
from grpo_ablation.analysis import render, result_tables
from grpo_ablation.design import hypotheses, quantities, schema
from grpo_ablation.design.ablation import Design

runs = pd.read_csv(sys.argv[1])
runs["greedy_gap"] = runs["greedy_best"] - runs["greedy_final"]  # its computation
table = result_tables.results_table(runs, {"greedy": 0.1, "sampled": 0.05})
config = json.loads(sys.argv[2])
print(json.dumps({
    "registry": quantities.__file__,
    "columns": list(table.columns),
    "diff": float(table.set_index("cell").loc[sys.argv[3], "greedy_gap_diff_mean"]),
    "shown": list(result_tables.display_table(table).columns),
    "effects": sorted(set(result_tables.effects_table(table)["quantity"])),
    "digits": render.number("greedy_gap_diff_low", 0.12345),
    "metrics": list(hypotheses.METRICS),
    "declared": [h.metric for h in hypotheses.declared(Design.of(config))],
    "schema": schema.metric_description(),
}))
"""


def test_a_metric_added_to_the_registry_alone_reaches_every_table(tmp_path):
    copy = tmp_path / "src"
    shutil.copytree(ROOT / "src", copy, ignore=shutil.ignore_patterns("__pycache__"))
    registry = copy / "grpo_ablation/design/quantities.py"
    text = registry.read_text()
    end = text.index("\n)\n", text.index("QUANTITIES: tuple")) + 1  # the tuple's closing line
    registry.write_text(text[:end] + ENTRY + text[end:])
    runs = run_rows({REF: [0.2, 0.4, 0.6], OTHER: [0.3, 0.5, 0.7]})
    runs["greedy_best"] += [0.0, 0.1, 0.2, 0.1, 0.2, 0.3]  # the gap widens by 0.1 in OTHER
    runs.to_csv(tmp_path / "runs.csv", index=False)
    hypothesis = {
        "id": "toy",
        "kind": "directional",
        "stage": "std_scaling",
        "cell": "population",
        "metric": "greedy_gap",
        "direction": "higher",
        "minimum_effect": 0.01,
        "source": "test",
    }
    config = {**CONFIG, "hypotheses": [hypothesis]}
    env = {**os.environ, "PYTHONPATH": str(copy)}
    done = subprocess.run(
        [sys.executable, "-c", FOLLOW, str(tmp_path / "runs.csv"), json.dumps(config), OTHER],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    seen = json.loads(done.stdout)
    assert seen["registry"] == str(registry)  # the copy's, not this checkout's
    for part in ("mean", "low", "high", "n"):
        for column in ("greedy_gap", "greedy_gap_diff", "greedy_gap_interaction"):
            assert (f"{column}_{part}" in seen["columns"]) == (column != "greedy_gap_interaction")
    assert abs(seen["diff"] - 0.1) < 1e-9
    assert seen["shown"][-2:] == ["greedy gap", "Δ greedy gap vs ref."]
    assert seen["effects"] == sorted([*quantities.EFFECTS, "greedy_gap"])
    assert seen["digits"] == "0.123"  # an accuracy's three decimals, from its unit
    # a nameable paired quantity: after the others a hypothesis may name, before the descriptive
    expected = [*quantities.NAMEABLE, "greedy_gap", *quantities.OUTCOME_DEPENDENT, *hypotheses.PUSH]
    assert seen["metrics"] == expected
    assert seen["declared"] == ["greedy_gap"]
    assert "efficiency_late, greedy_gap; or a push" in seen["schema"]
    # this checkout knows no such metric: the entry alone made it
    assert "greedy_gap" not in hypotheses.METRICS
