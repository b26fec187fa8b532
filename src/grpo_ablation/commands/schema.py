"""``grpo-ablation schema``: the config schema's generated sections, written or checked."""

from __future__ import annotations

import argparse

HELP = "write the config schema's sections declared as dataclasses (grpo_ablation.design.schema)"
# A command a person runs to maintain the checkout (``grpo-ablation --help`` lists it second).
ROLE = "maintain"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--check", action="store_true", help="only say whether it is up to date")


def run(a: argparse.Namespace) -> None:
    from grpo_ablation.design.schema import write_schema

    write_schema(check=a.check)
