"""The smoke config end to end: every output exists and matches its schema, the tables and
figures are there, figures rebuild without retraining, and the report renders in Chromium."""

from __future__ import annotations

import base64
import gzip
import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pandas as pd
import pytest
import yaml
from conftest import IMAGE_SIZES, LANDING, in_chromium, jobs, page_text, rendered, report_items

from grpo_ablation.analysis import STAGE_FIGURES
from grpo_ablation.analysis.result_tables import BASE_LABEL
from grpo_ablation.design.ablation import Design, read_winners, reference_of
from grpo_ablation.design.quantities import EFFECTS
from grpo_ablation.layout import LANDING_END, READING, READING_VIEW, TABLES, Tree

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
SCHEMAS = Path(__file__).parent / "schemas"


def schema(name: str) -> dict:
    return json.loads((SCHEMAS / f"{name}.schema.json").read_text())


def check(path: Path, name: str) -> None:
    assert path.exists(), f"missing {path}"
    jsonschema.validate(json.loads(path.read_text()), schema(name))


@pytest.fixture(scope="module")
def design(smoke_pipeline):
    from snakemake.utils import validate

    config = yaml.safe_load((ROOT / "config/smoke.yaml").read_text())
    validate(config, str(ROOT / "workflow/schemas/config.schema.yaml"))  # fills the defaults
    winners = read_winners([smoke_pipeline.exp / "selection/std_scaling.json"])
    design = Design.of(config)
    stages = {s.name: (s, design.cells(s, winners)) for s in design.stages}
    return config, stages


def runs(design):
    config, stages = design
    cells = dict.fromkeys(c.path for _, cs in stages.values() for c in cs)
    return [(c, s) for c in cells for s in config["seeds"]]


def test_every_run_has_its_record_budget_rollouts_and_evaluations(smoke_pipeline, design):
    exp = smoke_pipeline.exp
    check(exp / "data/manifest.json", "manifest")
    check(exp / "selection/std_scaling.json", "selection")
    for split in ("test", "validation"):
        check(exp / f"eval/base/{split}/summary.json", "eval_summary")
    for cell, seed in runs(design):
        run = exp / f"runs/{cell}/seed={seed}"
        check(run / "run_info.json", "run_info")
        check(run / "budget.json", "budget")
        check(run / "objective.json", "objective")
        assert (run / "objective.md").read_text().strip()
        assert (
            list((run / "rollouts").glob("rank*.jsonl.gz"))
            and (run / "metrics.jsonl").stat().st_size
        )
        for split in ("test", "validation"):
            check(exp / f"eval/{cell}/seed={seed}/{split}/summary.json", "eval_summary")
        summary = json.loads((exp / f"diagnostics/{cell}/seed={seed}/summary.json").read_text())
        assert summary["groups"] > 0 and summary["objective"]["aggregation"] in cell


def test_every_run_has_its_efficiency_curve_and_the_table_counts_its_fit(smoke_pipeline, design):
    """The curve policies (training.curve_points) are scored on test: at the final step, where the
    curve policy is the final checkpoint's weights, the curve's value is the test summary's exact
    sampled accuracy (up to lm-eval's batching of the requests); the efficiency table has a
    row per cell and stage, each run counted as identified or with its reason."""
    import pandas as pd

    from grpo_ablation.design.options import curve_steps

    config, stages = design
    exp = smoke_pipeline.exp
    steps = curve_steps(config["training"]["max_steps"], config["training"]["curve_points"])
    assert len(steps) >= 4
    for cell, seed in runs(design):
        curve = json.loads((exp / f"eval/{cell}/seed={seed}/curve/curve.json").read_text())
        assert curve["metric"] == "exact"
        got = [p["step"] for p in curve["points"]]
        # mu > 1 rescales max_steps (the update-epochs stage): its own curve steps
        mu = json.loads((exp / f"runs/{cell}/seed={seed}/objective.json").read_text()).get(
            "num_iterations", 1
        )
        assert got == curve_steps(config["training"]["max_steps"] * mu, len(steps))
        final = json.loads((exp / f"eval/{cell}/seed={seed}/test/summary.json").read_text())
        last = final["checkpoints"][-1]
        assert last["step"] == got[-1]
        assert curve["points"][-1]["accuracy"] == pytest.approx(last["sampled_exact"], abs=1e-6)
    table = pd.read_csv(exp / "tables/efficiency.csv")
    rows = {(s, c.path) for s, (_, cs) in stages.items() for c in cs}
    assert set(zip(table["stage"], table["cell"], strict=True)) == rows
    assert (table["runs"] == len(config["seeds"])).all()
    unexplained = table[(table["identified"] < table["runs"]) & table["not_identified"].isna()]
    assert unexplained.empty, "every run without an identified fit says why"


