"""Every path of the results tree, spelled once.

    <results_dir>/<experiment>/             the experiment folder, shared by the draws
        design.json    the design: config sections, cells, stages and their rows
        data/          train, validation and test splits with manifest.json (their hashes)
        tasks/<split>/ the lm-eval task folders
        calculations/  the worked-numbers sheet, and token_weights.csv (the conventions' worked
                       example of token weights)
        figures/       token_weights.{png,pdf}: its figure
        pooled/        tables, figures and reading over base-policy draws
        study/         a sequential study's look_<n>.json (each look as its ledger holds it)

    studies/<experiment>/ (in the checkout, tracked): a study's registration.json, ledger.jsonl
                       and ledger.head (``design/registration.py``, ``design/ledger.py``), and
                       draw=<d>/ per finished draw: what its looks read, with records.json
                       (``design/records.py``); next.yaml, the next look's override
        draw=<d>/      one base policy's tree (the experiment folder itself without draws):
            base/                           the base policy
            runs/<cell>/seed=<s>/           a training run (checkpoints, rollouts, records)
            eval/base/<split>/summary.json  the base policy's evaluation
            eval/<cell>/seed=<s>/           a run's evaluation: <split>/summary.json,
                                            calibration.json, curve/curve.json
            diagnostics/<cell>/seed=<s>/    steps.csv, summary.json (from the rollout log)
            selection/<stage>.json          a stage's validation winner
            push/<cell>/seed=<s>/push.json  the push of every objective (push_pilot.json: its pilot)
            tables/                         the analysis's numbers (TABLES)
            figures/<stage>/                its figures (STAGE_FIGURES)
            figures/reading.rst             the reading, composed from tables/
            logs/, benchmarks/              per job

``Tree`` builds these paths as strings, so the rules can pass ``"{cell}"`` and ``"{seed}"`` for
Snakemake's wildcards; the analysis and the CLI use the same methods on a real folder.
Importable without torch: the DAG is built from it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# A sequential study's tracked record, beside the results tree: committed with each look.
STUDIES = "studies"
REGISTRATION = "registration.json"
LEDGER = "ledger.jsonl"  # its head: the same name with .head
# Beside them, draw=<d>/ per finished draw: the files a look reads of it, and this manifest.
RECORDS = "records.json"
NEXT_LOOK = "next.yaml"  # the next look's override, written by a look
# Each draw's reading (figures/), composed from its tables; the pooled one has a name of its own:
# the report keeps one file per name.
READING = "reading.rst"
POOLED_READING = "pooled_reading.rst"
# Each reading's HTML view (``render.html_view``), the report's item: the reading rendered.
READING_VIEW = "reading.html"
POOLED_READING_VIEW = "pooled_reading.html"
# A reading's line after its verdict table (an RST comment, not shown): the report's landing page
# (workflow/report/workflow.rst, which spells it again) shows the reading up to it.
LANDING_END = ".. The landing page ends here: the reading goes on on its own page."
# What the pooled job writes in pooled/tables/ (``analysis.draws``); the DAG declares the same.
# A table people read has, beside its CSV, a text (Markdown; reStructuredText for the verdicts,
# whose reading is RST) and its HTML view (``render.html_view``: the text rendered, the table as
# a table, the CSV to download), which is what the report shows of it.
POOLED_TABLES = (
    "results.csv",
    "results.md",
    "results.html",
    "hypotheses.csv",
    "hypotheses.rst",
    "hypotheses.html",
    "draws.csv",
    # one row per (stage, cell, draw): the mean over the draw's seeds, the unit the pooled tests
    # run on; a study's look reads it (``analysis.jobs.study_look.write_look``)
    "draw_means.csv",
    "agreement.csv",
    "agreement.md",
    "agreement.html",
    "effects.csv",
    "efficiency.csv",
    "efficiency.md",
    "efficiency.html",
)
# What the tables job writes in a draw's tables/ (``analysis.jobs.tables.write_all``): every number
# of the analysis, computed once; the figures and the reading read them. The DAG declares the
# same (a rule's output key: ``output_key``), and the job refuses to write any other set. Each
# table people read has its text and HTML view beside its CSV, as in POOLED_TABLES.
TABLES = (
    "results.csv",
    "results.md",
    "results.tex",
    "results.html",
    "objectives.csv",
    "objectives.md",
    "objectives.tex",
    "objectives.html",
    "hypotheses.csv",
    "hypotheses.rst",
    "hypotheses.html",
    "calibration.csv",
    "calibration.md",
    "calibration.html",
    "calibration_bins.csv",
    "coupling.csv",
    "coupling.md",
    "coupling.html",
    "coupling_steps.csv",
    "efficiency.csv",
    "efficiency.md",
    "efficiency.html",
    # long, one row per (stage, cell, quantity): the effect plots' numbers with their roles and
    # the manipulation checks' predictions, for the figures and the reading
    "effects.csv",
    # one row per run: its draw, stage, cell, seed and every per-run quantity
    # (design/quantities.py), which the pooled job reads of each draw
    "runs.csv",
    # what the figures draw, one row per run, checkpoint, step, group or curve point
    "efficiency_fits.csv",
    "efficiency_points.csv",
    "accuracy_curves.csv",
    "training_steps.csv",
    "calibration_groups.csv",
)
# The figures drawn for every stage (figures/<stage>/<kind>.<format>); the effect plot comes
# first: the report opens with it. The first format is the one the report shows.
STAGE_FIGURES = (
    "effects",
    "accuracy",
    "groups",
    "length",
    "clip_truncation",
    "mixed",
    "coupling",
    "efficiency",
)
FIGURE_FORMATS = ("png", "pdf")
# What the pooled figures job draws in pooled/figures/ (``analysis.jobs.pooled_figures``): per stage its
# effect plot over draws (figures/<stage>/<kind>.<format>) and, where the config declares
# hypotheses, their verdicts (figures/verdicts.<format>). The DAG declares the same.
POOLED_STAGE_FIGURES = ("effects",)
POOLED_VERDICTS = "verdicts"


def figure_files(kind: str) -> list[str]:
    """The files of one figure (``<kind>.png``, ``<kind>.pdf``)."""
    return [f"{kind}.{ext}" for ext in FIGURE_FORMATS]


def draw_number(folder: str | Path) -> int | None:
    """The draw whose folder ``folder`` is (``Tree.draw``: ``draw=<d>``); None for an experiment
    folder without draws."""
    name = Path(folder).name
    return int(name.split("=", 1)[1]) if name.startswith("draw=") else None


def output_key(name: str) -> str:
    """A rule's output key for a file: ``results.csv`` -> ``results``, ``results.md`` ->
    ``results_md``, ``results.html`` -> ``results_html``, ``effects.png`` -> ``effects_png``."""
    stem, ext = name.rsplit(".", 1)
    return stem if ext == "csv" else f"{stem}_{ext}"


# What the push report writes in tables/ (``analysis.jobs.push_report``), and the pilot's table.
PUSH_TABLES = ("push.csv", "push_cosine.csv", "push.md", "push.html")
PUSH_PILOT_TABLE = "push_pilot.csv"
# The push's figure (figures/push.<format>).
PUSH_FIGURE = "push"
# The worked-numbers sheet (calculations/), with the conventions' worked example of token weights:
# its numbers there, its figure in figures/.
CALCULATIONS_SHEET = "calculations.md"
CALCULATIONS_VIEW = "calculations.html"  # the sheet's HTML view, the report's item
CALCULATIONS_TABLE = "calculations.csv"
TOKEN_WEIGHTS = "token_weights"
TOKEN_WEIGHTS_TABLE = f"{TOKEN_WEIGHTS}.csv"

# Output key -> file name of each table (``TABLE["effects"]`` is ``effects.csv``): how the analysis
# names a table it reads or writes.
TABLE: dict[str, str] = {output_key(name): name for name in TABLES}
# The same for the pooled job's tables (``POOLED_TABLE["draws"]`` is ``draws.csv``).
POOLED_TABLE: dict[str, str] = {output_key(name): name for name in POOLED_TABLES}
# The same for the push report's (``PUSH_TABLE["push_cosine"]`` is ``push_cosine.csv``).
PUSH_TABLE: dict[str, str] = {output_key(name): name for name in PUSH_TABLES}
# What the evaluation job writes in its folder (``Evaluation``); the diagnostics job's summary
# has the same name in its folder.
SUMMARY = "summary.json"
CALIBRATION = "calibration.json"
CURVE = "curve.json"
# A checkpoint's evaluation folder (``step_folder`` of its split's): its numbers, lm-eval's
# samples and its timings (apart, so that its numbers are byte-identical across reruns), then the
# key that marks it finished, written last.
STEP_RESULTS = "results.json"
STEP_SAMPLES = "samples.jsonl"
STEP_TIMING = "timing.json"
STEP_DONE = "done.json"
# What a training run writes in its folder (``Tree.run``); checkpoint-<step> is TRL's name.
RUN_INFO = "run_info.json"
OBJECTIVE = "objective.json"
OBJECTIVE_TEXT = "objective.md"
BUDGET = "budget.json"
METRICS_LOG = "metrics.jsonl"  # the trainer's log, one line a step
ROLLOUTS = "rollouts"
CHECKPOINTS = "checkpoints"
CURVE_POLICIES = "curve"  # the weights-only policies of the efficiency curve
# The options that decide a rerun (TrainingConfig.rerun_identity); the seconds of each attempt.
RUN_IDENTITY = "run_identity.json"
WALL_TIME = "wall_time.json"
CHECKPOINT_PREFIX = "checkpoint-"
# Written last by the Trainer when it saves a checkpoint: its presence marks the save complete.
TRAINER_STATE = "trainer_state.json"
# The diagnostics job's per-step table (beside its summary); a split folder's and a task folder's
# manifest; the base-policy job's record.
STEPS = "steps.csv"
# The push's two purposes (training/push.py): the replicates a push hypothesis is judged on, and
# the pilot, on other prompts and keys, its SD is planned from.
PUSH_PURPOSES = ("test", "pilot")
MANIFEST = "manifest.json"
BASE_INFO = "base_policy.json"
# The fixed splits, one JSONL file each in data/ beside their manifest (``split_path``).
SPLITS = ("train", "validation", "test")
# The mixed-group calibration's working folder in a run's evaluation: per saved policy
# (``step_folder``), the rows of the prompts it sampled in training and their lm-eval task.
CALIBRATION_WORK = "calibration"
CALIBRATION_ROWS = "rows.jsonl"
CALIBRATION_TASK = "task"
# In a base policy's model folder: the local warm start's record; a converted GGUF's provenance.
WARM_START = "warm_start.json"
CONVERSION = "conversion.json"


def run_key(cell: str, seed: Any) -> str:
    """``<cell>/seed=<s>``: how every per-run folder (runs/, eval/, diagnostics/ ...) names a run."""
    return f"{cell}/seed={seed}"


@dataclass(frozen=True)
class Evaluation:
    """One evaluation folder (``eval/<cell>/seed=<s>``, or the base policy's ``eval/base``): the
    files the evaluation job writes under its ``--out``, which ``Tree`` spells from the root."""

    folder: str | Path

    def split(self, split: str) -> str:
        return f"{self.folder}/{split}"

    def summary(self, split: str = "test") -> str:
        return f"{self.split(split)}/{SUMMARY}"

    def calibration(self) -> str:
        return f"{self.folder}/{CALIBRATION}"

    def curve_folder(self) -> str:
        return f"{self.folder}/curve"

    def curve(self) -> str:
        return f"{self.curve_folder()}/{CURVE}"


# The files that hold a model's weights (optimizer state and tokenizer files are not).
WEIGHT_FILES = ("*.safetensors", "pytorch_model*.bin")


def weight_files(folder: Path) -> list[Path]:
    """A local model folder's weight files, sorted: what identifies its weights (by name, size and
    mtime) for an evaluation's cache and for a run's record of its base model."""
    return sorted(f for pattern in WEIGHT_FILES for f in Path(folder).glob(pattern))


def weight_identity(folder: Path) -> list[list[Any]]:
    """A local model's weights as a cache key: each weight file's path, size and mtime."""
    return [[str(f), f.stat().st_size, f.stat().st_mtime_ns] for f in weight_files(folder)]


def split_path(folder: str | Path, split: str) -> Path:
    """A split's file in a data folder (``data/<split>.jsonl``)."""
    return Path(folder) / f"{split}.jsonl"


