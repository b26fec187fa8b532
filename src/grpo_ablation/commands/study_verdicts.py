"""``grpo-ablation study-verdicts``: a study's verdicts as its ledger holds them (Markdown)."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "print a study's verdicts from its registration and ledger, as a Markdown table"
# A command a person runs (``grpo-ablation --help`` lists it first).
ROLE = "run"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--study",
        type=Path,
        default=Path("studies/study"),
        help="the study's tracked folder (registration.json, ledger.jsonl); default studies/study",
    )
    p.add_argument("--out", type=Path, help="also write the table here")


def run(a: argparse.Namespace) -> None:
    from grpo_ablation.analysis.study import verdict_table

    table = verdict_table(a.study)
    if a.out:
        a.out.write_text(table)
    print(table, end="")
