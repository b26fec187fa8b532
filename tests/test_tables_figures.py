"""Tables compare cells only with intervals over seeds; figures keep one colour per cell."""

import math
from pathlib import Path

import pandas as pd
import pytest

from grpo_ablation.analysis import (
    STAGE_FIGURES,
    calibration,
    curves,
    draws,
    hypotheses,
    loading,
    render,
    result_tables,
)
from grpo_ablation.analysis.jobs.figures import (
    FigureData,
    write_figures,
    write_stage_figures,
    write_weight_figure,
)
from grpo_ablation.analysis.jobs.pooled_figures import write_pooled_figures
from grpo_ablation.analysis.plots import over_draws, per_stage, saving
from grpo_ablation.analysis.prose.effects import effects_reading
from grpo_ablation.design import checks
from grpo_ablation.design.ablation import Design, cell_label
from grpo_ablation.design.hypotheses import contrast_roles, declared
from grpo_ablation.design.quantities import EFFECTS
from grpo_ablation.layout import FIGURE_FORMATS, POOLED_TABLE, TABLE, Tree
from grpo_ablation.objective.calculations import worked_weights, write_sheet
from grpo_ablation.objective.conventions import GROUP_CATEGORIES

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
            row["fraction_mixed"] = 0.3 + g / 10
            row.update(
                efficiency_auc=0.4 + g / 4,
                efficiency_A=0.5 + g / 2,
                efficiency_log10_C_mid=3.0 - g,
                efficiency_late=0.45 + g / 3,
            )
            rows.append(row)
    return pd.DataFrame(rows)


def test_results_table_has_intervals_and_paired_differences_to_the_reference():
    runs = run_rows({REF: [0.2, 0.4, 0.6], OTHER: [0.3, 0.5, 0.7]})
    table = result_tables.results_table(runs, {"greedy": 0.1, "sampled": 0.05}).set_index("cell")
    assert (
        table.loc[result_tables.BASE_LABEL, "greedy_final_mean"] == 0.1
    )  # the base policy, step 0
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
    table = result_tables.results_table(
        run_rows({REF: [0.2], OTHER: [0.3]}), {"greedy": 0.1, "sampled": 0.0}
    )
    assert math.isnan(table.set_index("cell").loc[OTHER, "greedy_final_diff_low"])
    shown = result_tables.display_table(table).set_index("cell")
    assert shown.loc[OTHER, "Δ final greedy vs ref."] == "+0.100 (n=1: interval undefined)"
    assert shown.loc[REF + " (ref.)", "Δ final greedy vs ref."] == "reference"


def test_no_table_shows_mean_advantages_or_calls_truncation_clipping():
    shown = result_tables.display_table(
        result_tables.results_table(run_rows({REF: [0.2, 0.3]}), {"greedy": 0, "sampled": 0})
    )
    assert not any("advantage" in c for c in shown.columns)
    assert "truncation" in shown.columns and not any(
        "clip" in c and "trunc" in c for c in shown.columns
    )


def test_markdown_and_latex_render_every_row():
    shown = result_tables.display_table(
        result_tables.results_table(run_rows({REF: [0.2, 0.3]}), {"greedy": 0, "sampled": 0})
    )
    md = render.to_markdown(shown)
    assert md.count("\n") == len(shown) + 2 and "[" in md
    tex = render.to_latex(shown, "caption with 95% and std_scaling", "tab:x")
    assert (
        r"95\%" in tex
        and r"std\_scaling" in tex
        and r"\Delta" in tex
        and tex.count(r"\\") >= len(shown) + 1
    )


def test_design_lists_every_stage_with_its_reference_and_the_stage1_winner():
    rows = Design.of(CONFIG).rows({"std_scaling": "population"})
    assert [(r["stage"], r["cell"]) for r in rows] == [
        ("std_scaling", REF),
        ("std_scaling", OTHER),
        ("aggregation", "std=population/agg=sequence_mean/G=4"),
        ("aggregation", "std=population/agg=constant/G=4"),
    ]
    assert {r["reference"] for r in rows if r["stage"] == "std_scaling"} == {REF}
    only = Design.of(CONFIG).rows(None, ["std_scaling"])
    assert [r["stage"] for r in only] == ["std_scaling"] * 2


def test_report_inputs_ask_for_the_selection_only_when_needed():
    files = checks.report_inputs("E", {"std_scaling": [REF]}, lambda c: [0, 1], sources=[])
    assert files["evals"] == [
        f"E/eval/{REF}/seed=0/test/summary.json",
        f"E/eval/{REF}/seed=1/test/summary.json",
    ]
    assert "selection" not in files and len(files["diagnostics"]) == 4
    files = checks.report_inputs("E", {}, lambda c: [0], sources=["std_scaling"])
    assert files["selection"] == ["E/selection/std_scaling.json"]


def test_stage_objective_names_what_varies_and_what_is_fixed():
    text = Design.of(CONFIG).stage_caption("aggregation")
    assert text.startswith("length aggregation over ['sequence_mean', 'constant']")
    assert "std scaling the winner of stage 'std_scaling' on validation" in text
    assert "KL coefficient" not in text  # no stage of this config names beta


