"""Frames rendered as Markdown and LaTeX tables."""

from __future__ import annotations

from typing import Any

import pandas as pd


def to_markdown(frame: pd.DataFrame) -> str:
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
    """A booktabs ``table``; ``wrap`` gives p{} widths for long text columns."""
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