def test_the_exact_sampled_accuracy_agrees_with_many_samples(smoke_pipeline, design, tmp_path):
    """On a trained checkpoint, mean@k over many samples per prompt lies within its binomial
    interval of the exact expected accuracy (which bounds P(correct) in [exact, exact + U])."""
    from grpo_ablation.evaluation.evaluate import evaluate_checkpoints
    from grpo_ablation.evaluation.task_folders import write_task

    exp, stages = smoke_pipeline.exp, design[1]
    summary = json.loads((exp / "eval/base/test/summary.json").read_text())["checkpoints"][0]
    assert summary["sampled_metric"] == "exact" and summary["sampled_accuracy"] > 0
    reference = next(c for c in stages["std_scaling"][1] if "std=sample" in c.path)
    final = json.loads((exp / f"eval/{reference.path}/seed=0/test/summary.json").read_text())[
        "checkpoints"
    ][-1]
    manifest = json.loads((exp / "tasks/test/manifest.json").read_text())
    k = 128  # the smoke checkpoints are barely trained: P(correct) is a few percent
    write_task(
        Path(manifest["test"]),
        tmp_path / "tasks",
        "many",
        manifest["max_gen_toks"],
        k,
        manifest["temperature"],
        exact=manifest["exact"],
    )
    got = evaluate_checkpoints(
        [(final["step"], Path(final["checkpoint"]))], tmp_path / "tasks", tmp_path / "out"
    )[0]
    rows = [
        json.loads(x)
        for x in (tmp_path / f"out/step={final['step']}/samples.jsonl").read_text().splitlines()
    ]
    exact = [r for r in rows if r["task"] == "exact"]
    n = len(exact)
    se = (sum(r["p_correct"] * (1 - r["p_correct"]) for r in exact) / k) ** 0.5 / n
    low, high = got["sampled_exact"], got["sampled_exact"] + got["sampled_exact_unresolved"]
    assert got["sampled_exact"] == pytest.approx(final["sampled_exact"], abs=1e-6)
    assert n * k * low >= 30 and se > 0  # enough correct samples for the interval to bite
    assert low - 3.5 * se <= got["sampled_mean_at_k"] <= high + 3.5 * se, (low, high, se, got)


def test_the_mixed_calibration_predicts_groups_it_never_saw(smoke_pipeline, design):
    """Every run's groups generated by a saved policy carry their prompts' exact P(correct) under
    that policy, and, over the reference cell's runs (independent draws; other cells share their
    step-0 groups), the observed number of mixed groups lies within 4 SD of the predicted sum
    (this fails if training sampled from another distribution than the one lm-eval scores, or if
    a checkpoint is paired with the wrong step)."""
    exp, stages = smoke_pipeline.exp, design[1]
    reference = next(c for c in stages["std_scaling"][1] if "std=sample" in c.path).path
    observed = predicted = variance = 0.0
    for cell, seed in runs(design):
        record = json.loads((exp / f"eval/{cell}/seed={seed}/calibration.json").read_text())
        assert record["measured"] and record["policy_steps"][0] == 0
        steps = {g["step"] for g in record["groups"]}
        assert 0 in steps and steps <= set(record["policy_steps"])
        for g in record["groups"] if cell == reference else []:
            if g["failed"]:
                continue
            p, G = g["p_correct"], g["size"]
            q = 1 - p**G - (1 - p) ** G
            observed += 0 < g["correct"] < G
            predicted, variance = predicted + q, variance + q * (1 - q)
    assert variance > 1  # enough uncertain groups for the check to bite
    assert abs(observed - predicted) <= 4 * variance**0.5, (observed, predicted, variance)
    table = pd.read_csv(exp / "tables/calibration.csv")
    assert len(table) == sum(len(cells) for _, cells in stages.values())
    assert "Mixed-group calibration" in (exp / "figures/reading.rst").read_text()