def test_palette_gives_each_cell_one_colour_whatever_the_order():
    cells = Design.of(CONFIG).all_cells()
    assert len(cells) == 4  # stage-2 cells for both possible winners, known before any result
    a, b = per_stage.cell_palette(cells), per_stage.cell_palette(list(reversed(cells)))
    assert a == b and len(set(a.values())) == len(cells)


def test_worked_example_weights_come_from_the_library():
    w = pd.DataFrame(worked_weights()).set_index(["aggregation", "length"])["token_weight"]
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


def synthetic_effects() -> pd.DataFrame:
    runs = run_rows({REF: [0.2, 0.4, 0.6], OTHER: [0.3, 0.5, 0.75]})
    return result_tables.effects_table(
        result_tables.results_table(runs, {"greedy": 0.1, "sampled": 0.05})
    )


def synthetic_figure_data() -> FigureData:
    curves, steps = synthetic_frames()
    coupled = pd.DataFrame(
        {
            "stage": "std_scaling",
            "cell": OTHER,
            "reference": REF,
            "seed": [s for s in (0, 1) for _ in range(3)],
            "step": [0, 1, 2] * 2,
            "compared": 8,
            "identical": [1.0, 0.75, 0.5, 1.0, 1.0, 0.25],
        }
    )
    points, fits = synthetic_efficiency()
    return FigureData(
        effects=synthetic_effects(),
        curves=curves,
        steps=steps,
        bins=calibration.calibration_bins(calibration_groups().assign(stage="std_scaling")),
        coupling=coupled,
        points=points,
        fits=fits,
        R0=0.5,
    )


def test_stage_figures_are_written_as_png_and_pdf(tmp_path):
    palette = per_stage.cell_palette(Design.of(CONFIG).all_cells())
    data = synthetic_figure_data().of_stage("std_scaling")
    out = tmp_path / "figures" / "std_scaling"
    paths = write_stage_figures(data, palette, out, "std_scaling")
    declared = Tree(tmp_path).stage_figures("std_scaling")
    assert sorted(map(str, paths)) == sorted(declared.values())
    assert sorted(p.name for p in paths) == sorted(
        f"{k}.{e}" for k in STAGE_FIGURES for e in FIGURE_FORMATS
    )
    assert all(p.stat().st_size > 1000 for p in paths)
    weights = write_sheet(tmp_path / "calculations")[2]
    paths = write_weight_figure(weights, tmp_path)
    assert all(p.stat().st_size > 1000 for p in paths)


def test_the_figures_job_reads_the_tables_and_writes_its_declared_files(tmp_path):
    """What the figures draw round-trips through the tables job's files (layout.TABLES), and the
    figures job writes exactly the files layout declares for each stage."""
    data = synthetic_figure_data()
    folder = tmp_path / "tables"
    folder.mkdir()
    runs = run_rows({REF: [0.2, 0.4, 0.6], OTHER: [0.3, 0.5, 0.75]})
    result_tables.results_table(runs, {"greedy": 0.1, "sampled": 0.5}).to_csv(
        folder / TABLE["results"], index=False
    )
    frames = {
        "effects": data.effects,
        "accuracy_curves": data.curves,
        "training_steps": data.steps,
        "calibration_bins": data.bins,
        "coupling_steps": data.coupling,
        "efficiency_points": data.points,
        "efficiency_fits": data.fits,
    }
    for key, frame in frames.items():
        frame.to_csv(folder / TABLE[key], index=False)
    back = FigureData.read(folder)
    assert back.R0 == 0.5
    pd.testing.assert_frame_equal(back.effects, data.effects, check_exact=True)
    paths = write_figures(Design.of(CONFIG), folder, tmp_path / "figures")
    declared = Tree(tmp_path).stage_figures("std_scaling").values()
    assert sorted(map(str, paths)) == sorted(declared)
    assert {p.name for p in (tmp_path / "figures" / "std_scaling").iterdir()} == {
        Path(p).name for p in declared
    }


def synthetic_efficiency() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Curve points of two cells x two seeds on a known ScaleRL curve, and their fits: every run
    of REF identified, OTHER's seed 1 not."""
    from grpo_ablation.analysis.efficiency import scalerl_curve

    points, fits = [], []
    for cell in (REF, OTHER):
        for seed in (0, 1):
            for step in (1, 2, 4, 8, 16):
                tokens = 100.0 * step
                acc = float(scalerl_curve(tokens, 0.5, 0.8, 1.0, 400.0))
                points.append(
                    {
                        "stage": "std_scaling",
                        "cell": cell,
                        "seed": seed,
                        "step": step,
                        "generated_tokens": tokens,
                        "completions": 8 * step,
                        "accuracy": acc,
                    }
                )
            ok = cell == REF or seed == 0
            fits.append(
                {
                    "stage": "std_scaling",
                    "cell": cell,
                    "seed": seed,
                    "efficiency_identified": float(ok),
                    "efficiency_A": 0.8,
                    "efficiency_B": 1.0,
                    "efficiency_C_mid": 400.0,
                }
            )
    return pd.DataFrame(points), pd.DataFrame(fits)


