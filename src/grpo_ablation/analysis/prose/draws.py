"""The pooled reading's own paragraphs (``analysis/draws.py``): the study's note, the verdicts
over draws, and which contrasts hold across draws."""

from __future__ import annotations

import pandas as pd

from grpo_ablation.analysis.draws import ALPHA, UNIT
from grpo_ablation.analysis.prose.verdicts import verdicts_reading
from grpo_ablation.design.ablation import Design
from grpo_ablation.design.hypotheses import (
    EXPLORATORY,
)
from grpo_ablation.design.quantities import PAIRED


def _contrast(r: pd.Series) -> str:
    """A pooled contrast named: its cell, stage and quantity."""
    return f"``{r['label']}`` ({r['stage']}) on {PAIRED[r['quantity']]}"


def _held(table: pd.DataFrame) -> str:
    """The contrasts that hold across draws (each with its pooled interval and role), then how
    many agree in sign in every draw without a resolved pooled difference."""
    held = table[table["holds_across_draws"]]
    agree = table[~table["holds_across_draws"] & (table["same_sign"] == table["draws"])]
    head = (
        f"**Across draws** ({int(table['draws'].max())} base-policy draws, {len(table)} distinct "
        f"pooled contrasts): {len(held)} {'holds' if len(held) == 1 else 'hold'} across draws "
        "(pooled 95% interval excludes zero and every draw's mean difference has its sign)"
    )
    if not held.empty:
        head += ": " + "; ".join(
            f"{_contrast(r)}, {r['mean']:+.3g} [{r['low']:+.3g}, {r['high']:+.3g}]"
            + ("" if r.get("role", EXPLORATORY) == EXPLORATORY else f" ({r['role']})")
            for _, r in held.iterrows()
        )
    return (
        f"{head}. {len(agree)} {'agrees' if len(agree) == 1 else 'agree'} in sign in every draw "
        "without a resolved pooled difference."
    )


def _interaction(table: pd.DataFrame) -> str:
    """With one seed a draw, that draw-to-draw differences are not assessed; else the draw × cell
    interactions at ALPHA beside the count expected by chance, and the contrasts without one."""
    seeds = table["seeds_per_draw"] if "seeds_per_draw" in table else pd.Series(1, table.index)
    if (seeds < 2).all():
        return (
            "With one seed a draw the design cannot separate draw-to-draw differences from seed "
            "noise (each draw's difference is one run), so whether an effect varies between base "
            "policies is not assessed."
        )
    tested = table[table["interaction_p"].notna()]
    hits = tested[tested["interaction_p"] < ALPHA]
    text = (
        "Draw × cell interaction (one-way ANOVA of the per-seed paired differences, "
        "between-draw over within-draw mean square): "
        f"{len(hits)} of {len(tested)} contrasts at α = {ALPHA:g}, "
        f"{ALPHA * len(tested):.2f} expected by chance with none (exploratory, no correction "
        "for multiplicity)"
    )
    if not hits.empty:
        text += ": " + "; ".join(
            f"{_contrast(r)}, p = {r['interaction_p']:.3g}" for _, r in hits.iterrows()
        )
    text += "."
    if len(tested) < len(table):
        text += (
            f" {len(table) - len(tested)} contrasts have no such test (fewer than two seeds "
            "in some draw, or no spread within draws)."
        )
    return text


def consistency_reading(table: pd.DataFrame) -> str:
    """Which pooled contrasts hold across draws and how many agree in sign without being
    resolved (``_held``); where every draw has two seeds or more, how many show a draw × cell
    interaction next to the count expected by chance; with one seed a draw, that the design
    cannot tell draw-to-draw differences from seed noise (``_interaction``)."""
    if table.empty:
        return "**Across draws**: no contrast to compare.\n"
    return (
        f"{_held(table)} {_interaction(table)} A declared hypothesis is judged above by its own "
        "test (Holm's correction, the minimum effect), not by this count; a manipulation check "
        "moves by construction.\n"
    )


def study_note(design: Design) -> str:
    """In a sequential study (``study.looks``), what the verdicts of the pooled reading are and
    are not: fixed-sample tests on the draws so far; the study decides in its ledger."""
    plan = design.sections.get("study") or {}
    if not plan.get("looks"):
        return ""
    return (
        f"**A sequential study** (looks at {', '.join(map(str, plan['looks']))} draws): the "
        f"verdicts below are fixed-sample tests on the {len(design.draws)} draws trained so far, "
        "as if no other look came; the study decides in its ledger (``studies/<experiment>/ledger.jsonl``, "
        "each look in ``study/look_<n>.json``), against the boundaries of the error spent so "
        "far, which are stricter at an early look. Read these as the look's estimates.\n\n"
    )


def pooled_opening(design: Design, verdicts: pd.DataFrame) -> str:
    """The pooled reading's opening (the report's landing page up to ``LANDING_END``, then the
    verdicts in full): the study's note, then the verdicts over draws."""
    return study_note(design) + verdicts_reading(verdicts, UNIT)
