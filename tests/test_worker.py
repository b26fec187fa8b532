"""The local job worker gives the same files as an in-process evaluation, is shared by later jobs,
reports failures as failed jobs, and goes away when idle (training through it: test_pipeline_smoke)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

import pytest

pytest.importorskip("lm_eval")

from grpo_ablation import worker
from grpo_ablation.design.options import EvaluationConfig
from grpo_ablation.evaluation.task_folders import write_task
from grpo_ablation.objective.calculations import write_sheet

ROOT = Path(__file__).resolve().parents[1]
CLI = ROOT / "workflow" / "scripts" / "grpo.py"
# What an evaluation job receives: every option resolved (checks.evaluation_config).
EVALUATION = asdict(EvaluationConfig(batch_size=4, k=2, max_gen_toks=8)) | {
    "device": "cpu",
    "dtype": "float32",
}
PROMPTS = ["47+8=", "1+2=", "99+12=", "5+5=", "3+40=", "70+7="]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, setup) -> dict:
    """A tiny model as the 'base policy', test and validation tasks, and a private worker."""
    model, _ = setup
    root = tmp_path_factory.mktemp("worker")
    rows = root / "rows.jsonl"
    rows.write_text(
        "".join(
            json.dumps({"prompt_id": f"p{i}", "prompt": p, "answer": "55", "difficulty": 0}) + "\n"
            for i, p in enumerate(PROMPTS)
        )
    )
    for split in ("test", "validation"):
        write_task(rows, root / "tasks" / split, f"w_{split}", max_gen_toks=8, k=2, temperature=1.0)
    (root / "base_policy.json").write_text(json.dumps({"model": str(model)}))
    # TMPDIR isolates this module's worker (socket, lock and log) from any other on the machine.
    (root / "tmp").mkdir()
    yield {"root": root, "tmp": root / "tmp"}
    worker.stop(_socket({"tmp": root / "tmp"}))


def _evaluate(env: dict, out: str, mode: str, base: Path | None = None, idle: str = "60"):
    cmd = [
        sys.executable,
        str(CLI),
        "evaluate",
        "--base",
        str(base or env["root"] / "base_policy.json"),
        "--tasks",
        str(env["root"] / "tasks"),
        "--out",
        str(env["root"] / out),
        "--evaluation",
        json.dumps(EVALUATION),
    ]
    run_env = {
        **os.environ,
        "GRPO_WORKER": mode,
        "GRPO_WORKER_IDLE": idle,
        "TMPDIR": str(env["tmp"]),
    }
    return subprocess.run(cmd, env=run_env, capture_output=True, text=True, timeout=300)


def _socket(env: dict) -> Path:
    code = (
        f"import tempfile; tempfile.tempdir = {str(env['tmp'])!r}; "
        # the set-up every job does first (offline flags, CPU pins): the key depends on them
        "from grpo_ablation.process import bootstrap; bootstrap(); "
        "from grpo_ablation.worker import socket_path; print(socket_path())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


@pytest.mark.slow  # starts processes of its own
def test_worker_gives_the_in_process_files_and_is_reused(env: dict) -> None:
    local = _evaluate(env, "in_process", "off")
    assert local.returncode == 0, local.stderr[-3000:]
    pids = []
    for i in range(2):
        done = _evaluate(env, f"worker{i}", "on")
        assert done.returncode == 0, done.stderr[-3000:]
        assert "unavailable" not in done.stderr
        pids.append(_socket(env).with_suffix(".pid").read_text())
        assert "Running generate_until" in done.stderr, "the child writes to the job's own stderr"
        for split in ("test", "validation"):
            for name in ("results.json", "samples.jsonl"):
                a = env["root"] / "in_process" / split / "step=0" / name
                b = env["root"] / f"worker{i}" / split / "step=0" / name
                assert a.read_bytes() == b.read_bytes(), f"{split}/{name} differs in the worker"
        timing = json.loads(
            (env["root"] / f"worker{i}" / "test" / "step=0" / "timing.json").read_text()
        )
        assert timing["in_worker"] is True
    timing = json.loads(
        (env["root"] / "in_process" / "test" / "step=0" / "timing.json").read_text()
    )
    assert timing["in_worker"] is False
    # One worker served both jobs (same process; its log is appended to by every start); the
    # second paid no lm-eval import.
    assert pids[0] == pids[1]
    log = _socket(env).with_suffix(".log").read_text()
    assert log.count("listening") == 1, log
    second = json.loads((env["root"] / "worker1" / "test" / "step=0" / "timing.json").read_text())
    assert second["import_lm_eval_s"] < 0.05


@pytest.mark.slow  # starts processes of its own
def test_a_failing_job_fails_with_its_error(env: dict) -> None:
    bad = env["root"] / "bad_base.json"
    bad.write_text(json.dumps({"model": str(env["root"] / "no_such_model")}))
    done = _evaluate(env, "bad", "on", base=bad)
    assert done.returncode != 0
    assert "unavailable" not in done.stderr, "the failure must come from the worker's child"
    assert "Traceback" in done.stderr and "no_such_model" in done.stderr
    assert not (env["root"] / "bad" / "test" / "summary.json").exists()


@pytest.mark.slow  # starts processes of its own
def test_worker_exits_when_idle(env: dict, tmp_path: Path) -> None:
    private = {**env, "tmp": tmp_path}
    done = _evaluate(private, "idle", "on", idle="1")
    assert done.returncode == 0, done.stderr[-3000:]
    sock = _socket(private)
    deadline = time.monotonic() + 30
    while sock.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not sock.exists(), "the worker should exit and remove its socket after 1 s idle"
    assert "exiting" in sock.with_suffix(".log").read_text()


def test_mode_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("GRPO_WORKER", *worker.SCHEDULER_ENVS):
        monkeypatch.delenv(var, raising=False)
    assert worker.wanted()  # auto on a workstation
    key = worker.code_key()
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    # auto under a batch scheduler too, with one worker per allocation
    key42 = worker.code_key()
    assert worker.wanted() and key42 != key
    monkeypatch.setenv("SLURM_JOB_ID", "43")
    assert worker.code_key() not in (key, key42)
    monkeypatch.setenv("GRPO_WORKER", "on")
    assert worker.wanted()
    monkeypatch.setenv("GRPO_WORKER", "off")
    monkeypatch.delenv("SLURM_JOB_ID")
    assert not worker.wanted()
    monkeypatch.setenv("GRPO_WORKER", "sometimes")
    with pytest.raises(ValueError, match="GRPO_WORKER must be auto, on or off"):
        worker.wanted()


def test_the_socket_lives_in_a_private_folder_with_a_short_path(
    monkeypatch, tmp_path: Path
) -> None:
    import tempfile

    deep = tmp_path / ("x" * 90)
    deep.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    path = worker.socket_path()
    assert len(str(path)) < 100, "a long temp dir falls back to /tmp (socket paths max ~107 bytes)"
    assert path.parent.stat().st_mode & 0o777 == 0o700
    short = Path(tempfile.mkdtemp(prefix="gw", dir="/tmp"))  # under the 60-character limit
    monkeypatch.setattr(tempfile, "tempdir", str(short))
    folder = short / f"grpo-worker-{os.getuid()}"
    folder.mkdir()
    folder.chmod(0o755)  # a folder others can enter is refused, not used
    try:
        with pytest.raises(worker.WorkerUnavailable, match="mode 0700"):
            worker.socket_path()
    finally:
        folder.rmdir()
        short.rmdir()


def test_another_hugging_face_cache_gets_another_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """The libraries fix their cache folders and offline flags at import: a worker started for one
    cache must never serve a job of another (the tests' own cache, then a user's run)."""
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    key = worker.code_key()
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    offline = worker.code_key()
    monkeypatch.setenv("HF_HOME", "/elsewhere/hf")
    assert len({key, offline, worker.code_key()}) == 3


@pytest.mark.slow  # starts processes of its own
def test_a_figure_job_in_the_worker_draws_the_in_process_figure(env: dict) -> None:
    # The analysis and figure commands are served too: the same files as in a process of its own
    # (the PDF apart from its creation date, which differs between any two runs), with what such a
    # process reads at start-up taken from the job, not the worker: here a matplotlibrc in the
    # job's working directory that embeds the PDF's fonts as TrueType (Type 3 by default).
    job_dir = env["root"] / "figure_job"
    job_dir.mkdir()
    (job_dir / "matplotlibrc").write_text("pdf.fonttype: 42\n")
    table = write_sheet(env["root"] / "calculations")[2]
    outputs = {}
    for mode in ("off", "on"):
        out = env["root"] / f"weights_{mode}"
        done = subprocess.run(
            [sys.executable, str(CLI), "token-weights", "--table", str(table), "--out", str(out)],
            env={**os.environ, "GRPO_WORKER": mode, "TMPDIR": str(env["tmp"])},
            cwd=job_dir,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert "unavailable" not in done.stderr  # "on": it ran in the worker, or failed
        outputs[mode] = {p.name: p.read_bytes() for p in sorted(out.iterdir())}
    assert set(outputs["off"]) == set(outputs["on"]) >= {"token_weights.png", "token_weights.pdf"}
    assert b"/FontFile2" in outputs["off"]["token_weights.pdf"], "the job's matplotlibrc applies"
    for name, data in outputs["off"].items():
        if name.endswith(".pdf"):
            strip = re.compile(rb"/CreationDate \(D:\d+Z\)")
            assert strip.sub(b"", data) == strip.sub(b"", outputs["on"][name]), name
        else:
            assert data == outputs["on"][name], name


def test_a_jobs_garbage_collections_leave_the_preloaded_pages_shared(tmp_path: Path) -> None:
    # The worker's preloaded objects are out of the children's collections: a full collection in
    # a forked child copies few pages of the worker's (a few thousand of ~36,000 otherwise).
    script = (
        "import gc, os\n"
        "from grpo_ablation.worker import _preload\n"
        "_preload()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    gc.collect()\n"
        "    os._exit(0)\n"
        "print(os.wait4(pid, 0)[2].ru_minflt)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout.split()[-1]) < 5_000