def test_every_cell_of_a_seed_starts_from_the_same_keyed_draws(smoke_pipeline, design):
    """Keyed sampling in the whole DAG: every cell with its reference's batch shape drew, at step
    0, exactly the reference's completions at each seed (both sample the base policy with the same
    keys), the coupling table and reading say how long that lasts, and the sampler is recorded."""
    exp = smoke_pipeline.exp
    for cell, seed in runs(design):
        objective = json.loads((exp / f"runs/{cell}/seed={seed}/objective.json").read_text())
        assert objective["sampler"].startswith("keyed Gumbel-max"), (cell, seed)
    steps = pd.read_csv(exp / "tables/coupling_steps.csv")
    table = pd.read_csv(exp / "tables/coupling.csv")
    compared = table[table["seeds"] > 0]
    first = steps[steps["step"] == 0]
    assert (first["identical"] == 1.0).all(), first[first["identical"] < 1.0]
    assert (compared["identical_step0"] == 1.0).all()
    # mu = 4 generates every 4 optimizer steps: compared generation by generation, not dropped;
    # G = 2 (another batch shape) is listed, not compared.
    assert any("mu=4" in c for c in compared["cell"])
    assert set(table.loc[table["seeds"] == 0, "cell"]) == {"std=sample/agg=sequence_mean/G=2"}
    reading = (exp / "figures/reading.rst").read_text()
    assert "Coupling of the cells' samples" in reading and "not compared" in reading


def test_the_push_is_measured_at_the_base_policy_and_the_final_checkpoint(smoke_pipeline):
    """push.json for the baseline cell's first seed, every choice at steps 0 and final; the
    directions the formulas call identical have cosine 1 up to the std's epsilon."""
    from grpo_ablation.analysis.push_tables import IDENTITIES
    from grpo_ablation.objective.conventions import AGGREGATIONS, SCALINGS

    exp = smoke_pipeline.exp
    table = pd.read_csv(exp / "tables/push.csv")
    assert sorted(table["step"].unique()) == [0, 4]
    assert table["choice"].nunique() == len(SCALINGS) * len(AGGREGATIONS)
    assert table[["accuracy", "incorrect_length", "mixed"]].notna().all().all()
    cosine = pd.read_csv(exp / "tables/push_cosine.csv").set_index(["a", "b"])
    for pair in IDENTITIES:
        assert (cosine.loc[pair, "cosine"] > 0.999).all(), pair
    assert (exp / "figures/push.png").stat().st_size > 1000
    assert "The push of each objective" in (exp / "figures/reading.rst").read_text()


def test_run_info_records_the_split_hashes(smoke_pipeline, design):
    manifest = json.loads((smoke_pipeline.exp / "data/manifest.json").read_text())
    hashes = {split: entry["sha256"] for split, entry in manifest["splits"].items()}
    for cell, seed in runs(design):
        info = json.loads(
            (smoke_pipeline.exp / f"runs/{cell}/seed={seed}/run_info.json").read_text()
        )
        assert info["split_hashes"] == hashes, (cell, seed)
        # every job ran with the CPU numerics pins (where they apply) and says so
        from grpo_ablation.numerics import CPU_PINS, has_avx2

        if has_avx2():
            assert info["compute"]["cpu_numerics"] == CPU_PINS, (cell, seed)


def test_csv_outputs_have_their_columns(smoke_pipeline, design):
    columns = schema("csv_columns")["properties"]
    exp = smoke_pipeline.exp
    files = {
        "tables/results.csv": [exp / "tables/results.csv"],
        "tables/objectives.csv": [exp / "tables/objectives.csv"],
        "tables/hypotheses.csv": [exp / "tables/hypotheses.csv"],
        "tables/coupling.csv": [exp / "tables/coupling.csv"],
        "tables/coupling_steps.csv": [exp / "tables/coupling_steps.csv"],
        "calculations/token_weights.csv": [exp / "calculations/token_weights.csv"],
        "diagnostics/<cell>/seed=<s>/steps.csv": [
            exp / f"diagnostics/{c}/seed={s}/steps.csv" for c, s in runs(design)
        ],
    }
    for key, paths in files.items():
        for path in paths:
            jsonschema.validate(list(pd.read_csv(path).columns), columns[key])


