"""Every per-run quantity the analysis reports, declared once (``QUANTITIES``).

A quantity is one number per run (a row of ``analysis.loading.load_runs``). Its entry says where
that number is computed (``source``), the unit its numbers are rounded in (``unit``:
``analysis/render.py``), whether the results table summarises it over seeds and pairs it with the
cell's reference by seed, whether the effect plots and the reading show its contrasts, whether a
declared hypothesis may name it, what the reading calls it and which columns the formatted
results table shows of it. Everything else is derived here: the results table's columns
(``RUN_QUANTITIES``, ``PAIRED``), the effects (``EFFECTS``), the metrics a hypothesis may name
(``NAMEABLE``) and the schema's description of them (``design/schema.py``). To add one: the
entry, and its computation at its source (docs/design.md, "To add a metric").

Part of the design layer: no pandas, no numerical library.
"""

from __future__ import annotations

from dataclasses import dataclass

from grpo_ablation.objective.conventions import GROUP_CATEGORIES

# The units a quantity's numbers are shown in (``analysis/render.py`` rounds by them).
ACCURACY = "accuracy"  # accuracies and every other fraction, share, rate or probability
LENGTH = "length"  # lengths in tokens
COUNT = "count"  # seeds, runs, groups, steps, units, tokens
STATISTIC = "statistic"  # z scores, the efficiency fit's steepness B
LOG10 = "log10"  # log10 C_mid and its differences
OTHER = "other"  # durations, levels, anything not named: 3 significant digits
UNITS = (ACCURACY, LENGTH, COUNT, STATISTIC, LOG10, OTHER)

# Where a run's value is computed; ``analysis.loading.load_runs`` puts each into the run's row.
SOURCES = {
    "checkpoints": "the evaluated checkpoints' summaries (analysis/loading.py: load_runs)",
    "diagnostics": "the run's diagnostics summary (analysis/diagnostics.py: run_summary; "
    "its key with '/' read as '_')",
    "budget": "the run's consumed budget (training/train.py)",
    "efficiency": "the run's efficiency curve (analysis/efficiency.py: run_efficiency)",
}

# How a column of the formatted results table shows its quantity: mean [low, high] over seeds,
# the signed paired difference to the reference (of ``<name>_diff``), or the mean alone.
INTERVAL, DIFF, MEAN = "interval", "diff", "mean"


@dataclass(frozen=True)
class Quantity:
    name: str  # the run row's column; the results table's ``<name>_{mean,low,high,n}``
    unit: str  # one of UNITS
    source: str  # a key of SOURCES
    label: str = ""  # what readings and figures call it (a paired quantity needs one)
    summarised: bool = True  # mean and 95% t interval over seeds in the results table
    # paired by seed with the cell's reference: the results table's ``<name>_diff_*`` (and
    # ``<name>_interaction_*`` for a recipe cell), the contrasts roles are given to
    paired: bool = False
    effect: bool = False  # its contrasts are drawn in the effect plots and read in the reading
    # Whether a declared hypothesis may name it: False for a quantity that exists only where the
    # outcome allowed it (an efficiency fit is identified only when the run gained beyond two
    # standard errors and saturated within its compute), which describes and is never tested.
    nameable: bool = True
    shown: tuple[tuple[str, str], ...] = ()  # formatted results table: (header, INTERVAL|DIFF|MEAN)

    def __post_init__(self) -> None:
        if self.unit not in UNITS or self.source not in SOURCES:
            raise ValueError(f"{self.name}: unit {self.unit!r} or source {self.source!r} unknown")
        if self.paired and not self.label:
            raise ValueError(f"{self.name}: a paired quantity needs the label readings use")
        shows_diff = any(how == DIFF for _, how in self.shown)
        if (self.effect or shows_diff) and not self.paired:
            raise ValueError(f"{self.name}: only a paired quantity has contrasts to show")


_FRACTION_HEADERS = {"failed_scoring": "failed scoring"}

