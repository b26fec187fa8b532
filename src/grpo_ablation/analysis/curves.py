"""How a curve over steps is summarised for its figure: each run smoothed by a centred rolling
mean within the run (``smoothing_window`` steps, stated on the axis: ``smoothing_label``), then the
mean and 95% Student-t band over seeds at each step (``seed_bands``; with one seed no band).
Per-step curves of a few prompts per step are noise at every step, hence the smoothing before the
mean."""

from __future__ import annotations

import pandas as pd

from grpo_ablation.analysis.stats import t_interval

# Rolling-mean window of the per-step curves, shortened for short runs (``smoothing_window``).
SMOOTHING_STEPS = 10


def seed_bands(frame: pd.DataFrame, x: str, y: str, by: list[str]) -> pd.DataFrame:
    """Mean and 95% t interval over seeds of ``y`` at every ``x`` within each ``by`` group."""
    rows = []
    for key, g in frame.groupby([*by, x], sort=True):
        iv = t_interval(g[y])
        rows.append(
            {
                **dict(zip([*by, x], key, strict=True)),
                "mean": iv.mean,
                "low": iv.low,
                "high": iv.high,
                "n": iv.n,
            }
        )
    return pd.DataFrame(rows)


def smoothing_window(n_steps: int, target: int = SMOOTHING_STEPS) -> int:
    """Steps per rolling mean: ``target``, but at most a quarter of the run, so a short run keeps
    its shape (the smoke config's 4 steps: 1, i.e. unsmoothed)."""
    return max(1, min(target, n_steps // 4))


def smooth(frame: pd.DataFrame, columns: list[str], window: int, x: str = "step") -> pd.DataFrame:
    """Centred rolling mean of ``columns`` over ``window`` steps within each run (cell, seed);
    NaN steps are skipped and the ends use the partial window."""
    if window <= 1 or frame.empty:
        return frame
    out = frame.sort_values(["cell", "seed", x]).copy()
    rolled = out.groupby(["cell", "seed"], sort=False)[columns].transform(
        lambda v: v.rolling(window, center=True, min_periods=1).mean()
    )
    out[columns] = rolled
    return out


def smoothing_label(window: int) -> str:
    return "unsmoothed" if window <= 1 else f"rolling mean over {window} steps"
