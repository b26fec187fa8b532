"""The reading of the verdicts on the declared hypotheses (``analysis/hypotheses.py``'s table):
the overview the report opens with, then each verdict with its power."""

from __future__ import annotations

import math

import pandas as pd

from grpo_ablation.analysis import marks
from grpo_ablation.analysis.prose.effects import PAIRING
from grpo_ablation.analysis.render import largest_difference, list_table, number
from grpo_ablation.design.hypotheses import (
    ALPHA,
    METRICS,
)
from grpo_ablation.layout import LANDING_END


def _number(x: float, metric: str, signed: bool = True) -> str:
    """A value of ``metric`` in the reading, rounded as the tables round it (``render.number``)."""
    return number(metric, x, signed)


def _p(x: float) -> str:
    """``= 0.089``, or ``< 0.0001``: a p-value as the tables round it, after ``p`` or ``Holm``."""
    shown = number("p", x)
    return f"< {shown[1:]}" if shown.startswith("<") else f"= {shown}"


def _duration(minutes: float) -> str:
    if not math.isfinite(minutes):
        return ""
    hours, rest = divmod(round(minutes), 60)
    return f" (≈ {hours} h {rest:02d} min here)" if hours else f" (≈ {rest} min here)"


# The SD's upper 95% bound from fewer degrees of freedom is too wide to size anything on (1 df:
# 31.9 times the SD), so no units are named from it.
MIN_DF_FOR_BOUND = 3


def _detects(v: pd.Series, short: bool = False) -> str:
    """What a verdict's design detects with 80% power from the SD it observed: ``detects ≥ X``,
    ``shows equivalence only within ±X``, or that nothing within the metric's range is
    (``short``: ``≥ X``, ``±X``, ``nothing in range``)."""
    m, equivalence = str(v["metric"]), v["kind"] == "equivalence"
    mde = _number(v["mde"], m, False)
    if not (math.isfinite(v["sd"]) and v["sd"] > 0):
        return "not computed" if short else "has no power computed"
    if v["mde"] > largest_difference(m):
        if short:
            return "nothing in range"
        return (
            f"shows equivalence within no margin inside the metric's range (±{mde} needed)"
            if equivalence
            else f"detects no effect within the metric's range (≥ {mde})"
        )
    if short:
        return f"±{mde}" if equivalence else f"≥ {mde}"
    return f"shows equivalence only within ±{mde}" if equivalence else f"detects ≥ {mde}"


def _policy(v: pd.Series) -> str:
    """A push hypothesis's policy; "" for the others (read back from a table: NaN, not "")."""
    policy = v.get("policy")
    return policy if isinstance(policy, str) else ""


# What a verdict's mean is over, by its unit: the population its units sample, so what the verdict
# says beyond this run. The rest of a verdict's scope (task, model, split, training budget) is one
# for all of them, the config's: said once beside the table, not in every row.
SCOPE = {
    "seed": "training seeds of this one base policy",
    "draw": "new base policies, each with its seeds",
    "replicate": "prompt batches at one policy, no training",
}


def _bound(v: pd.Series) -> str:
    """A prediction as a relation of Δ (``Δ within ±0.020``, ``Δ < -0.10``), from the row's
    declaration, rounded as the tables round the metric."""
    m = str(v["metric"])
    if v["kind"] == "equivalence":
        return f"Δ within ±{_number(v['margin'], m, False)}"
    s = 1 if v["direction"] > 0 else -1
    bound = _number(s * v["minimum_effect"], m) if v["minimum_effect"] else "0"
    return f"Δ {'>' if s > 0 else '<'} {bound}"


def _unbroken(text: str) -> str:
    """``text`` with no line break at its spaces (a relation or an interval reads whole)."""
    return text.replace(" ", "\u00a0")


# What each row's drawing shows (``marks.mark_svg``), said once under the table.
MARKS_KEY = (
    "Each row's drawing, on its metric's own axis: the 90% interval (bar) and mean (dot), "
    "coloured by the verdict (green supported, red refuted, grey inconclusive); the region the "
    "hypothesis predicts (shaded) from its margin or δ (dashed); zero (black); the minimum "
    "detectable effect (grey ticks, an arrow at the edge where off the axis)."
)


