"""A local job worker: pay Python, torch, transformers, TRL and lm-eval imports once per machine.

On a laptop a job of the default spends much of its time starting up (about 5 s of imports for a
training job, 7 s of imports and first model load for an evaluation, 2 s for diagnostics, 3-4 s
of a figure job's 8, against seconds of work). The worker is a daemon that imports everything
once, then forks one child per job: the job itself (``grpo.py train|evaluate|figures ...``, the
commands whose module says ``SERVED``; ``grpo_ablation.commands``) becomes a thin client that
sends its command, arguments and stdout and stderr file descriptors over a Unix socket and waits
for the exit status. The child runs exactly the in-process code path (the command's job) with the
job's threads and writes to the job's log, so results are byte-identical with or without the
worker (tested; a PDF's creation date apart).

- One worker per user, Python executable and version of this package's source (a hash of it is in
  the socket name): a stale worker never serves new code.
- The first client starts the worker (under a file lock, so concurrent jobs start one); the worker
  exits after ``GRPO_WORKER_IDLE`` seconds (default 120) without a job.
- A child exits when its client goes away (a killed Snakemake job leaves no orphan writing
  outputs). A child that crashes is reported by the client as a failed job.
- Under a batch scheduler (SLURM, PBS, LSF) a worker belongs to one allocation (its job id is
  part of the socket name): the evaluation jobs that Snakemake packs into one allocation
  (``group-components`` in the SLURM profile) share it, so start-up is paid once per allocation;
  jobs of other allocations on the same node never reach it (their GPUs, cgroup and lifetime
  differ), and the scheduler ends it with its allocation.
- A training job with several processes (``compute.processes_per_train_job`` > 1) is launched by
  torchrun/accelerate, never through the worker.
- ``GRPO_WORKER``: ``auto`` (default) and ``on`` use the worker; ``off`` never does.
- ``grpo-ablation worker serve|where|stop`` starts it by hand, names its socket, stops it. The
  CLI hands it the jobs it may run (``Job``), so the worker knows no command table of its own.
"""

from __future__ import annotations

import argparse
import array
import contextlib
import fcntl
import gc
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_ablation.device import set_threads
from grpo_ablation.numerics import CPU_PINS
from grpo_ablation.process import bootstrap

MODE_ENV = "GRPO_WORKER"
IDLE_ENV = "GRPO_WORKER_IDLE"
CHILD_ENV = "GRPO_WORKER_CHILD"  # set in a child: the job runs in the worker
SCHEDULER_ENVS = ("SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID")
# Variables a child takes from its client (the rest of the environment is the worker's).
FORWARDED_ENV_PREFIXES = (
    "GRPO_",
    "HF_",
    "TRANSFORMERS_",
    "CUDA_",
    "PYTORCH_",
    "TOKENIZERS_",
    # read at start-up by a process of its own: the child applies them (_as_a_fresh_process)
    "OMP_NUM_THREADS",
    "MPLCONFIGDIR",
    "MATPLOTLIBRC",
)
# The whole package, nested modules included: the worker runs code from all of it.
PACKAGE_DIR = Path(__file__).resolve().parent
START_TIMEOUT_S = 180.0
# How the worker's command line reads in /proc (a stale pid file may name another process).
WORKER_CMDLINE = b"grpo_ablation.cli\x00worker\x00serve"


@dataclass(frozen=True)
class Job:
    """A command the worker may run: its argument parser and its job function."""

    parser: Callable[[], argparse.ArgumentParser]
    run: Callable[[argparse.Namespace], None]


def idle_seconds() -> float:
    """How long the worker waits for a job before it exits (``GRPO_WORKER_IDLE``)."""
    return float(os.environ.get(IDLE_ENV, "120"))


class WorkerUnavailable(RuntimeError):
    """The worker could not be reached before the job started (the client may fall back)."""


def wanted(command: str = "evaluate") -> bool:
    """Whether ``command`` (one the worker may serve) should run in the worker. Under a batch scheduler only evaluations use
    it (packed into one allocation they share one); a training or diagnostics job there is its
    own allocation, where a worker would cost its start-up and save nothing."""
    mode = os.environ.get(MODE_ENV, "auto").lower()
    if mode not in ("auto", "on", "off"):
        raise ValueError(f"{MODE_ENV} must be auto, on or off, got {mode!r}")
    if mode == "off":
        return False
    return mode == "on" or command == "evaluate" or not allocation()