def test_efficiency_figure_draws_a_curve_for_identified_fits_only():
    points, fits = synthetic_efficiency()
    palette = per_stage.cell_palette([REF, OTHER])
    fig = per_stage.efficiency_figure(points, fits, 0.5, palette)
    ref_ax, other_ax = fig.axes[:2]
    curves = [[ln for ln in ax.get_lines() if len(ln.get_xdata()) == 100] for ax in fig.axes[:2]]
    assert [len(c) for c in curves] == [2, 1]
    assert " ".join(ref_ax.get_title().split()).startswith(cell_label(REF))  # wrapped
    assert "2 of 2 fits identified" in ref_ax.get_title()
    assert "1 of 2 fits identified" in other_ax.get_title()


def test_accuracy_figure_draws_each_cell_in_its_palette_colour():
    curves, _ = synthetic_frames()
    palette = per_stage.cell_palette([REF, OTHER, "std=none/agg=constant/G=4"])
    fig = per_stage.accuracy_figure(curves, palette)
    colours = {line.get_label(): line.get_color() for line in fig.axes[0].get_lines()}
    assert colours[cell_label(REF)] == palette[REF]
    assert colours[cell_label(OTHER)] == palette[OTHER]


def test_a_run_with_one_checkpoint_is_drawn_as_points_not_a_line():
    """The base policy at step 0 and one saved checkpoint: two points, each with its interval as
    an error bar, and neither a line nor a band between them; three or more points are joined,
    their interval a band."""
    from matplotlib.collections import LineCollection, PolyCollection

    curves, _ = synthetic_frames()
    palette = per_stage.cell_palette([REF, OTHER])
    steps = sorted(curves["step"].unique())
    assert len(steps) > 2
    for kept, style, curve in ((steps[:2], "None", False), (steps, "-", True)):
        fig = per_stage.accuracy_figure(curves[curves["step"].isin(kept)], palette)
        ax = fig.axes[0]
        drawn = {line.get_label(): line for line in ax.get_lines()}
        assert drawn[cell_label(REF)].get_linestyle() == style
        assert drawn[cell_label(REF)].get_marker() == "o"
        bands = [c for c in ax.collections if isinstance(c, PolyCollection)]
        bars = [c for c in ax.collections if isinstance(c, LineCollection)]
        assert (len(bands) > 0, len(bars) > 0) == (curve, not curve)


def test_cells_whose_groups_failed_scoring_are_flagged():
    runs = run_rows({REF: [0.2, 0.4, 0.6], OTHER: [0.3, 0.5, 0.7]})
    runs.loc[runs["cell"] == REF, "fraction_failed_scoring"] = 0.0
    runs.loc[runs["cell"] == OTHER, "fraction_failed_scoring"] = 1.0
    flags = result_tables.scoring_flags(
        result_tables.results_table(runs, {"greedy": 0.1, "sampled": 0.05})
    )
    assert flags == [
        f"**Scoring failed** in 100% of the groups of ``{OTHER}`` (mean over seeds): "
        "those groups carried no reward signal."
    ]


def test_effects_are_the_results_tables_paired_differences():
    runs = run_rows({REF: [0.2, 0.4, 0.6], OTHER: [0.3, 0.5, 0.75]})
    table = result_tables.results_table(runs, {"greedy": 0.1, "sampled": 0.05})
    effects = result_tables.effects_table(table)
    assert list(effects["quantity"].unique()) == list(EFFECTS)
    rows = table.set_index("cell")
    for _, e in effects.iterrows():
        for stat in ("mean", "low", "high", "n"):
            expected = rows.loc[e["cell"], f"{e['quantity']}_diff_{stat}"]
            assert e[stat] == pytest.approx(expected, nan_ok=True), (e["quantity"], stat)
    other = effects[effects["cell"] == OTHER].set_index("quantity")
    # greedy differences 0.1, 0.1, 0.15: mean 0.117 [0.045, 0.188], above zero
    assert other.loc["greedy_final", "mean"] == pytest.approx(0.35 / 3)
    assert other.loc["greedy_final", "excludes_zero"]
    ref = effects[effects["is_reference"]]
    assert set(ref["cell"]) == {REF} and (ref["mean"] == 0).all() and not ref["excludes_zero"].any()


def test_an_interval_of_zero_width_never_excludes_zero():
    from grpo_ablation.analysis.stats import Interval

    assert not Interval(0.05, 0.05, 0.05, 3).excludes_zero()
    assert Interval(0.05, 0.01, 0.09, 3).excludes_zero()
    # every seed's greedy difference is +0.1 exactly: a zero-width interval, not "excludes zero"
    runs = run_rows({REF: [0.2, 0.4, 0.6], OTHER: [0.3, 0.5, 0.7]})
    effects = result_tables.effects_table(
        result_tables.results_table(runs, {"greedy": 0.1, "sampled": 0.05})
    )
    greedy = effects[(effects["cell"] == OTHER) & (effects["quantity"] == "greedy_final")].iloc[0]
    assert greedy["low"] == pytest.approx(greedy["high"]) == pytest.approx(0.1)
    assert not greedy["excludes_zero"]


