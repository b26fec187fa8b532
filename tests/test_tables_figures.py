"""Tables compare cells only with intervals over seeds; figures keep one colour per cell."""

import math

import pandas as pd
import pytest

from grpo_ablation import pipeline
from grpo_ablation.analysis import STAGE_FIGURES, figures, tables
from grpo_ablation.objective.formulas import GROUP_CATEGORIES

REF, OTHER = "std=sample/agg=sequence_mean/G=4", "std=population/agg=sequence_mean/G=4"
CONFIG = {
    "seeds": [0, 1, 2],
    "training": {
        "group_size": 4,
        "prompts_per_step": 2,
        "std_eps": 1e-4,
        "beta": 0.0,
        "clip_eps_low": 0.2,
        "clip_eps_high": 0.2,
        "max_completion_length": 8,
        "max_steps": 4,
    },
    "stages": {
        "std_scaling": {
            "vary": {"std_scaling": ["sample", "population"]},
            "fixed": {"aggregation": "sequence_mean"},
            "reference": "sample",
        },
        "aggregation": {
            "vary": {"aggregation": ["sequence_mean", "constant"]},
            "fixed": {"std_scaling": {"winner_of": "std_scaling"}},
            "reference": "sequence_mean",
        },
        "group_size": {"enabled": False, "vary": {"group_size": [2, 4]}, "reference": 4},
    },
}


def run_rows(greedy: dict[str, list[float]]) -> pd.DataFrame:
    rows = []
    for cell, values in greedy.items():
        for seed, g in enumerate(values):
            row = {
                "stage": "std_scaling",
                "cell": cell,
                "reference": REF,
                "seed": seed,
                "greedy_final": g,
                "greedy_best": g + 0.1,
                "sampled_final": g / 2,
                "sampled_best": g,
                "length_correct": 4.0,
                "length_incorrect": 6.0,
                "truncation_rate": 0.1,
                "length_correct_late": 3.0,
                "length_incorrect_late": 5.0 + g,
                "test_length_incorrect": 4.0 - g,
                "ratio_clip_low": 0.01,
                "ratio_clip_high": 0.02,
                "zero_std_fraction": 0.5,
                "weight_share_homogeneous": 0.5,
                "generated_tokens": 100,
                "wall_time_s": 2.0,
            }
            row.update({f"fraction_{c}": 0.25 for c in GROUP_CATEGORIES})
            rows.append(row)
    return pd.DataFrame(rows)


def test_results_table_has_intervals_and_paired_differences_to_the_reference():
    runs = run_rows({REF: [0.2, 0.4, 0.6], OTHER: [0.3, 0.5, 0.7]})
    table = tables.results_table(runs, {"greedy": 0.1, "sampled": 0.05}).set_index("cell")
    assert table.loc[tables.BASE_LABEL, "greedy_final_mean"] == 0.1  # the base policy, step 0
    ref, other = table.loc[REF], table.loc[OTHER]
    assert ref["is_reference"] and not other["is_reference"] and other["reference"] == REF
    assert ref["greedy_final_mean"] == pytest.approx(0.4) and ref["greedy_final_n"] == 3
    assert ref["greedy_final_low"] < 0.4 < ref["greedy_final_high"]
    # Every seed improves by exactly 0.1: the paired interval collapses on +0.1.
    assert other["greedy_final_diff_mean"] == pytest.approx(0.1)
    assert other["greedy_final_diff_low"] == pytest.approx(0.1)
    assert ref["greedy_final_diff_mean"] == 0.0
    # Lengths of incorrect completions get the same paired comparison (training and test).
    assert other["length_incorrect_late_diff_mean"] == pytest.approx(0.1)
    assert other["test_length_incorrect_diff_mean"] == pytest.approx(-0.1)
    assert other["test_length_incorrect_diff_high"] == pytest.approx(-0.1)


def test_one_seed_says_the_interval_is_undefined():
    table = tables.results_table(
        run_rows({REF: [0.2], OTHER: [0.3]}), {"greedy": 0.1, "sampled": 0.0}
    )
    assert math.isnan(table.set_index("cell").loc[OTHER, "greedy_final_diff_low"])
    shown = tables.display_table(table).set_index("cell")
    assert shown.loc[OTHER, "Δ final greedy vs ref."] == "+0.100 (n=1: interval undefined)"
    assert shown.loc[REF + " (ref.)", "Δ final greedy vs ref."] == "reference"


def test_no_table_shows_mean_advantages_or_calls_truncation_clipping():
    shown = tables.display_table(
        tables.results_table(run_rows({REF: [0.2, 0.3]}), {"greedy": 0, "sampled": 0})
    )
    assert not any("advantage" in c for c in shown.columns)
    assert "truncation" in shown.columns and not any(
        "clip" in c and "trunc" in c for c in shown.columns
    )


def test_markdown_and_latex_render_every_row():
    shown = tables.display_table(
        tables.results_table(run_rows({REF: [0.2, 0.3]}), {"greedy": 0, "sampled": 0})
    )
    md = tables.to_markdown(shown)
    assert md.count("\n") == len(shown) + 2 and "[" in md
    tex = tables.to_latex(shown, "caption with 95% and std_scaling", "tab:x")
    assert (
        r"95\%" in tex
        and r"std\_scaling" in tex
        and r"\Delta" in tex
        and tex.count(r"\\") >= len(shown) + 1
    )