def test_results_table_has_one_row_per_cell_per_stage_and_the_base_policy(smoke_pipeline, design):
    config, stages = design
    table = pd.read_csv(smoke_pipeline.exp / "tables/results.csv")
    for name, (stage, cells) in stages.items():
        rows = table[table["stage"] == name]
        assert sorted(rows["cell"]) == sorted([BASE_LABEL, *(c.path for c in cells)])
        refs = {reference_of(stage, c, cells).path for c in cells}
        assert sorted(rows.loc[rows["is_reference"], "cell"]) == sorted(refs)
        trained = rows[rows["cell"] != BASE_LABEL]
        assert (trained["n_seeds"] == len(config["seeds"])).all()
        assert trained["greedy_final_diff_n"].eq(len(config["seeds"])).all()
    for name in ("results", "objectives"):
        for ext in ("md", "tex"):
            assert (smoke_pipeline.exp / f"tables/{name}.{ext}").stat().st_size > 100
    assert "advantage" not in " ".join(table.columns)


def test_figures_exist_as_png_and_pdf(smoke_pipeline, design):
    _, stages = design
    fig = smoke_pipeline.exp / "figures"
    paths = [
        fig / stage / f"{kind}.{ext}"
        for stage in stages
        for kind in STAGE_FIGURES
        for ext in ("png", "pdf")
    ]
    paths += [fig / "token_weights.png", fig / "token_weights.pdf"]
    for path in paths:
        assert path.exists() and path.stat().st_size > 1000, path


def test_effect_plots_show_the_results_tables_contrasts_and_the_reading_is_written(
    smoke_pipeline, design
):
    config, stages = design
    table = pd.read_csv(smoke_pipeline.exp / "tables/results.csv").set_index(["stage", "cell"])
    # one long effects table, written by the tables job; the figures and the reading read it
    every = pd.read_csv(smoke_pipeline.exp / "tables/effects.csv")
    assert list(dict.fromkeys(every["stage"])) == list(stages)
    for stage, (_, cells) in stages.items():
        effects = every[every["stage"] == stage]
        assert sorted(set(effects["cell"])) == sorted(c.path for c in cells)
        interaction = effects["quantity"].str.endswith("_interaction")
        assert list(dict.fromkeys(effects.loc[~interaction, "quantity"])) == list(EFFECTS)
        # a recipe cell two changes away from its reference also shows their interaction
        recipe = "std=none/agg=constant/G=4"
        assert set(effects.loc[interaction, "cell"]) == ({recipe} if stage == "dr_grpo" else set())
        for _, e in effects.iterrows():
            row = table.loc[(stage, e["cell"])]
            column = (
                e["quantity"] if e["quantity"].endswith("_interaction") else f"{e['quantity']}_diff"
            )
            for stat in ("mean", "low", "high", "n"):
                assert e[stat] == pytest.approx(row[f"{column}_{stat}"], nan_ok=True), (
                    stage,
                    e["cell"],
                    e["quantity"],
                    stat,
                )
        # every seed has a final accuracy; a length needs incorrect completions in that run
        accuracy = effects["quantity"].isin(["greedy_final", "sampled_final"])
        assert (effects.loc[accuracy, "n"] == len(config["seeds"])).all()
        assert (effects["n"] <= len(config["seeds"])).all()
    reading = (smoke_pipeline.exp / "figures/reading.rst").read_text()
    assert reading.count("**Stage ") == len(stages) and "seeds" in reading
    # The verdicts on the smoke config's declared hypotheses open the reading.
    verdicts = pd.read_csv(smoke_pipeline.exp / "tables/hypotheses.csv")
    assert list(verdicts["id"]) == list(config["hypotheses"])
    assert set(verdicts["verdict"]) <= {"supported", "refuted", "inconclusive"}
    on_push = verdicts["metric"].str.startswith("push_")
    assert (verdicts.loc[~on_push, "n"] == len(config["seeds"])).all()
    # a push hypothesis is judged on the push's replicates, at the policy it names: its n and
    # mean are those of push.json's replicates at the final checkpoint (a replicate whose update
    # has no direction, every group of its fold zero-variance, has no push)
    (pushed,) = smoke_pipeline.exp.glob("push/*/*/*/seed=0/push.json")
    final = max(json.loads(pushed.read_text())["policies"], key=lambda p: p["step"])
    diffs = [
        r["choices"]["none/constant"]["push"]["incorrect_length"]
        - r["choices"]["sample/sequence_mean"]["push"]["incorrect_length"]
        for r in final["replicates"]
    ]
    finite = [d for d in diffs if math.isfinite(d)]
    assert len(diffs) == config["push"]["replicates"]
    row = verdicts[on_push].iloc[0]
    assert row["n"] == len(finite) and row["policy"] == "final" and row["unit"] == "replicate"
    if finite:
        assert row["mean"] == pytest.approx(sum(finite) / len(finite))
    assert reading.startswith("**Declared hypotheses** (3,")
    assert reading.index("``dr_grpo_not_worse``: **") < reading.index("**Stage 1")
    assert "**Exploratory contrasts in all**" in reading
    # G's mixed-group contrast is a manipulation check, with the value the reference predicts
    g = every[every["stage"] == "group_size"]
    check = g[(g["quantity"] == "fraction_mixed") & ~g["is_reference"]]
    assert (check["role"] == "manipulation check").all() and check["predicted"].notna().all()
    assert "predicted" in reading.split("Manipulation checks", 1)[1]