def test_the_results_table_has_the_columns_its_schema_lists():
    import json
    from pathlib import Path

    import jsonschema

    columns = json.loads((Path(__file__).parent / "schemas/csv_columns.schema.json").read_text())
    schema = columns["properties"]["tables/results.csv"]
    runs = run_rows({REF: [0.2, 0.4, 0.6], OTHER: [0.3, 0.5, 0.75]})
    table = result_tables.results_table(runs, {"greedy": 0.1, "sampled": 0.05})
    jsonschema.validate(list(table.columns), schema)
    # the late accuracy, defined for every run, is paired like any other quantity: +0.1/3 + ...
    other = table.set_index("cell").loc[OTHER]
    assert other["efficiency_late_diff_n"] == 3
    assert other["efficiency_late_diff_mean"] == pytest.approx((0.1 + 0.1 + 0.15) / 3 / 3)


def effect_row(
    cell: str, quantity: str, mean: float, low: float, high: float, n: int = 3, **more
) -> dict:
    """One row of an effects table (``more`` overrides or adds columns)."""
    return {
        "stage": "aggregation",
        "stage_title": "stage 2: length aggregation",
        "cell": cell,
        "label": cell_label(cell),
        "reference": REF,
        "is_reference": cell == REF,
        "quantity": quantity,
        "metric": EFFECTS[quantity],
        "mean": mean,
        "low": low,
        "high": high,
        "n": n,
        "excludes_zero": low > 0 or high < 0,
        **more,
    }


def test_the_reading_names_the_intervals_that_exclude_zero_and_counts_the_others():
    effects = pd.DataFrame(
        [
            effect_row(REF, "greedy_final", 0.0, 0.0, 0.0),
            effect_row(REF, "length_incorrect_late", 0.0, 0.0, 0.0),
            effect_row(OTHER, "greedy_final", 0.05, -0.02, 0.12),  # includes zero
            effect_row(OTHER, "length_incorrect_late", -0.8, -1.2, -0.4),  # excludes it
        ]
    )
    text = effects_reading(effects)
    assert text.startswith("**Stage 2: length aggregation**") and "over 3 seeds" in text
    assert "1 of 2 contrasts excludes zero" in text
    assert (
        "``population / sequence_mean / G=4``: lower incorrect-completion length, last ¼ of "
        "steps (tokens), -0.80 [-1.20, -0.40]"
    ) in text
    assert "greedy" not in text.split("excludes zero", 1)[1].split("The other")[0]
    assert "The other one includes zero" in text
    # one stage, one paragraph; then the count over all stages next to the chance rate
    stage, overall = text.strip().split("\n\n")
    assert "(0.10 expected by chance with no effect at all)" in stage
    assert overall.startswith(
        "**Exploratory contrasts in all**: 1 of 2 distinct contrasts exclude zero, 0.10"
    )


def test_the_reading_says_when_nothing_can_be_read():
    none_excluding = pd.DataFrame(
        [effect_row(REF, "greedy_final", 0, 0, 0), effect_row(OTHER, "greedy_final", 0.1, -1, 1)]
    )
    assert "Exploratory: no interval excludes zero, all 1 contrasts include it" in effects_reading(
        none_excluding
    )
    one_seed = pd.DataFrame(
        [
            effect_row(REF, "greedy_final", 0, math.nan, math.nan, 1),
            effect_row(OTHER, "greedy_final", 0.1, math.nan, math.nan, 1),
        ]
    )
    text = effects_reading(one_seed)
    assert "over 1 seed " in text and "nothing here can be read as an effect" in text


def test_effects_figure_draws_each_contrast_at_its_mean_with_a_zero_line():
    effects = synthetic_effects()
    palette = per_stage.cell_palette([REF, OTHER])
    fig = per_stage.effects_figure(effects, palette)
    # titles wrap at word boundaries only, so neighbouring panels' titles never meet
    assert [" ".join(ax.get_title().split()) for ax in fig.axes] == list(EFFECTS.values())
    greedy = effects[(effects["cell"] == OTHER) & (effects["quantity"] == "greedy_final")].iloc[0]
    xs = [x for line in fig.axes[0].get_lines() for x in line.get_xdata()]
    assert greedy["mean"] in xs and greedy["low"] in xs and greedy["high"] in xs
    assert any(list(line.get_xdata()) == [0, 0] for line in fig.axes[0].get_lines())  # zero line


def test_smoothing_window_adapts_to_short_runs_and_smooths_within_each_run():
    assert curves.smoothing_window(200) == 10
    assert curves.smoothing_window(20) == 5
    assert curves.smoothing_window(4) == 1  # the smoke config: left as it is
    frame = pd.DataFrame(
        {
            "cell": ["a"] * 4 + ["b"] * 4,
            "seed": [0] * 8,
            "step": [0, 1, 2, 3] * 2,
            "y": [0.0, 3.0, 0.0, 3.0, 10.0, 10.0, 10.0, 10.0],
        }
    )
    out = curves.smooth(frame, ["y"], 3).set_index(["cell", "step"])["y"]
    assert out["a", 1] == pytest.approx(1.0) and out["a", 0] == pytest.approx(1.5)
    assert (out["b"] == 10).all()  # no mixing across runs
    assert curves.smoothing_label(1) == "unsmoothed"
    assert curves.smoothing_label(10) == "rolling mean over 10 steps"


