"""Tables for people: one rule (``render.kind_of``) rounds every number a Markdown or LaTeX table
shows by what its column, or its row's quantity, holds; the CSVs keep full precision."""

import base64
import html
import math
import re

import pandas as pd

from grpo_ablation.analysis import calibration, render
from grpo_ablation.analysis.render import ACCURACY, COUNT, LENGTH, LOG10, OTHER, P_VALUE, STATISTIC
from grpo_ablation.design.hypotheses import PLAN_COLUMNS
from grpo_ablation.design.quantities import PAIRED, RUN_QUANTITIES
from grpo_ablation.objective.formulas import mixed_group_probability


def test_a_frame_is_shown_column_by_column_by_what_each_holds():
    """An accuracy (3 decimals), a p-value (2 significant digits), a length in tokens (2
    decimals) and a count (an integer); text, flags and integers as they are."""
    frame = pd.DataFrame(
        {
            "stage": ["std_scaling", "aggregation"],
            "greedy_final_diff_mean": [-0.022499999999999964, 0.41666666666666669],
            "p_holm": [0.0071321753084562615, 2.3e-05],
            "length_incorrect_late_mean": [12.345678, 3.0],
            "n_seeds": [3.0, 12.0],
            "within": [True, False],
        }
    )
    assert render.to_markdown(frame) == (
        "| stage | greedy_final_diff_mean | p_holm | length_incorrect_late_mean | n_seeds | within |\n"
        "|---|---|---|---|---|---|\n"
        "| std_scaling | -0.022 | 0.0071 | 12.35 | 3 | True |\n"
        "| aggregation | 0.417 | <0.0001 | 3.00 | 12 | False |\n"
    )
    tex = render.to_latex(frame, "caption", "tab:x")
    assert r"std\_scaling & -0.022 & 0.0071 & 12.35 & 3 & True \\" in tex
    assert r"aggregation & 0.417 & <0.0001 & 3.00 & 12 & False \\" in tex


def test_a_column_that_names_no_quantity_takes_its_rows_metric():
    """The hypotheses table: ``mean``, ``sd``, ``mde`` are in the unit of each row's metric; a
    missing number is blank; the units needed are a count, the power a fraction."""
    verdicts = pd.DataFrame(
        {
            "metric": ["greedy_final", "test_length_incorrect"],
            "n": [3, 3],
            "mean": [-0.022499999999999964, -1.23456],
            "sd": [0.0071321753084562615, 0.5],
            "p": [0.08872049807326073, 0.9112795019267392],
            "power": [0.8123, math.nan],
            "units_needed": [7.0, math.inf],
            "level": [0.0125, 0.0125],
        }
    )
    assert render.to_markdown(verdicts).splitlines()[2:] == [
        "| greedy_final | 3 | -0.022 | 0.007 | 0.089 | 0.812 | 7 | 0.0125 |",
        "| test_length_incorrect | 3 | -1.23 | 0.50 | 0.91 |  | inf | 0.0125 |",
    ]


def test_numbers_and_intervals_worked():
    assert render.interval("greedy_final_diff", 0.1, 0.05, 0.15, 3, signed=True) == (
        "+0.100 [+0.050, +0.150]"
    )
    # a difference that rounds to zero is never "-0.00"
    assert render.interval("length_incorrect_late_diff", -0.0004, -0.5, 0.5, 2, signed=True) == (
        "+0.00 [-0.50, +0.50]"
    )
    assert render.interval("greedy_final", 0.4, math.nan, math.nan, 1) == (
        "0.400 (n=1: interval undefined)"
    )
    assert render.interval("greedy_final", math.nan, math.nan, math.nan, 0) == "n/a"
    assert render.number("p", 0.5) == "0.50" and render.number("p", 1.0) == "1.0"
    assert render.number("p_refute_holm", 0.00023) == "0.00023"
    assert render.number("p", 0.0) == "<0.0001"
    assert render.number("efficiency_C_mid", 1234.6) == "1235"
    assert render.number("efficiency_log10_C_mid_diff", -0.01234, signed=True) == "-0.012"
    assert render.number("wall_time_s", 1234.6) == "1235" and render.number(
        "wall_time_s", 3.214
    ) == ("3.21")
    assert render.number("z", 0.87061) == "0.87" and render.number("fraction_mixed", math.nan) == ""