def test_the_tables_and_figures_jobs_write_exactly_their_declared_outputs(smoke_pipeline, design):
    """Each job prints what it wrote: the tables job layout.TABLES, each stage's figures job its
    Tree.stage_figures, the files the DAG declares as the rules' outputs (from the same layout)."""
    _, stages = design
    tree = Tree(smoke_pipeline.exp)

    def printed(log: str) -> list[str]:
        lines = Path(log).read_text().splitlines()
        return sorted(x for x in lines if x.startswith(str(smoke_pipeline.exp)))

    assert printed(tree.log("tables")) == sorted(tree.tables().values())
    assert sorted(Path(p).name for p in tree.tables().values()) == sorted(TABLES)
    for stage in stages:
        assert printed(tree.log("figures", stage)) == sorted(tree.stage_figures(stage).values())
        folder = smoke_pipeline.exp / "figures" / stage
        assert sorted(map(str, folder.iterdir())) == sorted(tree.stage_figures(stage).values())


def test_no_nan_reaches_a_sentence_or_a_shown_table(smoke_pipeline):
    """Every reading and every table for people (.rst, .md, and the HTML views the report shows,
    as a reader sees them) the pipeline wrote: a value that is missing is said as such or left
    blank, never printed as "nan" (a NaN once read as a value gave "nan policy" sixteen times in
    a reading)."""
    exp = smoke_pipeline.exp
    written = [*exp.rglob("*.rst"), *exp.rglob("*.md"), *exp.rglob("*.html")]
    assert len([p for p in written if p.suffix == ".html"]) > 5
    found = {
        str(p.relative_to(exp)): re.findall(
            r".{0,40}\bnan\b.{0,20}",
            page_text(p.read_text()) if p.suffix == ".html" else p.read_text(),
            re.I,
        )
        for p in written
    }
    assert {p: hits for p, hits in found.items() if hits} == {}


def test_the_report_shows_its_tables_and_readings_as_rendered_pages(smoke_pipeline):
    """Every table of the report is its HTML view: a rendered table, its text rendered, and its
    CSV beside it to download, byte for byte; the reading is rendered too (no RST markup left).
    Nothing the report shows is a raw CSV, RST or Markdown download."""
    items = report_items(smoke_pipeline.report)
    tables = {p: i for p, i in items.items() if "table" in (i["labels"] or {})}
    assert len(tables) >= 6, sorted(i["name"] for i in items.values())
    for path, item in tables.items():
        page = item["content"]
        assert item["mime_type"] == "text/html" and "<table>" in page, path
        assert "system-message" not in page and "**" not in page_text(page), path
        csv = Path(path).with_suffix(".csv")
        link = re.search(rf'download="{csv.name}" href="data:text/csv;base64,([^"]+)"', page)
        assert link and base64.b64decode(link[1]) == csv.read_bytes(), path
    reading = next(i for p, i in items.items() if Path(p).name == READING_VIEW)
    assert reading["mime_type"] == "text/html"
    page = reading["content"]
    assert "<strong>Declared hypotheses</strong>" in page and "<table" in page
    assert "**" not in page_text(page) and "``" not in page_text(page)
    assert "system-message" not in page
    raw = {".csv", ".rst", ".md", ".txt"}
    downloads = [i["name"] for i in items.values() if Path(i["name"]).suffix in raw]
    assert downloads == []
    assert (smoke_pipeline.exp / "figures" / READING).exists()


def test_figures_rebuild_alone_without_retraining(smoke_pipeline):
    nothing = smoke_pipeline.snakemake("figures", "--dry-run")
    assert "Nothing to be done" in nothing.stdout + nothing.stderr
    trained = sorted(smoke_pipeline.exp.glob("runs/**/run_info.json"))
    before = {p: p.stat().st_mtime_ns for p in trained}
    done = smoke_pipeline.snakemake("figures", "--forcerun", "stage_figures", "token_weight_figure")
    assert jobs(done.stdout + done.stderr) <= {
        "stage_figures",
        "effects_reading",
        "token_weight_figure",
        "figures",
    }
    assert "stage_figures" in jobs(done.stdout + done.stderr)
    assert {p: p.stat().st_mtime_ns for p in trained} == before