def test_axes_fit_the_data_not_the_interval():
    low, high = per_stage.fit_limits([3.1, 4.9, 4.0])
    assert 2.9 < low < 3.1 and 4.9 < high < 5.1
    assert per_stage.fit_limits([math.nan]) is None
    low, high = per_stage.fit_limits([0.0, 0.0], floor=0.0)  # a fraction that stayed at zero
    assert -0.01 < low < 0 < high
    _, steps = synthetic_frames()
    steps.loc[steps["seed"] == 1, "length/incorrect"] = 9.0  # two seeds far apart: a wide band
    fig = per_stage.length_figure(steps, per_stage.cell_palette([REF, OTHER]))
    bottom, top = fig.axes[0].get_ylim()
    assert bottom > 3.5 and top < 9.5  # the runs span 4..9; the t band (t = 12.7) is cut


def calibration_groups() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "cell": [REF] * 4,
            "seed": [0, 0, 1, 1],
            "step": [0, 50, 0, 50],
            "failed": [False, False, False, True],
            "predicted": [0.12, 0.18, 0.55, 0.9],
            "observed": [0, 1, 1, 1],
        }
    )


def test_calibration_bins_pair_predicted_and_observed_mixed_fractions():
    groups = calibration_groups().assign(stage="x")
    bins = calibration.calibration_bins(groups).set_index("bin")
    # the group with a scoring failure is left out
    assert list(bins.index) == [1, 5] and list(bins["groups"]) == [2, 1]
    assert bins.loc[1, "predicted"] == pytest.approx(0.15)
    assert bins.loc[1, "observed"] == pytest.approx(0.5)
    # Wilson interval of 1 in 2: 0.5 ± 0.405 (centre 0.5)
    assert bins.loc[1, "low"] == pytest.approx(0.0945, abs=1e-4)
    assert bins.loc[1, "high"] == pytest.approx(0.9055, abs=1e-4)
    fig = per_stage.mixed_figure(bins.reset_index(), [REF], per_stage.cell_palette([REF]))
    # every group of a bin mixed: the Wilson bound meets the fraction (no negative bar)
    all_mixed = pd.DataFrame(
        {"cell": [REF] * 10, "failed": [False] * 10, "predicted": [0.9] * 10, "observed": [1] * 10}
    )
    mixed_bins = calibration.calibration_bins(all_mixed.assign(stage="x"))
    assert mixed_bins["high"].item() == pytest.approx(1.0) and mixed_bins["observed"].item() == 1.0
    per_stage.mixed_figure(mixed_bins, [REF], per_stage.cell_palette([REF]))
    identity = fig.axes[0].get_lines()[0]
    assert list(identity.get_xdata()) == list(identity.get_ydata())


def test_the_results_table_reads_back_exactly_so_figures_recompute_no_contrast(tmp_path):
    runs = run_rows({REF: [0.2, 0.4, 0.6], OTHER: [0.3, 0.5, 0.75]})
    table = result_tables.results_table(runs, {"greedy": 0.1, "sampled": 0.05})
    table.to_csv(tmp_path / "results.csv", index=False)
    back = loading.read_results(tmp_path / "results.csv")
    pd.testing.assert_frame_equal(back, table, check_exact=True)  # every float, bit for bit
    assert back.loc[back["cell"] == result_tables.BASE_LABEL, "reference"].item() == ""
    pd.testing.assert_frame_equal(
        result_tables.effects_table(back), result_tables.effects_table(table)
    )


def test_a_stage_named_like_a_missing_value_keeps_its_name(tmp_path):
    runs = run_rows({REF: [0.2, 0.4], OTHER: [0.3, 0.5]}).assign(stage="NA")
    table = result_tables.results_table(runs, {"greedy": 0.1, "sampled": 0.05})
    table.to_csv(tmp_path / "results.csv", index=False)
    back = loading.read_results(tmp_path / "results.csv")
    assert set(back["stage"]) == {"NA"}
    pd.testing.assert_frame_equal(back, table, check_exact=True)


def test_the_overlap_check_fires_on_overlapping_text_and_names_it(tmp_path):
    """Every figure is checked when saved (saving.save): texts that run into one another (here two
    panels' titles, then crowded tick labels) stop the job, naming the figure and the strings, and
    nothing is written; the same texts laid out apart pass."""
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(4, 2))
    left.set_title("a long title that runs on into the next panel")
    right.set_title("the title of the next panel, also long")
    with pytest.raises(saving.OverlapError) as caught:
        saving.save(fig, tmp_path / "crowded")
    message = str(caught.value)
    assert "crowded" in message
    assert "'a long title that runs on into the next panel'" in message
    assert "'the title of the next panel, also long'" in message
    assert list(tmp_path.iterdir()) == []
    fig, ax = plt.subplots(figsize=(2, 2))
    ax.set_xticks([0.0, 0.1], ["a long tick label", "another long tick label"])
    assert any("tick label" in a and "tick label" in b for a, b in saving.overlaps(fig))
    plt.close(fig)
    fig, (left, right) = plt.subplots(1, 2, figsize=(14, 2))
    left.set_title("a long title that runs on into the next panel")
    right.set_title("the title of the next panel, also long")
    fig.suptitle("the figure's title")
    fig.tight_layout()
    assert [p.name for p in saving.save(fig, tmp_path / "apart")] == ["apart.png", "apart.pdf"]


