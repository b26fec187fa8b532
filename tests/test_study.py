"""A study's looks: judged one at a time against the boundaries of the error spent so far, and
recorded in a ledger that no later look can rewrite."""

from __future__ import annotations

import copy
import math
from pathlib import Path

import pytest

from grpo_ablation.analysis import sequential as seq
from grpo_ablation.analysis.study import judge_look, levels
from grpo_ablation.design.hypotheses import Hypothesis, node_levels
from grpo_ablation.design.ledger import Ledger, LedgerError, open_hypotheses

LOWER = Hypothesis(
    id="lower",
    kind="directional",
    stage="s",
    cell=(("group_size", 16),),
    metric="greedy_final",
    source="a test",
    direction=-1,
    minimum_effect=0.0,
    expected_effect=0.02,
)
SAME = Hypothesis(
    id="same",
    kind="equivalence",
    stage="s",
    cell=(("std_scaling", "population"),),
    metric="greedy_final",
    source="a test",
    margin=0.02,
    expected_effect=0.0,
)
PLANNED = [10, 20, 30, 40]


def test_each_test_gets_its_share_of_the_level():
    # two hypotheses: four tests at 0.05 / 4; an equivalence's refute test is two-sided
    assert levels([LOWER, SAME]) == {"lower": (0.0125, 0.0125), "same": (0.0125, 0.00625)}


def test_a_decided_hypothesis_passes_its_level_and_a_gatekeeper_holds_all_of_it_first():
    """Holm's graph: one decided of three, the two open share α; a gatekeeper holds α alone
    while open (the others none), then the others share it."""
    ids = ["a", "b", "c"]
    assert node_levels(ids, set()) == pytest.approx({"a": 0.05 / 3, "b": 0.05 / 3, "c": 0.05 / 3})
    assert node_levels(ids, {"a"}) == {"b": 0.025, "c": 0.025}
    assert node_levels(ids, set(), gatekeeper="a") == {"a": 0.05, "b": 0.0, "c": 0.0}
    assert node_levels(ids, {"a"}, gatekeeper="a") == {"b": 0.025, "c": 0.025}
    assert levels([LOWER, SAME], gatekeeper="lower") == {"lower": (0.025, 0.025), "same": (0, 0)}


def test_a_look_decides_what_it_can_and_carries_the_rest():
    """Look 1 at 10 units: the directional effect (−0.1 ± 0.01: t ≈ 31.6 on 9 df) crosses the
    first boundary (Lan-DeMets O'Brien-Fleming at γ·0.0125, carried to 9 df) and is supported;
    the equivalence is too noisy to decide and continues, now at the whole α (its tests at
    0.025 and 0.0125). At look 2 the supported one keeps its verdict untested."""
    wiggle = [0.01 * (-1) ** i for i in range(10)]
    diffs = {"lower": [-0.1 + w for w in wiggle], "same": [0.05 * (-1) ** i for i in range(10)]}
    look1 = judge_look([LOWER, SAME], diffs, PLANNED, [])
    gamma = seq.carried_level(tuple(PLANNED), 0.0125)
    assert 0.9 < gamma < 1
    z1 = seq.spending_boundaries([0.25], gamma * 0.0125)[0]
    bounds = look1["boundaries"]["lower"]
    assert bounds["support_t"] == pytest.approx(seq.t_boundary(z1, 9)) and bounds["gamma"] == gamma
    stats = look1["statistics"]["lower"]
    assert stats["units"] == 10 and stats["df"] == 9
    assert stats["support_t"] == pytest.approx(0.1 / (0.01 * math.sqrt(10 / 9) / math.sqrt(10)))
    # the repeated confidence interval: mean ± the look's boundary × se
    half = bounds["support_t"] * stats["se"]
    assert stats["rci"] == pytest.approx([stats["mean"] - half, stats["mean"] + half])
    assert look1["decisions"] == {"lower": seq.SUPPORTED, "same": seq.CONTINUE}
    assert look1["levels"]["same"] == [0.025, 0.0125]  # the decided one's level passed on
    assert open_hypotheses(look1) == ["same"]
    diffs2 = {"lower": [], "same": [0.001 * (-1) ** i for i in range(20)]}
    look2 = judge_look([LOWER, SAME], diffs2, PLANNED, [look1])
    assert look2["decisions"]["lower"] == seq.SUPPORTED and "lower" not in look2["statistics"]
    # the equivalence: TOST t = (0.02 − 0)/se with se ≈ 0.000229: far beyond its boundary
    assert look2["decisions"]["same"] == seq.SUPPORTED


