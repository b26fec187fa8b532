"""What `make run`, the README's first command, prints: Snakemake's lines cut to LINE_MAX
characters (a job's input list runs to 18,000), the cut said, and a failure still failing the
command with its message on screen. Run against a stand-in `snakemake` that prints such a line, so
the test reads the Makefile's own recipe and no job runs."""

import subprocess
from pathlib import Path

from conftest import ROOT

LINE_MAX = 300  # the Makefile's default
INPUTS = "input: " + ", ".join(
    f"results/default/draw=9/runs/cell={i}/run_info.json" for i in range(400)
)


def make_run(tmp_path: Path, exit_status: int) -> subprocess.CompletedProcess:
    """`make run` with a stand-in venv whose snakemake prints a job block and a last line, then
    exits with ``exit_status``."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / ".installed").touch()
    fake = venv / "bin" / "snakemake"
    fake.write_text(
        "#!/bin/bash\n"
        f"echo 'rule tables:'\necho '    {INPUTS}'\n"
        f"echo 'Error in rule tables: the last line' >&2\nexit {exit_status}\n"
    )
    fake.chmod(0o755)
    return subprocess.run(
        [
            "make",
            "--silent",
            "--no-print-directory",
            "-o",
            f"{venv}/.installed",
            "run",
            f"VENV={venv}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_make_run_cuts_long_lines_and_says_so(tmp_path):
    done = make_run(tmp_path, exit_status=0)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "rule tables:" in lines
    cut = next(line for line in lines if line.startswith("    input: results/default/draw=9"))
    more = len(INPUTS) + 4 - LINE_MAX
    assert cut.endswith(f" [... {more} more characters]")
    assert all(len(line) <= LINE_MAX + 40 for line in lines)


def test_a_failure_still_fails_make_run_with_its_message_shown(tmp_path):
    done = make_run(tmp_path, exit_status=1)
    assert done.returncode != 0
    assert "Error in rule tables: the last line" in done.stdout
