"""``grpo-ablation worker``: the local job worker (serve, where, stop)."""

from __future__ import annotations

import argparse
from pathlib import Path

from grpo_ablation import worker

HELP = "the local job worker: serve, where, stop"
# A command a person runs to maintain the checkout (``grpo-ablation --help`` lists it second).
ROLE = "maintain"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "action",
        choices=("serve", "where", "stop"),
        help="serve: run the worker (normally started by the first client); where: print the "
        "socket this checkout's clients use; stop: stop this checkout's worker now",
    )
    p.add_argument(
        "--socket", type=Path, default=None, help="the socket (default: this checkout's)"
    )
    p.add_argument(
        "--idle",
        type=float,
        default=worker.idle_seconds(),
        help="seconds without a job before the worker stops",
    )


def run(a: argparse.Namespace) -> None:
    from grpo_ablation.commands import served_jobs

    if a.action == "where":
        print(worker.socket_path())
    elif a.action == "stop":
        print("stopped" if worker.stop() else "no worker running")
    else:
        worker.serve(a.socket or worker.socket_path(), a.idle, served_jobs())