def test_a_legend_over_data_is_refused_when_saved(tmp_path):
    """A legend keeps clear of the data (saving.save checks every figure): one laid over a line's
    points, an error bar or a bar stops the job, naming the figure, the legend and what it covers,
    and nothing is written. A reference line or span across the panel (axhline, axvspan) is not
    data, and a legend below the panels covers nothing."""
    import matplotlib.pyplot as plt

    def panel():
        fig, ax = plt.subplots(figsize=(4, 3))
        ax.plot([0, 1, 2], [0, 1, 2], "o-", label="the curve")
        ax.set_title("a panel")
        return fig, ax

    fig, ax = panel()
    ax.legend(loc="center")
    with pytest.raises(saving.OverlapError) as caught:
        saving.save(fig, tmp_path / "covered")
    message = str(caught.value)
    assert "covered" in message and "legend [the curve] over Line2D 'the curve'" in message
    assert list(tmp_path.iterdir()) == []
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.errorbar([0.5], [0.5], yerr=[0.4], fmt="none", label="an error bar")
    ax.set(xlim=(0, 1), ylim=(0, 1), title="error bars")
    ax.legend(loc="center")
    # the bar itself (a LineCollection), not only its point: here it has none (fmt="none")
    assert [w.split()[0] for _, w in saving.legend_overlaps(fig)] == ["LineCollection"]
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.bar([0, 1], [1, 1], width=1.0, label="bars")
    ax.set_title("bars")
    ax.legend(loc="center")
    assert saving.legend_overlaps(fig), "a legend over a bar covers it"
    plt.close(fig)
    fig, ax = panel()
    ax.axhline(1.5, label="a reference")
    ax.axvspan(0.1, 0.4, alpha=0.2)
    ax.legend(loc="upper left")  # over the reference line and span, clear of the curve
    assert saving.legend_overlaps(fig) == []
    plt.close(fig)
    fig, ax = panel()
    fig.legend(loc="lower center")
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    assert [p.name for p in saving.save(fig, tmp_path / "below")] == ["below.png", "below.pdf"]


def test_a_figure_without_a_title_is_not_saved(tmp_path):
    """A figure says what it shows: a suptitle, or its one panel's title; else nothing is written."""
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(8, 2))
    left.set_title("one panel")
    right.set_title("another")
    with pytest.raises(ValueError, match="untitled has no title"):
        saving.save(fig, tmp_path / "untitled")
    assert list(tmp_path.iterdir()) == []
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.set_title("the one panel's title")
    assert [p.name for p in saving.save(fig, tmp_path / "one")] == ["one.png", "one.pdf"]


def test_a_figure_drawn_again_is_the_same_file(tmp_path):
    """No creation date in the PDF (matplotlib writes one by default): regenerated figures do
    not differ from the last ones."""
    import matplotlib.pyplot as plt

    for name in ("first", "again"):
        fig, ax = plt.subplots(figsize=(3, 2))
        ax.plot([0, 1], [1, 0])
        ax.set_title("a panel")
        saving.save(fig, tmp_path / name)
    pdf = (tmp_path / "first.pdf").read_bytes()
    assert b"/CreationDate" not in pdf
    assert pdf == (tmp_path / "again.pdf").read_bytes()
    assert (tmp_path / "first.png").read_bytes() == (tmp_path / "again.png").read_bytes()


def test_a_figure_title_is_wrapped_to_the_figure_width():
    import matplotlib.pyplot as plt

    title = "Declared hypotheses pooled over 2 base-policy draws: each 90% interval over the draws"
    for width in (3.0, 7.5):
        fig = plt.figure(figsize=(width, 2))
        per_stage.suptitle(fig, title + " against its margin or minimum effect")
        text = fig.get_suptitle()
        assert text.replace("\n", " ").startswith(title)
        extent = fig._suptitle.get_window_extent(fig.canvas.get_renderer())
        assert extent.width <= fig.bbox.width
        plt.close(fig)
    fig = plt.figure(figsize=(3.0, 2))
    fig.suptitle(title, fontsize=9)  # unwrapped, as it was: wider than the figure
    assert fig._suptitle.get_window_extent(fig.canvas.get_renderer()).width > fig.bbox.width
    plt.close(fig)


def test_the_effect_plot_wraps_long_titles_and_says_its_seeds_once():
    effects = synthetic_effects()
    fig = per_stage.effects_figure(effects, per_stage.cell_palette([REF, OTHER]))
    assert saving.overlaps(fig) == []
    titles = [ax.get_title() for ax in fig.axes]
    assert all(len(line) <= per_stage.TITLE_CHARACTERS for t in titles for line in t.split("\n"))
    notes = [t.get_text() for t in fig.texts]
    assert any("mean over 3 seed pairs" in t for t in notes), notes
    # one seed: said once, under the panels, not beside every point
    one = effects.assign(n=1, low=math.nan, high=math.nan)
    fig = per_stage.effects_figure(one, per_stage.cell_palette([REF, OTHER]))
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert not any("no interval" in t for t in texts)
    assert any("one seed pair" in t.get_text() for t in fig.texts)


