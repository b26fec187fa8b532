"""How long two cells of one seed draw the same completions: the coupling of common random numbers.

With keyed sampling (``grpo_ablation.keyed_sampling``) a completion's random numbers depend only on
(seed, step, prompt, occurrence, slot, position), so a cell and its stage's reference with one seed
draw the identical completion wherever their policies agree on it; they draw apart only where the
objective has changed the policy. Per step, ``identical`` is the share of the cell's completions
equal (token text) to the reference's completion of the same prompt and slot, and
``first_difference`` is the first step with a completion that differs. For population against
sample std scaling this is a direct test of the claim that the two objectives differ only in
scale (√(G/(G−1)), absorbed by Adam): under that claim the two cells draw identical completions
for as long as floating-point rounding keeps them together.

Steps are generation indices (the optimizer step divided by the update epochs μ, as the keys
are), so a cell with another μ is compared generation by generation. Cells with another batch
shape than their reference (another group size or prompts per step) draw other prompts at other
slots and are not compared; the reading names them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from grpo_ablation.layout import ROLLOUTS, TABLE, Tree
from grpo_ablation.training.rollout_log import read_rollouts

KEY = ["step", "group_index", "completion_index"]
STEP_COLUMNS = ["stage", "cell", "reference", "seed", "step", "compared", "identical"]
COLUMNS = [
    "stage",
    "cell",
    "reference",
    "seeds",
    "identical_step0",
    "identical_mean",
    "identical_last",
    "first_difference_median",
    "first_difference_min",
    "first_difference_max",
    "steps",
    "last_step",
]


def step_coupling(cell: pd.DataFrame, reference: pd.DataFrame) -> pd.DataFrame:
    """Per step the two runs share (one may be longer or unfinished): completions compared and the
    share identical to the reference's (same prompt, group and slot); empty when the two runs'
    batches do not line up (another group size or prompts per step). A resampled step is compared
    on its first generation batch, the one its reference generates too."""
    cell, reference = _first_batch(cell), _first_batch(reference)
    common = set(cell["step"]) & set(reference["step"])
    a = cell.loc[cell["step"].isin(common), [*KEY, "prompt_id", "completion"]]
    b = reference.loc[reference["step"].isin(common), [*KEY, "prompt_id", "completion"]]
    both = a.merge(b, on=KEY, suffixes=("", "_ref"))
    if both.empty or len(both) != len(a) or (both["prompt_id"] != both["prompt_id_ref"]).any():
        return pd.DataFrame(columns=["step", "compared", "identical"])
    both["same"] = both["completion"] == both["completion_ref"]
    out = both.groupby("step")["same"].agg(compared="size", identical="mean").reset_index()
    return out


def _first_batch(rows: pd.DataFrame) -> pd.DataFrame:
    if "generation_batch" not in rows:  # logs written before resampling existed
        return rows
    return rows[rows["generation_batch"].fillna(0) == 0]


def first_difference(steps: pd.DataFrame) -> int:
    """The first step with a completion unlike the reference's; one past the last step when the
    two runs stay identical throughout (so medians over seeds stay defined)."""
    differ = steps.loc[steps["identical"] < 1.0, "step"]
    return int(differ.min()) if len(differ) else int(steps["step"].max()) + 1


def load_coupling(
    exp: Path,
    rows: list[dict[str, Any]],
    seeds: Iterable[int],
    update_epochs: Mapping[str, int] | None = None,
) -> pd.DataFrame:
    """Per (stage, cell, seed, step) of every non-reference cell: the share of its completions
    identical to its reference's at that seed (``STEP_COLUMNS``). ``update_epochs``: each cell's
    μ, from the design (``loading.run_training``); a cell it does not name has μ = 1."""
    cache: dict[tuple[str, int], pd.DataFrame] = {}

    def rollouts(cell: str, seed: int) -> pd.DataFrame:
        # Steps as generation indices: a cell with mu update epochs generates every mu steps.
        if (cell, seed) not in cache:
            frame = read_rollouts(Path(Tree(exp).run(cell, seed)) / ROLLOUTS)
            mu = int((update_epochs or {}).get(cell, 1))
            cache[(cell, seed)] = frame.assign(step=frame["step"] // mu)
        return cache[(cell, seed)]

    frames = []
    for r in rows:
        if r["cell"] == r["reference"]:
            continue
        for seed in seeds:
            steps = step_coupling(rollouts(r["cell"], seed), rollouts(r["reference"], seed))
            if not steps.empty:
                frames.append(
                    steps.assign(
                        stage=r["stage"], cell=r["cell"], reference=r["reference"], seed=seed
                    )
                )
    if not frames:
        return pd.DataFrame(columns=STEP_COLUMNS)
    return pd.concat(frames, ignore_index=True)[STEP_COLUMNS]


def coupling_table(steps: pd.DataFrame) -> pd.DataFrame:
    """Per stage and cell: identical shares at step 0, over all steps and at the last step, and
    the first step that differs (median, min and max over seeds; a seed that never differs counts
    as one past its last step)."""
    out = []
    for (stage, cell), g in steps.groupby(["stage", "cell"], sort=False):
        firsts = pd.Series([first_difference(s) for _, s in g.groupby("seed")])
        last = g[g["step"] == g["step"].max()]
        out.append(
            {
                "stage": stage,
                "cell": cell,
                "reference": g["reference"].iloc[0],
                "seeds": g["seed"].nunique(),
                "identical_step0": g.loc[g["step"] == g["step"].min(), "identical"].mean(),
                "identical_mean": g["identical"].mean(),
                "identical_last": last["identical"].mean(),
                "first_difference_median": firsts.median(),
                "first_difference_min": firsts.min(),
                "first_difference_max": firsts.max(),
                "steps": int(g["step"].nunique()),
                "last_step": int(g["step"].max()),
            }
        )
    return pd.DataFrame(out, columns=COLUMNS)


def write_coupling(
    exp: Path,
    rows: list[dict[str, Any]],
    seeds: Iterable[int],
    out: Path,
    update_epochs: Mapping[str, int] | None = None,
) -> list[Path]:
    """``out/coupling.{csv,md,html}`` (per cell) and ``out/coupling_steps.csv`` (per step and
    seed)."""
    from grpo_ablation.analysis.render import html_view, to_markdown

    steps = load_coupling(exp, rows, seeds, update_epochs)
    table = coupling_table(steps)
    compared = set(zip(table["stage"], table["cell"], strict=True))
    excluded = [
        {"stage": r["stage"], "cell": r["cell"], "reference": r["reference"], "seeds": 0}
        for r in rows
        if r["cell"] != r["reference"] and (r["stage"], r["cell"]) not in compared
    ]
    if excluded:  # listed with no numbers: another batch shape than the reference's
        table = pd.concat([table, pd.DataFrame(excluded, columns=COLUMNS)], ignore_index=True)
    out.mkdir(parents=True, exist_ok=True)
    steps.to_csv(out / TABLE["coupling_steps"], index=False)
    table.to_csv(out / TABLE["coupling"], index=False)
    caption = (
        "Common random numbers: share of each cell's completions identical to its reference's "
        "(same seed, step, prompt and slot), and the first step that differs."
    )
    (out / TABLE["coupling_md"]).write_text(caption + "\n\n" + to_markdown(table) + "\n")
    (out / TABLE["coupling_html"]).write_text(html_view(caption, table, out / TABLE["coupling"]))
    return [out / TABLE[k] for k in ("coupling", "coupling_md", "coupling_html", "coupling_steps")]
