"""``grpo-ablation study-look``: judge a sequential study's look and write the next one."""

from __future__ import annotations

import argparse
from pathlib import Path

from grpo_ablation.commands import design_argument

HELP = "judge a sequential study's look, append it to its ledger, write the next look"
# A command a person runs (``grpo-ablation --help`` lists it first).
ROLE = "run"


def add_arguments(p: argparse.ArgumentParser) -> None:
    design_argument(p)
    p.add_argument("--out", type=Path, help="also write the look's record here (JSON)")
    p.add_argument(
        "--draw-means",
        type=Path,
        help="the pooled job's draw_means.csv of the look's draws (default: computed from the "
        "draws' records)",
    )


def run(a: argparse.Namespace) -> None:
    from grpo_ablation.analysis.jobs.study_look import write_look
    from grpo_ablation.analysis.loading import FIT_TEXT, read_table
    from grpo_ablation.design.ablation import Design
    from grpo_ablation.design.records import study_records
    from grpo_ablation.layout import NEXT_LOOK

    design = Design.load(a.design)
    means = read_table(a.draw_means, text=FIT_TEXT) if a.draw_means else None
    record = write_look(design, a.out, means)
    for hid, verdict in record["decisions"].items():
        st = record["statistics"].get(hid)
        judged = (
            f" (mean {st['mean']:+.4g}, repeated CI [{st['rci'][0]:+.4g}, {st['rci'][1]:+.4g}] "
            f"at this look's boundary, {st['units']} draws; the fixed-sample interval is biased "
            "after a stop)"
            if st
            else " (decided at an earlier look)"
        )
        print(f"look {record['look']}: {hid} {verdict}{judged}")
    following = study_records(design) / NEXT_LOOK
    print(f"next look: {following}" if following.exists() else "the study is over")
