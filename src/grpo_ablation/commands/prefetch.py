"""``grpo-ablation prefetch``: fill the Hugging Face cache on the submit host (model, data set,
built-in benchmark data); the one command that talks to the hub."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from grpo_ablation.commands import json_value, leave_without_shutdown

HELP = "fill the Hugging Face cache (runs on the submit host)"
OFFLINE = False


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--config",
        type=json_value,
        required=True,
        help="sections task, base_policy, evaluation, stand_in as JSON or a file",
    )
    p.add_argument("--out", type=Path, required=True, help="the prefetch record (JSON)")


def run(a: argparse.Namespace) -> None:
    from grpo_ablation.policy.prefetch import prefetch

    record = prefetch(a.config)
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    print(json.dumps(record, indent=2))
    leave_without_shutdown()
