"""``grpo-ablation reading``: the report's reading, verdicts first."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "the report's reading: verdicts on the hypotheses, then the effects"
SERVED = True


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--effects", type=Path, nargs="+", required=True, help="tables/effects.csv")
    p.add_argument("--verdicts", type=Path, help="hypotheses.csv: the verdicts that open it")
    p.add_argument("--calibration", type=Path, help="calibration.csv: a closing paragraph")
    p.add_argument("--coupling", type=Path, help="coupling.csv: a closing paragraph")
    p.add_argument("--efficiency", type=Path, help="efficiency.csv: a paragraph on efficiency")
    p.add_argument("--push", type=Path, help="tables/push.csv: a closing paragraph")
    p.add_argument(
        "--out",
        type=Path,
        required=True,
        help="the draw's figures/ folder: the reading (reading.rst) and its HTML view "
        "(reading.html, the report's item) go there",
    )


def run(a: argparse.Namespace) -> None:
    from grpo_ablation.analysis.jobs.reading import write_reading
    from grpo_ablation.layout import READING, READING_VIEW

    written = write_reading(
        a.effects,
        a.out / READING,
        a.out / READING_VIEW,
        a.verdicts,
        a.calibration,
        a.coupling,
        a.push,
        a.efficiency,
    )
    for path in written:
        print(path)
