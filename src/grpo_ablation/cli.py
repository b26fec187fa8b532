"""The project's one entry point: ``grpo-ablation <command> ...`` (the rules run it through
workflow/scripts/grpo.py; ``python -m grpo_ablation.cli`` is the same).

Every command is a module of ``grpo_ablation.commands`` (its help, arguments and job; whether the
local job worker may serve it and whether it works offline), and ``COMMANDS`` the table of them.
``main`` sets the process up (``grpo_ablation.process.bootstrap``) before anything imports torch,
then runs the command in the job worker where it may serve it, else in this process.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import textwrap

from grpo_ablation import worker
from grpo_ablation.commands import COMMANDS, ROLES
from grpo_ablation.process import bootstrap


def parser() -> argparse.ArgumentParser:
    """The whole CLI: one subcommand per command, listed by who runs it (``ROLES``)."""
    from importlib.metadata import PackageNotFoundError, version

    p = argparse.ArgumentParser(
        prog="grpo-ablation",
        description=textwrap.fill(
            "The commands of the GRPO ablation pipeline. A command writes where its --out says "
            "(a file, or the folder of its files); a study's commands write in its tracked "
            "folder (study.record). `grpo-ablation <command> --help` describes each option.",
            80,
        ),
        epilog=command_list(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    with contextlib.suppress(PackageNotFoundError):  # run from a checkout not installed
        p.add_argument("--version", action="version", version=version("grpo-ablation"))
    sub = p.add_subparsers(
        dest="command", required=True, metavar="<command>", help="one of the commands below"
    )
    for role in ROLES:
        for c in (c for c in COMMANDS.values() if c.role == role):
            c.arguments(sub.add_parser(c.name, description=c.help))
    return p


def command_list(width: int = 80) -> str:
    """The commands under the heading of who runs them, each with its one line of help."""
    blocks = []
    for role, heading in ROLES.items():
        lines = [f"{heading}:"]
        for c in (c for c in COMMANDS.values() if c.role == role):
            lines += textwrap.wrap(
                c.help, width, initial_indent=f"  {c.name:<16}", subsequent_indent=" " * 18
            )
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def main(argv: list[str] | None = None) -> None:
    """``grpo-ablation <command> ...``: set up the process, then run the command in the job
    worker where it may serve it (``GRPO_WORKER``), else in this process. A reader that stops
    early (``| head``) ends it quietly, as it ends any Unix filter."""
    try:
        _main(sys.argv[1:] if argv is None else list(argv))
    except BrokenPipeError:
        # the rest of the output has nowhere to go: no traceback, and none at exit's flush
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(1) from None


def _main(args: list[str]) -> None:
    if args and args[0] in COMMANDS:
        # Only prefetch talks to the hub; pins before torch's import (a worker started from this
        # process inherits both).
        bootstrap(offline=COMMANDS[args[0]].offline)
    a = parser().parse_args(args)
    command = COMMANDS[a.command]
    if command.may_serve(a) and worker.wanted(a.command):
        try:
            raise SystemExit(worker.run_job(a.command, args[args.index(a.command) + 1 :]))
        except worker.WorkerUnavailable as exc:
            print(f"job worker unavailable, running in this process: {exc}", file=sys.stderr)
    from grpo_ablation.design.problems import InputError

    try:
        command.job(a)
    except (InputError, FileNotFoundError) as err:
        if not command.person:
            raise  # a rule's job: its log keeps the traceback
        # A person's input at fault (a config, a study's registration, ledger or records, a file
        # named on the command line): the problem alone, no traceback; exit status 1.
        said = f"{err.filename}: no such file" if isinstance(err, FileNotFoundError) else err
        raise SystemExit(f"grpo-ablation {a.command}: {said}") from None


if __name__ == "__main__":
    main()
