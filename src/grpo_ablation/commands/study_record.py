"""``grpo-ablation study-record``: copy a study's finished draw into its tracked records."""

from __future__ import annotations

import argparse
from pathlib import Path

from grpo_ablation.commands import design_argument

HELP = "copy a finished draw of a sequential study into its tracked records (studies/<name>/)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    design_argument(p)
    p.add_argument("--draw", type=int, required=True, help="the draw (base_policy.draws)")
    p.add_argument(
        "--from",
        dest="source",
        type=Path,
        help="the draw's folder (default: the design's, results/<experiment>/draw=<d>)",
    )


def run(a: argparse.Namespace) -> None:
    from grpo_ablation.analysis.draws import draw_rows
    from grpo_ablation.design.ablation import Design
    from grpo_ablation.design.ledger import sha256_file
    from grpo_ablation.design.records import record_folder, study_records, write_records
    from grpo_ablation.layout import REGISTRATION

    design = Design.load(a.design)
    study = study_records(design)
    if study is None:
        raise SystemExit("study-record: the design declares no study (study.looks)")
    source = a.source or design.draw_dir(a.draw)
    registration = sha256_file(study / REGISTRATION)
    out = record_folder(study, a.draw)
    manifest = write_records(design, draw_rows(design, a.draw, source), source, out, registration)
    print(f"recorded draw {a.draw}: {len(manifest['numbers'])} files of numbers in {out}")
