"""A job's code, derived from its imports: the files a rule lists as inputs, none kept by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from grpo_ablation.code import sources

ROOT = Path(__file__).resolve().parents[1]


def names(module: str) -> set[str]:
    return {p.split("grpo_ablation/")[1] for p in sources(module)}


def test_a_jobs_code_is_its_module_and_what_it_imports_transitively():
    push = names("analysis.jobs.push_report")
    # the push report job imports push_tables, which imports design.hypotheses, which imports
    # design.ablation, ...
    job = {"analysis/jobs/push_report.py", "analysis/push_tables.py", "design/hypotheses.py"}
    assert job | {"design/ablation.py"} <= push
    # ... and render and saving inside functions
    assert {"analysis/render.py", "analysis/plots/saving.py"} <= push
    assert "analysis/plots/per_stage.py" not in push and "training/train.py" not in push
    # the tables job's code holds the verdicts' and no figure's
    tables = names("analysis.jobs.tables")
    assert "analysis/hypotheses.py" in tables and "analysis/plots/per_stage.py" not in tables
    with pytest.raises(ValueError, match=r"grpo_ablation\.analysis\.nothing is not a module"):
        sources("analysis.nothing")


def test_no_rule_lists_source_files_by_hand():
    rules = "".join(p.read_text() for p in (ROOT / "workflow/rules").glob("*.smk"))
    assert "SRC /" not in rules and '"src/grpo_ablation/' not in rules


def test_the_files_are_read_where_the_rules_say_not_where_the_package_was_imported(tmp_path):
    """The rules pass the workflow's own package folder: a copy of the package on the path (a
    contributor's) must not move the inputs, or every finished job would rerun."""
    import shutil

    copy = tmp_path / "grpo_ablation"
    shutil.copytree(ROOT / "src/grpo_ablation", copy)
    found = sources("analysis.jobs.push_report", root=copy)
    assert found and all(p.startswith(str(copy)) for p in found)
    assert len(found) == len(sources("analysis.jobs.push_report"))
