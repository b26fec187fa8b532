"""The commands of ``grpo-ablation``, one module each, named after the command (``base_policy``:
``grpo-ablation base-policy``). Every module declares the same things: ``HELP`` (one line),
``add_arguments(parser)`` and ``run(args)``, and where they apply ``SERVED = True`` (the local job
worker may run it; ``servable(args)`` may decline per call) and ``OFFLINE = False`` (it talks to
the hub), and ``ROLE`` (``ROLES``: ``run`` for a command a person runs, ``maintain`` for one that
maintains the checkout; else the pipeline's rules run it). Each is a thin adapter from files and
JSON arguments to a library function; it imports nothing heavy at the top, so the CLI starts
without torch. A command writes where its ``--out`` says: a file, or the folder of its files
(named by ``grpo_ablation.layout``); a study's commands write in its tracked folder
(``study.record``).

``COMMANDS``, the table the CLI and the job worker read, is found from the modules (each imported
by name, so this package imports none of its commands at its top: no import cycle)."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import pkgutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from grpo_ablation.worker import Job


# Who runs a command, in the order ``grpo-ablation --help`` lists them, with its heading there.
ROLES = {
    "run": "What you run",
    "maintain": "To maintain the checkout",
    "pipeline": "What the pipeline's rules run (a job each)",
}


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    job: Callable[[argparse.Namespace], None]
    arguments: Callable[[argparse.ArgumentParser], None]
    # The local job worker may run it (imports paid once per machine; grpo_ablation.worker),
    # where ``servable`` of the parsed arguments, if given, agrees.
    served: bool = False
    servable: Callable[[argparse.Namespace], bool] | None = None
    offline: bool = True  # False: it talks to the hub (prefetch alone)
    role: str = "pipeline"  # who runs it (ROLES)

    @classmethod
    def of(cls, module: ModuleType) -> Command:
        return cls(
            name=module.__name__.rsplit(".", 1)[1].replace("_", "-"),
            help=module.HELP,
            job=module.run,
            arguments=module.add_arguments,
            served=getattr(module, "SERVED", False),
            servable=getattr(module, "servable", None),
            offline=getattr(module, "OFFLINE", True),
            role=getattr(module, "ROLE", "pipeline"),
        )

    @property
    def person(self) -> bool:
        """A person runs it: an error of its input ends it as the message, not a traceback."""
        return self.role != "pipeline"

    def parser(self, **kwargs: Any) -> argparse.ArgumentParser:
        p = argparse.ArgumentParser(prog=self.name, description=self.help, **kwargs)
        self.arguments(p)
        return p

    def may_serve(self, a: argparse.Namespace) -> bool:
        return self.served and (self.servable is None or self.servable(a))


def json_value(text: str) -> Any:
    """A JSON option's value: the JSON itself, or the path of a file that holds it. The rules pass
    files (a config section each, ``Tree.config_section``): inline, the sections made a job's
    command line kilobytes long."""
    if text.lstrip().startswith(("{", "[")):
        return json.loads(text)
    if not Path(text).is_file():
        raise argparse.ArgumentTypeError(f"neither JSON nor a JSON file: {text[:80]!r}")
    return json.loads(Path(text).read_text())


def design_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--design", type=Path, required=True, help="the DAG's design.json")


def threads_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch's CPU threads (the rule's threads; they decide the numbers on a CPU)",
    )


def configfile_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--configfile",
        type=Path,
        nargs="+",
        required=True,
        help="the config (several: merged key by key, the later winning, as Snakemake does)",
    )


def leave_without_shutdown() -> None:
    """Exit 0 now, everything written. A native thread left by the hub and data-set clients has
    aborted the interpreter's shutdown now and then ("terminate called without an active
    exception", exit 134, after the complete output: seen in prefetch, then in the splits of a hub
    data set), failing a finished job: leave without that shutdown."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


# Last: the commands' modules import the helpers above.
COMMANDS: dict[str, Command] = {
    c.name: c
    for c in (
        Command.of(importlib.import_module(f"{__name__}.{m.name}"))
        for m in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name)
    )
}


def served_jobs() -> dict[str, Job]:
    """What the worker may run: the served commands' parsers and jobs."""
    from grpo_ablation.worker import Job

    return {name: Job(c.parser, c.job) for name, c in COMMANDS.items() if c.served}