def test_report_renders_in_headless_chromium_with_every_figure(smoke_pipeline, design):
    _, stages = design
    page = in_chromium(
        smoke_pipeline.report,
        {
            "sizes": IMAGE_SIZES,
            "landing": LANDING,
            "effects": "const c = categories['1. Effects'] || {};"
            "return Object.fromEntries(Object.entries(c).map(([k, v]) => [k, Object.keys(v)]));",
        },
        asynchronous=("sizes",),
    )
    text, sizes, landing, effects = (page[k] for k in ("body", "sizes", "landing", "effects"))
    assert text.strip(), "the report rendered an empty page"
    expected = len(stages) * len(STAGE_FIGURES) + 1  # + the worked token-weight example
    assert len(sizes) >= expected
    assert all(w > 0 and h > 0 for w, h in sizes), sizes
    # The landing page opens with the reading generated from the effect numbers, up to its
    # verdict table (the rest, from the verdicts in full to the effects, on its own page), and
    # the effect plots are the first category of the menu, one subcategory per stage.
    landing = " ".join(landing.split())
    reading = (smoke_pipeline.exp / "figures/reading.rst").read_text()
    opening, rest = reading.split(LANDING_END)
    for paragraph in rendered(opening):
        assert paragraph in landing, paragraph
    assert "Declared hypotheses" in landing and "Stage 1:" not in landing and "Stage 1:" in rest
    menu = text.split()
    assert menu.index("Effects") < menu.index("Appendix") < menu.index("Figures")
    config, _ = design
    for stage in stages:
        assert len(effects.get(Design.of(config).stage_title(stage), [])) == 1, effects


def test_the_smoke_dag_trains_over_two_processes(smoke_pipeline, tmp_path):
    """compute.processes_per_train_job: 2 runs every cell of the smoke DAG as two processes
    (torchrun, gloo): each run's objective says so; the baseline cell has the same prompts and
    budget as its one-process run, every group whole on one rank and logged once."""
    from conftest import remade_inputs, snakemake

    from grpo_ablation.training.rollout_log import read_rollouts

    config = yaml.safe_load((ROOT / "config/smoke.yaml").read_text())
    config.update(results_dir=str(tmp_path), compute={"processes_per_train_job": 2})
    # resampling selects over the whole batch in one process (refused with two): keep and filter
    config["stages"]["zero_variance"]["vary"]["zero_variance"] = ["keep", "filter"]
    path = tmp_path / "two.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    # Every cell on seed 0: the second seed trained the same code paths on other draws, in half
    # of this test's time.
    one_process = [
        p
        for p in smoke_pipeline.exp.glob("runs/**/seed=0/run_info.json")
        if "zv=resample" not in str(p)
    ]
    # Those training jobs, and one cell's evaluation; the rest of the DAG (every other evaluation,
    # tables, figures) reads the same files as after one process and runs in the one-process DAG.
    cell = "std=sample/agg=sequence_mean/G=4/seed=0"
    summary = tmp_path / f"smoke/eval/{cell}/test/summary.json"
    runs = [tmp_path / "smoke" / p.relative_to(smoke_pipeline.exp) for p in one_process]
    # The one-process DAG's inputs; its compute section differs in processes_per_train_job, which
    # only training reads: written for this config, dated as the one-process section.
    smoke_pipeline.copy_inputs(tmp_path / "smoke")
    compute = tmp_path / "smoke/config/compute.json"
    dated = compute.stat().st_mtime_ns
    compute.unlink()
    snakemake(path, str(compute))
    os.utime(compute, ns=(dated, dated))
    assert json.loads(compute.read_text())["processes_per_train_job"] == 2
    done = snakemake(path, *map(str, [*runs, summary]), timeout=1800)
    assert not remade_inputs(done.stdout + done.stderr)
    infos = sorted((tmp_path / "smoke/runs").rglob("run_info.json"))
    assert len(infos) == len(one_process)
    assert all(
        json.loads((i.parent / "objective.json").read_text())["num_processes"] == 2 for i in infos
    )
    two, one = tmp_path / f"smoke/runs/{cell}", smoke_pipeline.exp / f"runs/{cell}"
    rows, ref = read_rollouts(two / "rollouts"), read_rollouts(one / "rollouts")
    assert set(rows["rank"]) == {0, 1}
    assert not rows.duplicated(["step", "group_index", "completion_index"]).any()
    assert (rows.groupby(["step", "group_index"])["rank"].nunique() == 1).all(), "groups stay whole"
    assert (
        rows.groupby("step")["prompt_id"].apply(set) == ref.groupby("step")["prompt_id"].apply(set)
    ).all()
    b2, b1 = (json.loads((r / "budget.json").read_text()) for r in (two, one))
    assert {k: b2[k] for k in ("optimizer_steps", "completions", "prompts")} == {
        k: b1[k] for k in ("optimizer_steps", "completions", "prompts")
    }
    # Keyed sampling names each completion's noise by its slot in the whole batch, not on its rank:
    # at step 0 (the base policy on both sides) the two-process run draws the one-process run's
    # completions, up to rounding differences of the batch shapes.
    key = ["step", "group_index", "completion_index"]
    both = rows[rows["step"] == 0].merge(ref[ref["step"] == 0], on=key, suffixes=("", "_one"))
    assert len(both) == (ref["step"] == 0).sum()
    assert (both["completion"] == both["completion_one"]).mean() >= 0.9
    final = json.loads(summary.read_text())["checkpoints"][-1]
    assert 0 <= final["greedy_accuracy"] <= 1