def verdicts_overview(verdicts: pd.DataFrame, default_unit: str = "seed") -> str:
    """One row per declared hypothesis, what a reader needs first, one or two lines each: its
    prediction, Δ with its 90% interval drawn against the prediction (``marks``) and written, the
    verdict, what the design detects with 80% power from the SD it observed, and its scope: the
    units and what they sample, hence what the verdict generalises to (``SCOPE``). A
    reStructuredText list-table, each row's drawing an inline SVG (a substitution defined under
    the table, then ``MARKS_KEY``); the prose follows."""
    head = ["hypothesis", "prediction", "Δ [90% interval]", "verdict", "detects (80%)", "scope"]
    rows, drawn = [], []
    for _, v in verdicts.iterrows():
        m = str(v["metric"])
        unit = v["unit"] if v.get("unit") == "replicate" else default_unit
        n = int(v["n"])
        delta = (
            f"{_number(v['mean'], m)} [{_number(v['low90'], m)}, {_number(v['high90'], m)}]"
            if n >= 2 and math.isfinite(v["low90"])
            else "no interval"
        )
        # the metric's name to its first parenthesis (the full name is the prose's)
        what = METRICS[m].split(" (")[0] + (f" at the {v['policy']} policy" if _policy(v) else "")
        # a table written before the declarations were columns: the prediction in words and
        # no drawing
        declared = all(k in v for k in marks.DECLARATION)
        relation = _bound(v) if declared else str(v["prediction"])
        predicted = f"{what}: {_unbroken(relation) if declared else relation}"
        # the drawing's tooltip: its row in words, and what the design detects
        title = f"{v['id']}, {v['verdict']}: Δ {delta}; {what}: {relation}; {_detects(v)}"
        mark = marks.mark_svg({**v, "title": title}) if declared else ""
        if mark:
            drawn.append(f".. |{v['id']} marks| raw:: html\n\n   {mark}\n")
        rows.append(
            [
                f"``{v['id']}``",
                predicted,
                # the numbers wrap whole under the drawing where the row is narrow
                (f"|{v['id']} marks| " if mark else "") + _unbroken(delta),
                f"**{str(v['verdict']).upper()}**",
                _detects(v, short=True),
                f"{n} {unit}{'' if n == 1 else 's'}: {SCOPE[unit]}",
            ]
        )
    key = [MARKS_KEY, ""] if drawn else []
    return "\n".join([list_table(head, rows, widths="23 22 17 10 8 20"), *drawn, *key])


def _power_clause(v: pd.Series, unit: str) -> str:
    """What the design could detect, after the verdict: ``— this design detects ≥ X; N draws
    (≈ T) would be needed`` for an inconclusive one, the power at the expected effect otherwise."""
    m, equivalence = str(v["metric"]), v["kind"] == "equivalence"
    if not math.isfinite(v["sd"]):
        return f" (no power computed: fewer than two {unit}s with a finite value)"
    if not v["sd"] > 0:
        return f" (no power computed: every {unit} gave the same difference)"
    detects = _detects(v)
    need, upper = v["units_needed"], v.get("units_needed_upper", math.nan)
    if int(v["n"]) - 1 < MIN_DF_FOR_BOUND:
        upper = math.nan  # the SD's upper bound from so few df says nothing usable
    target = "its margin" if equivalence else "its expected effect"
    if math.isfinite(need):
        needed = (
            f"; {need:.0f} {unit}s{_duration(v['minutes_needed'])} would be needed for {target}"
        )
        if math.isfinite(upper):
            needed += f" ({upper:.0f} at the upper 95% bound of the SD)"
        elif int(v["n"]) - 1 < MIN_DF_FOR_BOUND:
            needed += f" (at the SD's upper bound: not estimable from {int(v['n']) - 1} df)"
    elif not math.isfinite(v["expected"]):
        needed = "; no expected effect declared, so no number of units is named"
    else:
        needed = ""
    # An SD from few units is itself uncertain: its degrees of freedom are said with it.
    observed = f"observed SD {_number(v['sd'], m, False)} on {int(v['n']) - 1} df"
    if v["verdict"] == "inconclusive":
        return f" — this design {detects} (80% power, {observed}){needed}"
    # No power for a decided verdict: computed from the SD that decided it, it would be circular.
    return f" (this design {detects} with 80% power, {observed})"


