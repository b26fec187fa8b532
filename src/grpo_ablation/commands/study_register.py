"""``grpo-ablation study-register``: register a sequential study before any of its draws trains."""

from __future__ import annotations

import argparse
from pathlib import Path

from grpo_ablation.commands import configfile_argument

HELP = (
    "register a sequential study (its design, hypotheses, looks and levels) before it runs, in "
    "its tracked folder (study.record)"
)
# A command a person runs (``grpo-ablation --help`` lists it first).
ROLE = "run"


def add_arguments(p: argparse.ArgumentParser) -> None:
    configfile_argument(p)


def run(a: argparse.Namespace) -> None:
    from grpo_ablation.design.ablation import Design
    from grpo_ablation.design.registration import register
    from grpo_ablation.design.schema import load_config
    from grpo_ablation.layout import Tree

    config = load_config(a.configfile)
    if not (config.get("study") or {}).get("looks"):
        raise SystemExit(f"{' '.join(map(str, a.configfile))} declares no study (study.looks)")
    root = Tree(Design.of(config).folder())
    path = register(config, [Path(root.draw(d)) for d in config["study"]["draws"]])
    print(f"registered: {path} (commit its folder: the ledger and its head are beside it)")
