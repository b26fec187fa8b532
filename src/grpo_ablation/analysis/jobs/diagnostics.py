"""The diagnostics job (``grpo-ablation diagnostics``): one run's per-step diagnostics and its
summary (``analysis/diagnostics.py``), written beside its evaluation."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from grpo_ablation.analysis.diagnostics import run_diagnostics, run_summary
from grpo_ablation.layout import BUDGET, OBJECTIVE, STEPS, SUMMARY


def _clean(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def write_run_diagnostics(run: Path, out: Path) -> list[Path]:
    """``out/steps.csv`` (one row per generation step) and ``out/summary.json`` (the run)."""
    out.mkdir(parents=True, exist_ok=True)
    steps = run_diagnostics(run)
    steps.to_csv(out / STEPS, index=False)
    summary = {k: _clean(v) for k, v in run_summary(steps).items()}
    summary["objective"] = json.loads((run / OBJECTIVE).read_text())
    summary["budget"] = json.loads((run / BUDGET).read_text())
    (out / SUMMARY).write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    return [out / STEPS, out / SUMMARY]