def test_a_level_passed_on_is_used_at_the_same_look():
    """One look of 10 units, two directional hypotheses, the second's t between its boundaries
    at α/4 (t_9 2.69) and α/2 (2.26): when the first is supported it passes its level on, and the
    second, judged again at the same look at α/2, is supported too; with the first undecided
    (t = 0) the second stays inconclusive."""
    from scipy import stats

    second = Hypothesis(**{**LOWER.__dict__, "id": "second"})
    t = (stats.t.isf(0.025, 9) + stats.t.isf(0.0125, 9)) / 2
    signs = [(-1) ** i for i in range(10)]
    se = seq.sample_sd(signs) / math.sqrt(10)
    diffs = {"lower": [-10.0 + 0.01 * x for x in signs], "second": [-t * se + x for x in signs]}
    record = judge_look([LOWER, second], diffs, [10], [])
    assert record["statistics"]["second"]["support_t"] == pytest.approx(t)
    assert record["decisions"] == {"lower": seq.SUPPORTED, "second": seq.SUPPORTED}
    assert record["levels"]["second"] == [0.025, 0.025]
    alone = judge_look([LOWER, second], {**diffs, "lower": [0.1 * x for x in signs]}, [10], [])
    assert alone["decisions"] == {"lower": seq.INCONCLUSIVE, "second": seq.INCONCLUSIVE}


def test_the_last_look_says_inconclusive_where_nothing_crossed():
    diffs = {"same": [0.05 * (-1) ** i for i in range(10)]}
    record = judge_look([SAME], diffs, [10], [])
    assert record["decisions"] == {"same": seq.INCONCLUSIVE}
    with pytest.raises(LedgerError, match="all are in the ledger"):
        judge_look([SAME], diffs, [10], [record])


def test_the_ledger_appends_looks_and_refuses_to_rewrite_one(tmp_path):
    ledger = Ledger(tmp_path / "study" / "ledger.jsonl")
    first = {"tables": {"draws.csv": "a" * 64}, "decisions": {"h": "continue"}}
    with pytest.raises(LedgerError, match="no registration line"):
        ledger.append(first, 1)
    ledger.open("r" * 64)
    with pytest.raises(LedgerError, match="cannot come before look 1"):
        ledger.append(first, 2)
    assert ledger.append(first, 1)["look"] == 1
    # the same look judged again on the same tables: the same line, kept once
    assert ledger.append(first, 1)["look"] == 1 and len(ledger.entries()) == 1
    # judged again with other numbers, or on other tables: refused
    with pytest.raises(LedgerError, match="the ledger keeps the first"):
        ledger.append({**first, "decisions": {"h": "supported"}}, 1)
    second = {"tables": {"draws.csv": "b" * 64}, "decisions": {"h": "supported"}}
    with pytest.raises(LedgerError, match="the ledger keeps the first"):
        ledger.append(second, 1)
    record = ledger.append(second, 2)
    assert record["look"] == 2 and record["previous"]
    assert ledger.append(first, 1)["look"] == 1  # an earlier look asked again: as recorded
    assert [e["look"] for e in ledger.entries()] == [1, 2]
    assert ledger.registration() == "r" * 64


def test_a_study_leaves_out_the_stages_marked_descriptive():
    from test_design import default_config

    from grpo_ablation.design.ablation import Design

    config = default_config()
    config["stages"]["lite_ppo"]["descriptive"] = True
    assert "lite_ppo" in Design.of(config).stage_names  # not a study: every enabled stage
    config["study"] = {"draws": [9, 10, 11], "looks": [2, 3]}
    assert "lite_ppo" not in Design.of(config).stage_names
    assert "dr_grpo" in Design.of(config).stage_names


