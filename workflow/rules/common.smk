# Config validation, the design (stages, cells, seeds) and the paths every rule shares.
import json
from dataclasses import asdict
import os
import shutil
from functools import lru_cache
from pathlib import Path

from snakemake.exceptions import WorkflowError

from grpo_ablation.design import checks, cost
from grpo_ablation.design.axes import path_regex
from grpo_ablation.design.options import ComputeConfig
from grpo_ablation.design.schema import check_config
from grpo_ablation.design.slurm import refusal, slurm_problems, slurm_resources
from grpo_ablation.design import packing
from grpo_ablation.design.ablation import Design
from grpo_ablation.design.ledger import Ledger
from grpo_ablation.design.records import draw_source, recorded_draws, study_records
from grpo_ablation.layout import (
    CALCULATIONS_SHEET,
    CALCULATIONS_TABLE,
    CALCULATIONS_VIEW,
    LEDGER,
    MANIFEST,
    REGISTRATION,
    SPLITS,
    TOKEN_WEIGHTS_TABLE,
    Tree,
)


# `--config 'seeds=[0,1,2,3,4]'` hands the seeds over as strings.
if isinstance(config.get("seeds"), list):
    config["seeds"] = [int(s) if isinstance(s, str) and s.isdigit() else s for s in config["seeds"]]
# Every problem at once, the schema's and the design's, each with the key, what is wrong and the
# name meant where one is close; a valid config gets the schema's defaults filled in. The design
# (stages, cells, runs, draws) is built once; the design rule writes it for the jobs.
try:
    DESIGN = check_config(config, Path(workflow.source_path("../schemas/config.schema.yaml")))
except ValueError as err:  # several problems: "<n> problems in the config:", one a line
    several = len(getattr(err, "problems", [err])) > 1
    raise WorkflowError(str(err) if several else f"invalid config: {err}") from None

ROOT = str(DESIGN.folder())
# Base-policy draws (base_policy.draws): everything below the base policy lives per draw, so EXP
# holds a {draw} wildcard that every rule's paths inherit; splits and evaluation tasks are shared.
DRAWS = DESIGN.draws
EXP = Tree(ROOT).draw("{draw}") if DRAWS else ROOT
# A sequential study (study.looks) reads its draws from their records in its tracked folder
# (grpo_ablation.design.records): a draw recorded there, by this checkout or in the commits of
# another, is read as recorded and not built again; the others (BUILT) are built here and
# recorded as each finishes. Records are checked against the registration and the ledger first.
STUDY_RECORDS = study_records(DESIGN)
try:
    RECORDED = (
        recorded_draws(STUDY_RECORDS, DRAWS, Ledger(STUDY_RECORDS / LEDGER))
        if STUDY_RECORDS and (STUDY_RECORDS / REGISTRATION).exists()
        else []
    )
except ValueError as err:
    raise WorkflowError(f"study records: {err}") from err
BUILT = [d for d in DRAWS if d not in RECORDED]
# Every path of the results tree comes from grpo_ablation.layout: TREE for a draw's folder (its
# {draw} wildcard included), SHARED for what the draws share.
TREE, SHARED = Tree(EXP), Tree(ROOT)
# What evaluation jobs need: the evaluation section, with training's generation length (one
# answer protocol) and the compute section's device and precision.
EVALUATION = json.dumps(checks.evaluation_config(config), sort_keys=True)
COMPUTE = json.dumps(ComputeConfig.of(config["compute"]).section_identity(), sort_keys=True)
COMPUTE_OPTIONS = ComputeConfig.of(config["compute"])
def verbatim(text: str):
    """A params value passed as it is: Snakemake reads a plain string as a wildcard pattern, and a
    task's prompt_template holds {question}."""
    return lambda wildcards: text


