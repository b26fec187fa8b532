"""Reading what a finished experiment recorded, for the benchmarks that measure one.

The pipeline, evaluation and memory benchmarks measure no time of their own: they read the
Snakemake ``benchmark:`` file of every job (wall, CPU, peak RSS) and the timers the jobs wrote
(``timing.json`` of each evaluation, ``run_info.json`` of each run). A design with base-policy
draws keeps a whole experiment tree under each ``draw=<d>/``, so every reader walks those too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grpo_ablation.layout import STEP_TIMING

if TYPE_CHECKING:
    import pandas as pd

# The workflow's scripts and configs, for benchmarks that run the workflow's own commands.
ROOT = Path(__file__).resolve().parents[1]


def subtrees(exp_dir: Path) -> list[Path]:
    """The experiment folder and, with base-policy draws, each draw's folder (draw=<d>/)."""
    return [exp_dir, *sorted(exp_dir.glob("draw=*"))]


def one_draw(exp_dir: Path) -> Path:
    """A one-base-policy folder: the experiment itself, or its first draw's folder."""
    return next(iter(sorted(exp_dir.glob("draw=*"))), exp_dir)


def read_job_benchmarks(exp_dir: Path) -> pd.DataFrame:
    """One row per job from Snakemake's ``benchmark:`` files (every draw's too): rule, wall s,
    cpu s, peak RSS, and the job's end (file mtime) and start (end - wall); ``folder`` is the
    experiment or draw folder the job belongs to, ``job`` its path under ``benchmarks/``.

    Raises FileNotFoundError when there is none: every figure read from them needs a finished
    pipeline.
    """
    import pandas as pd

    rows = []
    for folder in subtrees(exp_dir):
        root = folder / "benchmarks"
        for path in sorted(root.rglob("*.tsv")):
            last = pd.read_csv(path, sep="\t").iloc[-1]
            end = path.stat().st_mtime
            rows.append(
                {
                    "folder": folder,
                    "rule": path.relative_to(root).parts[0].removesuffix(".tsv"),
                    "job": str(path.relative_to(root)),
                    "wall_s": float(last["s"]),
                    "cpu_s": float(last["cpu_time"]),
                    "max_rss_mb": float(last["max_rss"]),
                    "end": end,
                    "start": end - float(last["s"]),
                }
            )
    if not rows:
        raise FileNotFoundError(
            f"no benchmark files under {exp_dir}/benchmarks: run the pipeline first"
        )
    return pd.DataFrame(rows)


def pipeline_wall(jobs: pd.DataFrame) -> float:
    """First job start to last job end (Snakemake's benchmark files)."""
    return float(jobs["end"].max() - jobs["start"].min())


def eval_dir(folder: Path, job: str) -> Path:
    """``evaluate/<cell>/seed=<s>.tsv`` or ``evaluate/base.tsv`` (rule ``evaluate_base``, filed
    under ``evaluate/``) -> the job's eval directory."""
    return folder / "eval" / Path(*Path(job).with_suffix("").parts[1:])


def timings(directory: Path) -> list[dict[str, Any]]:
    """Every ``timing.json`` under an evaluation's directory."""
    return [json.loads(t.read_text()) for t in directory.rglob(STEP_TIMING)]