def _declared_clause(v: pd.Series) -> str:
    """The power the config's declared SD gave the design before the run."""
    if not math.isfinite(v["sd_declared"]):
        return " Before the run: no SD declared for this metric (power.sd)."
    m = str(v["metric"])
    what = "the smallest margin shown" if v["kind"] == "equivalence" else "the effect detected"
    power = (
        f"power {v['power_declared']:.0%} at the expected effect {_number(v['expected'], m, False)}"
        if math.isfinite(v["power_declared"])
        else "no expected effect declared"
    )
    df = v.get("sd_declared_df", math.nan)
    pooled = f", pooled over earlier runs on {df:.0f} df" if math.isfinite(df) else ""
    return (
        f" Before the run, for {v['units_declared']} (declared SD "
        f"{_number(v['sd_declared'], m, False)}{pooled}): {power}, {what} with 80% "
        f"{_number(v['mde_declared'], m, False)}."
    )


def verdicts_reading(verdicts: pd.DataFrame, default_unit: str = "seed") -> str:
    """The reading's opening: each declared hypothesis with its prediction, source, test and
    verdict (reStructuredText)."""
    if verdicts.empty:
        return (
            "**Declared hypotheses**: none. The config declares no prediction (``hypotheses:``), "
            "so every contrast below is exploratory.\n\n" + LANDING_END + "\n"
        )
    # Before LANDING_END only what the table needs to be read: the landing page fits a screen.
    lines = [
        f"**Declared hypotheses** ({len(verdicts)}, written in the config before the run; "
        f"α = {ALPHA}, Holm; Δ is cell minus reference {PAIRING[default_unit]}, mean [90% t "
        "interval]):",
        "",
        verdicts_overview(verdicts, default_unit),
        LANDING_END,
        "",
        f"The verdicts: α = {ALPHA}, one Holm family of the support and refute tests of all of "
        "them, so that any verdict of this run is wrong with probability at most α (within this "
        "run: a hypothesis judged again in another run is a new test at its own α); the power of "
        "each test is computed at Holm's first step; a push's Δ is paired by replicate at the "
        "policy it names.",
        "",
        "Each in full:",
        "",
    ]
    for _, v in verdicts.iterrows():
        m = str(v["metric"])
        # a push hypothesis's units are its replicates, whatever the design's unit
        unit = v["unit"] if v.get("unit") == "replicate" else default_unit
        p = "" if not math.isfinite(v["p"]) else f", p {_p(v['p'])}"
        if math.isfinite(v["p_holm"]):
            p += f" (Holm {_p(v['p_holm'])})"
        if v["verdict"] == "inconclusive" and math.isfinite(v.get("p_refute", math.nan)):
            p += f"; the refuting test p {_p(v['p_refute'])} (Holm {_p(v['p_refute_holm'])})"
        interval = (
            f"{_number(v['mean'], m)} [{_number(v['low90'], m)}, {_number(v['high90'], m)}]"
            if int(v["n"]) >= 2 and math.isfinite(v["low90"])
            else f"no interval (fewer than two {unit}s with a finite value)"
        )
        lines.append(
            f"- ``{v['id']}``: **{str(v['verdict']).upper()}**{_power_clause(v, unit)}. "
            f"``{v['cell']}`` − ``{v['reference']}`` ({v['stage']}), {METRICS[m]}"
            + (f" at the {v['policy']} policy" if _policy(v) else "")
            + f": predicted "
            f"{v['prediction']}; Δ = {interval} over {int(v['n'])} "
            f"{unit}{'' if int(v['n']) == 1 else 's'}; {v['test']}{p}."
            f"{_declared_clause(v)} Source: {v['source']}."
        )
    return "\n".join(lines) + "\n"