def step_folder(folder: str | Path, step: Any) -> Path:
    """``<folder>/step=<step>``: how an evaluation names what it measured of one saved policy."""
    return Path(folder) / f"step={step}"


def checkpoint(run: str | Path, step: Any) -> Path:
    """A run folder's checkpoint of ``step`` (``checkpoints/checkpoint-<step>``)."""
    return Path(run) / CHECKPOINTS / f"{CHECKPOINT_PREFIX}{step}"


def checkpoint_step(path: str | Path) -> int | None:
    """The step of a ``checkpoint-<step>`` folder, else None."""
    name = Path(path).name
    tail = name.removeprefix(CHECKPOINT_PREFIX)
    return int(tail) if tail != name and tail.isdigit() else None


@dataclass(frozen=True)
class Tree:
    """The results tree under ``folder``: a draw's folder, or the experiment folder for what the
    draws share (``data``, ``tasks``, ``calculations``, ``pooled``)."""

    folder: str | Path

    def at(self, *parts: Any) -> str:
        return "/".join([str(self.folder), *map(str, parts)])

    # -- shared by draws -------------------------------------------------------------------------
    def data(self, name: str) -> str:
        return self.at("data", name)

    def split(self, split: str) -> str:
        return str(split_path(self.at("data"), split))

    def task_manifest(self, split: str) -> str:
        return self.at("tasks", split, MANIFEST)

    def calculations(self, name: str) -> str:
        return self.at("calculations", name)

    def design(self) -> str:
        """The design the DAG runs (``grpo_ablation.design.ablation.Design.write``)."""
        return self.at("design.json")

    def design_config(self) -> str:
        """The config sections the design is built from, which the design job reads (by file: on
        its command line they were its longest line, 8-19 kB)."""
        return self.at("design_config.json")

    def config_section(self, name: str) -> str:
        """One config section a job reads (task, compute, evaluation, ...), by file for the same
        reason as ``design_config``."""
        return self.at(f"config/{name}.json")

    def prefetch(self) -> str:
        return self.at("prefetch.json")

    def draw(self, draw: Any) -> str:
        """A base-policy draw's folder (``draw=<d>``)."""
        return self.at(f"draw={draw}")

    def pooled(self) -> str:
        return self.at("pooled")

    def study_look(self, units: int) -> str:
        """The record of the study's look at ``units`` draws, as the ledger holds it."""
        return self.at("study", f"look_{units:03d}.json")

    def pooled_tables(self) -> dict[str, str]:
        """In the pooled folder: its tables (``POOLED_TABLES``), by output key."""
        return {output_key(name): self.at("tables", name) for name in POOLED_TABLES}

    def pooled_reading(self) -> str:
        """In the pooled folder: its reading."""
        return self.at(POOLED_READING)

    def pooled_reading_view(self) -> str:
        """In the pooled folder: its reading's HTML view."""
        return self.at(POOLED_READING_VIEW)

    def pooled_stage_figures(self, stage: str) -> dict[str, str]:
        """In the pooled folder: a stage's figures over draws (``POOLED_STAGE_FIGURES`` in each of
        ``FIGURE_FORMATS``), by output key."""
        return {
            output_key(name): self.figure(name, stage)
            for kind in POOLED_STAGE_FIGURES
            for name in figure_files(kind)
        }

    def pooled_verdict_figures(self) -> dict[str, str]:
        """In the pooled folder: the figure of the declared hypotheses' verdicts, by output key."""
        return {output_key(name): self.figure(name) for name in figure_files(POOLED_VERDICTS)}

    def pooled_figures(self, stages: list[str], hypotheses: bool) -> list[str]:
        """In the pooled folder: every file of the pooled figures job, the verdicts first (where
        ``hypotheses`` are declared), then each stage's figures."""
        verdicts = list(self.pooled_verdict_figures().values()) if hypotheses else []
        return verdicts + [p for s in stages for p in self.pooled_stage_figures(s).values()]

    # -- one draw --------------------------------------------------------------------------------
    def base_policy(self) -> str:
        return self.at("base", BASE_INFO)

    def run(self, cell: str, seed: Any) -> str:
        return self.at("runs", run_key(cell, seed))

    def run_info(self, cell: str, seed: Any) -> str:
        return f"{self.run(cell, seed)}/{RUN_INFO}"

    def run_options(self, cell: str, seed: Any) -> str:
        """A run's training options, which its train and push jobs read (``config_section``)."""
        return self.at("config", "runs", f"{run_key(cell, seed)}.json")

    def objective(self, cell: str, seed: Any) -> str:
        return f"{self.run(cell, seed)}/{OBJECTIVE}"

    def evaluation(self, cell: str, seed: Any) -> str:
        return self.at("eval", run_key(cell, seed))

    def summary(self, cell: str, seed: Any, split: str = "test") -> str:
        return Evaluation(self.evaluation(cell, seed)).summary(split)

    def base_summary(self, split: str = "test") -> str:
        return Evaluation(self.at("eval", "base")).summary(split)

    def calibration(self, cell: str, seed: Any) -> str:
        return Evaluation(self.evaluation(cell, seed)).calibration()

    def curve(self, cell: str, seed: Any) -> str:
        return Evaluation(self.evaluation(cell, seed)).curve()

    def diagnostics(self, cell: str, seed: Any) -> str:
        return self.at("diagnostics", run_key(cell, seed))

    def steps(self, cell: str, seed: Any) -> str:
        """The diagnostics job's per-step table of a run."""
        return f"{self.diagnostics(cell, seed)}/{STEPS}"

    def diagnostics_summary(self, cell: str, seed: Any) -> str:
        return f"{self.diagnostics(cell, seed)}/{SUMMARY}"

    def selection(self, stage: str) -> str:
        return self.at("selection", f"{stage}.json")

    def push(self, cell: str, seed: Any, purpose: str = "test") -> str:
        """The push record of one purpose (``PUSH_PURPOSES``): the test's push.json, the
        pilot's push_pilot.json."""
        name = "push.json" if purpose == "test" else f"push_{purpose}.json"
        return self.at("push", run_key(cell, seed), name)

    def table(self, name: str) -> str:
        return self.at("tables", name)

    def tables(self) -> dict[str, str]:
        """The tables job's files (``TABLES``), by output key."""
        return {output_key(name): self.table(name) for name in TABLES}

    def figure(self, name: str, stage: str | None = None) -> str:
        return self.at("figures", name) if stage is None else self.at("figures", stage, name)

    def stage_figures(self, stage: str) -> dict[str, str]:
        """A stage's figure files (``STAGE_FIGURES`` in each of ``FIGURE_FORMATS``), by output
        key (``<kind>_<format>``)."""
        return {
            output_key(name): self.figure(name, stage)
            for kind in STAGE_FIGURES
            for name in figure_files(kind)
        }

    def run_log(self, job: str, cell: str, seed: Any) -> str:
        return self.log(job, run_key(cell, seed))

    def run_benchmark(self, job: str, cell: str, seed: Any) -> str:
        return self.benchmark(job, run_key(cell, seed))

    def log(self, *parts: Any) -> str:
        return self.at("logs", *parts[:-1], f"{parts[-1]}.log")

    def benchmark(self, *parts: Any) -> str:
        return self.at("benchmarks", *parts[:-1], f"{parts[-1]}.tsv")


# Greedy prefix: the last runs/ or eval/ segment counts (the results folder may hold such a name).
_RUN_PATH = re.compile(
    r"(?:.*/)?(?:eval|runs|diagnostics|push)/(?P<cell>.+?)/seed=(?P<seed>\d+)(?:/|$)"
)


def cell_and_seed(path: str | Path) -> tuple[str, int]:
    """The (cell, seed) a run's or an evaluation's path belongs to (``Tree.run``, ``summary`` ...)."""
    match = _RUN_PATH.match(str(path))
    if match is None:
        raise ValueError(f"{path} is not under runs/, eval/, diagnostics/ or push/ <cell>/seed=<s>")
    return match["cell"], int(match["seed"])