def test_the_effect_plot_is_legible_at_the_width_a_report_shows_it():
    """The report fits a figure to its page, about 1,000 px: every label of the five-panel effect
    plot (ticks, titles, the note) stays at least 9 px high there, whatever the number of cells."""
    import matplotlib.pyplot as plt
    from matplotlib.text import Text

    effects = synthetic_effects()
    fig = per_stage.effects_figure(effects, per_stage.cell_palette([REF, OTHER]))
    assert len(fig.axes) == len(EFFECTS)
    fig.canvas.draw()
    width = fig.get_figwidth()
    texts = [
        t
        for t in fig.findobj(Text)
        if t.get_visible() and t.get_text().strip() and t.get_window_extent().width > 0
    ]
    smallest = min(t.get_fontsize() for t in texts) * 1000 / (72 * width)
    assert smallest >= 9, (round(smallest, 1), width)
    plt.close(fig)


POOLED_HYPOTHESES = [
    {
        "id": "population_equals_sample",
        "kind": "equivalence",
        "stage": "std_scaling",
        "cell": "population",
        "metric": "greedy_final",
        "margin": 0.05,
        "source": "test",
    },
    {
        "id": "population_raises_sampled",
        "kind": "directional",
        "stage": "std_scaling",
        "cell": "population",
        "metric": "sampled_final",
        "direction": "higher",
        "minimum_effect": 0.01,
        "source": "test",
    },
    {
        "id": "population_shortens_incorrect",
        "kind": "directional",
        "stage": "std_scaling",
        "cell": "population",
        "metric": "length_incorrect_late",
        "direction": "lower",
        "minimum_effect": 0.1,
        "source": "test",
    },
]


def pooled_design(hypotheses: bool = True) -> Design:
    """The std scaling stage under three base-policy draws of one seed each."""
    return Design.of(
        {
            **CONFIG,
            "seeds": [0],
            "stages": {"std_scaling": CONFIG["stages"]["std_scaling"]},
            "base_policy": {"kind": "local", "draws": [9, 10, 11]},
            "hypotheses": POOLED_HYPOTHESES if hypotheses else [],
        }
    )


def pooled_tables(design: Design, folder: Path) -> dict[str, pd.DataFrame]:
    """The pooled job's effects, draws and hypotheses tables (``jobs.pooled.write_pooled``'s own
    functions) of runs whose difference is 0.022, 0.019 and 0.026 in the three draws."""
    gaps = {9: 0.022, 10: 0.019, 11: 0.026}
    runs = pd.concat(
        [
            run_rows({REF: [0.4 + d / 100], OTHER: [0.4 + d / 100 + gap]}).assign(draw=d)
            for d, gap in gaps.items()
        ],
        ignore_index=True,
    )
    pooled = draws.draw_means(runs)
    table = result_tables.results_table(pooled, {"greedy": 0.1, "sampled": 0.05})
    rows = design.rows()
    out = {
        "effects": result_tables.effects_table(table, None, contrast_roles(design, rows)),
        "draws": draws.per_draw_contrasts(runs),
        "hypotheses": hypotheses.verdicts_table(declared(design), pooled, rows, design),
    }
    folder.mkdir(parents=True, exist_ok=True)
    for key, frame in out.items():
        frame.to_csv(folder / POOLED_TABLE[key], index=False)
    return out


def test_the_pooled_figures_job_draws_the_pooled_tables_into_its_declared_files(tmp_path):
    for declared_hypotheses in (True, False):
        design = pooled_design(declared_hypotheses)
        out = tmp_path / str(declared_hypotheses)
        pooled_tables(design, out / "tables")
        paths = write_pooled_figures(design, out / "tables", out)
        assert list(map(str, paths)) == Tree(out).pooled_figures(
            ["std_scaling"], declared_hypotheses
        )
        assert all(p.stat().st_size > 1000 for p in paths)


def test_the_effect_plot_over_draws_shows_each_draw_faintly_and_the_interval_over_draws(tmp_path):
    design = pooled_design()
    frames = pooled_tables(design, tmp_path)
    palette = per_stage.cell_palette(design.all_cells())
    fig = per_stage.effects_figure(frames["effects"], palette, frames["draws"])
    greedy = fig.axes[0]
    faint = [
        x for line in greedy.get_lines() if (line.get_alpha() or 1) < 1 for x in line.get_xdata()
    ]
    assert sorted(faint) == pytest.approx([0.019, 0.022, 0.026])
    pooled = frames["effects"].set_index(["cell", "quantity"]).loc[(OTHER, "greedy_final")]
    assert pooled["n"] == 3 and pooled["mean"] == pytest.approx((0.019 + 0.022 + 0.026) / 3)
    drawn = [x for line in greedy.get_lines() for x in line.get_xdata()]
    assert pooled["low"] in drawn and pooled["high"] in drawn
    note = " ".join(t.get_text() for t in fig.texts)
    assert "mean over 3 base-policy draws" in note and "its one seed" in note
    assert saving.overlaps(fig) == []