TASK = verbatim(json.dumps(config["task"], sort_keys=True))
# Hub content (model, data set, external benchmark data, or the CPU stand-in of them) is fetched
# once by the local prefetch rule; configs that need none skip it.
NEEDS_PREFETCH = checks.needs_prefetch(config)
PREFETCH = SHARED.prefetch()
SEEDS = DESIGN.seeds
# The jobs' conda environment (--software-deployment-method conda), relative to workflow/rules;
# the vLLM pin set where the config uses vLLM.
CONDA_ENV = f"../../{checks.conda_env(config)}"
THREADS = int(config["threads_per_job"])


def slurm(gpus):
    """A submitted job's partition and account under SLURM (config `slurm`), by whether it asks
    for a GPU; nothing where the keys are empty (grpo_ablation.design.slurm)."""
    return slurm_resources(config.get("slurm"), gpus)


# Paths into the checkout are relative to the working directory (the repository root, where
# Snakemake runs and every job starts): params and inputs are rerun triggers, and an absolute
# path made a copy of a finished run (cp -a, or a fresh clone beside the copied results/ and
# .snakemake/) plan every job again. Both sides resolved (links included), so a checkout reached
# through a link gives the same relative path. Not workflow.source_path() either: that one points
# into a per-invocation temporary source cache, which changed the params on every run.
RULES_DIR, WORKDIR = Path(str(workflow.current_basedir)), Path.cwd().resolve()
# Every rule runs `python {params.cli} <command>` (workflow/scripts/grpo.py).
CLI = os.path.relpath((RULES_DIR / ".." / "scripts" / "grpo.py").resolve(), WORKDIR)
# The package's sources in the checkout, for rules whose output is the code's (inputs, so that an
# edit rebuilds them).
SRC = Path(os.path.relpath((RULES_DIR / ".." / ".." / "src" / "grpo_ablation").resolve(), WORKDIR))


wildcard_constraints:
    cell=path_regex(),
    seed=r"\d+",
    name=r"[a-z_]+",
    draw=r"\d+",


def write_text(path: str, text: str, log: str) -> None:
    """A run directive's one line: ``text`` into ``path``, what it wrote into ``log``."""
    Path(path).write_text(text)
    Path(log).write_text(f"wrote {path} ({len(text)} characters)\n")


def folder(key, up=1, of="output"):
    """A params function: the folder ``up`` levels above input/output ``key``."""

    def find(wildcards, input, output):
        path = Path((output if of == "output" else input)[key])
        return str(path.parents[up - 1])

    return find


# Report entries of one draw are told apart by a label.
DRAW_LABEL = {"draw": "{draw}"} if DRAWS else {}


def per_draw(paths):
    """Paths holding the {draw} wildcard, one per draw built here (unchanged without draws)."""
    return [str(p).format(draw=d) for d in BUILT for p in paths] if DRAWS else list(paths)


def draw_of(wildcards):
    """A job's draw (None without draws)."""
    return int(wildcards.draw) if DRAWS else None


def exp_of(draw):
    """A draw's folder as a concrete path (what an input function returns is not formatted)."""
    return str(DESIGN.draw_dir(draw))


def winners_for(stage, draw):
    """The winners a stage takes from earlier stages of its draw, read from their selections
    (checkpoints)."""
    out = {}
    for src in DESIGN.stage(stage).sources():
        path = checkpoints.select.get(stage=src, **({"draw": draw} if DRAWS else {})).output[0]
        out[src] = json.loads(Path(path).read_text())["winner"]
    return out


def cells_of(stage, draw):
    return DESIGN.cells(stage, winners_for(stage, draw))


def stage_evals(stage, draw):
    tree = Tree(exp_of(draw))
    return [tree.summary(c.path, s) for c in cells_of(stage, draw) for s in DESIGN.seeds_of(c.path)]


@lru_cache(maxsize=None)
def run_training(cell, seed, draw):
    """One run's TrainingConfig, built once (the train rule reads it twice)."""
    return DESIGN.training_config(DESIGN.parse_cell(cell), int(seed), draw)


def training_json(wildcards):
    """The run's training options as JSON, less each one at its declared neutral value
    (TrainingConfig.rerun_identity): the rerun trigger of its train and push jobs. An option added with the
    value that trains as before it existed leaves it as it was, so no finished run retrains; a value
    away from it (a changed default included) changes it. Push reads options declared before
    neutral values existed, which this JSON always holds."""
    cfg = run_training(wildcards.cell, wildcards.seed, draw_of(wildcards))
    return json.dumps(cfg.rerun_identity(), sort_keys=True)