def test_the_rule_names_the_kind_of_every_quantity_a_table_shows():
    kinds = {
        "greedy_final_diff_low": ACCURACY,
        "fraction_mixed_mean": ACCURACY,
        "efficiency_identified_mean": ACCURACY,  # the fraction of identified fits
        "identical_step0": ACCURACY,
        "long_incorrect_share": ACCURACY,
        "power_declared": ACCURACY,
        "p": P_VALUE,
        "p_refute_holm": P_VALUE,
        "interaction_p": P_VALUE,
        "length_incorrect_late_diff_mean": LENGTH,
        "incorrect_length": LENGTH,
        "greedy_final_n": COUNT,
        "generated_tokens": COUNT,
        "efficiency_C_mid_mean": COUNT,
        "units_needed_upper": COUNT,
        "last_step": COUNT,
        "efficiency_log10_C_mid_diff_mean": LOG10,
        "z": STATISTIC,
        "efficiency_B_mean": STATISTIC,
        "level": OTHER,
        "max_unresolved": OTHER,
        "minutes_needed": OTHER,
        "gpu_hours_needed": OTHER,
        "mean": None,  # by the row's metric
        "mde": None,
        "sd_declared": None,
    }
    assert {name: render.kind_of(name) for name in kinds} == kinds
    # every quantity of the results table and every paired one has its kind by name
    assert [q for q in (*RUN_QUANTITIES, *PAIRED) if render.kind_of(q) is None] == []
    # the plan's columns: the metric's unit, or their own
    assert [c for c in PLAN_COLUMNS if render.kind_of(c) is None] == [
        "id",
        "kind",
        "metric",
        "expected",
        "boundary",
        "sd_declared",
        "mde",
    ]


def calibration_groups() -> pd.DataFrame:
    """Six groups of one cell, at probabilities that need rounding."""
    return pd.DataFrame(
        [
            {
                "stage": "s",
                "cell": "c",
                "reference": "c",
                "seed": 0,
                "step": 0,
                "G": 4,
                "failed": False,
                "observed": int(k % 3 == 0),
                "p": p,
                "p_unresolved": 1e-9,
                "predicted": mixed_group_probability(p, 4),
            }
            for k, p in enumerate([0.1, 0.3, 0.55, 0.7, 0.9, 1 / 3])
        ],
        columns=calibration.GROUP_COLUMNS,
    )


def test_the_written_csv_keeps_full_precision_and_its_markdown_is_rounded(tmp_path):
    """calibration.csv holds every digit the table has; calibration.md three decimals of each
    fraction, two of z, integers for the counts."""
    groups = calibration_groups()
    table = calibration.calibration_table(groups)
    calibration.write_calibration(groups, tmp_path)
    assert (tmp_path / "calibration.csv").read_text() == table.to_csv(index=False)
    predicted = float(table["predicted"].iloc[0])
    assert repr(predicted) in (tmp_path / "calibration.csv").read_text()
    row = (tmp_path / "calibration.md").read_text().splitlines()[-2]
    assert row == (
        f"| s | c | 6 | 0 | 0.333 | {predicted:.3f} | {table['predicted_low'].iloc[0]:.3f} | "
        f"{table['predicted_high'].iloc[0]:.3f} | {table['z'].iloc[0]:.2f} | True |  | 1e-09 |"
    )


def html_rows(page: str) -> list[list[str]]:
    """The cells of every body row of a page's tables, as the browser shows their text."""
    rows = re.findall(r"<tr>(.*?)</tr>", page, re.S)
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", row, re.S) for row in rows]
    return [[html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in row] for row in cells if row]


def test_the_html_view_shows_the_markdowns_cells_its_text_rendered_and_its_csv(tmp_path):
    """calibration.html, the report's item: the caption rendered (not RST source), the cells the
    Markdown table shows (numbers right-aligned), and the CSV byte for byte as a download."""
    calibration.write_calibration(calibration_groups(), tmp_path)
    page = (tmp_path / "calibration.html").read_text()
    md = (tmp_path / "calibration.md").read_text().splitlines()
    shown = [
        [c.strip() for c in line.strip("|").split("|")] for line in md if line.startswith("| s ")
    ]
    assert page.startswith("<!DOCTYPE html>") and "<table>" in page
    assert html_rows(page) == shown
    assert '<td class="number">6</td>' in page and '<td class="number">' + shown[0][4] in page
    assert "<p>Mixed-group calibration per cell" in page and "system-message" not in page
    data = re.search(r'download="calibration.csv" href="data:text/csv;base64,([^"]+)"', page)
    assert base64.b64decode(data[1]) == (tmp_path / "calibration.csv").read_bytes()


def test_a_table_in_rst_reads_as_written_whatever_markup_its_cells_hold():
    """``to_rst`` (the verdicts' table in hypotheses.rst): a cell with RST markup characters (a
    cell path's ``_``, ``*``, a backquote, a bar) renders as its own text, numbers as shown; an
    empty cell stays a cell."""
    frame = pd.DataFrame(
        {
            "id": ["a_b_", "*x*"],
            "cell": ["std=sample/agg=sequence_mean", "`y` | z: [w]"],
            "p_holm": [0.0071321753084562615, math.nan],
            "note": ["<tag>", ""],
        }
    )
    page = render.rst_html(render.to_rst(frame))
    assert "system-message" not in page
    assert html_rows(page) == [
        ["a_b_", "std=sample/agg=sequence_mean", "0.0071", "<tag>"],
        ["*x*", "`y` | z: [w]", "", ""],
    ]