def allocation() -> str:
    """The batch allocation this job runs in ("" on a workstation): a worker serves one."""
    return next((os.environ[v] for v in SCHEDULER_ENVS if os.environ.get(v)), "")


def code_key() -> str:
    """Hash of the interpreter, this checkout, its sources, the batch allocation, the CPU numerics
    pins, the Hugging Face variables and PYTHONPATH: a new version (or another allocation, pins,
    cache or path) gets a new worker."""
    # The pins and the Hugging Face variables too: torch reads the pins once, at import
    # (grpo_ablation.numerics), and huggingface_hub and datasets fix their cache folders and
    # offline flags at import, so a child could not take another cache from its client.
    # PYTHONPATH decides which code the worker imports.
    pins = ",".join(f"{k}={os.environ.get(k)}" for k in sorted(CPU_PINS))
    hub = ",".join(f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith("HF_"))
    context = "\0".join(
        [
            sys.executable,
            str(PACKAGE_DIR),
            allocation(),
            pins,
            hub,
            str(os.environ.get("PYTHONPATH")),
        ]
    )
    h = hashlib.sha256(context.encode())
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        h.update(str(path.relative_to(PACKAGE_DIR)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def socket_path() -> Path:
    """``<tmp>/grpo-worker-<uid>/<key>.sock`` in a directory only this user can enter.

    Unix socket paths are limited to ~107 bytes: a long temp dir falls back to /tmp.
    """
    root = Path(tempfile.gettempdir())
    if len(str(root)) > 60:
        root = Path("/tmp")
    folder = root / f"grpo-worker-{os.getuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    info = folder.stat()
    if info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise WorkerUnavailable(f"{folder} must belong to this user with mode 0700")
    return folder / f"{code_key()}.sock"


def _send(conn: socket.socket, message: dict[str, Any], fds: list[int] | None = None) -> None:
    data = json.dumps(message).encode() + b"\n"
    if fds:
        conn.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
    else:
        conn.sendall(data)


def _recv_line(conn: socket.socket, fds_wanted: int = 0) -> tuple[dict[str, Any] | None, list[int]]:
    """One JSON line (None on EOF) and the file descriptors that came with it."""
    buf, fds = b"", []
    while not buf.endswith(b"\n"):
        if fds_wanted and not fds:
            msg, anc, _, _ = conn.recvmsg(65536, socket.CMSG_SPACE(fds_wanted * 4))
            for level, kind, payload in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds += list(array.array("i", payload[: len(payload) - len(payload) % 4]))
        else:
            msg = conn.recv(65536)
        if not msg:
            return None, fds
        buf += msg
    return json.loads(buf), fds


# ----------------------------------------------------------------------------- client


def run_job(command: str, argv: list[str]) -> int:
    """Run the job ``command`` with arguments ``argv`` (as ``grpo.py <command> <argv>``) in the
    worker; return its exit status.

    Raises ``WorkerUnavailable`` if no worker could be reached or started, before anything ran.
    """
    for attempt in range(2):
        conn = _connect_or_start()
        try:
            env = {k: v for k, v in os.environ.items() if k.startswith(FORWARDED_ENV_PREFIXES)}
            sys.stdout.flush()
            sys.stderr.flush()
            reader = conn.makefile("rb")  # one buffer for both replies
            try:
                _send(
                    conn,
                    {"command": command, "argv": argv, "cwd": os.getcwd(), "env": env},
                    fds=[1, 2],
                )
                line = reader.readline()
            except OSError:  # reset by a worker that was exiting: nothing has run yet
                line = b""
            started = json.loads(line) if line else None
            if started is None:
                # The worker was exiting (idle) as we connected: start a fresh one, once.
                conn.close()
                if attempt == 0:
                    continue
                raise WorkerUnavailable("the job worker closed the connection twice")
            line = reader.readline()
            done = json.loads(line) if line else None
            if done is None:
                print(
                    f"job worker child {started.get('pid')} died without a result",
                    file=sys.stderr,
                )
                return 1
            return int(done["rc"])
        finally:
            conn.close()
    raise AssertionError("unreachable")


def _connect(path: Path) -> socket.socket | None:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(str(path))
        return conn
    except (FileNotFoundError, ConnectionRefusedError):
        conn.close()
        return None
    except OSError as exc:
        conn.close()
        raise WorkerUnavailable(f"cannot connect to {path}: {exc}") from exc


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _connect_or_start() -> socket.socket:
    path = socket_path()
    conn = _connect(path)
    if conn:
        return conn
    with _locked(path.with_suffix(".lock")):
        conn = _connect(path)  # another job may have started it meanwhile
        if conn:
            return conn
        log = path.with_suffix(".log")
        pid = _spawn_detached(
            [
                sys.executable,
                "-m",
                "grpo_ablation.cli",
                "worker",
                "serve",
                "--socket",
                str(path),
            ],
            log,
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            conn = _connect(path)
            if conn:
                return conn
            if not _alive(pid):
                raise WorkerUnavailable(f"job worker exited:\n{log.read_text()[-2000:]}")
            time.sleep(0.05)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        raise WorkerUnavailable(f"job worker did not start within {START_TIMEOUT_S:.0f} s")


def _spawn_detached(cmd: list[str], log: Path) -> int:
    """Start ``cmd`` as a daemon that is not a descendant of this process; return its pid.

    Snakemake's ``benchmark:`` measures a job's whole process tree: a worker started as a child
    of the first evaluation job would be counted in that job's memory and CPU, with the children
    it forks for every later job.
    """
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join(
            [str(PACKAGE_DIR.parent), *filter(None, [os.environ.get("PYTHONPATH")])]
        ),
    )
    read, write = os.pipe()
    launcher = os.fork()
    if launcher == 0:  # the intermediate process: start the daemon, report its pid, exit
        try:
            os.close(read)
            # cwd: the package's parent, so `-m` cannot import a module from the job's directory.
            with open(log, "a") as out:
                proc = subprocess.Popen(
                    cmd,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=PACKAGE_DIR.parent,
                    start_new_session=True,
                    close_fds=True,
                )
            os.write(write, str(proc.pid).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        text = f.read()
    os.waitpid(launcher, 0)
    if not text:
        raise WorkerUnavailable(f"could not start the job worker ({' '.join(cmd)})")
    return int(text)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # An exited daemon is reaped by init; a zombie would still answer, so check its state.
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    return True


# ----------------------------------------------------------------------------- worker


def _preload() -> None:
    """Everything the served jobs import, so children start warm."""
    import lm_eval
    import lm_eval.evaluator
    import lm_eval.models.huggingface  # noqa: F401
    import torch  # noqa: F401
    import transformers.models.gpt2.modeling_gpt2  # noqa: F401
    import trl  # noqa: F401
    from lm_eval.tasks import TaskManager  # noqa: F401

    import grpo_ablation.analysis.jobs.diagnostics
    import grpo_ablation.analysis.jobs.figures
    import grpo_ablation.analysis.jobs.pooled
    import grpo_ablation.analysis.jobs.pooled_figures
    import grpo_ablation.analysis.jobs.push_report
    import grpo_ablation.analysis.jobs.reading
    import grpo_ablation.analysis.jobs.tables
    import grpo_ablation.evaluation.evaluate
    import grpo_ablation.training.push
    import grpo_ablation.training.train
    import grpo_ablation.training.trainer  # noqa: F401

    # What was loaded here lives as long as the worker: frozen out of the garbage collector, so
    # a child's collections never visit it. An unfrozen full collection in a child writes every
    # preloaded object's header, copying ~140 MB of pages the child shared with the worker
    # (0.35 CPU s a collection on the 2-core EPYC, docs/measurements.md, 2026-12-07).
    gc.collect()
    gc.freeze()


def serve(path: Path, idle_s: float, jobs: dict[str, Job]) -> None:
    """Serve ``jobs`` on the socket ``path`` until idle for ``idle_s`` seconds."""
    bootstrap()  # its client did already; a worker started by hand too
    _preload()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # leave through `finally`
    children: set[int] = set()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # a dead worker's socket (we hold the start lock)
    listener.bind(str(path))
    inode = path.stat().st_ino
    listener.listen(64)
    listener.settimeout(1.0)
    path.with_suffix(".pid").write_text(f"{os.getpid()}\n")
    print(f"job worker {os.getpid()} listening on {path}", flush=True)
    last = time.monotonic()
    try:
        while True:
            for pid in list(children):
                if os.waitpid(pid, os.WNOHANG)[0]:
                    children.discard(pid)
                    last = time.monotonic()
            if not children and time.monotonic() - last > idle_s:
                break
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            try:
                pid = os.fork()
            except OSError as exc:
                print(f"fork failed: {exc}", flush=True)
                conn.close()  # the client sees EOF before start and runs in-process
                continue
            if pid == 0:  # child
                listener.close()
                os._exit(_child(conn, jobs))
            children.add(pid)
            conn.close()
            last = time.monotonic()
    finally:
        # Remove the socket only if it is still ours (a successor may have replaced it).
        with contextlib.suppress(FileNotFoundError):
            if path.stat().st_ino == inode:
                path.unlink()
                path.with_suffix(".pid").unlink()
        print(f"job worker {os.getpid()} idle for {idle_s:.0f} s: exiting", flush=True)


def stop(path: Path | None = None) -> bool:
    """Stop the worker of ``path`` (default: this checkout's) now; False if none was running."""
    path = path or socket_path()
    try:
        pid = int(path.with_suffix(".pid").read_text())
        # A stale pid file may name an unrelated process by now.
        if WORKER_CMDLINE not in Path(f"/proc/{pid}/cmdline").read_bytes():
            return False
        os.kill(pid, signal.SIGTERM)
    except (FileNotFoundError, ValueError, ProcessLookupError):
        return False
    return True


def _child(conn: socket.socket, jobs: dict[str, Job]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        request, fds = _recv_line(conn, fds_wanted=2)
        if request is None or len(fds) != 2:
            return 1
        os.dup2(fds[0], 1)
        os.dup2(fds[1], 2)
        for fd in fds:
            os.close(fd)
        os.chdir(request["cwd"])
        # The job's variables replace the worker's (not only add to them).
        for key in [k for k in os.environ if k.startswith(FORWARDED_ENV_PREFIXES)]:
            del os.environ[key]
        os.environ.update(request["env"])
        os.environ[MODE_ENV] = "off"  # the child runs the job in-process
        os.environ[CHILD_ENV] = "1"
        _as_a_fresh_process()
        _send(conn, {"pid": os.getpid()})
        threading.Thread(target=_exit_when_client_leaves, args=(conn,), daemon=True).start()
        job = jobs[request["command"]]

        try:
            # The job's command line, as a process of its own would see it (the training job
            # names itself when it relaunches; it never does in the worker, one process only).
            sys.argv = [sys.argv[0], request["command"], *request["argv"]]
            job.run(job.parser().parse_args(request["argv"]))
            rc = 0
        except SystemExit as exc:  # as Python maps it: None -> 0, int -> itself, else print, 1
            if exc.code is None or isinstance(exc.code, int):
                rc = exc.code or 0
            else:
                print(exc.code, file=sys.stderr)
                rc = 1
        except BaseException:
            traceback.print_exc()
            rc = 1
        sys.stdout.flush()
        sys.stderr.flush()
        _send(conn, {"rc": rc})
        return rc
    except BaseException:
        traceback.print_exc()
        return 1


def _as_a_fresh_process() -> None:
    """What a process of the job's own reads once at start-up, from the job's directory and
    variables rather than the worker's: torch's threads from OMP_NUM_THREADS (Snakemake sets it to
    the rule's threads; a job that sets its own, as training does, sets them again), and
    matplotlib's settings (a matplotlibrc in the working directory, MATPLOTLIBRC, MPLCONFIGDIR),
    the backend apart (the figure modules choose Agg)."""
    threads = os.environ.get("OMP_NUM_THREADS", "")
    if threads.isdigit() and int(threads) > 0:
        set_threads(int(threads))
    mpl = sys.modules.get("matplotlib")
    if mpl is not None:
        mpl.rcParams.update({k: v for k, v in mpl.rc_params().items() if k != "backend"})


def _exit_when_client_leaves(conn: socket.socket) -> None:
    """The client sends nothing after its request: EOF means its job was killed."""
    with contextlib.suppress(OSError):
        while conn.recv(1):
            pass
    os._exit(1)