# In the results CSV's column order; the formatted table's order is ``SHOWN_ORDER``.
QUANTITIES: tuple[Quantity, ...] = (
    Quantity(
        "greedy_final",
        ACCURACY,
        "checkpoints",
        "final greedy accuracy",
        paired=True,
        effect=True,
        shown=(("final greedy acc.", INTERVAL), ("Δ final greedy vs ref.", DIFF)),
    ),
    Quantity("greedy_best", ACCURACY, "checkpoints", shown=(("best greedy acc.", INTERVAL),)),
    Quantity(
        "sampled_final",
        ACCURACY,
        "checkpoints",
        "final sampled accuracy",
        paired=True,
        effect=True,
        shown=(("final sampled accuracy", INTERVAL), ("Δ final sampled vs ref.", DIFF)),
    ),
    Quantity("sampled_best", ACCURACY, "checkpoints", shown=(("best sampled accuracy", INTERVAL),)),
    Quantity("length_correct", LENGTH, "diagnostics"),
    Quantity("length_incorrect", LENGTH, "diagnostics"),
    Quantity(
        "length_correct_late",
        LENGTH,
        "diagnostics",
        shown=(("length correct, last ¼ of steps", INTERVAL),),
    ),
    Quantity(
        "length_incorrect_late",
        LENGTH,
        "diagnostics",
        "incorrect-completion length, last ¼ of steps (tokens)",
        paired=True,
        effect=True,
        shown=(
            ("length incorrect, last ¼ of steps", INTERVAL),
            ("Δ length incorrect vs ref.", DIFF),
        ),
    ),
    Quantity(
        "test_length_incorrect",
        LENGTH,
        "checkpoints",
        "incorrect-completion length on test, final (tokens)",
        paired=True,
        shown=(
            ("test length incorrect (final, sampled)", INTERVAL),
            ("Δ test length incorrect vs ref.", DIFF),
        ),
    ),
    Quantity("truncation_rate", ACCURACY, "diagnostics", shown=(("truncation", INTERVAL),)),
    Quantity("ratio_clip_low", ACCURACY, "diagnostics", shown=(("ratio clip low", MEAN),)),
    Quantity("ratio_clip_high", ACCURACY, "diagnostics", shown=(("ratio clip high", MEAN),)),
    Quantity("grad_clipped", ACCURACY, "diagnostics", shown=(("grad. clipped steps", MEAN),)),
    Quantity(
        "grad_clip_factor", ACCURACY, "diagnostics", shown=(("mean grad. clip factor", MEAN),)
    ),
    # one per group category (objective/conventions.py); only the mixed groups' is paired
    *(
        Quantity(
            f"fraction_{c}",
            ACCURACY,
            "diagnostics",
            "mixed-group fraction" if c == "mixed" else "",
            paired=c == "mixed",
            effect=c == "mixed",
            shown=(
                (_FRACTION_HEADERS.get(c, c.replace("_", "-")), MEAN),
                *((("Δ mixed vs ref.", DIFF),) if c == "mixed" else ()),
            ),
        )
        for c in GROUP_CATEGORIES
    ),
    Quantity("zero_std_fraction", ACCURACY, "diagnostics"),
    Quantity("weight_share_homogeneous", ACCURACY, "diagnostics"),
    Quantity("generated_tokens", COUNT, "diagnostics", shown=(("generated tokens", MEAN),)),
    Quantity("wall_time_s", OTHER, "budget", shown=(("wall time s", MEAN),)),
    # the efficiency curve (analysis/efficiency.py): fit parameters of identified fits only, the
    # area and the late accuracy for every run
    Quantity("efficiency_identified", ACCURACY, "efficiency", shown=(("fits identified", MEAN),)),
    Quantity(
        "efficiency_A",
        ACCURACY,
        "efficiency",
        "efficiency fit: asymptote A",
        paired=True,
        nameable=False,
        shown=(("asymptote A", INTERVAL), ("Δ A vs ref.", DIFF)),
    ),
    Quantity("efficiency_B", STATISTIC, "efficiency"),
    Quantity("efficiency_C_mid", COUNT, "efficiency", shown=(("C_mid (tokens)", MEAN),)),
    Quantity(
        "efficiency_log10_C_mid",
        LOG10,
        "efficiency",
        "efficiency fit: log10 C_mid (generated tokens to half the gain)",
        summarised=False,
        paired=True,
        nameable=False,
        shown=(("Δ log10 C_mid vs ref.", DIFF),),
    ),
    Quantity("efficiency_C_mid_completions", COUNT, "efficiency"),
    Quantity(
        "efficiency_auc",
        ACCURACY,
        "efficiency",
        "area under the efficiency curve (mean sampled accuracy over training)",
        paired=True,
        effect=True,
        shown=(("efficiency AUC", INTERVAL), ("Δ efficiency AUC vs ref.", DIFF)),
    ),
    Quantity(
        "efficiency_late",
        ACCURACY,
        "efficiency",
        "late accuracy (mean sampled accuracy over the late window, the last ¼ of steps)",
        paired=True,
    ),
)

