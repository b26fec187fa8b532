"""SLURM jobs get the threads the config asks for: Snakemake 9 constrains every job's threads by
`--cores`, remote jobs included, so no local `cores` (a workflow profile's) may reach them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = Path(sys.executable).with_name("snakemake")
# A path: no top-level `slurm` in the repository shadows a site profile of that name.
PROFILE = "profiles/slurm"
# The config's `slurm` section as a dry run is given it (grpo_ablation.design.slurm).
SITE = {"account": "acct", "gpu_partition": "gpuq", "cpu_partition": "cpuq"}
SITE_ARG = "slurm={" + ", ".join(f"{k}: {v}" for k, v in SITE.items()) + "}"


def _dry_run(
    tmp_path: Path, *args: str, config: tuple[str, ...] = (), rule: str = "train"
) -> list[dict[str, str]]:
    env = {k: v for k, v in os.environ.items() if k != "SNAKEMAKE_PROFILE"}
    env.update(
        HF_HOME=str(tmp_path / "hf"),
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    )
    cmd = [
        str(SNAKEMAKE),
        "-n",
        "-p",
        *args,
        "--config",
        f"results_dir={tmp_path / 'results'}",
        *config,
    ]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    assert not (tmp_path / "results").exists(), "a dry run must write nothing"
    jobs = []
    # Jobs of a group (the evaluation rules) are listed indented under their group.
    pattern = rf"^ *rule ({rule}):\n(.*?^Shell command: [^\n]*)"
    for name, block in re.findall(pattern, out, re.M | re.S):
        job = dict(re.findall(r"^ +(\w+): ([^\n]*)$", block, re.M)) | {"rule": name}
        job["shell"] = re.search(r"^Shell command: ([^\n]*)", block, re.M).group(1)
        jobs.append(job)
    assert jobs, out[-3000:]
    return jobs


@pytest.mark.slow  # starts processes of its own
def test_slurm_train_jobs_get_the_configured_threads_and_resources(tmp_path):
    jobs = _dry_run(tmp_path, "--profile", PROFILE, "--configfile", "config/cluster.yaml")
    assert len(jobs) == (4 + 4 - 1) * 3
    for job in jobs:
        assert job["threads"] == "8"
        assert re.search(r" --threads 8 ", job["shell"]), job["shell"]
        resources = dict(kv.split("=", 1) for kv in job["resources"].split(", "))
        assert resources["gpu"] == "1" and resources["cpus_per_task"] == "8"
        assert resources["mem_mb"] == "32000"


def test_other_slurm_jobs_run_as_many_threads_as_they_get_cpus():
    import yaml

    conf = yaml.safe_load((ROOT / "profiles/slurm/config.yaml").read_text())
    for rule, threads in conf["set-threads"].items():
        assert conf["set-resources"][rule]["cpus_per_task"] == threads, rule


@pytest.mark.slow  # starts processes of its own
def test_local_runs_take_their_cores_from_the_command_line(tmp_path):
    assert not (ROOT / "profiles/default").exists(), "a workflow profile would cap SLURM jobs"
    jobs = _dry_run(tmp_path, "--cores", "2", config=("threads_per_job=8",))
    assert {j["threads"] for j in jobs} == {"2"}
    assert all(" --threads 2 " in j["shell"] for j in jobs)


def local_rules(config: dict | None = None) -> set[str]:
    """The rules the workflow declares local (``localrules:`` or ``localrule: True``), and with a
    (validated) ``config`` those whose ``localrule: checks.<name>(config)`` holds for it."""
    from grpo_ablation.design import checks

    text = "\n".join(p.read_text() for p in (ROOT / "workflow/rules").glob("*.smk"))
    listed = re.search(r"^localrules:\n((?: +\w+,?\n)+)", text, re.M)
    names = set(re.findall(r"\w+", listed.group(1))) if listed else set()
    for rule, body in re.findall(r"^rule (\w+):\n((?:[ #].*\n|\n)*)", text, re.M):
        if re.search(r"^ +localrule: True", body, re.M):
            names.add(rule)
        check = re.search(r"^ +localrule: checks\.(\w+)\(config\)", body, re.M)
        if check and config is not None and getattr(checks, check.group(1))(config):
            names.add(rule)
    return names


@pytest.mark.slow  # starts processes of its own
def test_every_slurm_job_asks_for_the_time_and_memory_the_config_sets(tmp_path):
    """One place sizes the jobs: the config's resources section; the profile sets CPUs only. One
    place says where they run: the config's slurm section, the GPU partition for the jobs that ask
    for a GPU, the CPU partition for the others, every one charged to the account; the hub model's
    look-up and the analysis run on the submit host."""
    import yaml

    cluster = yaml.safe_load((ROOT / "config/cluster.yaml").read_text())
    local = local_rules(cluster)
    assert {"prefetch", "tables", "effects_reading", "figures", "base_policy"} <= local
    assert "base_policy" not in local_rules(
        yaml.safe_load((ROOT / "config/smoke.yaml").read_text())
    )

    profile = yaml.safe_load((ROOT / "profiles/slurm/config.yaml").read_text())
    for rule, sizes in profile["set-resources"].items():
        assert not {"runtime", "mem_mb"} & set(sizes), rule
    assert "default-resources" not in profile, "the config's slurm section says where jobs run"
    limits = cluster["resources"]
    jobs = _dry_run(
        tmp_path,
        "--profile",
        PROFILE,
        "--configfile",
        "config/cluster.yaml",
        config=(SITE_ARG,),
        rule=r"\w+",
    )
    submitted, partitions = {}, {}
    for job in jobs:
        resources = dict(kv.split("=", 1) for kv in job.get("resources", "").split(", ") if kv)
        if job["rule"] in local:  # runs on the submit host
            continue
        submitted[job["rule"]] = (resources.get("runtime"), resources.get("mem_mb"))
        gpu = int(resources.get("gpu", 0)) > 0
        partitions.setdefault(job["rule"], set()).add(
            (gpu, resources.get("slurm_partition"), resources.get("slurm_account"))
        )
    key = {"evaluate_base": "eval", "evaluate": "eval"}
    assert set(submitted) == {"train", "evaluate_base", "evaluate", "diagnostics"}
    on_gpus = (True, SITE["gpu_partition"], SITE["account"])
    assert partitions == {
        "train": {on_gpus},
        "evaluate": {on_gpus},
        "evaluate_base": {on_gpus},
        "diagnostics": {(False, SITE["cpu_partition"], SITE["account"])},
    }
    for rule, (runtime, mem_mb) in submitted.items():
        prefix = key.get(rule, rule)
        assert (runtime, mem_mb) == (
            str(limits[f"{prefix}_runtime"]),
            str(limits[f"{prefix}_mem_mb"]),
        ), rule
