"""Base-policy draws in the design: each draw has its own base policy, cells and seeds; the
analysis pairs within a draw and pools over draws with the draw as the unit."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import (
    IMAGE_SIZES,
    LANDING,
    in_chromium,
    jobs,
    landing_report,
    page_text,
    rendered,
    report_items,
    snakemake,
)
from scipy import stats as scipy_stats

from grpo_ablation.analysis import draws, hypotheses, loading, result_tables
from grpo_ablation.analysis.jobs.pooled import write_pooled
from grpo_ablation.analysis.prose.draws import consistency_reading, pooled_opening
from grpo_ablation.analysis.prose.verdicts import verdicts_reading
from grpo_ablation.analysis.result_tables import results_table
from grpo_ablation.design import checks
from grpo_ablation.design import hypotheses as declarations
from grpo_ablation.design.ablation import Design, DesignError, run_seed
from grpo_ablation.design.quantities import EFFECTS, PAIRED
from grpo_ablation.layout import (
    LANDING_END,
    NEXT_LOOK,
    POOLED_READING,
    POOLED_READING_VIEW,
    POOLED_TABLES,
    READING,
    READING_VIEW,
    RECORDS,
    STAGE_FIGURES,
    TABLE,
    Tree,
)

ROOT = Path(__file__).resolve().parents[1]


def _runs(values: dict[tuple[str, int, int], float]) -> pd.DataFrame:
    """A runs table (every paired quantity = the value) of one stage with cells ref and b."""
    rows = []
    for (cell, draw, seed), v in values.items():
        rows.append(
            {
                "stage": "s",
                "cell": cell,
                "reference": "ref",
                "singles": (),
                "draw": draw,
                "seed": seed,
                **dict.fromkeys(PAIRED, v),
            }
        )
    return pd.DataFrame(rows)


# Two draws of two seeds: cell b minus ref is (0.10, 0.30) in draw 0 and (0.05, -0.05) in draw 1.
SMALL = {
    ("ref", 0, 0): 0.50,
    ("ref", 0, 1): 0.40,
    ("b", 0, 0): 0.60,
    ("b", 0, 1): 0.70,
    ("ref", 1, 0): 0.20,
    ("ref", 1, 1): 0.30,
    ("b", 1, 0): 0.25,
    ("b", 1, 1): 0.25,
}


def test_the_draw_blocked_interval_is_the_t_interval_over_draw_means():
    # By hand: draw means of the difference 0.20 and 0.00; mean 0.10, SD 0.1414, t(1) = 12.706,
    # half-width 12.706 * 0.1414 / sqrt(2) = 1.2706.
    pooled = draws.draw_means(_runs(SMALL))
    table = results_table(pooled, {"greedy": 0.1, "sampled": 0.1}).set_index("cell")
    row = table.loc["b"]
    assert row["greedy_final_diff_n"] == 2
    assert row["greedy_final_diff_mean"] == pytest.approx(0.10)
    half = scipy_stats.t.ppf(0.975, 1) * math.sqrt(0.02) / math.sqrt(2)
    assert half == pytest.approx(1.2706, abs=1e-4)
    assert row["greedy_final_diff_low"] == pytest.approx(0.10 - half)
    assert row["greedy_final_diff_high"] == pytest.approx(0.10 + half)
    # Not the interval over the four runs as if they were exchangeable (3 degrees of freedom).
    flat = results_table(_runs(SMALL).assign(seed=lambda f: f["draw"] * 10 + f["seed"]), {})
    assert flat.set_index("cell").loc["b", "greedy_final_diff_n"] == 4


def test_the_base_row_of_a_results_table_gives_back_the_base_accuracies_it_was_given():
    """The pooled job reads each draw's base policy from its results table's base row, every
    accuracy it was given (a missing external benchmark's NaN included), in order."""
    base = {"greedy": 0.25, "sampled": 0.125, "external_gsm8k": math.nan, "external_arc": 0.5}
    table = results_table(_runs(SMALL), base)
    read = result_tables.base_of(table)
    assert list(read) == list(base)
    assert all(read[k] == v or (math.isnan(read[k]) and math.isnan(v)) for k, v in base.items())


def test_a_value_missing_for_one_cell_drops_that_seed_for_the_whole_stage():
    # Every paired difference is +1.0, but ref lacks seed 1 of draw 0 (NaN): averaging each cell
    # over its own seeds would give draw 0 a difference of 0.5 + ... ; pairing keeps +1.0.
    values = {
        ("ref", 0, 0): 0.0,
        ("ref", 0, 1): math.nan,
        ("b", 0, 0): 1.0,
        ("b", 0, 1): 8.0,
        ("ref", 1, 0): 2.0,
        ("ref", 1, 1): 4.0,
        ("b", 1, 0): 3.0,
        ("b", 1, 1): 5.0,
    }
    table = results_table(draws.draw_means(_runs(values)), {}).set_index("cell")
    assert table.loc["b", "length_incorrect_late_diff_mean"] == pytest.approx(1.0)
    assert table.loc["b", "length_incorrect_late_diff_low"] == pytest.approx(1.0)


def test_an_unidentified_efficiency_fit_blanks_only_its_own_cell():
    """A fit parameter missing where its fit is not identified does not remove the other cells'
    (they would all lose draw 0 under the stage-wide pairing of the other quantities): a third
    cell c with no fit in draw 0 leaves b's A there, and b's ΔA pairs with ref over both draws."""
    values = {("ref", d, 0): 0.5 + d for d in (0, 1)} | {("b", d, 0): 0.6 + d for d in (0, 1)}
    values |= {("c", 0, 0): math.nan, ("c", 1, 0): 1.7}
    pooled = draws.draw_means(_runs(values))
    table = results_table(pooled, {}).set_index("cell")
    assert table.loc["b", "efficiency_A_diff_n"] == 2
    assert table.loc["b", "efficiency_A_diff_mean"] == pytest.approx(0.1)
    assert table.loc["c", "efficiency_A_diff_n"] == 1
    # the other paired quantities keep the stage-wide pairing: draw 0 is dropped for every cell,
    # the fit-free late accuracy (defined for every run) among them
    assert table.loc["b", "greedy_final_diff_n"] == 1
    assert table.loc["b", "efficiency_late_diff_n"] == 1


def test_each_draw_trains_its_seeds_with_seeds_of_its_own():
    assert run_seed(2, None) == 2
    assert run_seed(0, 3) == 3000 and run_seed(1, 3) == 3001
    config = {"base_policy": {"kind": "local", "draws": [3]}, "seeds": [0, 1000]}
    with pytest.raises(DesignError, match=r"seed must lie in \[0, 1000\)"):
        checks.check_draws(config)


def test_the_hypotheses_take_the_draw_as_their_unit():
    config = {
        "stages": {"s": {"vary": {"std_scaling": ["sample", "none"]}, "reference": "sample"}},
        "training": {},
        "hypotheses": {
            "h": {
                "kind": "equivalence",
                "stage": "s",
                "cell": "none",
                "metric": "greedy_final",
                "margin": 0.5,
                "source": "test",
            }
        },
    }
    design = Design.of(config)
    rows = design.rows()
    ref, cell = (r["cell"] for r in rows)
    frame = _runs(SMALL).replace({"cell": {"ref": ref, "b": cell}, "reference": {"ref": ref}})
    verdicts = hypotheses.verdicts_table(
        declarations.declared(design), draws.draw_means(frame), rows, design
    )
    assert int(verdicts.loc[0, "n"]) == 2 and verdicts.loc[0, "mean"] == pytest.approx(0.10)
    assert "over 2 draws" in verdicts_reading(verdicts, draws.UNIT)


def test_a_contrast_holds_across_draws_only_if_every_draw_agrees():
    effects = pd.DataFrame(
        [
            {
                "stage": "s",
                "cell": c,
                "label": c,
                "is_reference": False,
                "quantity": "greedy_final",
                "mean": m,
                "low": lo,
                "high": hi,
                "excludes_zero": lo > 0 or hi < 0,
                "role": "manipulation check" if c == "a" else "exploratory",
            }
            for c, m, lo, hi in [
                ("a", 0.1, 0.05, 0.15),
                ("b", 0.1, 0.02, 0.18),
                ("c", 0.1, -0.1, 0.3),
            ]
        ]
    )
    within = pd.DataFrame(
        [
            {"stage": "s", "cell": c, "quantity": "greedy_final", "draw": d, "mean": m}
            for c, ms in {"a": (0.1, 0.1, 0.1), "b": (0.2, 0.2, -0.1), "c": (0.1, 0.1, 0.1)}.items()
            for d, m in enumerate(ms)
        ]
    )
    table = draws.consistency(effects, within).set_index("cell")
    assert table["holds_across_draws"].to_dict() == {"a": True, "b": False, "c": False}
    assert table["same_sign"].to_dict() == {"a": 3, "b": 2, "c": 3}
    # one seed a draw: no interaction test, and no claim that a sign change would not carry
    assert table["interaction_p"].isna().all() and (table["seeds_per_draw"] == 1).all()
    text = consistency_reading(table.reset_index())
    assert "1 holds across draws" in text and "1 agrees in sign" in text
    assert "cannot separate draw-to-draw differences from seed noise" in text
    assert "change sign" not in text and "would not carry" not in text
    assert "+0.1 [+0.05, +0.15] (manipulation check)" in text


def test_the_interaction_f_test_by_hand():
    # d0: [1, 3], d1: [5, 7]: grand mean 4, MS_between = 2 (2-4)² + 2 (6-4)² over 1 = 16,
    # MS_within = (2 + 2) / 2 = 2, F = 8 on (1, 2) degrees of freedom.
    test = draws.interaction_test({0: [1.0, 3.0], 1: [5.0, 7.0]})
    assert test["F"] == pytest.approx(8.0)
    assert (test["df_between"], test["df_within"]) == (1, 2)
    assert test["p"] == pytest.approx(scipy_stats.f.sf(8, 1, 2))
    assert test["p"] == pytest.approx(0.1056, abs=1e-4)
    # unbalanced: the usual one-way ANOVA
    groups = {0: [0.1, 0.3, 0.2], 1: [0.5, 0.4], 2: [0.0, 0.1, -0.1, 0.05]}
    expected = scipy_stats.f_oneway(*groups.values())
    test = draws.interaction_test(groups)
    assert (test["F"], test["p"]) == pytest.approx((expected.statistic, expected.pvalue))
    # one seed in a draw, one draw, or no spread within draws: no test
    assert math.isnan(draws.interaction_test({0: [1.0], 1: [5.0, 7.0]})["p"])
    assert math.isnan(draws.interaction_test({0: [1.0, 3.0]})["p"])
    assert math.isnan(draws.interaction_test({0: [1.0, 1.0], 1: [5.0, 5.0]})["p"])


def test_with_two_seeds_a_draw_the_reading_tests_the_draw_by_cell_interaction():
    # SMALL: differences (0.10, 0.30) in draw 0, (0.05, -0.05) in draw 1: means 0.2 and 0.0,
    # MS_between = 2 (0.1² + 0.1²) = 0.04, MS_within = (0.02 + 0.005) / 2 = 0.0125, F = 3.2.
    runs = _runs(SMALL)
    table = results_table(draws.draw_means(runs), {"greedy": 0.1, "sampled": 0.1})
    within = draws.per_draw_contrasts(runs)
    assert within.set_index(["quantity", "draw"]).loc[("greedy_final", 0), "sd"] == pytest.approx(
        math.sqrt(0.02)
    )
    agreement = draws.consistency(result_tables.effects_table(table), within)
    assert len(agreement) == len(EFFECTS) and (agreement["seeds_per_draw"] == 2).all()
    assert agreement["interaction_p"].to_numpy() == pytest.approx(scipy_stats.f.sf(3.2, 1, 2))
    text = consistency_reading(agreement)
    assert "Draw × cell interaction" in text
    assert f"0 of {len(EFFECTS)} contrasts at α = 0.05, 0.25 expected by chance" in text
    assert "cannot separate" not in text and "would not carry" not in text


@pytest.mark.parametrize(
    "base, message",
    [
        ({"kind": "local", "seed": 1, "draws": [1, 2]}, "both seed and draws"),
        ({"kind": "hub", "name": "org/model", "draws": [1, 2]}, "kind local"),
        ({"kind": "local", "draws": [1, 1]}, "distinct"),
    ],
)
def test_draws_that_cannot_be_run_are_refused(base, message):
    with pytest.raises(DesignError, match=message):
        checks.check_draws({"base_policy": base})


def test_each_draw_is_its_base_policy_seed():
    # A design parses its stages only when asked: none are needed for the draws.
    config = {"experiment": "e", "base_policy": {"kind": "local", "draws": [3, 4], "sft_steps": 9}}
    assert Design.of(config).draws == [3, 4]
    assert checks.draw_base_policy(config, 4) == {"kind": "local", "seed": 4, "sft_steps": 9}
    assert Design.of(config).draw_dir(4) == Path("results/e/draw=4")
    one = {"experiment": "e", "base_policy": {"kind": "local", "seed": 2}}
    assert Design.of(one).draws == [] and Design.of(one).draw_dir(None) == Path("results/e")
    assert checks.draw_base_policy(one, None) == one["base_policy"]


@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    """The smoke config's std scaling stage under two draws of two seeds, end to end."""
    config = yaml.safe_load((ROOT / "config/smoke.yaml").read_text())
    config["experiment"] = "drawn"
    config["base_policy"]["draws"] = [0, 1]
    config["stages"] = {"std_scaling": config["stages"]["std_scaling"]}
    hyps = config["hypotheses"]
    config["hypotheses"] = {k: h for k, h in hyps.items() if h["stage"] == "std_scaling"}
    config["push"] = {"enabled": False}
    root = tmp_path_factory.mktemp("draws")
    config["results_dir"] = str(root)
    path = root / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    snakemake(path)
    snakemake(path, "--report", str(root / "report.html"))
    return config, root / "drawn"


@pytest.mark.slow
def test_draws_run_their_own_base_policies_on_the_shared_splits(drawn):
    config, exp = drawn
    assert (exp / "data/manifest.json").exists() and not list(exp.glob("draw=*/data"))
    bases = [json.loads((exp / f"draw={d}/base/base_policy.json").read_text()) for d in (0, 1)]
    weights = [(Path(b["model"]) / "model.safetensors").read_bytes() for b in bases]
    assert weights[0] != weights[1]  # two warm starts, two seeds
    for d in (0, 1):
        for s in config["seeds"]:
            assert (
                exp / f"draw={d}/eval/std=sample/agg=sequence_mean/G=4/seed={s}/test/summary.json"
            ).exists()
        assert (exp / f"draw={d}/tables/hypotheses.csv").exists()


@pytest.mark.slow
def test_the_pooled_tables_pair_within_draws_and_pool_over_them(drawn):
    _, exp = drawn
    per_draw = {
        d: pd.read_csv(exp / f"draw={d}/tables/results.csv").set_index(["stage", "cell"])
        for d in (0, 1)
    }
    # The pooled job writes the tables the DAG declares (layout.POOLED_TABLES), no more.
    assert sorted(p.name for p in (exp / "pooled/tables").iterdir()) == sorted(POOLED_TABLES)
    pooled = pd.read_csv(exp / "pooled/tables/results.csv").set_index(["stage", "cell"])
    key = ("std_scaling", "std=population/agg=sequence_mean/G=4")
    means = [per_draw[d].loc[key, "greedy_final_diff_mean"] for d in (0, 1)]
    assert pooled.loc[key, "greedy_final_diff_mean"] == pytest.approx(sum(means) / 2)
    assert pooled.loc[key, "greedy_final_diff_n"] == 2
    if means[0] != means[1]:
        half = scipy_stats.t.ppf(0.975, 1) * abs(means[0] - means[1]) / math.sqrt(2) / math.sqrt(2)
        assert pooled.loc[key, "greedy_final_diff_high"] == pytest.approx(sum(means) / 2 + half)
    verdicts = pd.read_csv(exp / "pooled/tables/hypotheses.csv")
    assert list(verdicts["id"]) == ["population_equals_sample"] and int(verdicts.loc[0, "n"]) == 2
    reading = (exp / "pooled/pooled_reading.rst").read_text()
    assert reading.startswith("**Declared hypotheses**") and "**Across draws** (2" in reading
    agreement = pd.read_csv(exp / "pooled/tables/agreement.csv")
    assert set(agreement["draws"]) == {2}


@pytest.mark.slow
def test_the_pooled_job_reads_each_draws_efficiency_fits_as_fitted(drawn):
    """The pooled job does not fit the curves again: what it reads back from a draw's tables is
    what fitting gives, reasons and types included."""
    _, exp = drawn
    design = Design.load(exp / "design.json")
    for d in design.draws:
        rows = draws.draw_rows(design, d)
        fitted = loading.load_runs(design.draw_dir(d), design, rows)
        read = loading.load_runs(design.draw_dir(d), design, rows, fitted=True)
        pd.testing.assert_frame_equal(read, fitted, check_exact=True)


@pytest.mark.slow
def test_the_pooled_job_reads_only_its_declared_inputs(drawn, tmp_path):
    """The pooled rule declares design.json and each draw's per-run, results and effects tables:
    given those files alone (no run's summary, selection, budget or fit), the pooled job writes
    what it wrote in the full tree, byte for byte; what it reads of a draw is what the draw's
    run files give (``load_runs``, the base policy's summary, the manipulation predictions)."""
    _, exp = drawn
    alone = tmp_path / exp.name
    alone.mkdir()
    shutil.copyfile(exp / "design.json", alone / "design.json")
    design = Design.load(alone / "design.json")
    for d in design.draws:
        for key in ("runs", "results", "effects"):
            target = Path(Tree(design.draw_dir(d)).table(TABLE[key]))
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(exp / f"draw={d}/tables" / TABLE[key], target)
    write_pooled(design, design.pooled_dir())
    for name in POOLED_TABLES:
        assert (alone / "pooled/tables" / name).read_bytes() == (
            exp / "pooled/tables" / name
        ).read_bytes(), name
    for name in (POOLED_READING, POOLED_READING_VIEW):
        assert (alone / "pooled" / name).read_bytes() == (exp / "pooled" / name).read_bytes()
    full = Design.load(exp / "design.json")
    for d in full.draws:
        read = draws.DrawInputs.of_tables(design, d)
        rows = draws.draw_rows(full, d)
        assert read.rows == rows
        runs = loading.load_runs(full.draw_dir(d), full, rows).assign(draw=d)
        pd.testing.assert_frame_equal(read.runs, runs, check_exact=True)
        assert read.base == loading.base_accuracy(full.draw_dir(d))
        predicted = hypotheses.manipulation_predictions(full.draw_dir(d), full, rows)
        assert read.predicted == {k: v for k, v in predicted.items() if not math.isnan(v)}


@pytest.mark.slow
def test_tables_without_a_runs_fit_are_refused_by_name(drawn, tmp_path):
    _, exp = drawn
    design = Design.load(exp / "design.json")
    draw = tmp_path / "draw"
    # the runs' records without their weights and rollouts
    weights = shutil.ignore_patterns("checkpoints", "curve", "rollouts", "push")
    shutil.copytree(design.draw_dir(0), draw, ignore=weights)
    fits = draw / "tables" / "efficiency_fits.csv"
    table = pd.read_csv(fits)
    table[table["seed"] != table["seed"].max()].to_csv(fits, index=False)
    with pytest.raises(ValueError, match=r"has no fit of .* run its tables job again"):
        loading.load_runs(draw, design, draws.draw_rows(design, 0), fitted=True)


@pytest.mark.slow
def test_the_pooled_figures_are_drawn_from_the_pooled_tables(drawn):
    """Each stage's effect plot over draws and the verdicts, the files layout declares, which the
    pooled figures job prints (it draws from the pooled tables: nothing is pooled again)."""
    _, exp = drawn
    declared = Tree(exp / "pooled").pooled_figures(["std_scaling"], True)
    assert sorted(map(str, (exp / "pooled/figures").rglob("*.*"))) == sorted(declared)
    assert all(Path(p).stat().st_size > 1000 for p in declared)
    printed = Path(Tree(exp).log("pooled_figures")).read_text().split()
    assert sorted(x for x in printed if x.startswith(str(exp))) == sorted(declared)


@pytest.mark.slow
def test_the_report_opens_with_the_reading_pooled_over_draws(drawn):
    import matplotlib.pyplot as plt

    _, exp = drawn
    page = in_chromium(
        exp.parent / "report.html",
        {
            "landing": LANDING,
            "pooled": "return categories['0. Pooled over draws'] || {};",
            "sizes": IMAGE_SIZES,
        },
        asynchronous=("sizes",),
    )
    landing = " ".join(page["landing"].split())
    # the reading up to its verdict table opens the landing page; the rest is a page of its own
    opening, rest = (exp / "pooled/pooled_reading.rst").read_text().split(LANDING_END)
    for paragraph in rendered(opening):
        assert paragraph in landing, paragraph
    assert "Declared hypotheses" in landing and "Stage 1:" not in landing
    assert "Stage 1:" in rest and "Across draws" in rest
    pooled = page["pooled"]
    assert pooled, "the pooled tables, figures and reading have a category of their own"
    # the pooled figures: the verdicts beside the pooled reading, each stage's effects by stage
    figures = Tree(exp / "pooled")
    assert figures.pooled_verdict_figures()["verdicts_png"] in pooled["0. reading and verdicts"]
    assert str(exp / "pooled/pooled_reading.html") in pooled["0. reading and verdicts"]
    assert (
        figures.pooled_stage_figures("std_scaling")["effects_png"] in pooled["stage 1: std scaling"]
    )
    # every figure decodes in the browser, the pooled ones among them (at their own size)
    sizes = page["sizes"]
    assert len(sizes) >= len(STAGE_FIGURES) + 1 + 2  # identical images are embedded once
    assert all(w > 0 and h > 0 for w, h in sizes), sizes
    for path in figures.pooled_figures(["std_scaling"], True):
        if path.endswith(".png"):
            height, width = plt.imread(path).shape[:2]
            assert [width, height] in sizes, path


# The top of the landing page's first table row, and the window's height.
FIRST_ROW = """
const row = document.querySelector('.prose table tbody tr');
return row ? [row.getBoundingClientRect().top, row.getBoundingClientRect().bottom,
              window.innerHeight] : null;
"""


@pytest.mark.slow
@pytest.mark.parametrize("width, height", [(1280, 800), (1920, 1080)])
def test_the_verdict_table_is_on_the_first_screen_of_the_report(drawn, width, height):
    """At common window sizes the landing page opens on the verdict table: its first row lies
    within the window as the report opens (a page taller than the window is cut at its top by
    the report viewer: the whole reading had put the title 4,275 px above the window)."""
    _, exp = drawn
    page = in_chromium(exp.parent / "report.html", {"row": FIRST_ROW}, size=(width, height))
    assert page["row"], "the landing page shows no verdict table"
    top, bottom, window = page["row"]
    assert top >= 0 and bottom <= window, page["row"]


# The landing page's verdict table as the window shows it (boxes: left, top, right, bottom): each
# row's and the drawings in it, the table's, the rule graph's (its element and its SVG), the
# window's size.
VERDICT_ROWS = """
const box = e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
const table = document.querySelector('.prose table');
if (!table) return null;
return {rows: [...table.querySelectorAll('tbody tr')].map(
          r => ({row: box(r), marks: [...r.querySelectorAll('svg.verdict-mark')].map(box)})),
        table: box(table),
        graph: [...document.querySelectorAll('#rulegraph, #rulegraph svg')].map(box),
        window: [window.innerWidth, window.innerHeight]};
"""


def check_first_screen(shown: dict | None, count: int) -> None:
    """The verdict table's ``count`` rows, each with its one drawing inside it, lie within the
    window as the report opens; the table is whole across it (not cut at its left by the viewer,
    which centres a page wider than it) and nothing of the rule graph lies over it."""
    assert shown, "the landing page shows no verdict table"
    width, height = shown["window"]
    rows = shown["rows"]
    assert len(rows) == count, rows
    assert rows[0]["row"][1] >= 0 and rows[-1]["row"][3] <= height, (rows[0], rows[-1], height)
    for r in rows:
        (mark,) = r["marks"]
        left, top, right, bottom = r["row"]
        assert left <= mark[0] < mark[2] <= right and top <= mark[1] < mark[3] <= bottom, r
    left, top, right, bottom = shown["table"]
    assert left >= 0 and right <= width, shown["table"]
    for g in shown["graph"]:
        apart = g[2] <= left or right <= g[0] or g[3] <= top or bottom <= g[1]
        assert apart, (g, shown["table"])


@pytest.mark.slow
@pytest.mark.parametrize("width, height", [(1280, 800), (1920, 1080)])
def test_the_verdict_drawings_are_on_the_first_screen_of_the_report(drawn, width, height):
    """Each row of the landing page's verdict table draws its verdict (the interval against the
    prediction: ``marks``), all within the window as the report opens at common sizes, clear of
    the rule graph (nine rows of the default config's: the test after this one)."""
    _, exp = drawn
    page = in_chromium(exp.parent / "report.html", {"rows": VERDICT_ROWS}, size=(width, height))
    check_first_screen(page["rows"], 1)


def default_verdicts(count: int) -> tuple[dict, pd.DataFrame]:
    """The default config (config/config.yaml) and the verdicts over draws of the first ``count``
    hypotheses it declares (nine), judged by the pooled job's functions on differences made up
    for 8 draws (a mix of verdicts): the table, without a run. The power columns are stood in
    for (an MDE of 2.5 observed SDs, as wide as what the design's would show): the TOST power's
    integrals take half a minute here."""
    import numpy as np

    from grpo_ablation.analysis.stats import sample_sd

    def power(declared, diffs, design, unit):
        return {
            h.id: {
                "unit": "replicate" if h.on_push else unit,
                "sd": sample_sd(diffs[h.id]),
                "mde": 2.5 * sample_sd(diffs[h.id]),
            }
            for h in declared
        }

    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    design = Design.of(config)
    declared = declarations.declared(design)[:count]
    rng = np.random.default_rng(0)
    shape = [(0.001, 0.01), (0.03, 0.01), (-0.3, 0.2), (-0.02, 0.01), (0.0, 0.02)]
    shape += [(0.0, 0.005), (0.05, 0.01), (0.004, 0.02), (-1.5, 1.0)]
    made = zip(declared, shape[:count], strict=True)
    diffs = {h.id: list(m + sd * rng.standard_normal(8)) for h, (m, sd) in made}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(hypotheses, "power_columns", power)
        return config, hypotheses.verdicts_of(declared, diffs, design.rows(), design, draws.UNIT)


@pytest.mark.parametrize("width, height", [(1280, 800), (1920, 1080)])
def test_nine_verdicts_and_their_drawings_fit_the_first_screen(tmp_path, width, height):
    """The default config's nine hypotheses: the landing page (the report template rendered as
    ``snakemake --report`` does, in Snakemake's report page, from the pooled reading of a made-up
    verdict table: conftest.landing_report) shows every row of the verdict table with its drawing
    within the first screen at 1280×800 and 1920×1080, the rule graph clear of the table (it had
    overprinted its last column; it goes under the table where both do not fit side by side)."""
    config, verdicts = default_verdicts(9)
    assert len(verdicts) == 9 and set(verdicts["verdict"]) == {
        "supported",
        "refuted",
        "inconclusive",
    }
    reading = pooled_opening(Design.of(config), verdicts)
    page = landing_report(reading, config, tmp_path)
    shown = in_chromium(page, {"rows": VERDICT_ROWS}, size=(width, height))
    check_first_screen(shown["rows"], 9)


@pytest.mark.slow
def test_no_legend_of_the_drawn_figures_covers_data(drawn, tmp_path):
    """saving.save refuses a figure whose legend covers a point, line, error bar, band or bar, so
    the run itself would have failed on one; drawn again here from the fixture's tables, each
    stage figure of a draw, the worked example and the pooled figures pass it, and legends were
    there to check."""
    from grpo_ablation.analysis.jobs.figures import write_figures, write_weight_figure
    from grpo_ablation.analysis.jobs.pooled_figures import write_pooled_figures
    from grpo_ablation.analysis.plots import saving

    _, exp = drawn
    design = Design.load(exp / "design.json")
    checked: dict[str, int] = {}

    def check(fig, name):
        assert saving.legend_overlaps(fig) == [], name
        checked[name] = len(fig.legends) + sum(ax.get_legend() is not None for ax in fig.axes)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(saving, "check_legends", check)
        write_figures(design, design.draw_dir(0) / "tables", tmp_path / "draw")
        write_weight_figure(exp / "calculations/token_weights.csv", tmp_path)
        write_pooled_figures(design, exp / "pooled/tables", tmp_path / "pooled")
    assert len(checked) == len(STAGE_FIGURES) + 1 + 2  # + the verdicts, effects
    assert sum(checked.values()) >= 5, checked


def test_the_landing_page_cuts_the_reading_where_the_reading_says():
    """The report template spells the reading's landing-page mark again: the same line; and the
    names of the readings' views (the report's items), whose RST lies beside them."""
    template = (ROOT / "workflow/report/workflow.rst").read_text()
    assert f'{{% set cut = "{LANDING_END}" %}}' in template
    assert LANDING_END in verdicts_reading(pd.DataFrame())
    for reading, view in ((POOLED_READING, POOLED_READING_VIEW), (READING, READING_VIEW)):
        assert f'res.name == "{view}"' in template
        assert Path(view).with_suffix(Path(reading).suffix).name == reading
    assert 'with_suffix(".rst")' in template


@pytest.mark.slow
def test_the_report_shows_the_pooled_verdict_table_and_reading_rendered(drawn):
    """The pooled verdicts (pooled/tables/hypotheses.html) are a table of the report's first
    category, one row per declared hypothesis with its verdict; the pooled results table and the
    pooled reading are HTML views too; hypotheses.rst holds what its name says."""
    from docutils.core import publish_doctree

    _, exp = drawn
    items = report_items(exp.parent / "report.html")
    pooled = {p: i for p, i in items.items() if i["labels"] and p.startswith(str(exp / "pooled"))}
    view = pooled[str(exp / "pooled/tables/hypotheses.html")]
    assert view["mime_type"] == "text/html" and view["labels"]["table"]
    verdicts = pd.read_csv(exp / "pooled/tables/hypotheses.csv")
    rows = re.findall(r"<tr>(.*?)</tr>", view["content"].split("Each in full")[1], re.S)
    assert len(rows) == len(verdicts) + 1  # its header, then one row per hypothesis
    for row, (_, v) in zip(rows[1:], verdicts.iterrows(), strict=True):
        assert f">{v['id']}<" in row and f">{v['verdict']}<" in row
    for name in ("results", "agreement", "efficiency"):  # every pooled table people read
        shown = pooled[str(exp / f"pooled/tables/{name}.html")]
        assert shown["mime_type"] == "text/html" and "<table>" in shown["content"], name
    reading = pooled[str(exp / "pooled" / POOLED_READING_VIEW)]
    text = page_text(reading["content"])
    assert "Across draws" in text and "**" not in text and "system-message" not in text
    # the verdicts' text is reStructuredText, named so, and parses as such
    rst = (exp / "pooled/tables/hypotheses.rst").read_text()
    tree = publish_doctree(rst, settings_overrides={"report_level": 5, "_disable_config": True})
    assert not list(tree.findall(lambda n: n.tagname == "system_message"))
    assert not (exp / "pooled/tables/hypotheses.md").exists()


@pytest.mark.slow  # starts Snakemake
def test_the_figures_target_plans_the_pooled_figures_the_report_opens_with(tmp_path):
    """`snakemake figures` on a design with draws rebuilds the pooled figures too (the verdict
    figure and each stage's effects over draws), not only each draw's own."""
    import re

    config = tmp_path / "config.yaml"
    default = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    config.write_text(yaml.safe_dump({**default, "results_dir": str(tmp_path / "results")}))
    done = snakemake(config, "-n", "figures", timeout=300)
    assert re.search(r"^pooled_figures\s+1\s*$", done.stdout + done.stderr, re.MULTILINE)


@pytest.mark.slow  # starts Snakemake
def test_snakemake_figures_redraws_the_pooled_figures_after_their_module_changes(drawn):
    """An edited pooled-figure module: `snakemake figures` draws the pooled figures again from the
    pooled tables, and trains, evaluates and pools nothing. (An edit, not a touch: Snakemake
    reruns a job for a newer input only when its content differs from what the job recorded.)
    The module's bytes and time are put back after."""
    _, exp = drawn
    figures = [Path(p) for p in Tree(exp / "pooled").pooled_figures(["std_scaling"], True)]
    before = {p: p.stat().st_mtime_ns for p in figures}
    module = ROOT / "src/grpo_ablation/analysis/plots/over_draws.py"
    text, kept = module.read_bytes(), module.stat()
    try:
        module.write_bytes(text + b"# an edit (tests/test_draws.py; undone when it ends)\n")
        done = snakemake(exp.parent / "config.yaml", "figures")
    finally:
        module.write_bytes(text)
        os.utime(module, ns=(kept.st_atime_ns, kept.st_mtime_ns))
    ran = jobs(done.stdout + done.stderr)
    assert "pooled_figures" in ran and not ran & {"train", "evaluate", "tables", "pooled"}, ran
    assert all(p.stat().st_mtime_ns > before[p] for p in figures)


@dataclass
class Studied:
    config: Path  # the study's config
    results: Path  # its results_dir: the drawn fixture's, which built look 1's two draws
    record: Path  # its tracked folder (studies/<name>)
    registered: Path  # a copy of that folder as registered: a fresh clone of its commit
    built: Path  # a copy of the results_dir as the drawn fixture left it
    first_override: str = ""  # the override look 1 wrote (studies/<name>/next.yaml)

    @property
    def tree(self) -> Tree:
        return Tree(self.results / "drawn")

    def build_look_1(self) -> None:
        """Look 1's two draws as its run built them (the drawn fixture's, where it built them:
        the paths its evaluations record are the same), less its design: the look's run writes
        the study's own."""
        shutil.rmtree(self.results, ignore_errors=True)
        shutil.copytree(self.built, self.results)
        Path(self.tree.design()).unlink()


@pytest.fixture(scope="module")
def studied(drawn, tmp_path_factory) -> Studied:
    """The drawn fixture's two draws as the first look of a study of two looks (two draws, then
    three), in its results folder; refused before registering; then each look one Snakemake run
    asked for its look's file, the second given the override the first wrote: the uninterrupted
    study. The tests after this one in the module find the drawn fixture's folder changed."""
    from grpo_ablation.design.registration import register
    from grpo_ablation.design.schema import load_config

    config, exp = drawn
    work = tmp_path_factory.mktemp("study")
    study = Studied(
        work / "study.yaml",
        exp.parent,
        work / "studies" / "drawn",
        work / "registered",
        work / "built",
    )
    shutil.copytree(study.results, study.built)
    study.build_look_1()
    plan = {"draws": [0, 1, 2], "looks": [2, 3], "record": str(study.record)}
    study.config.write_text(
        yaml.safe_dump({**config, "results_dir": str(study.results), "study": plan})
    )
    # refused before any job: the study is not registered
    with pytest.raises(AssertionError, match="is not registered"):
        snakemake(study.config, study.tree.study_look(2), "-n")
    # the fixture trained draws 0 and 1 before: registered here as if it had not
    register(load_config(study.config), [])
    shutil.copytree(study.record, study.registered)
    snakemake(study.config, study.tree.study_look(2))
    study.first_override = (study.record / NEXT_LOOK).read_text()
    snakemake([study.config, study.record / NEXT_LOOK], study.tree.study_look(3))
    shutil.copytree(study.record, work / "uninterrupted")
    return study


@pytest.mark.slow  # starts Snakemake
def test_a_study_runs_look_after_look_through_snakemake(studied, tmp_path):
    """Look 1 (1 df, a boundary near t = 160) continues and writes the next look's override
    (three draws, the open hypothesis); the run given that override trains the third draw and
    judges look 2, the last, which ends the study. Each draw's numbers are recorded in the
    study's folder as it finishes, and each look reads them there. An earlier look asked again is
    its record, not a new one; a look judged again on changed records, or on draws no look has,
    is refused, as is a look before the ones it follows."""
    from grpo_ablation.analysis.jobs.study_look import write_look
    from grpo_ablation.design.ledger import Ledger, LedgerError
    from grpo_ablation.design.records import RecordError, numbers_sha, read_records
    from grpo_ablation.design.schema import load_config

    tree, record = studied.tree, studied.record
    first = load_config(studied.config)
    study = {**first, "base_policy": {**first["base_policy"], "draws": [0, 1, 2]}}
    look1 = json.loads(Path(tree.study_look(2)).read_text())
    assert look1["look"] == 1 and look1["decisions"] == {"population_equals_sample": "continue"}
    following = yaml.safe_load(studied.first_override)
    assert following["base_policy"] == {"draws": [0, 1, 2]}
    assert following["hypotheses"] == {}  # none decided: the open one stays as declared
    look2 = json.loads(Path(tree.study_look(3)).read_text())
    assert look2["look"] == 2 and look2["draws"] == [0, 1, 2]
    assert look2["decisions"]["population_equals_sample"] != "continue"
    assert not (record / NEXT_LOOK).exists()
    assert Ledger(record / "ledger.jsonl").entries() == [look1, look2]
    # each look holds the numbers of each draw it read, as recorded
    registration = Ledger(record / "ledger.jsonl").registration()
    for d in (0, 1, 2):
        manifest = read_records(record / f"draw={d}", registration)
        assert look2["records"][str(d)] == numbers_sha(manifest)
        assert all("wall_time_s" not in p for p in manifest["numbers"])
    assert look1["records"] == {k: look2["records"][k] for k in ("0", "1")}
    assert write_look(Design.of(first)) == look1  # asked again: as recorded
    with pytest.raises(LedgerError, match=r"a look runs study\.draws"):
        write_look(Design.of({**study, "base_policy": {**first["base_policy"], "draws": [1]}}))
    fits = record / "draw=2" / "tables" / TABLE["efficiency_fits"]
    fits.write_text(fits.read_text() + "\n")
    try:
        with pytest.raises(RecordError, match="changed since its draw was recorded"):
            write_look(Design.of(study))
    finally:
        fits.write_text(fits.read_text()[:-1])
    assert Ledger(record / "ledger.jsonl").entries() == [look1, look2]
    # a look before the ones it follows, on the study as registered
    before = {**study, "study": {**study["study"], "record": str(tmp_path / "drawn")}}
    shutil.copytree(studied.registered, tmp_path / "drawn")
    with pytest.raises(LedgerError, match="look 2 needs looks 1 to 1 in the ledger first"):
        write_look(Design.of(before))


@pytest.mark.slow  # starts Snakemake
def test_a_study_continues_from_its_records_with_results_deleted(studied):
    """The same study from the study's folder as registered (a fresh clone of its commit), with
    results/ deleted between the looks and within look 2 (after its new draw was recorded, before
    it was judged): look 2 then trains nothing, reads every draw from the records, and the ledger
    is the uninterrupted study's byte for byte (its third draw trained twice: the numbers a
    rerun reproduces, the seconds recorded apart)."""
    tree, record = studied.tree, studied.record
    ledger = {name: (record / name).read_bytes() for name in ("ledger.jsonl", "ledger.head")}
    looks = {n: Path(tree.study_look(n)).read_bytes() for n in (2, 3)}
    draw2 = json.loads((record / "draw=2" / RECORDS).read_text())
    shutil.rmtree(record)
    shutil.copytree(studied.registered, record)
    # look 1's run: its two draws built (the drawn fixture's), recorded and judged
    studied.build_look_1()
    snakemake(studied.config, tree.study_look(2))
    override = record / NEXT_LOOK
    assert override.read_text() == studied.first_override
    shutil.rmtree(studied.results)  # between the looks
    both = [studied.config, override]
    snakemake(both, str(record / "draw=2" / RECORDS))
    shutil.rmtree(studied.results)  # within look 2: its new draw recorded, not yet judged
    planned = jobs(snakemake(both, tree.study_look(3), "-n").stdout)
    assert planned and not planned & {"base_policy", "train", "evaluate", "tables", "record_draw"}
    snakemake(both, tree.study_look(3))
    again = json.loads((record / "draw=2" / RECORDS).read_text())
    assert again["numbers"] == draw2["numbers"]  # its seconds apart: again["timing"] may differ
    assert {name: (record / name).read_bytes() for name in ledger} == ledger
    assert Path(tree.study_look(3)).read_bytes() == looks[3]


def test_a_replicated_reference_enters_each_draw_as_the_mean_of_its_runs():
    """The reference runs three times a draw (seeds 0, 1, 2), cell b once (seed 0): each draw's
    contrast is b − the mean of the three (draw 0: 0.60 − 0.50 = 0.10; draw 1: 0.25 − 0.30 =
    −0.05), mean 0.025 over the two draws."""
    replicated = {
        ("ref", 0, 0): 0.40,
        ("ref", 0, 1): 0.50,
        ("ref", 0, 2): 0.60,
        ("b", 0, 0): 0.60,
        ("ref", 1, 0): 0.20,
        ("ref", 1, 1): 0.30,
        ("ref", 1, 2): 0.40,
        ("b", 1, 0): 0.25,
    }
    table = results_table(draws.draw_means(_runs(replicated)), {}).set_index("cell")
    assert table.loc["b", "greedy_final_diff_n"] == 2
    assert table.loc["b", "greedy_final_diff_mean"] == pytest.approx(0.025)


def test_a_stage_may_run_its_reference_k_times_a_seed():
    config = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    config["stages"]["group_size"]["reference_replicates"] = 3
    design = Design.of(config)
    base = design.baseline().path  # the reference of group_size (G = 8) and of other stages
    assert design.seeds_of(base) == [0, 1, 2]
    assert design.seeds_of("std=sample/agg=sequence_mean/G=16") == [0]
    # the plan: the contrast's SD is that of a run against the mean of three, σ·√(2/3)
    (h,) = [h for h in declarations.declared(design) if h.id == "g16_lowers_greedy"]
    plan = declarations.Plan.of(design)
    assert plan.declared_sd(h) == pytest.approx(plan.sd["greedy_final"] * math.sqrt(2 / 3))
    (other,) = [h for h in declarations.declared(design) if h.id == "resample_raises_greedy"]
    assert plan.declared_sd(other) == plan.sd["greedy_final"]  # its stage is not replicated
    config["stages"]["aggregation"]["fixed"] = {"std_scaling": {"winner_of": "std_scaling"}}
    config["stages"]["aggregation"]["reference_replicates"] = 2
    with pytest.raises(DesignError, match="a stage that takes a winner has no reference cell"):
        _ = Design.of(config).stage_names  # parsing the stages refuses it


@pytest.mark.slow  # starts Snakemake
def test_the_dag_trains_a_replicated_reference_at_its_replicate_seeds(tmp_path):
    """Smoke's seeds 0 and 1, std_scaling's reference run twice a seed: its reference (the
    baseline) trains at seeds 0-3, population at 0 and 1 only."""
    from test_bad_input import dry_run

    # (aggregation's std fixed, so that no checkpoint defers the tables' inputs in a dry run)
    done = dry_run(
        tmp_path,
        stages__std_scaling__reference_replicates=2,
        stages__aggregation__fixed={"std_scaling": "sample"},
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    for seed in (0, 1, 2, 3):
        assert f"runs/std=sample/agg=sequence_mean/G=4/seed={seed}/run_info.json" in out
    assert "runs/std=population/agg=sequence_mean/G=4/seed=2/" not in out
    assert "runs/std=population/agg=sequence_mean/G=4/seed=1/run_info.json" in out
