"""Upgrades that keep finished runs (issue #40): a run is retrained only when what it trains
changes. A copy of the checkout (its source, Snakefile, rules and schema) is edited as a
contributor would, its schema rewritten from the copy's options (``grpo-ablation schema``), and the
smoke DAG planned with it (``snakemake -n``) against the session's finished smoke run, from the
checkout, whose ``.snakemake`` holds what the runs were trained with. The targets are the finished
runs' outputs (run_info.json, evaluations, push): the schema written from the copy changes the
design, and a dry run hides every job behind the selection checkpoint that this reruns."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from conftest import BIN, ROOT, SmokePipeline

from grpo_ablation.layout import RUN_INFO, SUMMARY

OPTIONS = "src/grpo_ablation/design/options.py"
ANCHOR = "    # --- bookkeeping ---\n"


def checkout_copy(tmp_path: Path, edit: Callable[[str], str]) -> Path:
    """The checkout's source, Snakefile and workflow, copied, with ``edit`` applied to the options'
    declarations and the schema's sections written from them. The copy's ``workflow/scripts`` and
    ``envs`` link to the checkout's, so every rule's ``cli`` param (``workflow/scripts/grpo.py``
    resolved, relative to the working directory: the checkout) is the one the finished runs
    recorded."""
    copy = tmp_path / "checkout"
    shutil.copytree(ROOT / "src", copy / "src", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(
        ROOT / "workflow",
        copy / "workflow",
        ignore=shutil.ignore_patterns("__pycache__", "scripts"),
    )
    (copy / "workflow/scripts").symlink_to(ROOT / "workflow/scripts")
    (copy / "envs").symlink_to(ROOT / "envs")
    shutil.copy2(ROOT / "Snakefile", copy / "Snakefile")
    options = copy / OPTIONS
    text = options.read_text()
    edited = edit(text)
    assert edited != text, "the edit changed nothing"
    options.write_text(edited)
    python(copy, "-m", "grpo_ablation.cli", "schema")
    return copy


def environment(copy: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": f"{copy / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
        "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
    }


def python(copy: Path, *args: str) -> str:
    """Run the copy's package (stdout)."""
    done = subprocess.run(
        [sys.executable, *args], env=environment(copy), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done.stdout


def run_outputs(exp: Path) -> list[str]:
    """Every finished run's outputs: its training, its evaluations and its push."""
    files = [*exp.glob(f"runs/**/{RUN_INFO}"), *exp.glob(f"eval/**/{SUMMARY}")]
    return sorted(map(str, [*files, *exp.glob("push/**/push.json")]))


def planned(copy: Path, smoke: SmokePipeline) -> dict[str, int]:
    """The jobs ``snakemake -n`` plans for the finished runs' outputs with the copy's Snakefile,
    rule by rule, in the checkout (its .snakemake records the runs' params)."""
    done = subprocess.run(
        [
            str(BIN / "snakemake"),
            "-n",
            "--nolock",
            "--cores",
            "2",
            "--snakefile",
            str(copy / "Snakefile"),
            "--configfile",
            "config/smoke.yaml",
            "--config",
            f"results_dir={smoke.root}",
            "--",
            *run_outputs(smoke.exp),
        ],
        cwd=ROOT,
        env=environment(copy),
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    if "Nothing to be done" in out:
        return {}
    assert "Job stats:" in out, out[-3000:]
    table = out.split("Job stats:", 1)[1].split("\ntotal", 1)[0]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)\s*$", table, re.M)}


def test_an_option_added_at_its_neutral_value_retrains_no_finished_run(smoke_pipeline, tmp_path):
    """The contributor's step: declare a training option whose default reproduces today's
    behaviour (``neutral=`` the default) and write the schema; the finished runs stay."""
    declaration = (
        "    entropy_bonus: float = option(\n"
        '        0.0, "a made-up option: 0 trains as before it existed", neutral=0.0, minimum=0\n'
        "    )\n"
    )
    copy = checkout_copy(tmp_path, lambda text: text.replace(ANCHOR, declaration + ANCHOR, 1))
    assert planned(copy, smoke_pipeline) == {}
    # the copy really declares the option, and its schema states it (else this proves nothing)
    probe = "from grpo_ablation.design.options import TrainingConfig as T; print(T().entropy_bonus)"
    assert python(copy, "-c", probe).strip() == "0.0"
    assert "entropy_bonus" in (copy / "workflow/schemas/config.schema.yaml").read_text()


def test_a_compute_option_added_at_its_neutral_value_reruns_no_job(smoke_pipeline, tmp_path):
    """The same for the compute section, which every train and evaluation job reads by file:
    the file holds the section less its options at their neutral values."""
    declaration = (
        "    made_up_switch: bool = option(\n"
        '        False, "a made-up option: false runs as before it existed", neutral=False\n'
        "    )\n"
    )
    anchor = "    gradient_checkpointing: bool = option("
    copy = checkout_copy(tmp_path, lambda text: text.replace(anchor, declaration + anchor, 1))
    assert planned(copy, smoke_pipeline) == {}
    probe = "from grpo_ablation.design.options import ComputeConfig as C; print(C().made_up_switch)"
    assert python(copy, "-c", probe).strip() == "False"


def test_a_changed_default_retrains_the_runs_it_changes(smoke_pipeline, tmp_path):
    """The default of an existing option changes (the std's epsilon, which no stage varies): every
    finished run trains with it, so every run is planned again."""
    old = 'option(1e-4, "added to the std'
    copy = checkout_copy(
        tmp_path, lambda text: text.replace(old, 'option(1e-3, "added to the std', 1)
    )
    runs = list(smoke_pipeline.exp.glob(f"runs/**/{RUN_INFO}"))
    assert runs
    jobs = planned(copy, smoke_pipeline)
    assert jobs["train"] == len(runs) and jobs["evaluate"] == len(runs), jobs