def test_ratio_clipping_is_exactly_zero_at_one_update_epoch_and_active_at_four(smoke_pipeline):
    """mu = 1: the policy that sampled is the one updated, the ratio is exactly 1 and clipping
    never fires; mu = 4 re-uses each batch, the ratio leaves [0.8, 1.2] and clipping is active."""
    base = smoke_pipeline.exp / "diagnostics/std=sample/agg=sequence_mean/G=4"
    clip = ["ratio_clip/low", "ratio_clip/high"]
    for seed in (0, 1):
        one = pd.read_csv(base / f"seed={seed}/steps.csv")
        four = pd.read_csv(base / f"mu=4/seed={seed}/steps.csv")
        assert (one[clip].to_numpy() == 0).all()
        assert one["grad_norm"].gt(0).any()  # there was a gradient to clip
        assert four[clip].to_numpy().sum() > 0, four[clip]
        # gradient clipping (the norm, not the ratio) per step, from the logged norm at 1.0
        logged = one.dropna(subset=["grad_norm"])
        assert (logged["grad_clipped"] == (logged["grad_norm"] > 1 - 1e-6)).all()
        assert logged["grad_clip_factor"].between(0, 1).all()
    results = pd.read_csv(smoke_pipeline.exp / "tables/results.csv")
    assert {"grad_clipped_mean", "grad_clip_factor_mean"} <= set(results.columns)
    run = smoke_pipeline.exp / "runs/std=sample/agg=sequence_mean/G=4/mu=4/seed=0"
    record = json.loads((run / "objective.json").read_text())
    assert record["num_iterations"] == 4
    # the same completions as at mu = 1, four times the optimizer steps
    assert json.loads((run / "budget.json").read_text())["completions"] == 4 * 8


def test_kl_to_the_reference_is_recorded_per_step_only_with_a_kl_term(smoke_pipeline):
    exp = smoke_pipeline.exp
    for std in ("none", "sample"):
        cell = f"std={std}/agg=sequence_mean/G=4"
        with_kl = pd.read_csv(exp / f"diagnostics/{cell}/beta=0.04/seed=0/steps.csv")
        assert with_kl["kl"].iloc[0] == 0  # the policy starts at the reference
        assert with_kl["kl"].gt(0).any()
        record = json.loads((exp / f"runs/{cell}/beta=0.04/seed=0/objective.json").read_text())
        assert record["beta"] == 0.04 and record["kl_estimator"] == "k3"
        without = pd.read_csv(exp / f"diagnostics/{cell}/seed=0/steps.csv")
        assert "kl" not in without or without["kl"].isna().all()


