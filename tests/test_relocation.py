"""Results move with their checkout: nothing a job is planned by (its params, inputs, outputs and
what Snakemake records of them) holds the checkout's absolute path, so a finished run copied
elsewhere (``cp -a``), or a fresh clone with the finished ``results/`` and ``.snakemake/``
beside it, plans no job. (Every rule's ``cli`` param was once the absolute path of
``workflow/scripts/grpo.py``, and the jobs' code inputs absolute paths into ``src/``: a copy
planned every job again, "Params have changed".)

The finished run is the session's smoke run (``smoke_pipeline``), not trained again: its results
are copied into a copy of the checkout as its own ``results/``, and ``snakemake --touch
--forceall`` there records every job's metadata (params, inputs, code, input checksums) as a run
there would. Each case then copies that folder and plans the smoke DAG with ``snakemake -n``."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from conftest import ROOT, jobs, snakemake

pytestmark = pytest.mark.slow
CONFIG = "config/smoke.yaml"


def checkout_files() -> list[str]:
    """The checkout's files as a commit of its working tree holds them (tracked, and untracked
    ones git does not ignore; none of results/ or .snakemake/ but what is tracked)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\0")
    return sorted(f for f in listed if f and (ROOT / f).is_file())


def copy_checkout(dest: Path, keep_mtimes: bool) -> Path:
    """The checkout's files copied to ``dest``: with their mtimes (``cp -a``), or new ones, as a
    fresh clone has them."""
    for name in checkout_files():
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        (shutil.copy2 if keep_mtimes else shutil.copy)(ROOT / name, dest / name)
    return dest


def copy_tree(src: Path, dest: Path) -> None:
    """``cp -a``: links kept as links, mtimes kept."""
    shutil.copytree(src, dest, symlinks=True, copy_function=shutil.copy2, dirs_exist_ok=True)


def in_copy(checkout: Path, *args: str) -> str:
    """Snakemake on the smoke config in ``checkout``, its Snakefile importing that copy's package
    (not the checkout's, which the editable install puts on the path); stdout and stderr."""
    path = os.pathsep.join(filter(None, [str(checkout / "src"), os.environ.get("PYTHONPATH")]))
    done = snakemake(CONFIG, *args, cwd=checkout, env={"PYTHONPATH": path})
    return done.stdout + done.stderr


def planned(checkout: Path) -> str:
    """What ``snakemake -n`` plans in ``checkout``: "" when nothing, else each rule's job count
    and every distinct reason Snakemake gives."""
    out = in_copy(checkout, "-n")
    if "Nothing to be done" in out:
        return ""
    table = out.split("Job stats:", 1)[-1].split("\ntotal", 1)[0]
    counts = {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)\s*$", table, re.M)}
    assert counts or not jobs(out), out[-3000:]
    reasons = Counter(m.strip() for m in re.findall(r"^\s*reason: (.*)$", out, re.M))
    listed = "\n".join(f"  {n} x {r[:600]}" for r, n in reasons.most_common())
    return f"planned {sum(counts.values())} jobs {counts}, for these reasons:\n{listed}"


@pytest.fixture(scope="module")
def finished(smoke_pipeline, tmp_path_factory) -> Path:
    """A copy of the checkout whose ``results/`` is the session's finished smoke run, and whose
    ``.snakemake/`` records every job as run there."""
    home = copy_checkout(tmp_path_factory.mktemp("first") / "grpo_ablation", keep_mtimes=True)
    copy_tree(smoke_pipeline.root, home / "results")
    touched = in_copy(home, "--touch", "--forceall")
    assert re.search(r"(\d+) of \1 steps \(100%\) done", touched), touched[-3000:]
    assert len(records(home)) > 100, "the touch recorded the jobs' metadata"
    assert not (plan := planned(home)), f"where it ran, the finished run {plan}"
    return home


def records(checkout: Path) -> list[dict]:
    """What Snakemake recorded of each output in ``checkout`` (.snakemake/metadata)."""
    files = (checkout / ".snakemake/metadata").rglob("*")
    return [json.loads(f.read_text()) for f in sorted(files) if f.is_file()]


def test_what_snakemake_records_of_the_jobs_names_no_absolute_path(finished):
    """Params, inputs, shell commands: no field of any job's record holds the absolute path of the
    copy it ran in, or of the checkout."""
    named = Counter(
        f"{record.get('rule')}.{field}"
        for record in records(finished)
        for field, value in record.items()
        if any(str(root) in json.dumps(value) for root in (finished, ROOT))
    )
    assert not named, f"fields naming an absolute path (rule.field: records): {dict(named)}"


def test_a_finished_run_copied_elsewhere_plans_no_job(finished, tmp_path):
    moved = tmp_path / "elsewhere" / "grpo_ablation"
    copy_tree(finished, moved)
    assert not (plan := planned(moved)), f"copied to {moved}, the finished run {plan}"


def test_a_fresh_clone_beside_the_finished_results_plans_no_job(finished, tmp_path):
    """The checkout's files with new mtimes (newer than every result: the code inputs are checked
    by their recorded checksums), the finished results/ and .snakemake/ copied in."""
    clone = copy_checkout(tmp_path / "clone" / "grpo_ablation", keep_mtimes=False)
    for kept in ("results", ".snakemake"):
        copy_tree(finished / kept, clone / kept)
    assert not (plan := planned(clone)), f"beside a fresh clone, the finished run {plan}"
