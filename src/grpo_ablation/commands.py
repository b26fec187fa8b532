"""Every command the rules run, declared once, and the set-up every process does first.

A ``Command`` names its help, where its arguments and its job live, whether the local job worker
may serve it and whether it works offline. The CLI (``python -m grpo_ablation.cli``), the job
worker and ``python -m grpo_ablation.training.train`` are built from ``COMMANDS``, and each calls
``bootstrap`` before anything imports torch; no other module has a main (one that imports torch at
module level could not pin before it). Library use (a notebook) calls ``bootstrap()`` first.

Importable without torch: jobs and arguments are named as ``"module:function"`` and imported when
a command runs.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from dataclasses import dataclass
from typing import Any

from grpo_ablation.compute import set_threads, work_offline
from grpo_ablation.numerics import pin_cpu_numerics

_BOOTSTRAPPED = False


def bootstrap(*, offline: bool = True, threads: int | None = None) -> None:
    """The process's set-up, first thing in every entry point: the offline flags (jobs read the
    cache the prefetch rule filled; a user's own setting wins, nothing here unsets it), the CPU
    numerics pins (before torch's import: the same numbers on every x86-64 CPU;
    ``grpo_ablation.numerics``) and, when given, torch's threads. The flags and pins are set once
    per process (a worker's forked children have them); ``threads`` applies every call."""
    global _BOOTSTRAPPED
    if not _BOOTSTRAPPED:
        if offline:
            work_offline()
        pin_cpu_numerics()
        _BOOTSTRAPPED = True
    set_threads(threads)


def _load(ref: str) -> Any:
    module, _, name = ref.partition(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    job: str  # "module:function", called with the parsed arguments
    arguments: str  # "module:function" adding the command's arguments to a parser
    # The local job worker may run it (imports paid once per machine; grpo_ablation.worker), where
    # ``servable`` ("module:function" of the parsed arguments), if given, agrees.
    served: bool = False
    servable: str | None = None
    offline: bool = True  # False: it talks to the hub (prefetch alone)

    def parser(self, **kwargs: Any) -> argparse.ArgumentParser:
        p = argparse.ArgumentParser(prog=self.name, description=self.help, **kwargs)
        _load(self.arguments)(p)
        return p

    def run(self, a: argparse.Namespace) -> None:
        _load(self.job)(a)

    def may_serve(self, a: argparse.Namespace) -> bool:
        return self.served and (self.servable is None or _load(self.servable)(a))


def _cli(name: str, help: str, **kw: Any) -> Command:
    py = name.replace("-", "_")
    return Command(name, help, f"grpo_ablation.cli:cmd_{py}", f"grpo_ablation.cli:args_{py}", **kw)


def _job(name: str, help: str, module: str, **kw: Any) -> Command:
    return Command(name, help, f"{module}:run", f"{module}:add_arguments", served=True, **kw)


COMMANDS: dict[str, Command] = {
    c.name: c
    for c in (
        _cli("prefetch", "fill the Hugging Face cache (runs on the submit host)", offline=False),
        _cli("splits", "write the fixed splits and their manifest"),
        _cli("base-policy", "build and warm-start the base policy (or name a hub model)"),
        _cli("eval-tasks", "write the lm-eval task YAMLs for test and validation"),
        _cli("calculations", "write the worked-numbers sheet (Markdown and CSV)"),
        _cli("plan", "the power and cost of every declared hypothesis, before any run"),
        _job(
            "train",
            "train one (cell, seed) run; resumes if interrupted",
            "grpo_ablation.training.job",
            servable="grpo_ablation.training.job:servable",
        ),
        _job(
            "evaluate",
            "evaluate every checkpoint of a run (or the base policy)",
            "grpo_ablation.evaluation.job",
            servable="grpo_ablation.evaluation.job:servable",
        ),
        _job(
            "diagnostics",
            "per-step and per-run diagnostics of one run's rollout log",
            "grpo_ablation.analysis.job",
        ),
        _cli("design", "check the config and write the design the analysis jobs read"),
        _cli("select", "choose a stage's winner on the validation split"),
        _cli("tables", "result and objective tables (CSV, Markdown, LaTeX)"),
        _cli("figures", "every figure (PNG and PDF)"),
        _cli("reading", "the report's reading: verdicts on the hypotheses, then the effects"),
        _cli("pooled", "tables, verdicts and reading pooled over the base-policy draws"),
        _cli("push", "the push of every objective on the same samples"),
        _cli("push-report", "table and figure of the push"),
        _cli("token-weights", "figure of the worked example's per-token weights"),
    )
}
SERVED = tuple(name for name, c in COMMANDS.items() if c.served)


def parser() -> argparse.ArgumentParser:
    """The whole CLI: one subcommand per command."""
    p = argparse.ArgumentParser(prog="grpo-ablation", description="The rules' entry points.")
    sub = p.add_subparsers(dest="command", required=True)
    for c in COMMANDS.values():
        _load(c.arguments)(sub.add_parser(c.name, help=c.help, description=c.help))
    return p


def main(argv: list[str] | None = None) -> None:
    """``grpo-ablation <command> ...``: set up the process, then run the command in the job
    worker where it may serve it (``GRPO_WORKER``), else in this process."""
    from grpo_ablation import worker

    args = sys.argv[1:] if argv is None else list(argv)
    if args and args[0] in COMMANDS:
        # Only prefetch talks to the hub; pins before torch's import (a worker started from this
        # process inherits both).
        bootstrap(offline=COMMANDS[args[0]].offline)
    a = parser().parse_args(args)
    command = COMMANDS[a.command]
    if worker.wanted(a.command) and command.may_serve(a):
        try:
            raise SystemExit(worker.run_job(a.command, args[args.index(a.command) + 1 :]))
        except worker.WorkerUnavailable as exc:
            print(f"job worker unavailable, running in this process: {exc}", file=sys.stderr)
    command.run(a)


def run_command(name: str, argv: list[str] | None = None) -> None:
    """A module's own main (``python -m grpo_ablation.training.train ...``): the command ``name``
    with this process's arguments, set up as the CLI sets it up."""
    main([name, *(sys.argv[1:] if argv is None else argv)])
