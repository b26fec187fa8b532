"""Frames rendered as Markdown and LaTeX tables, every number rounded to what it measures.

One rule says how a number is shown, from the name of what it holds: a registered quantity, its
difference or interaction and their bounds (``greedy_final_diff_low``) by the unit its entry
declares (``design.quantities``), any other column's name (``p_holm``, ``units_needed``) by the
first of ``RULES`` it matches, or, for a column whose name names no quantity (``mean``,
``low90``, ``sd``, ``mde``, ``expected``), the quantity its row names in its ``metric`` or
``quantity`` column. Accuracies and every other fraction (their differences, interval
bounds, SDs and minimum detectable effects) get 3 decimals, lengths in tokens 2, p-values 2
significant digits (``<0.0001`` below 0.0001), counts none; anything the rule does not name gets
3 significant digits (no decimals from 100 on). ``to_markdown`` and ``to_latex`` show every
number of the frames they are given by it, and ``number`` and ``interval`` build the formatted
cells of the results and efficiency tables with it; the CSVs keep full precision.

``to_rst`` writes the same table as a reStructuredText list-table (for a text that is RST), and
``html_view`` the page the report shows of a table or a reading: its reStructuredText rendered by
docutils, then the table with its numbers as ``shown`` formats them, and its CSV to download.
"""

from __future__ import annotations

import base64
import html
import math
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from grpo_ablation.design.quantities import (
    ACCURACY,
    COUNT,
    LENGTH,
    LOG10,
    OTHER,
    STATISTIC,
    unit_of,
)

# The kinds of number a table shows: a quantity's units (``design.quantities.UNITS``) and p.
P_VALUE = "p-value"
# Below it a p-value reads ``<0.0001``.
P_FLOOR = 1e-4


def _words(*words: str) -> str:
    """Any of ``words`` as a whole ``_``-separated part of a name."""
    return rf"(^|_)({'|'.join(words)})(_|$)"


# name pattern -> kind, first match wins (``re.search`` on the name of a column or quantity that
# is not registered: a table's own columns, an external benchmark's accuracy, a push). A
# registered quantity's name never reaches them (``unit_of`` decides it), so they hold no word
# that only a registered quantity's name has (efficiency_A, _B, _C_mid, _auc, _late, fraction_*).
RULES: tuple[tuple[str, str], ...] = (
    # A push (per unit L2 step) is unbounded, whatever quantity it moves.
    (r"^push_", OTHER),
    (_words("level", "unresolved", "cosine", "norm"), OTHER),  # thresholds, tiny probabilities
    (_words("p"), P_VALUE),  # p, p_holm, p_refute_holm, interaction_p
    (_words("log10"), LOG10),  # efficiency_log10_C_mid_diff_n (before n, a count)
    (_words("wall", "minutes", "hours"), OTHER),  # durations
    (r"first_difference_median", OTHER),  # a median of steps: a half where seeds split evenly
    (
        _words(
            "n",
            "seeds",
            "runs",
            "groups",
            "draws",
            "replicates",
            "steps?",
            "units",
            "df",
            "tokens",
            "excluded",
            "same_sign",
            "first_difference",
        ),
        COUNT,
    ),
    (r"length", LENGTH),  # length_incorrect_late, test_length_incorrect, incorrect_length
    (_words("z"), STATISTIC),
    (
        _words(
            "greedy",
            "sampled",
            "accuracy",
            "external",
            "rate",
            "clip",
            "clipped",
            "mixed",
            "correct",
            "incorrect",
            "scoring",
            "identical",
            "identified",
            "observed",
            "predicted",
            "power",
        ),
        ACCURACY,
    ),
)
# The columns that name the quantity of their row's numbers (the hypotheses, agreement and plan
# tables: ``mean``, ``sd``, ``mde``, ... are in that quantity's unit).
QUANTITY_COLUMNS = ("metric", "quantity")


def largest_difference(name: str) -> float:
    """The largest difference two values of quantity ``name`` can have: 1 for an accuracy,
    fraction, share or rate, unbounded otherwise."""
    return 1.0 if kind_of(name) == ACCURACY else math.inf


def fit_limits(
    values: Iterable[float], pad: float = 0.08, floor: float | None = None
) -> tuple[float, float] | None:
    """Axis limits around the finite ``values``, padded by a fraction of their range (None when
    there is none): the axis shows the data, not the width of a two-seed interval. ``floor``
    (e.g. 0 for a fraction) keeps the axis from running far below what the quantity can be."""
    xs = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    if not xs:
        return None
    lo, hi = min(xs), max(xs)
    margin = pad * (hi - lo) if hi > lo else max(abs(hi), 1.0) * 0.05
    low, high = lo - margin, hi + margin
    if floor is not None and lo >= floor:
        low = max(low, floor - 0.02 * (high - floor))
    return low, high


