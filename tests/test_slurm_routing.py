"""Each job where it belongs under SLURM: the config's slurm section gives every submitted job its
partition and account (the dry runs in test_slurm_threads.py read them from the plan), a SLURM run
missing one is refused before its first sbatch, naming the key, and the checkpoints can go to a
scratch folder whose needs the run states before its first job."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from grpo_ablation.design import cost
from grpo_ablation.design.slurm import slurm_problems, slurm_resources

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = Path(sys.executable).with_name("snakemake")
SITE = {"account": "acct", "gpu_partition": "gpuq", "cpu_partition": "cpuq"}


def test_gpu_jobs_go_to_the_gpu_partition_and_the_others_to_the_cpu_one():
    assert slurm_resources(SITE, 2) == {"slurm_partition": "gpuq", "slurm_account": "acct"}
    assert slurm_resources(SITE, 0) == {"slurm_partition": "cpuq", "slurm_account": "acct"}
    # no CPU partition: the cluster's default (sbatch without -p); nothing set: nothing added
    assert slurm_resources({**SITE, "cpu_partition": ""}, 0) == {"slurm_account": "acct"}
    assert slurm_resources({}, 1) == {}


def test_a_slurm_run_missing_a_key_is_refused_naming_it():
    assert slurm_problems(SITE, gpu_jobs=43, no_account=False) == []
    problems = slurm_problems({}, gpu_jobs=43, no_account=False)
    assert [p.split(" ")[0] for p in problems] == ["slurm.gpu_partition", "slurm.account"]
    assert "43 planned jobs ask for a GPU" in problems[0]
    # no GPU job planned: no GPU partition needed; a cluster without accounts says so
    assert slurm_problems({}, gpu_jobs=0, no_account=True) == []


def test_nothing_in_the_repository_shadows_a_site_profile():
    """Snakemake looks for a bare --profile name in the working directory first: a top-level
    `slurm` would hide ~/.config/snakemake/slurm/ whenever Snakemake runs in the checkout."""
    assert not (ROOT / "slurm").exists() and not (ROOT / "slurm").is_symlink()
    for entry in ROOT.iterdir():
        assert not (entry.is_symlink() and "profiles" in os.readlink(entry)), entry


def test_the_run_states_what_the_checkpoints_need_where_they_go():
    """The preset's 21 runs of 5 checkpoints of Qwen2.5-0.5B: 290.5 GB, 373.5 GB at the peak (as
    `grpo-ablation disk` says), and a warning where that is more than is free."""
    said = cost.checkpoint_disk([5] * 21, 494_032_768, "newest", "/scratch/u", 10**11)
    assert "21 planned training runs (105 in all) go to /scratch/u (100.0 GB free there)" in said
    assert "290.5 GB, 373.5 GB at the peak" in said and "MORE THAN IS FREE" in said
    assert "MORE THAN" not in cost.checkpoint_disk([5], 494_032_768, "all", "/s", 10**12)
    unknown = cost.checkpoint_disk([5] * 21, None, "newest", "results", None)
    assert unknown.endswith("known once the base policy's weights are on disk.")


def test_a_run_keeps_its_checkpoints_in_the_scratch_folder(tmp_path):
    from grpo_ablation.layout import checkpoint
    from grpo_ablation.training.train import _clear_run, link_checkpoints, saved_checkpoints

    run, scratch = tmp_path / "results/runs/c/seed=0", tmp_path / "scratch/runs/c/seed=0"
    assert link_checkpoints(run, scratch) == scratch.resolve()
    checkpoint(run, 2).mkdir()
    assert (scratch / "checkpoint-2").is_dir() and saved_checkpoints(run)
    assert link_checkpoints(run, tmp_path / "elsewhere") == scratch.resolve(), "kept where it is"
    _clear_run(run)  # a run of other inputs starts afresh: the scratch folder emptied, not unlinked
    assert (run / "checkpoints").is_symlink() and not any(scratch.iterdir())
    # a run that holds its own folder keeps it
    own = tmp_path / "own"
    checkpoint(own, 1).mkdir(parents=True)
    assert link_checkpoints(own, tmp_path / "s2") == (own / "checkpoints").resolve()


@pytest.mark.slow  # starts Snakemake (9-22 s here): the refusal comes after the DAG is built
def test_a_slurm_run_without_partition_and_account_submits_nothing(tmp_path):
    """Through the SLURM profile, for real (not a dry run, whose executor is `dryrun`), in a
    working folder of its own: refused before the scheduler starts, naming both keys. Its train
    jobs packed 4 to a GPU (resources.runs_per_gpu) still count as GPU jobs, and the group size
    they need is named too."""
    env = {
        **os.environ,
        "HF_HOME": str(tmp_path / "hf"),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    }
    results = tmp_path / "results"
    packed = tmp_path / "packed.yaml"
    packed.write_text("resources:\n  runs_per_gpu: 4\n")
    cmd = [
        str(SNAKEMAKE),
        "--snakefile",
        str(ROOT / "Snakefile"),
        "--directory",
        str(tmp_path),
        "--profile",
        str(ROOT / "profiles/slurm"),
        "--configfile",
        str(ROOT / "config/cluster.yaml"),
        str(packed),
        "--config",
        f"results_dir={results}",
        "--nolock",
    ]
    done = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    out = done.stdout + done.stderr
    assert done.returncode != 0, out[-3000:]
    assert "SLURM run refused before any job was submitted" in out, out[-3000:]
    assert "slurm.gpu_partition is empty, and 43 planned jobs ask for a GPU" in out
    assert "slurm.account is empty" in out
    assert "packs one job per sbatch: add --group-components training=4" in out
    assert "Submitted" not in out and not results.exists(), "not even a local job ran"