def test_design_lists_every_stage_with_its_reference_and_the_stage1_winner():
    rows = pipeline.design_rows(CONFIG, {"std_scaling": "population"})
    assert [(r["stage"], r["cell"]) for r in rows] == [
        ("std_scaling", REF),
        ("std_scaling", OTHER),
        ("aggregation", "std=population/agg=sequence_mean/G=4"),
        ("aggregation", "std=population/agg=constant/G=4"),
    ]
    assert {r["reference"] for r in rows if r["stage"] == "std_scaling"} == {REF}
    only = pipeline.design_rows(CONFIG, None, ["std_scaling"])
    assert [r["stage"] for r in only] == ["std_scaling"] * 2


def test_report_inputs_ask_for_the_selection_only_when_needed():
    files = pipeline.report_inputs("E", {"std_scaling": [REF]}, [0, 1], sources=[])
    assert files["evals"] == [
        f"E/eval/{REF}/seed=0/test/summary.json",
        f"E/eval/{REF}/seed=1/test/summary.json",
    ]
    assert "selection" not in files and len(files["diagnostics"]) == 4
    files = pipeline.report_inputs("E", {}, [0], sources=["std_scaling"])
    assert files["selection"] == ["E/selection/std_scaling.json"]


def test_stage_objective_names_what_varies_and_what_is_fixed():
    text = pipeline.stage_caption(CONFIG, "aggregation")
    assert text.startswith("length aggregation over ['sequence_mean', 'constant']")
    assert "std scaling the winner of stage 'std_scaling' on validation" in text
    assert "KL coefficient β 0" in text


def test_palette_gives_each_cell_one_colour_whatever_the_order():
    cells = pipeline.all_cells(CONFIG)
    assert len(cells) == 4  # stage-2 cells for both possible winners, known before any result
    a, b = figures.cell_palette(cells), figures.cell_palette(list(reversed(cells)))
    assert a == b and len(set(a.values())) == len(cells)


def test_worked_example_weights_come_from_the_library():
    w = figures.worked_weights().set_index(["aggregation", "length"])["token_weight"]
    assert w["sequence_mean", 2] == pytest.approx(1 / 4) and w["sequence_mean", 8] == pytest.approx(
        1 / 16
    )
    assert w["token_mean", 2] == pytest.approx(1 / 10) == w["token_mean", 8]
    assert w["constant", 2] == pytest.approx(1 / 16)


def synthetic_frames():
    curves, steps = [], []
    for cell in (REF, OTHER):
        for seed in (0, 1):
            for step in (0, 2, 4):
                curves.append(
                    {
                        "stage": "std_scaling",
                        "cell": cell,
                        "seed": seed,
                        "step": step,
                        "greedy": 0.1 * step + 0.01 * seed,
                        "sampled": 0.05 * step,
                    }
                )
            for step in range(4):
                row = {
                    "stage": "std_scaling",
                    "cell": cell,
                    "seed": seed,
                    "step": step,
                    "length/correct": 4.0 + step,
                    "length/incorrect": 6.0,
                    "truncation_rate": 0.1,
                    "ratio_clip/low": 0.01,
                    "ratio_clip/high": None,
                    "mixed_observed": 0.5,
                    "mixed_predicted": 0.4,
                }
                row.update({f"fraction/{c}": 0.25 for c in GROUP_CATEGORIES})
                steps.append(row)
    return pd.DataFrame(curves), pd.DataFrame(steps)


def test_stage_figures_are_written_as_png_and_pdf(tmp_path):
    curves, steps = synthetic_frames()
    palette = figures.cell_palette(pipeline.all_cells(CONFIG))
    paths = figures.write_stage_figures(curves, steps, "std_scaling", palette, tmp_path)
    assert sorted(p.name for p in paths) == sorted(
        f"{k}.{e}" for k in STAGE_FIGURES for e in ("png", "pdf")
    )
    assert all(p.stat().st_size > 1000 for p in paths)
    paths = figures.write_weight_figure(tmp_path)
    assert all(p.stat().st_size > 1000 for p in paths)


def test_accuracy_figure_draws_each_cell_in_its_palette_colour():
    curves, _ = synthetic_frames()
    palette = figures.cell_palette([REF, OTHER, "std=none/agg=constant/G=4"])
    fig = figures.accuracy_figure(curves, palette)
    colours = {line.get_label(): line.get_color() for line in fig.axes[0].get_lines()}
    assert colours[pipeline.cell_label(REF)] == palette[REF]
    assert colours[pipeline.cell_label(OTHER)] == palette[OTHER]


def test_cells_whose_groups_failed_scoring_are_flagged():
    runs = run_rows({REF: [0.2, 0.4, 0.6], OTHER: [0.3, 0.5, 0.7]})
    runs.loc[runs["cell"] == REF, "fraction_failed_scoring"] = 0.0
    runs.loc[runs["cell"] == OTHER, "fraction_failed_scoring"] = 1.0
    flags = tables.scoring_flags(tables.results_table(runs, {"greedy": 0.1, "sampled": 0.05}))
    assert flags == [
        f"**Scoring failed** in 100% of the groups of `{OTHER}` (mean over seeds): "
        "those groups carried no reward signal."
    ]