def kind_of(name: str) -> str | None:
    """The kind of the numbers a column or quantity called ``name`` holds: a registered
    quantity's unit, else the first rule's it matches; None when the name says nothing of it."""
    unit = unit_of(name)
    if unit is not None:
        return unit
    return next((kind for pattern, kind in RULES if re.search(pattern, name)), None)


def _fixed(digits: int) -> Callable[[float, bool], str]:
    def show(x: float, signed: bool = False) -> str:
        x = 0.0 if round(x, digits) == 0 else x  # never "-0.000"
        return f"{x:{'+' if signed else ''}.{digits}f}"

    return show


def _p_value(x: float, signed: bool = False) -> str:
    return f"<{P_FLOOR:g}" if x < P_FLOOR else f"{x:#.2g}"


def _significant(x: float, signed: bool = False) -> str:
    sign = "+" if signed else ""
    x = 0.0 if x == 0 else x
    return f"{x:{sign}.0f}" if abs(x) >= 100 else f"{x:{sign}.3g}"


FORMATS: dict[str, Callable[[float, bool], str]] = {
    ACCURACY: _fixed(3),
    LENGTH: _fixed(2),
    P_VALUE: _p_value,
    COUNT: _fixed(0),
    STATISTIC: _fixed(2),
    LOG10: _fixed(3),
    OTHER: _significant,
}


def number(name: str, x: float, signed: bool = False) -> str:
    """``x``, a value of the quantity or column ``name``, as its kind shows it (``signed``: with
    its sign, for a difference); blank when it is missing."""
    x = float(x)
    if math.isnan(x):
        return ""
    if math.isinf(x):
        return f"{x:{'+' if signed else ''}}"
    return FORMATS[kind_of(name) or OTHER](x, signed)


def interval(name: str, mean: float, low: float, high: float, n: int, signed: bool = False) -> str:
    """``0.250 [0.100, 0.400]`` of the quantity ``name`` (mean [low, high] over n units), or
    ``0.250 (n=1: interval undefined)``, or ``n/a`` with no value; never a bare mean."""
    if n == 0 or not math.isfinite(mean):
        return "n/a"
    middle = number(name, mean, signed)
    if n < 2 or not (math.isfinite(low) and math.isfinite(high)):
        return f"{middle} (n={n}: interval undefined)"
    return f"{middle} [{number(name, low, signed)}, {number(name, high, signed)}]"


def _cell(value: Any, name: str | None) -> Any:
    if isinstance(value, bool | np.bool_) or not isinstance(value, float | np.floating):
        return value  # text, flags and integers as they are
    return number(name or "", value)


def shown(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` as a table shows it: every float formatted by its column's kind (``kind_of``),
    or by its row's quantity where the column's name names none; text, flags and integers
    unchanged."""
    of_row = next((frame[c].astype(str) for c in QUANTITY_COLUMNS if c in frame), None)
    out = frame.astype(object).copy()
    for i, col in enumerate(frame.columns):
        own = str(col) if kind_of(str(col)) else None
        names = [own] * len(frame) if own or of_row is None else list(of_row)
        out.iloc[:, i] = [_cell(v, name) for v, name in zip(frame.iloc[:, i], names, strict=True)]
    return out


def to_markdown(frame: pd.DataFrame) -> str:
    """A Markdown table of ``frame``, its numbers as ``shown`` formats them."""
    frame = shown(frame)

    def cell(v: Any) -> str:
        return str(v).replace("|", "\\|").replace("\n", " ")

    head = "| " + " | ".join(cell(c) for c in frame.columns) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    body = ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([head, rule, *body]) + "\n"


_TEX = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "Δ": r"$\Delta$",
    "≥": r"$\geq$",
    "·": r"$\cdot$",
}


def tex_escape(text: Any) -> str:
    return "".join(_TEX.get(ch, ch) for ch in str(text))


def to_latex(
    frame: pd.DataFrame, caption: str, label: str, wrap: dict[str, str] | None = None
) -> str:
    """A booktabs ``table`` of ``frame``, its numbers as ``shown`` formats them; ``wrap`` gives
    p{} widths for long text columns."""
    frame = shown(frame)
    wrap = wrap or {}
    spec = "".join(f"p{{{wrap[c]}}}" if c in wrap else "l" for c in frame.columns)
    lines = [
        r"\begin{table}[htbp]",
        r"\centering",
        r"\scriptsize",
        rf"\caption{{{tex_escape(caption)}}}",
        rf"\label{{{label}}}",
        rf"\begin{{tabular}}{{{spec}}}",
        r"\toprule",
        " & ".join(tex_escape(c) for c in frame.columns) + r" \\",
        r"\midrule",
    ]
    lines += [
        " & ".join(tex_escape(v) for v in row) + r" \\" for row in frame.itertuples(index=False)
    ]
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def list_table(head: list[str], rows: list[list[str]], widths: str = "") -> str:
    """A reStructuredText list-table of ``rows`` under ``head``, its cells as given (RST);
    ``widths``: its option (``auto``: the browser sizes the columns to their text, not docutils's
    equal shares)."""
    lines = [
        ".. list-table::",
        "   :header-rows: 1",
        *([f"   :widths: {widths}"] if widths else []),
        "",
    ]
    for row in [head, *rows]:
        lines += [f"   * - {row[0]}".rstrip(), *(f"     - {c}".rstrip() for c in row[1:])]
    return "\n".join(lines) + "\n"


# Characters that start or end reStructuredText inline markup: escaped, a cell reads as written.
_RST_MARKUP = re.compile(r"([\\*`|_\[\]<>:])")


