"""The set-up every process of the project does first, before anything imports torch.

The CLI (every job) calls ``bootstrap`` before it parses its command; the job worker calls it
when it starts (its forked children inherit the flags and pins); a notebook using the library
calls ``bootstrap()`` itself. ``in_own_process`` runs a function in a fresh interpreter whose
memory, GPU memory included, is given back when it ends (the cost probe's training, evaluation's
process per checkpoint).
"""

from __future__ import annotations

import ctypes
import multiprocessing
import platform
from collections.abc import Callable
from typing import Any

from grpo_ablation.device import set_threads
from grpo_ablation.hub import work_offline
from grpo_ablation.numerics import pin_cpu_numerics

_BOOTSTRAPPED = False

# glibc's mallopt parameters, and the values the jobs keep freed memory with: a block larger than
# the mmap threshold (128 KiB unless glibc has raised it) is unmapped when freed, and the heap's
# free top above the trim threshold given back to the kernel, so each activation of a forward pass
# ([2304, 512] float32 is 4.7 MB) was faulted in and zeroed afresh.
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD = 32 << 20  # glibc's largest on 64-bit (HEAP_MAX_SIZE / 2)
TRIM_THRESHOLD = 1 << 30


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
        keep_freed_memory()
        _BOOTSTRAPPED = True
    set_threads(threads)


def keep_freed_memory() -> bool:
    """Keep freed blocks up to 32 MiB in the process's heap for its next allocations (glibc
    only; False elsewhere, where nothing is changed). A forward pass's activations then reuse
    pages instead of new ones from the kernel: the default's evaluation job ~20% fewer CPU
    seconds, its training ~10% (docs/measurements.md, 2026-12-07). Every number is the same:
    where a buffer lies does not change what is computed in it (torch aligns each to 64 bytes
    either way). Freed memory is not given back until exit: the default's training runs peaked
    ~1% higher (506 against 501 MB, the mean of its 26 runs), its evaluations the same."""
    if platform.libc_ver()[0] != "glibc":
        return False
    libc = ctypes.CDLL(None)
    return bool(
        libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
        and libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )


def in_own_process(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` run in a fresh interpreter (spawned: nothing inherited, so no CUDA context),
    its result sent back; its memory, GPU memory included, is freed when it ends. ``fn`` is a
    module-level function, its arguments and result picklable. An error in it prints its
    traceback there and raises RuntimeError here."""
    spawn = multiprocessing.get_context("spawn")
    receive, send = spawn.Pipe(duplex=False)
    child = spawn.Process(target=_send_result, args=(send, fn, args))
    child.start()
    send.close()  # this end is the child's: recv() sees EOF if the child dies without sending
    try:
        result, sent = receive.recv(), True
    except EOFError:
        result, sent = None, False
    finally:
        receive.close()
        child.join()
    if child.exitcode or not sent:
        raise RuntimeError(
            f"{fn.__name__} failed in its own process (exit code {child.exitcode}); its log is above"
        )
    return result


def _send_result(send: Any, fn: Callable[..., Any], args: tuple) -> None:
    try:
        send.send(fn(*args))
    finally:
        send.close()
