"""The README as a newcomer reads it: short, its two commands first (the second the one CI runs),
every link and every shipped config in it."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_the_readme_is_read_in_ten_minutes():
    assert len(README.splitlines()) <= 200


def test_its_first_commands_set_up_and_run_then_test_and_ci_runs_the_second():
    block = re.search(r"```bash\n(.*?)```", README, re.S).group(1)
    commands = [line.split("#")[0].strip() for line in block.splitlines()]
    assert commands[:2] == ["make run", "make test"]
    ci = [line.strip() for line in (ROOT / ".ci/run").read_text().splitlines()]
    assert "make test" in ci


def test_every_link_of_the_readme_leads_to_a_file_of_the_clone():
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    local = [link for link in links if "://" not in link]
    assert local and not [link for link in local if not (ROOT / link).exists()]


def test_every_shipped_config_is_named_in_the_readme():
    configs = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "config").glob("*.yaml"))
    assert not [c for c in configs if f"`{c}`" not in README]


def test_what_the_default_can_detect_is_what_plan_computes():
    """The README's "detect an accuracy effect only beyond A-B" is the plan's range of minimum
    detectable effects over the default's accuracy hypotheses, to the printed digit."""
    from grpo_ablation.design.ablation import Design
    from grpo_ablation.design.hypotheses import plan_rows
    from grpo_ablation.design.quantities import PAIRED
    from grpo_ablation.design.schema import load_config

    rows = plan_rows(Design.of(load_config(ROOT / "config/config.yaml")))
    mdes = [r["mde"] for r in rows if "accuracy" in PAIRED.get(r["metric"], "")]
    text = " ".join(README.split())
    assert len(mdes) >= 2 and f"beyond {min(mdes):.1f}-{max(mdes):.1f}," in text


def test_the_studys_verdicts_are_what_its_ledger_says():
    """The README's study table is `grpo-ablation study-verdicts` on the committed ledger, verbatim:
    a look judged and not copied, or a number edited, fails here."""
    from grpo_ablation.analysis.study import verdict_table

    assert verdict_table(ROOT / "studies/study") in README


def test_what_the_default_found_is_on_the_first_screen_with_the_numbers_below():
    """The default's finding opens the README (within its first 20 lines, before the study's
    verdict table, the first table), with the interval its own section reports."""
    lines = README.splitlines()
    found = next(i for i, line in enumerate(lines) if line.startswith("**What the default found**"))
    first_table = next(i for i, line in enumerate(lines) if line.startswith("|"))
    assert found < min(20, first_table)
    opening = " ".join(lines[found : found + 4])
    section = " ".join(README.split("## What the default can resolve", 1)[1].split())
    interval = re.search(r"−\d\.\d+ \[−\d\.\d+, −\d\.\d+\]", opening).group(0)
    assert f"{interval} tokens per unit step" in section
