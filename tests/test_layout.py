"""The results tree is spelled once (grpo_ablation.layout): the rules, the analysis and the CLI
all build and read their paths through it."""

import re
from pathlib import Path

import pytest

from grpo_ablation.layout import Tree, cell_and_seed

ROOT = Path(__file__).resolve().parents[1]
CELL = "std=sample/agg=sequence_mean/G=8/zv=filter"


@pytest.mark.parametrize(
    "path",
    [
        Tree("results/e/draw=3").summary(CELL, 7, "validation"),
        Tree("results/e").run_info(CELL, 7),
        Tree("results/e").curve(CELL, 7),
        Tree("results/e").steps(CELL, 7),
        Tree("results/e").push(CELL, 7),
        Tree("results/e").run(CELL, 7),
        # a results folder whose own name is one of the tree's: the last segment counts
        Tree("/scratch/runs/eval/e").summary(CELL, 7),
    ],
)
def test_a_runs_paths_give_back_its_cell_and_seed(path):
    assert cell_and_seed(path) == (CELL, 7)


def test_a_path_outside_the_tree_is_named():
    with pytest.raises(ValueError, match="not under runs/"):
        cell_and_seed("results/e/tables/results.csv")


def test_the_rules_take_wildcards_through_the_tree():
    tree = Tree("R/draw={draw}")
    assert (
        tree.summary("{cell}", "{seed}")
        == "R/draw={draw}/eval/{cell}/seed={seed}/test/summary.json"
    )
    assert (
        tree.run_log("train", "{cell}", "{seed}")
        == "R/draw={draw}/logs/train/{cell}/seed={seed}.log"
    )
    assert tree.figure("effects.png", "{stage}") == "R/draw={draw}/figures/{stage}/effects.png"


def spelled_outside_layout(pattern: re.Pattern) -> list[str]:
    """``file:line: text`` of every match in the rules and the package but layout.py (comments
    and an argument's help text, which may show a name, left out)."""
    files = [*ROOT.glob("workflow/rules/*.smk"), *ROOT.glob("src/grpo_ablation/**/*.py")]
    return [
        f"{f.relative_to(ROOT)}:{i}: {m[0]}"
        for f in files
        if f.name != "layout.py"
        for i, line in enumerate(f.read_text().splitlines(), 1)
        if not line.lstrip().startswith("#") and "help=" not in line
        for m in pattern.finditer(line)
    ]


def test_no_rule_or_module_spells_a_path_of_the_tree():
    """The folders of a run's tree appear as path text only in layout.py."""
    spelled = re.compile(r"""["'/](?:eval|runs|diagnostics|selection|push)/\{|seed=\{""")
    assert spelled_outside_layout(spelled) == []


def test_the_evaluation_job_writes_where_the_tree_reads():
    """The evaluation job writes under its --out through layout.Evaluation; the rules and the
    analysis read from the root through Tree: one spelling of the files of a run's evaluation."""
    tree = Tree("results/e")
    names = ("summary.json", "calibration.json", "curve.json")
    for f in (ROOT / "src/grpo_ablation/evaluation").glob("*.py"):
        for name in names:
            assert f'"{name}"' not in f.read_text(), f"{f.name} spells {name}"
    folder = tree.evaluation(CELL, 7)
    assert tree.curve(CELL, 7) == f"{folder}/curve/curve.json"
    assert tree.calibration(CELL, 7) == f"{folder}/calibration.json"
    assert tree.base_summary("validation") == "results/e/eval/base/validation/summary.json"


def test_the_files_the_jobs_write_are_named_only_in_layout():
    """A run's files (run_info.json, objective.json, rollouts, checkpoint-<step>, its rerun
    identity and wall times ...), the split files and their manifest, the base policy's record and
    its model folder's, each checkpoint's evaluation files, the calibration's working files and the
    diagnostics' files: the jobs that write them and the rules and analysis that read them take
    the name from layout.py."""
    from grpo_ablation import layout

    names = [
        *(layout.RUN_INFO, layout.OBJECTIVE, layout.OBJECTIVE_TEXT, layout.BUDGET),
        *(layout.METRICS_LOG, layout.ROLLOUTS, layout.CURVE_POLICIES, layout.CHECKPOINT_PREFIX),
        *(layout.RUN_IDENTITY, layout.WALL_TIME),
        *(layout.STEPS, layout.SUMMARY, layout.CALIBRATION, layout.CURVE, layout.MANIFEST),
        *(layout.STEP_RESULTS, layout.STEP_SAMPLES, layout.STEP_TIMING, layout.STEP_DONE),
        *(layout.CALIBRATION_ROWS, layout.BASE_INFO, layout.WARM_START, layout.CONVERSION),
        *(layout.split_path("", split).name for split in layout.SPLITS),
    ]
    quoted = re.compile(r"""["'/](""" + "|".join(map(re.escape, names)) + r""")["'{]""")
    assert spelled_outside_layout(quoted) == []
    # nor is a split's file or a checkpoint's folder built from its parts
    built = re.compile(r"""\{split\}\.jsonl|step=\{""")
    assert spelled_outside_layout(built) == []
    assert Tree("R").split("test") == "R/data/test.jsonl"
    assert str(layout.step_folder("E/test", 4)) == "E/test/step=4"


