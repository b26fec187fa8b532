"""``grpo-ablation splits``: the fixed splits and their manifest."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from grpo_ablation.commands import json_value, leave_without_shutdown

HELP = "write the fixed splits and their manifest"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--task", type=json_value, required=True, help="task config as JSON or a file")
    p.add_argument(
        "--out", type=Path, required=True, help="the data/ folder (splits and their manifest)"
    )
    p.add_argument(
        "--prefetch",
        type=Path,
        help="the prefetch record: the source files must be the ones it read",
    )


def run(a: argparse.Namespace) -> None:
    from grpo_ablation.tasks import get_task

    fetched = json.loads(a.prefetch.read_text())["task"] if a.prefetch else None
    manifest = get_task(a.task).write_splits(a.out, fetched=fetched)
    print(json.dumps(manifest, indent=2))
    leave_without_shutdown()  # a hub data set's splits are read through the data-set client
