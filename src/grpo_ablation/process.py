"""The set-up every process of the project does first, before anything imports torch.

The CLI (every job) calls ``bootstrap`` before it parses its command; the job worker calls it
when it starts (its forked children inherit the flags and pins); a notebook using the library
calls ``bootstrap()`` itself.
"""

from __future__ import annotations

from grpo_ablation.compute import set_threads, work_offline
from grpo_ablation.numerics import pin_cpu_numerics

_BOOTSTRAPPED = False


def bootstrap(*, offline: bool = True, threads: int | None = None) -> None:
    """The offline flags (jobs read the cache the prefetch rule filled; a user's own setting
    wins, nothing here unsets it), the CPU numerics pins (before torch's import: the same numbers
    on every x86-64 CPU; ``grpo_ablation.numerics``) and, when given, torch's threads. The flags
    and pins are set once per process; ``threads`` applies every call."""
    global _BOOTSTRAPPED
    if not _BOOTSTRAPPED:
        if offline:
            work_offline()
        pin_cpu_numerics()
        _BOOTSTRAPPED = True
    set_threads(threads)