def _rst_text(value: Any) -> str:
    return _RST_MARKUP.sub(r"\\\1", str(value).replace("\n", " "))


def to_rst(frame: pd.DataFrame) -> str:
    """A reStructuredText list-table of ``frame``, its numbers as ``shown`` formats them."""
    frame = shown(frame)
    rows = [[_rst_text(v) for v in row] for row in frame.itertuples(index=False)]
    return list_table([_rst_text(c) for c in frame.columns], rows)


# The view's style: compact, numbers aligned; the header stays in sight over a long table.
_STYLE = """
body { font: 13px/1.45 system-ui, sans-serif; color: #1f2328; margin: 12px; }
p, li { max-width: 60em; }
table { border-collapse: collapse; margin: 8px 0; }
th, td { padding: 3px 8px; border-bottom: 1px solid #d0d7de; text-align: left;
         vertical-align: top; }
th { background: #f6f8fa; position: sticky; top: 0; }
td.number { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tbody tr:hover { background: #f6f8fa; }
code, tt, .literal { font-size: 92%; background: #f6f8fa; padding: 0 2px; }
td p, th p { margin: 0; }
.download { font-size: 92%; color: #57606a; }
"""


def rst_html(text: str) -> str:
    """``text`` (reStructuredText) as an HTML fragment; a markup error shows as docutils's
    system message in the page, not as raw text."""
    from docutils.core import publish_parts

    # no docutils.conf read; a lone heading stays in the body (not lifted to the document title)
    settings = {
        "_disable_config": True,
        "doctitle_xform": False,
        "embed_stylesheet": False,
        "stylesheet_path": "",
    }
    return publish_parts(text, writer="html5", settings_overrides=settings)["body"]


# A cell that shows a number (``0.250``, ``-0.1 [-0.2, 0.0]``, ``<0.0001``, ``inf``): right-aligned.
_NUMBER = re.compile(r"^[-+−<]?(\d|\.\d|inf)")


def _html_table(frame: pd.DataFrame) -> str:
    def cell(tag: str, value: Any) -> str:
        text = "" if value is None or value is pd.NA else str(value)
        number = ' class="number"' if tag == "td" and _NUMBER.match(text) else ""
        return f"<{tag}{number}>{html.escape(text)}</{tag}>"

    head = "".join(cell("th", c) for c in frame.columns)
    body = "\n".join(
        "<tr>" + "".join(cell("td", v) for v in row) + "</tr>"
        for row in shown(frame).itertuples(index=False)
    )
    return f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody>\n</table>"


def html_view(text: str, frame: pd.DataFrame | None = None, csv: Path | None = None) -> str:
    """The page the report shows (a standalone HTML file): ``text`` (reStructuredText) rendered,
    then ``csv`` (the numbers at full precision) as a download, then ``frame`` as a table, its
    numbers as ``shown`` formats them; the report embeds the page, so the CSV is embedded in it."""
    parts = [rst_html(text)]
    if csv is not None:
        data = base64.b64encode(csv.read_bytes()).decode("ascii")
        parts.append(
            f'<p class="download">Every number at full precision: <a download="{csv.name}" '
            f'href="data:text/csv;base64,{data}">{csv.name}</a></p>'
        )
    if frame is not None:
        parts.append(_html_table(frame))
    body = "\n".join(parts)
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<style>{_STYLE}</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n"
    )