# The formatted results table's columns, quantity by quantity (each shows its ``shown``); a
# quantity that shows columns and is not named here comes after these, in registry order.
SHOWN_ORDER = (
    "greedy_final",
    "greedy_best",
    "sampled_final",
    "sampled_best",
    "length_correct_late",
    "length_incorrect_late",
    "test_length_incorrect",
    "fraction_all_correct",
    "fraction_all_incorrect",
    "fraction_mixed",
    "fraction_failed_scoring",
    "ratio_clip_low",
    "ratio_clip_high",
    "grad_clipped",
    "grad_clip_factor",
    "truncation_rate",
    "efficiency_auc",
    "efficiency_identified",
    "efficiency_A",
    "efficiency_C_mid",
    "efficiency_log10_C_mid",
    "generated_tokens",
    "wall_time_s",
)

BY_NAME = {q.name: q for q in QUANTITIES}
# Summarised as mean [95% t interval] over seeds, in the results table's column order.
RUN_QUANTITIES = tuple(q.name for q in QUANTITIES if q.summarised)
# Paired by seed with the cell's reference, and what readings call them: those a hypothesis may
# name first, then the outcome-dependent ones.
PAIRED = {
    q.name: q.label
    for q in sorted((q for q in QUANTITIES if q.paired), key=lambda q: not q.nameable)
}
# The paired quantities a declared hypothesis may name.
NAMEABLE = tuple(q for q in PAIRED if BY_NAME[q].nameable)
# Quantities that exist only where the outcome allowed them; they describe.
OUTCOME_DEPENDENT = tuple(q for q in PAIRED if not BY_NAME[q].nameable)
# The contrasts the effect plots and the report's reading show, in panel order.
EFFECTS = {q: label for q, label in PAIRED.items() if BY_NAME[q].effect}
# The formatted results table's columns: header -> (the column's quantity, how it is shown).
DISPLAY = {
    header: (f"{q.name}_diff" if how == DIFF else q.name, how)
    for q in sorted(
        (q for q in QUANTITIES if q.shown),
        key=lambda q: SHOWN_ORDER.index(q.name) if q.name in SHOWN_ORDER else len(SHOWN_ORDER),
    )
    for header, how in q.shown
}


def unit_of(name: str) -> str | None:
    """The unit of a registered quantity ``name`` or of its difference or interaction
    (``<name>_diff``, ``<name>_interaction``), optionally as a mean or bound
    (``_mean``, ``_low``, ``_high``); None for any other name."""
    for stat in ("", "_mean", "_low", "_high"):
        for of in ("", "_diff", "_interaction"):
            suffix = of + stat
            if name.endswith(suffix) and (q := BY_NAME.get(name[: len(name) - len(suffix)])):
                return q.unit
    return None