def test_the_verdict_figure_draws_each_interval_against_its_margin_or_minimum_effect(tmp_path):
    from matplotlib.colors import to_hex

    design = pooled_design()
    verdicts = pooled_tables(design, tmp_path)["hypotheses"]
    # the three verdicts, so that the colours are seen to differ
    assert list(verdicts["verdict"]) == ["supported", "inconclusive", "refuted"]
    declared_ = {h.id: h for h in declared(design)}
    fig = over_draws.verdicts_figure(verdicts, declared_)
    assert len(fig.axes) == len(verdicts)
    for ax, (_, v) in zip(fig.axes, verdicts.iterrows(), strict=True):
        h = declared_[v["id"]]
        assert ax.get_title(loc="left").startswith(f"{v['id']}: {v['verdict']}")
        (bar,) = [
            line
            for line in ax.get_lines()
            if list(line.get_xdata()) == pytest.approx([v["low90"], v["high90"]])
        ]
        assert to_hex(bar.get_color()) == over_draws.VERDICT_COLOURS[v["verdict"]]
        dashed = sorted(
            line.get_xdata()[0] for line in ax.get_lines() if line.get_linestyle() == "--"
        )
        bounds = (
            [-h.margin, h.margin] if h.kind == "equivalence" else [h.direction * h.minimum_effect]
        )
        assert dashed == pytest.approx(bounds)
        ticks = [line.get_xdata()[0] for line in ax.get_lines() if line.get_marker() == "|"]
        mde = v["mde"] * (1 if h.kind == "equivalence" else h.direction)
        lo, hi = ax.get_xlim()
        if lo <= mde <= hi:
            assert mde == pytest.approx(max(ticks) if h.direction >= 0 else min(ticks))
        else:  # off the axis: at its edge, with its value
            assert any(f"MDE {mde:+.3g}" in t.get_text() for t in ax.texts)
    assert saving.overlaps(fig) == []


# -- tables for people: every number rounded by what it holds (render.kind_of) ------------------
def test_the_results_table_shows_accuracies_to_3_decimals_and_lengths_to_2():
    table = result_tables.results_table(
        run_rows({REF: [0.2, 0.4, 0.6], OTHER: [0.3, 0.5, 0.71]}), {"greedy": 0.1, "sampled": 0.05}
    )
    shown = result_tables.display_table(table).set_index("cell")
    ref, other = shown.loc[REF + " (ref.)"], shown.loc[OTHER]
    # length_incorrect_late = 5 + greedy: 5.4 over the reference's seeds
    r = table.set_index("cell").loc[REF]
    low, high = r["length_incorrect_late_low"], r["length_incorrect_late_high"]
    assert ref["length incorrect, last ¼ of steps"] == f"5.40 [{low:.2f}, {high:.2f}]"
    assert ref["final greedy acc."].startswith("0.400 [")
    assert shown.loc[result_tables.BASE_LABEL, "final greedy acc."] == "0.100"  # one stage: one row
    assert other["Δ final greedy vs ref."].startswith("+0.103 [")
    assert other["generated tokens"] == "100" and other["seeds"] == 3


def test_a_written_csv_keeps_full_precision_while_its_markdown_is_rounded(tmp_path):
    from grpo_ablation.analysis import efficiency

    runs = run_rows({REF: [0.2, 0.4, 0.6], OTHER: [0.3, 0.5, 0.71]}).assign(
        efficiency_status=efficiency.FIT, efficiency_reason=""
    )
    curves = efficiency.efficiency_table(
        result_tables.results_table(runs, {"greedy": 0.1, "sampled": 0.05}), runs
    )
    result_tables.write_efficiency(curves, tmp_path, "caption")
    csv = (tmp_path / "efficiency.csv").read_text()
    assert csv == curves.to_csv(index=False)
    auc = float(curves.set_index("cell").loc[OTHER, "efficiency_auc_mean"])
    assert repr(auc) in csv and len(repr(auc)) > 6  # 0.5258333333333334
    md = (tmp_path / "efficiency.md").read_text()
    row = next(line for line in md.splitlines() if line.startswith(f"| std_scaling | {OTHER} |"))
    assert f"| {auc:.3f} [" in row and repr(auc) not in md
    # its HTML view (the report's item) shows the Markdown's numbers in a table
    view = (tmp_path / "efficiency.html").read_text()
    assert "<table>" in view and f">{auc:.3f} [" in view and repr(auc) not in view.split("href")[0]


def test_the_verdict_figure_stays_within_an_accuracys_range_and_marks_an_mde_beyond_it(tmp_path):
    """Two draws (1 df): an equivalence on an accuracy could be shown only within ±2.955, which
    no accuracy difference reaches. An MDE never sets the axis: each panel's is the one drawn
    without any MDE (within ±1 on an accuracy), the MDE marked at its edges with its value."""
    design = pooled_design()
    verdicts = pooled_tables(design, tmp_path)["hypotheses"]
    declared_ = {h.id: h for h in declared(design)}
    wide, none = verdicts.copy(), verdicts.copy()
    wide["mde"], none["mde"] = 2.955, math.nan
    fig = over_draws.verdicts_figure(wide, declared_)
    unmarked = over_draws.verdicts_figure(none, declared_)
    accuracies = 0
    for ax, bare, (_, v) in zip(fig.axes, unmarked.axes, wide.iterrows(), strict=True):
        assert ax.get_xlim() == bare.get_xlim()
        h = declared_[v["id"]]
        notes = [t.get_text() for t in ax.texts if "off this axis" in t.get_text()]
        ticks = [line for line in ax.get_lines() if line.get_marker() == "|"]
        assert len(notes) == (2 if h.kind == "equivalence" else 1) and not ticks
        assert all("2.96" in n for n in notes)
        if render.largest_difference(v["metric"]) == 1.0:
            accuracies += 1
            lo, hi = ax.get_xlim()
            assert lo >= -1 and hi <= 1
    assert accuracies
    assert saving.overlaps(fig) == []
