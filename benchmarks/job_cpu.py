"""CPU seconds of pipeline jobs as the local job worker runs them: imports paid once, each job
forked and run in-process (``GRPO_WORKER=off``), its CPU time (user + system) read by ``wait4``.
CPU time, not wall time, so that jobs of a loaded machine compare (docs/measurements.md, what a
run's evaluation costs against its training).

    python -m benchmarks.job_cpu [--repeats N] 'CMD' ['CMD' ...]

Each CMD is a job's command as ``snakemake -n -p`` prints it (``python .../grpo.py evaluate ...``,
its ``> log 2>&1`` dropped; the job's output goes to ``$JOB_CPU_LOG``), run from the current directory; the jobs are interleaved N times,
``{repeat}`` in a command replaced by the repeat's number (a fresh ``--out`` each time: a job
whose outputs are finished would only read them back).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def job_cpu_seconds(command: str, threads: int = 1) -> float:
    """One job's CPU seconds (user + system of its forked process and its children)."""
    argv = shlex.split(command.split(" > ")[0])
    if len(argv) < 3 or not argv[1].endswith("grpo.py"):
        raise ValueError(f"not a job command (python .../grpo.py CMD ...): {command!r}")
    pid = os.fork()
    if pid == 0:  # the job, as the worker's child runs it
        os.environ["GRPO_WORKER"] = "off"
        os.environ["OMP_NUM_THREADS"] = str(threads)
        log = os.open(
            os.environ.get("JOB_CPU_LOG", os.devnull), os.O_WRONLY | os.O_CREAT | os.O_APPEND
        )
        os.dup2(log, 1)
        os.dup2(log, 2)
        from grpo_ablation.cli import main

        sys.argv = argv[1:]
        try:
            main()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        os._exit(code)
    _, status, usage = os.wait4(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"job failed ({status}): {command}")
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("commands", nargs="+")
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "src"))
    from grpo_ablation.worker import _preload

    _preload()
    for repeat in range(args.repeats):
        for command in args.commands:
            seconds = job_cpu_seconds(command.replace("{repeat}", str(repeat)))
            print(f"{repeat}\t{seconds:.2f}\t{command[:160]}", flush=True)


if __name__ == "__main__":
    main()