def test_the_analysis_outputs_are_declared_once_in_layout():
    """The tables job's files and each stage's figure files: named in layout.py, declared by the
    rules through Tree, with the output keys the rules use."""
    from grpo_ablation import layout

    tree = Tree("R/draw={draw}")
    tables = tree.tables()
    assert list(tables.values()) == [f"R/draw={{draw}}/tables/{n}" for n in layout.TABLES]
    assert tables["results"].endswith("/results.csv")
    assert tables["results_md"].endswith("/results.md")
    assert tables["effects"].endswith("/effects.csv")
    assert layout.TABLE["effects"] == "effects.csv" and len(layout.TABLE) == len(layout.TABLES)
    figures = tree.stage_figures("{stage}")
    assert figures["effects_png"] == "R/draw={draw}/figures/{stage}/effects.png"
    assert len(figures) == len(layout.STAGE_FIGURES) * len(layout.FIGURE_FORMATS)
    rules = (ROOT / "workflow/rules/report.smk").read_text()
    assert "TREE.tables()" in rules and 'TREE.stage_figures("{stage}")' in rules


def test_the_pooled_figures_are_declared_once_in_layout():
    """The pooled figures job's files (the verdicts where hypotheses are declared, each stage's
    effect plot over draws): named in layout.py, declared by the pooled_figures rule through Tree."""
    tree = Tree("R/pooled")
    effects = ["R/pooled/figures/s/effects.png", "R/pooled/figures/s/effects.pdf"]
    verdicts = ["R/pooled/figures/verdicts.png", "R/pooled/figures/verdicts.pdf"]
    assert tree.pooled_figures(["s"], True) == verdicts + effects
    assert tree.pooled_figures(["s"], False) == effects
    assert tree.pooled_stage_figures("s")["effects_png"] == effects[0]
    assert tree.pooled_verdict_figures()["verdicts_png"] == verdicts[0]
    rules = (ROOT / "workflow/rules/report.smk").read_text()
    assert "POOLED.pooled_figures(" in rules


def test_no_analysis_module_or_rule_spells_a_file_name_of_the_results_tree():
    """layout.py spells every table, reading and figure the analysis writes; the analysis
    modules and the rules name them through it, and build no file name of their own from a
    stem and an extension (the report's caption files aside: they are not results)."""
    import re

    from grpo_ablation import layout

    figures = [*layout.STAGE_FIGURES, layout.PUSH_FIGURE, layout.TOKEN_WEIGHTS]
    names = {
        *layout.TABLES,
        *layout.POOLED_TABLES,
        *layout.PUSH_TABLES,
        layout.PUSH_PILOT_TABLE,
        layout.READING,
        layout.POOLED_READING,
        layout.READING_VIEW,
        layout.POOLED_READING_VIEW,
        layout.TOKEN_WEIGHTS_TABLE,
        layout.CALCULATIONS_SHEET,
        layout.CALCULATIONS_VIEW,
        layout.CALCULATIONS_TABLE,
        *(name for f in figures for name in layout.figure_files(f)),
    }
    root = Path(layout.__file__).parent
    files = [
        *(root / "analysis").glob("*.py"),
        *(root / "objective").glob("*.py"),
        *(ROOT / "workflow/rules").glob("*.smk"),
    ]
    spelled = {
        f"{path.name}: {name}"
        for path in files
        for name in names
        if re.search(rf"[\"']{re.escape(name)}[\"']", path.read_text())
    }
    assert not spelled, sorted(spelled)
    built = re.compile(r"""f["'][^"'\n]*\.\{?(csv|md|tex|png|pdf|rst|e|ext)\}?["']""")
    made = [f"{p.name}: {m.group(0)}" for p in files for m in built.finditer(p.read_text())]
    assert not [m for m in made if "../report/" not in m], made  # captions are not results
