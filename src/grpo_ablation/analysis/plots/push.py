"""The push figure (``analysis/push_tables.py``'s table drawn)."""

from __future__ import annotations

import pandas as pd

from grpo_ablation.analysis.push_tables import LABELS, REFERENCE


def push_figure(table: pd.DataFrame):
    """One panel per quantity: each choice's push per unit step minus the reference choice's, paired
    over replicates, with its 95% interval; one marker per policy step."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    quantities = list(LABELS)
    fig, axes = plt.subplots(1, len(quantities), figsize=(4.2 * len(quantities), 4.6), sharey=True)
    choices = list(dict.fromkeys(table["choice"]))
    steps = sorted(table["step"].unique())
    for ax, q in zip(axes, quantities, strict=True):
        for k, step in enumerate(steps):
            t = table[table["step"] == step].set_index("choice").loc[choices]
            y = [i + (k - (len(steps) - 1) / 2) * 0.25 for i in range(len(choices))]
            d = f"{q}_diff"
            ax.errorbar(
                t[d],
                y,
                xerr=[t[d] - t[f"{d}_low"], t[f"{d}_high"] - t[d]],
                fmt="o",
                markersize=3,
                capsize=2,
                label="base policy" if step == 0 else f"checkpoint {step}",
            )
        ax.axvline(0, color="grey", linewidth=0.8)
        # Few ticks: a real model's pushes run to thousands, whose labels would collide.
        ax.xaxis.set_major_locator(MaxNLocator(nbins=4))
        ax.set_title(LABELS[q], fontsize=9)
        ax.set_xlabel(f"per unit step, minus {REFERENCE}", fontsize=8)
    axes[0].set_yticks(range(len(choices)), choices, fontsize=7)
    axes[0].invert_yaxis()
    fig.suptitle(
        f"The push: each choice's first-order change per unit step minus {REFERENCE}'s, 95% "
        "intervals over replicates",
        fontsize=10,
    )
    # below the panels, where it covers no error bar
    handles, labels = axes[-1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(steps), fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.07, 1, 0.95))
    return fig