def training_arguments(wildcards, output):
    """Every training option as JSON: what the run's options file holds. A params function that
    takes ``output`` is, for Snakemake, derived from the output path (here: the run it names), so
    it is no rerun trigger: training_json is."""
    cfg = run_training(wildcards.cell, wildcards.seed, draw_of(wildcards))
    return json.dumps(asdict(cfg), sort_keys=True)


# The config sections jobs read, each by file (written by config_section when it changes), as a
# run's options are (run_options): inline they made `make run` print command lines of kilobytes.
# A file is rewritten only when its section changes, which reruns what reads it, as the section
# in those jobs' params did. push.smk adds the push section.
CONFIG_SECTIONS = {
    "task": json.dumps(config["task"], sort_keys=True),
    "compute": COMPUTE,
    "evaluation": EVALUATION,
    "base_policy": json.dumps(checks.draw_base_policy(config, None), sort_keys=True),
    "prefetch": json.dumps({k: config.get(k) for k in checks.PREFETCH_SECTIONS}, sort_keys=True),
}


def section(name):
    """The input of a job that reads config section ``name`` by file."""
    return SHARED.config_section(name)


# GPUs of a training job: per process times the processes it starts.
TRAIN_GPUS = config["resources"]["gpus_per_train_job"] * COMPUTE_OPTIONS.processes_per_train_job
# resources.runs_per_gpu: train jobs packed N to a GPU (grpo_ablation.design.packing), the other
# GPU jobs taking every slot of theirs; at 1, each job's `gpu` as before.
TRAIN_GPU_RESOURCES = packing.train_resources(config["resources"], TRAIN_GPUS)
EVAL_GPU_RESOURCES = packing.gpu_job_resources(
    config["resources"], config["resources"]["gpus_per_eval_job"]
)


def checkpoints_of(wildcards):
    """Where a run's checkpoints go: its path under results_dir, below config checkpoints_dir
    (none: the run folder)."""
    if not config.get("checkpoints_dir"):
        return "none"
    run = Path(TREE.run("{cell}", "{seed}").format(**dict(wildcards.items())))
    below = run.relative_to(config["results_dir"])
    return str(Path(config["checkpoints_dir"]) / below / "checkpoints")


def base_parameters():
    """The base policy's parameters where its weights are on disk (the prefetched or local model,
    else a base policy built here before), else None: the size of each checkpoint."""
    from grpo_ablation.design.disk import weights_parameters

    folders = []
    if Path(PREFETCH).exists():
        model = json.loads(Path(PREFETCH).read_text()).get("model") or {}
        folders.append(model.get("cache") or model.get("local") if isinstance(model, dict) else model)
    for info in map(Path, per_draw([TREE.base_policy()])):
        folders.append(json.loads(info.read_text()).get("model") if info.exists() else None)
    return next(filter(None, (weights_parameters(Path(f)) for f in folders if f)), None)


def free_bytes(folder):
    """Free bytes of the file system ``folder`` is (or will be) on."""
    path = Path(folder).absolute()
    while not path.exists():
        path = path.parent
    return shutil.disk_usage(path).free


def all_targets(wildcards):
    targets = [SHARED.calculations(CALCULATIONS_SHEET)]
    for draw in BUILT if DRAWS else [None]:
        targets.append(Tree(exp_of(draw)).base_summary())
        for stage in DESIGN.stage_names:
            targets += stage_evals(stage, draw)
    targets += report_targets()
    return targets


# Cheap bookkeeping rules run on the submit host, not through the cluster's queue (tables and figures;
# a report rule belongs here too once it exists).
localrules:
    all,
    design_config,
    config_section,
    run_options,
    design,
    prefetch,
    splits,
    calculations,
    eval_tasks,
    select,
    tables,
    stage_figures,
    token_weight_figure,