def test_adding_an_axis_leaves_every_existing_output_up_to_date(smoke_pipeline, tmp_path):
    """The contributor's step, one declaration: append an axis to a copy of grpo_ablation.design.axes
    and plan the smoke DAG with it: the existing runs, evaluations and report inputs stay valid."""
    src = tmp_path / "src"
    shutil.copytree(ROOT / "src", src, ignore=shutil.ignore_patterns("__pycache__"))
    axes = src / "grpo_ablation/design/axes.py"
    text = axes.read_text()
    anchor = "\n)\nBY_NAME"
    assert anchor in text
    declaration = '    Axis("temperature", "temp", "sampling temperature", float, minimum=0.01),'
    axes.write_text(text.replace(anchor, f"\n{declaration}{anchor}", 1))
    env_path = f"{src}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"
    done = subprocess.run(
        [
            str(Path(sys.executable).with_name("snakemake")),
            "-n",
            "--cores",
            "2",
            "--configfile",
            "config/smoke.yaml",
            "--config",
            f"results_dir={smoke_pipeline.root}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={
            **os.environ,
            "PYTHONPATH": env_path,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        },
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    assert "Nothing to be done" in out, out[-3000:]
    # and the copy really declares the new axis (the test would prove nothing otherwise)
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "from grpo_ablation.design.axes import BY_NAME; print(sorted(BY_NAME))",
        ],
        env={**os.environ, "PYTHONPATH": env_path},
        capture_output=True,
        text=True,
        check=True,
    )
    assert "temperature" in probe.stdout


def test_planning_the_finished_dag_imports_no_heavy_library(smoke_pipeline):
    """With the selection checkpoint resolved, the report rules' inputs are planned too."""
    from test_boundaries import heavy_imports_of_a_dry_run

    assert heavy_imports_of_a_dry_run("config/smoke.yaml", smoke_pipeline.root) == []


def test_a_training_job_in_the_worker_writes_what_it_writes_in_its_own_process(
    smoke_pipeline, tmp_path
):
    """The smoke DAG trains in the local job worker (GRPO_WORKER=auto); the same job in its own
    process (GRPO_WORKER=off) gives the same rollouts, metrics and weights."""
    from safetensors.torch import load_file

    config = yaml.safe_load((ROOT / "config/smoke.yaml").read_text())
    from snakemake.utils import validate

    validate(config, str(ROOT / "workflow/schemas/config.schema.yaml"))
    cell = Design.of(config).parse_cell("std=sample/agg=sequence_mean/G=4")
    training = Design.of(config).training_config(cell, 1)
    exp = smoke_pipeline.exp
    in_worker = exp / f"runs/{cell.path}/seed=1"
    own = tmp_path / "run"
    from dataclasses import asdict

    cmd = [
        sys.executable,
        str(ROOT / "workflow/scripts/grpo.py"),
        "train",
        "--base",
        str(exp / "base/base_policy.json"),
        "--data",
        str(exp / "data"),
        "--out",
        str(own),
        "--training",
        json.dumps(asdict(training)),
        "--task",
        json.dumps(config["task"]),
        "--compute",
        json.dumps(config["compute"]),
        "--threads",
        "1",
    ]
    done = subprocess.run(
        cmd, env={**os.environ, "GRPO_WORKER": "off"}, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads((in_worker / "objective.json").read_text()) == json.loads(
        (own / "objective.json").read_text()
    )
    rollouts = "rollouts/rank0.jsonl.gz"
    assert gzip.decompress((in_worker / rollouts).read_bytes()) == gzip.decompress(
        (own / rollouts).read_bytes()
    )
    for step in json.loads((own / "run_info.json").read_text())["checkpoints"]:
        name = f"checkpoints/checkpoint-{step}/model.safetensors"
        a, b = load_file(in_worker / name), load_file(own / name)
        assert a.keys() == b.keys() and all((a[k] == b[k]).all() for k in a)


def test_no_figure_of_the_smoke_config_has_overlapping_text(smoke_pipeline, design, tmp_path):
    """saving.save checks every figure it writes for text that runs into other text (titles, axis
    and tick labels, legends, the suptitle), so the smoke run itself would have failed on one;
    drawn again here from the smoke tables, each stage's figures and the worked example pass it."""
    from grpo_ablation.analysis.jobs.figures import write_figures, write_weight_figure
    from grpo_ablation.analysis.plots import saving

    _, stages = design
    checked = []

    def check(fig, name):
        assert saving.overlaps(fig) == [], name
        checked.append(name)

    drawn = Design.load(smoke_pipeline.exp / "design.json")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(saving, "check_text", check)
        write_figures(drawn, smoke_pipeline.exp / "tables", tmp_path)
        write_weight_figure(smoke_pipeline.exp / "calculations/token_weights.csv", tmp_path)
    assert len(checked) == len(stages) * len(STAGE_FIGURES) + 1