def test_the_plan_of_a_study_gives_its_power_with_looks_and_the_draws_it_expects():
    """A directional hypothesis's power with the looks and the draws it expects to use (between
    the first look's and the last's); a push hypothesis's units are replicates, so it has none;
    a config without a study has no such columns."""
    from test_design import default_config

    from grpo_ablation.analysis.study import plan_with_looks as plan_rows
    from grpo_ablation.design.ablation import Design

    config = default_config()
    config["study"] = {"draws": list(range(12, 52)), "looks": [10, 20, 30, 40]}
    config["base_policy"]["draws"] = list(range(12, 22))
    rows = {r["id"]: r for r in plan_rows(Design.of(config))}
    big = rows["constant_push_shortens_incorrect"]
    assert "expected_draws" in big and math.isnan(big["expected_draws"])  # a push: replicates
    g16 = rows["g16_lowers_greedy"]
    assert 10 <= g16["expected_draws"] <= 40 and 0 < g16["power_with_looks"] < 1
    assert "expected_draws" not in plan_rows(Design.of(default_config()))[0]  # not a study


STUDIES = {"study": ["study.yaml"], "study_group_size": ["study.yaml", "study_group_size.yaml"]}


@pytest.mark.parametrize("name", STUDIES)
def test_the_projects_studies_are_powered_over_their_sds_uncertainty_and_gate_on_the_control(name):
    """config/study.yaml, an override of config/config.yaml, and config/study_group_size.yaml
    given after it, as declared: every hypothesis has an expected power of at least 80% over its
    planning SD's uncertainty (a directional one with the looks, simulated on t statistics; an
    equivalence at the study's most draws), every planning SD has its df, the positive control
    is the gatekeeper and its first look decides it with probability at least 0.95, and the
    first look trains the first quarter of the study's draws."""
    from grpo_ablation.analysis.study import plan_with_looks as plan_rows
    from grpo_ablation.design.ablation import Design
    from grpo_ablation.design.schema import load_config

    files = STUDIES[name]
    root = Path(__file__).resolve().parents[1]
    config = load_config([root / "config/config.yaml", *(root / "config" / f for f in files)])
    design = Design.of(config)
    study = design.sections["study"]
    assert config["experiment"] == name and len(study["draws"]) == study["looks"][-1]
    assert study["looks"] == [len(study["draws"]) * k // 4 for k in (1, 2, 3, 4)]
    assert design.draws == study["draws"][: study["looks"][0]]
    assert "dr_grpo" not in design.stage_names and "lite_ppo" not in design.stage_names
    assert study["gatekeeper"] == "lr0_lowers_greedy"
    rows = plan_rows(design)
    for r in rows:
        assert r["sd_df"] >= 5, r
        expected = (
            r["expected_power_with_looks"] if r["kind"] == "directional" else r["expected_power"]
        )
        assert expected >= 0.8, r
    (control,) = [r for r in rows if r["id"] == "lr0_lowers_greedy"]
    assert control["decided_at_look_1"] >= 0.95


def test_a_study_of_fewer_runs_a_draw_is_priced_at_the_measured_draws_mean_run():
    """A price measured on draws of 13 runs (config/study.yaml's first, 8.35 min, from the
    default's protocol) prices the study's draws of 8 runs (8 cells, no replicated reference) at
    8/13 of it; measured on the study's own draws of 8 runs, at the measurement itself."""
    from grpo_ablation.design.ablation import Design
    from grpo_ablation.design.hypotheses import Plan
    from grpo_ablation.design.schema import load_config

    root = Path(__file__).resolve().parents[1] / "config"
    config = load_config([root / "config.yaml", root / "study.yaml"])
    design = Design.of(config)
    runs = sum(len(design.seeds_of(path)) for path in design.all_cells())
    assert runs == 8 and config["power"]["runs_per_unit"] == 8
    assert Plan.of(design).minutes_per_unit == config["power"]["minutes_per_unit"]
    config["power"].update(minutes_per_unit=8.35, runs_per_unit=13)
    assert Plan.of(Design.of(config)).minutes_per_unit == pytest.approx(8.35 * 8 / 13)


def test_the_two_studies_share_no_draw_and_split_the_hypotheses():
    from grpo_ablation.design.ablation import Design
    from grpo_ablation.design.schema import load_config

    root = Path(__file__).resolve().parents[1] / "config"
    main = load_config([root / "config.yaml", root / "study.yaml"])
    group = load_config([root / "config.yaml", root / "study.yaml", root / "study_group_size.yaml"])
    assert not set(main["study"]["draws"]) & set(group["study"]["draws"])
    ids = [{h["id"] for h in Design.of(c).sections["hypotheses"]} for c in (main, group)]
    assert ids[0] & ids[1] == {"lr0_lowers_greedy"}  # the positive control in both
    assert {"g16_lowers_greedy", "resample_raises_greedy"} <= ids[1] - ids[0]


def test_the_group_size_study_plans_its_control_on_the_main_studys_first_look():
    """The positive control of config/study_group_size.yaml is planned on what config/study.yaml's
    look 1 measured of it in the same protocol (its ledger's statistics: mean, se, units): the
    SD of its per-draw differences on units − 1 df, naming look 1's draws, and an expected effect
    no larger than the measured one, in its direction; it gates the same graph and spending."""
    from grpo_ablation.design.ablation import Design
    from grpo_ablation.design.hypotheses import declared
    from grpo_ablation.design.schema import load_config

    root = Path(__file__).resolve().parents[1]
    config = root / "config"
    main = load_config([config / "config.yaml", config / "study.yaml"])
    group = load_config(
        [config / "config.yaml", *(config / f for f in STUDIES["study_group_size"])]
    )
    look1 = Ledger(root / "studies/study/ledger.jsonl").entries()[0]
    measured = look1["statistics"]["lr0_lowers_greedy"]
    (entry,) = group["power"]["sd"]["lr0_lowers_greedy"]
    assert entry["sd"] == pytest.approx(measured["se"] * math.sqrt(measured["units"]), abs=5e-5)
    assert entry["df"] == measured["units"] - 1 and entry["draws"] == look1["draws"]
    (control,) = [h for h in declared(Design.of(group)) if h.id == "lr0_lowers_greedy"]
    assert (
        control.direction * measured["mean"]
        >= control.expected_effect
        > 0.9 * abs(measured["mean"])
    )
    for key in ("gatekeeper", "spending"):
        assert group["study"][key] == main["study"][key]


def test_a_look_of_few_draws_is_planned_on_t_statistics():
    """config/study_reduced.yaml as it was planned and run on 2026-12-05 (no gatekeeper: each
    test at 0.0125): at its first look (4 draws, 3 df) the positive control needs t ≥ 13.8 where
    z needs 3.34. Planned on t statistics (the estimated SD's noise included) it stops at the
    first look with probability 0.53 and after 5.9 draws on average (the review's noncentral t:
    0.54 and 5.8; the z boundary carried to t with the SD taken as known had said 0.18 and 7.3).
    As the gatekeeper, at the whole α, it stops earlier."""
    from grpo_ablation.analysis.study import _stops
    from grpo_ablation.analysis.study import plan_with_looks as plan_rows
    from grpo_ablation.design.ablation import Design
    from grpo_ablation.design.hypotheses import declared
    from grpo_ablation.design.schema import load_config

    root = Path(__file__).resolve().parents[1]
    config = load_config([root / "config/config.yaml", root / "config/study_reduced.yaml"])
    gated = Design.of(copy.deepcopy(config))
    config["study"].pop("gatekeeper")
    design = Design.of(config)
    assert seq.t_boundary(3.3446, 3) == pytest.approx(13.8, abs=0.05)
    (control,) = [r for r in plan_rows(design) if r["id"] == "lr0_lowers_greedy"]
    assert 5.7 < control["expected_draws"] < 6.0 and control["power_with_looks"] > 0.99
    (h,) = [h for h in declared(design) if h.id == "lr0_lowers_greedy"]
    first, _ = _stops(design, h, math.nan)
    assert first[0] == pytest.approx(0.53, abs=0.02)
    assert control["decided_at_look_1"] < first[0]  # with the SD's own uncertainty (3 df)
    (gate,) = [r for r in plan_rows(gated) if r["id"] == "lr0_lowers_greedy"]
    assert gate["expected_draws"] < control["expected_draws"]


def test_the_pooled_reading_of_a_study_says_its_verdicts_are_not_the_studys():
    from grpo_ablation.analysis.prose.draws import study_note
    from grpo_ablation.design.ablation import Design
    from grpo_ablation.design.schema import load_config

    root = Path(__file__).resolve().parents[1]
    design = Design.of(
        load_config([root / "config/config.yaml", root / "config/study_reduced.yaml"])
    )
    note = study_note(design)
    assert "fixed-sample tests on the 4 draws trained so far" in note and "ledger" in note
    assert study_note(Design.of(load_config(root / "config/config.yaml"))) == ""


def test_a_look_judged_again_with_an_undefined_statistic_is_the_same_look(tmp_path):
    """A statistic with no spread is NaN; read back from the ledger it is another NaN object,
    and the look judged again on the same tables is still the look recorded."""
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.open("r" * 64)
    look = {"tables": {"t.csv": "a" * 64}, "statistics": {"h": {"support_t": math.nan}}}
    ledger.append(look, 1)
    assert ledger.append({**look, "statistics": {"h": {"support_t": float("nan")}}}, 1)["look"] == 1


def test_the_study_prices_each_look_by_the_stages_still_open():
    """config/study_reduced.yaml: 5 runs a draw (the baseline 3 times, lr 0, constant). Look 1
    trains all 5 in its 4 draws; before look 2 each stage is still needed with the probability
    that its hypothesis is still open (p for the control's, q for the length's), the shared
    baseline while either is: 4 draws of 3·(1 − (1 − p)(1 − q)) + p + q runs."""
    from grpo_ablation.analysis.study import _still_open, study_minutes
    from grpo_ablation.design.ablation import Design
    from grpo_ablation.design.schema import load_config

    root = Path(__file__).resolve().parents[1]
    design = Design.of(
        load_config([root / "config/config.yaml", root / "config/study_reduced.yaml"])
    )
    still = _still_open(design, 0.05)
    p, q = still["lr0_lowers_greedy"][0], still["constant_shortens_incorrect"][0]
    assert 0 < p < 1 and 0.95 < q < 1
    most, expected = study_minutes(design)
    second = 3 * (1 - (1 - p) * (1 - q)) + p + q
    assert expected / most == pytest.approx((4 * 5 + 4 * second) / (8 * 5))


def test_the_plan_command_prices_the_studys_first_look(capsys):
    """`grpo-ablation plan` of config/study.yaml: the first look trains every cell of its 28
    draws, 8 runs a draw, at the price measured again on the study's own draws (6.3 min a draw
    of 8 runs), and says where that price comes from after the registered source."""
    from grpo_ablation import cli

    root = Path(__file__).resolve().parents[1] / "config"
    cli.main(["plan", "--configfile", str(root / "config.yaml"), str(root / "study.yaml")])
    text = " ".join(capsys.readouterr().out.split())
    assert f"its first look (28 draws, every cell) {28 * 6.3:.0f} min" in text
    assert f"at most {112 * 6.3 / 60:.1f} h" in text
    assert "13 runs a draw; minutes measured again: this study's look-1 draws 36-39" in text


def test_the_verdict_table_reads_each_hypothesis_at_the_look_that_decided_it():
    """A decided hypothesis is reported at its deciding look (its Δ, repeated CI and draws then),
    an open one at the last look that judged it, one never judged as such; the coverage is
    1 − 2·level of the look."""
    from grpo_ablation.analysis.study import verdict_rows

    def h(metric, prediction):
        return {"cell": {"aggregation": "constant"}, "metric": metric, "prediction": prediction}

    registered = {
        "hypotheses": {
            "a": h("greedy_final", "lower than the reference by more than 0.01"),
            "b": h("sampled_final", "within ±0.02 of the reference"),
            "c": h("greedy_final", "higher"),
        }
    }
    look1 = {
        "look": 1,
        "draws": list(range(12, 40)),
        "levels": {"a": [0.025, 0.025], "b": [0.0125, 0.0125]},
        "statistics": {
            "a": {"units": 28, "mean": -0.2, "rci": [-0.31, -0.09]},
            "b": {"units": 28, "mean": 0.001, "rci": [-0.03, 0.032]},
        },
        "decisions": {"a": "supported", "b": "continue"},
    }
    look2 = {
        "look": 2,
        "draws": list(range(12, 68)),
        "levels": {"b": [0.025, 0.025]},
        "statistics": {"b": {"units": 56, "mean": 0.002, "rci": [-0.015, 0.019]}},
        "decisions": {"a": "supported", "b": "continue"},
    }
    a, b, c = verdict_rows(registered, [look1, look2])
    assert a["verdict"] == "**supported**" and a["look"] == "1" and a["draws"] == "28 (12-39)"
    assert a["Δ [repeated CI]"] == "-0.200 [-0.310, -0.090] (95.0%)"
    assert a["prediction"].startswith("aggregation=constant lower than the reference")
    assert b["verdict"] == "open (continues)" and b["look"] == "2" and b["draws"] == "56 (12-67)"
    assert b["Δ [repeated CI]"].endswith("(95.0%)")
    assert c["verdict"] == c["Δ [repeated CI]"] == "not judged yet"
