"""The ablation design, built once from the validated config: stages, cells, runs, winners.

A *stage* is declared in the config: the axes it varies (``vary``, crossed when there are
several; the first is the stage's *primary* axis), values it holds (``fixed``, possibly the
validation winner of an earlier stage), and the primary axis's *reference* value each cell is
compared with. Every other axis stays at the baseline, the shared ``training`` section. Nothing
here is specific to a stage or an axis: axes are declared in ``grpo_ablation.design.axes``.

A cell is spelled as key=value path segments (``std=population/agg=sequence_mean/G=8``); a cell
shared by two stages is one directory, so it is trained once.

``Design.of(config)`` takes the design's sections of the config (seeds, training, stages,
hypotheses, the base-policy draws) and the experiment folder; each is parsed once, when first
asked for. The Snakefile builds one, and the DAG writes it to ``<experiment>/design.json``
(``Design.write``), which the selection, tables, figures and pooled jobs read back
(``Design.load``) instead of taking config sections on their command lines.
Knows nothing of Snakemake; imports neither torch nor matplotlib.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field, fields
from functools import cached_property
from pathlib import Path
from typing import Any

from grpo_ablation.design.axes import (
    AXES,
    BY_NAME,
    RECIPES,
    DesignError,
    Recipe,
    axis,
    cell_path,
    defaults,
    parse_path,
)
from grpo_ablation.design.experiment import ExperimentConfig
from grpo_ablation.design.hypothesis_options import HypothesisOptions
from grpo_ablation.design.options import TrainingConfig
from grpo_ablation.design.problems import Problems
from grpo_ablation.layout import Tree
from grpo_ablation.settings import declared_default, from_dict, option, part_of

__all__ = ["Cell", "Design", "DesignError", "Stage", "WinnerOf"]

TRAINING_DEFAULTS: dict[str, Any] = {f.name: f.default for f in fields(TrainingConfig)}
SELECTION_METRICS = ("greedy_accuracy", "sampled_mean_at_k")


@dataclass(frozen=True)
class StageOptions:
    """A stage's options beside its axes (``vary``, ``fixed`` and ``reference``, free-form maps
    of axes to values that ``stage_of`` reads and the schema describes by hand). Their schema
    part is written from these declarations; the design checks their values (``checks``)."""

    enabled: bool = option(
        True,
        "false leaves the stage out (a config given later withdraws it: config files merge key "
        "by key)",
    )
    reference_replicates: int = option(
        1,
        "runs of the stage's reference cell per seed (replicate seeds of its own, numbered after "
        "the largest seed): each contrast is then against the mean of k runs, which lowers its SD "
        "by sqrt((1 + 1/k) / 2) for independent runs; the plan prices it",
        minimum=1,
    )
    descriptive: bool = option(
        False,
        "a stage that only describes (no hypothesis needs it): left out of a sequential study (a "
        "config with a study section), which trains only what its hypotheses need",
    )
    selection_metric: str = option(
        "greedy_accuracy",
        "how this stage's winner is chosen on validation, when a later stage takes it: {choices}",
        choices=SELECTION_METRICS,
    )

    @classmethod
    def of(cls, spec: dict[str, Any] | None, name: str) -> StageOptions:
        """The options of ``stages.<name>`` (any left out at its default; the axes not read)."""
        return part_of(cls, spec, f"stages.{name}")


# The config sections the design is made of (with the draws of base_policy): what design.json
# holds. Not the results folder: design.json lies in the experiment folder, which it then names.
SECTIONS = ("seeds", "training", "stages", "hypotheses", "power", "push", "study")
# Seeds below this under base-policy draws, so that every (draw, seed) gets its own run seed.
SEEDS_PER_DRAW = 1000


@dataclass(frozen=True, order=True)
class Cell:
    """One combination of axis values; ``path`` names the axes as ``grpo_ablation.design.axes`` says."""

    path: str
    values: tuple[tuple[str, Any], ...] = field(compare=False)

    def __getitem__(self, axis_name: str) -> Any:
        return dict(self.values)[axis_name]


def _segments(path: str) -> list[tuple[str, str]]:
    """``std=sample/agg=constant/G=8`` -> [("std", "sample"), ("agg", "constant"), ("G", "8")]."""
    return [
        (key, value) for key, _, value in (s.partition("=") for s in path.strip("/").split("/"))
    ]


def cell_label(path: str) -> str:
    """``sample / sequence_mean / G=8 / beta=0.04``: choices by name, numbers with their key; a
    cell that is a published recipe says which (``none / constant / G=8 (Dr. GRPO)``)."""
    by_key = {a.key: a for a in AXES}
    parts = [
        value if key in by_key and by_key[key].choices else f"{key}={value}"
        for key, value in _segments(path)
    ]
    recipe = cell_recipe(path)
    return " / ".join(parts) + (f" ({recipe.name})" if recipe else "")


def cell_recipe(path: str) -> Recipe | None:
    """The published recipe whose choices the cell at ``path`` takes, if any."""
    by_key = {a.key: a.name for a in AXES}
    values = {by_key[k]: v for k, v in _segments(path) if k in by_key}
    for recipe in RECIPES:
        if all(values.get(ax) == v for ax, v in recipe.values.items()):
            return recipe
    return None


@dataclass(frozen=True)
class WinnerOf:
    """A fixed value taken from an earlier stage's winner on the validation split."""

    stage: str


@dataclass(frozen=True)
class Stage:
    name: str
    vary: dict[str, tuple[Any, ...]]  # axis -> values, config order; the first is primary
    fixed: dict[str, Any]  # axis -> value or WinnerOf
    reference: Any  # the primary axis's reference value
    selection_metric: str = "greedy_accuracy"
    # Other varied axes pinned by the reference: every cell is then compared with that one cell
    # (a recipe stage compares each recipe with plain GRPO), not with its own values elsewhere.
    reference_also: dict[str, Any] = field(default_factory=dict)
    # Runs of the reference cell per seed: k > 1 trains it k times a draw (replicate seeds of its
    # own), so each contrast's reference is a mean of k runs (the √k allocation of many-to-one
    # comparisons: the contrast's SD falls by √((1 + 1/k) / 2) when runs are independent).
    reference_replicates: int = 1

    @property
    def primary(self) -> str:
        return next(iter(self.vary))

    @property
    def reference_values(self) -> dict[str, Any]:
        return {self.primary: self.reference, **self.reference_also}

    def sources(self) -> list[str]:
        """The stages whose winners this one takes."""
        return [v.stage for v in self.fixed.values() if isinstance(v, WinnerOf)]


def _varied(where: str, ax: str, values: Any) -> tuple[Any, ...]:
    """A stage's values of one varied axis, each checked."""
    a = axis(ax, f"{where}.vary")
    if not isinstance(values, list) or not values:
        raise DesignError(f"{where}.vary.{ax} must be a non-empty list of values")
    problems = Problems()
    coerced = []
    for v in values:
        with problems.check():
            coerced.append(a.coerce(v, f"{where}.vary.{ax}"))
    problems.raise_any()
    if len({a.spell(v) for v in coerced}) < len(coerced):
        raise DesignError(
            f"{where}.vary.{ax}={values}: a value is listed more than once (as paths spell it); "
            "list each once"
        )
    return tuple(coerced)


def _fixed(where: str, ax: str, value: Any, vary: dict[str, Any]) -> Any:
    """A stage's fixed value of one axis: a value, or the winner of another stage."""
    a = axis(ax, f"{where}.fixed")
    if ax in vary:
        raise DesignError(f"{where}: axis {ax!r} is both varied and fixed")
    if not isinstance(value, dict):
        return a.coerce(value, f"{where}.fixed.{ax}")
    if set(value) != {"winner_of"}:
        raise DesignError(f"{where}.fixed.{ax}: expected a value or {{winner_of: <stage>}}")
    return WinnerOf(str(value["winner_of"]))


def stage_of(name: str, spec: dict[str, Any]) -> Stage:
    """The stage ``stages.<name>`` declares, checked: every varied and fixed axis (their problems
    named together), then the reference among the varied values."""
    where = f"stages.{name}"
    vary_spec = spec.get("vary") or {}
    if not isinstance(vary_spec, dict) or not vary_spec:
        raise DesignError(f"{where}.vary must map at least one axis to its values")
    problems = Problems()
    vary: dict[str, tuple[Any, ...]] = {}
    for ax, values in vary_spec.items():
        with problems.check():
            vary[ax] = _varied(where, ax, values)
    fixed: dict[str, Any] = {}
    for ax, value in (spec.get("fixed") or {}).items():
        with problems.check():
            fixed[ax] = _fixed(where, ax, value, vary_spec)
    problems.raise_any()
    primary = next(iter(vary))
    ref_spec = spec.get("reference")
    # A value of the primary axis, or one cell of the stage as {axis: value} (the primary named).
    wanted = ref_spec if isinstance(ref_spec, dict) else {primary: ref_spec}
    if primary not in wanted:
        raise DesignError(f"{where}.reference must name the primary axis {primary!r}")
    reference_values: dict[str, Any] = {}
    for ax, value in wanted.items():
        if ax not in vary:
            raise DesignError(
                f"{where}.reference names {ax!r}, which the stage does not vary ({list(vary)})"
            )
        coerced = axis(ax).coerce(value, f"{where}.reference")
        if coerced not in vary[ax]:
            raise DesignError(
                f"{where}.reference={value!r} is not among the stage's values {list(vary[ax])}"
            )
        reference_values[ax] = coerced
    reference = reference_values.pop(primary)
    options = StageOptions.of(spec, name)
    k = options.reference_replicates
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise DesignError(f"{where}.reference_replicates must be an integer >= 1, got {k!r}")
    if k > 1 and any(isinstance(v, WinnerOf) for v in fixed.values()):
        raise DesignError(
            f"{where}.reference_replicates: a stage that takes a winner has no reference cell "
            "before its source is decided; replicate a stage with fixed values only"
        )
    return Stage(
        name,
        vary,
        fixed,
        reference,
        options.selection_metric,
        reference_values,
        k,
    )


def reference_of(stage: Stage, cell: Cell, cells: list[Cell]) -> Cell:
    """The cell ``cell`` is compared with: the same values, the varied axes the reference names
    (the primary, and any other it pins) at the reference's values."""
    want = {**dict(cell.values), **stage.reference_values}
    for c in cells:
        if dict(c.values) == want:
            return c
    raise DesignError(f"stage {stage.name!r}: no reference cell for {cell.path}")


def single_changes(stage: Stage, cell: Cell, cells: list[Cell]) -> list[Cell]:
    """Where ``cell`` departs from its reference on two or more varied axes (a recipe against
    GRPO): the cells of the stage that make each of those changes alone, whose differences its
    interaction is measured against; else none (or when the stage lacks one of them)."""
    ref = reference_of(stage, cell, cells)
    changed = [ax for ax in stage.vary if cell[ax] != ref[ax]]
    by_values = {c.values: c for c in cells}
    singles = [
        by_values.get(tuple((a, cell[a] if a == ax else ref[a]) for a, _ in ref.values))
        for ax in changed
    ]
    return [c for c in singles if c] if len(changed) >= 2 and all(singles) else []


def listed_draws(base_policy: dict[str, Any]) -> list[int]:
    """The seeds of the base-policy draws a ``base_policy`` section lists (none without draws)."""
    return [int(d) for d in base_policy.get("draws") or []]


def run_seed(seed: int, draw: int | None) -> int:
    """The seed a run trains with: the seed itself, or under draws 1000 * draw + seed, so that
    seed s of two draws shares neither its prompt order nor its sampling noise (the pooled interval
    takes the draws' seed noise as independent)."""
    return seed if draw is None else SEEDS_PER_DRAW * int(draw) + int(seed)


def select_winner(
    summaries: dict[str, list[dict[str, Any]]], metric: str, stage: str = ""
) -> dict[str, Any]:
    """A stage's winner on the validation split: highest mean over seeds of ``metric``.

    ``summaries`` maps a value of the stage's primary axis to the validation results of its seeds.
    Ties go to the value listed first (dicts keep the config's order), so the choice is
    deterministic.
    """
    means = {k: sum(r[metric] for r in rs) / len(rs) for k, rs in summaries.items() if rs}
    if not means:
        raise DesignError(f"no validation results to select a winner of stage {stage!r} from")
    best = max(means, key=lambda k: (means[k], -list(means).index(k)))
    return {"stage": stage, "winner": best, "metric": metric, "split": "validation", "means": means}


def read_winners(paths: list[Path]) -> dict[str, Any]:
    """Source stage -> winner, from the selection files."""
    out = {}
    for p in paths:
        data = json.loads(Path(p).read_text())
        out[data["stage"]] = data["winner"]
    return out


def declared_hypotheses(
    value: dict[str, Any] | list[dict[str, Any]] | None,
) -> list[dict[str, Any]]:
    """The hypotheses a design judges, in declaration order, each with its ``id``. A config
    declares them by id (``hypotheses: {<id>: {kind: ..., ...}}``), so that an override given
    after it changes a field of one, adds one, or withdraws one with ``enabled: false`` (as a
    stage), as Snakemake merges mappings key by key and would replace a list whole; design.json
    keeps this list (a list is taken as it is)."""
    if not value:
        return []
    if isinstance(value, list):
        return value
    return [
        {"id": hid, **{k: v for k, v in spec.items() if k != "enabled"}}
        for hid, spec in value.items()
        if hypothesis_enabled(spec)
    ]


def hypothesis_enabled(spec: dict[str, Any]) -> bool:
    """Whether a hypothesis declared by id is judged (``enabled: false`` withdraws it)."""
    return bool(spec.get("enabled", declared_default(HypothesisOptions, "enabled")))


@dataclass(frozen=True)
class Design:
    """The design of one experiment: its sections (``SECTIONS`` and ``draws``), each parsed once,
    and its experiment folder ``root``.

    Everything the rules, the jobs and the analysis ask of the design is a method here: the
    stages, the cells of a stage given its sources' winners, the rows the tables compare, each
    run's training config, the folders of the draws, the stages' titles and captions.
    """

    sections: dict[str, Any]
    # The experiment folder: what the draws share (data, tasks, design.json, pooled/); None for a
    # design made from a config without one (its folders cannot be asked for).
    root: Path | None
    # The analysis plan design.json declared before any run (``design.hypotheses.analysis_plan``:
    # each set of rows the winners can give, with its contrasts' roles); None for a design made
    # from a config. The analysis reads its roles from it (``planned_roles``).
    plan: list[dict[str, Any]] | None = field(default=None, compare=False)

    @classmethod
    def of(cls, config: dict[str, Any]) -> Design:
        """The design of a (validated) config (``pipeline.check_design`` checks it whole)."""
        sections = {k: config[k] for k in SECTIONS if k in config}
        if "hypotheses" in sections:
            raw = sections["hypotheses"]
            sections["hypotheses"] = declared_hypotheses(raw)
            # A withdrawn hypothesis's own planning SD (power.sd.<id>) leaves with it: a study's
            # later looks withdraw the decided ones, whose SDs would otherwise name no hypothesis.
            withdrawn = {
                h
                for h, spec in (raw.items() if isinstance(raw, dict) else [])
                if not hypothesis_enabled(spec)
            }
            power = sections.get("power") or {}
            if withdrawn & set(power.get("sd") or {}):
                sd = {k: v for k, v in power["sd"].items() if k not in withdrawn}
                sections["power"] = {**power, "sd": sd}
        sections["draws"] = listed_draws(config.get("base_policy") or {})
        results = config.get("results_dir", declared_default(ExperimentConfig, "results_dir"))
        root = config.get("experiment") and Path(results)
        return cls(sections, root / config["experiment"] if root else None)

    # -- design.json -------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The sections, and what follows from them for a reader of design.json: every cell the
        config can run, each stage's title, caption and rows (per winners of its sources)."""
        return {
            "sections": self.sections,
            "cells": {path: cell_label(path) for path in self.all_cells()},
            "stages": [
                {
                    "name": s.name,
                    "title": self.stage_title(s.name),
                    "caption": self.stage_caption(s.name),
                    "takes_winners_of": s.sources(),
                    "rows": [
                        {"winners": winners, "rows": self.rows(winners, [s.name])}
                        for winners in self.possible_winners(s)
                    ],
                }
                for s in self.stages
            ],
        }

    def write(self, path: str | Path, plan: list[dict[str, Any]] | None = None) -> Path:
        """design.json, with the analysis plan when given (the design job gives it)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        written = self.to_dict() | ({"analysis_plan": plan} if plan is not None else {})
        path.write_text(json.dumps(written, indent=1, default=list) + "\n")
        return path

    @classmethod
    def load(cls, path: str | Path) -> Design:
        """The design a DAG wrote (``write``) into its experiment folder: the same sections,
        parsed by the same code, and the analysis plan it declared."""
        written = json.loads(Path(path).read_text())
        return cls(written["sections"], Path(path).parent, written.get("analysis_plan"))

    # -- stages ------------------------------------------------------------------------------------
    @cached_property
    def declared(self) -> tuple[Stage, ...]:
        """Every stage the config declares, enabled or not, in config order."""
        problems = Problems()
        stages = []
        for name, spec in self.sections["stages"].items():
            with problems.check():
                stages.append(stage_of(name, spec))
        problems.raise_any()
        return tuple(stages)

    @property
    def stages(self) -> list[Stage]:
        """The enabled stages, in config order; in a sequential study (a ``study`` section) no
        stage marked ``descriptive``: a study trains only what its hypotheses need."""
        study = bool(self.sections.get("study"))
        options = {
            s.name: StageOptions.of(self.sections["stages"][s.name], s.name) for s in self.declared
        }
        return [
            s
            for s in self.declared
            if options[s.name].enabled and not (study and options[s.name].descriptive)
        ]

    @property
    def stage_names(self) -> list[str]:
        return [s.name for s in self.stages]

    def stage(self, name: str) -> Stage:
        for s in self.declared:
            if s.name == name:
                return s
        raise DesignError(
            f"unknown stage {name!r}; the config declares {list(self.sections['stages'])}"
        )

    @property
    def seeds(self) -> list[int]:
        return [int(s) for s in self.sections["seeds"]]

    @cached_property
    def shared_training(self) -> dict[str, Any]:
        """The shared training section with every option it leaves out at its declared default."""
        return {**TRAINING_DEFAULTS, **self.sections["training"]}

    @cached_property
    def shared_config(self) -> TrainingConfig:
        """The shared training section as a config (its batch and budget arithmetic)."""
        return from_dict(TrainingConfig, self.sections["training"], "training")

    # -- cells -------------------------------------------------------------------------------------
    @cached_property
    def baseline_values(self) -> dict[str, Any]:
        """The baseline: every axis at the shared training section's value."""
        return defaults(self.sections["training"], TRAINING_DEFAULTS)

    def cell(self, values: dict[str, Any]) -> Cell:
        base = self.baseline_values
        full = {**base, **values}
        return Cell(cell_path(full, base), tuple((a.name, full[a.name]) for a in AXES))

    def parse_cell(self, path: str) -> Cell:
        """The cell of ``path``; a path that is not the cell's own spelling (an axis named at its
        default, another order) is refused, so one cell never trains in two folders."""
        cell = self.cell(parse_path(path, self.baseline_values))
        if cell.path != path.strip("/"):
            raise DesignError(f"cell path {path!r} is spelled {cell.path!r}")
        return cell

    def baseline(self) -> Cell:
        return self.cell({})

    @cached_property
    def reference_replicates(self) -> dict[str, int]:
        """Cell path -> runs per seed, for the reference cells of stages that replicate theirs
        (the largest k where stages share a reference)."""
        out: dict[str, int] = {}
        for s in self.stages:
            if s.reference_replicates > 1:
                cells = self.cells(s)
                for c in cells:
                    ref = reference_of(s, c, cells).path
                    out[ref] = max(out.get(ref, 1), s.reference_replicates)
        return out

    @property
    def study_look(self) -> int | None:
        """The index of the sequential study's look whose draws this design runs
        (``study.draws[:n]`` for ``n`` in ``study.looks``); None when it runs no look's."""
        plan = self.sections.get("study") or {}
        planned = list(plan.get("draws") or [])
        looks = [int(n) for n in plan.get("looks") or []]
        return next((k for k, n in enumerate(looks) if self.draws == planned[:n]), None)

    def seeds_of(self, cell: str) -> list[int]:
        """The seeds a cell's runs take in each draw: the design's, and for a replicated
        reference (k runs per seed) k − 1 more per seed, numbered after the largest."""
        k = self.reference_replicates.get(cell, 1)
        top = max(self.seeds)
        return [*self.seeds, *range(top + 1, top + 1 + (k - 1) * len(self.seeds))]

    def cells(self, stage: str | Stage, winners: dict[str, Any] | None = None) -> list[Cell]:
        """The cells of one stage: the product of its varied values (first axis outermost), its
        fixed values, every other axis at the baseline. ``winners`` maps a source stage to its
        winner."""
        s = stage if isinstance(stage, Stage) else self.stage(stage)
        held: dict[str, Any] = {}
        for ax, value in s.fixed.items():
            if isinstance(value, WinnerOf):
                if not winners or value.stage not in winners:
                    raise DesignError(
                        f"stage {s.name!r} takes {ax} from stage {value.stage!r}: no winner yet"
                    )
                value = axis(ax).coerce(winners[value.stage], f"winner of stage {value.stage!r}")
            held[ax] = value
        return [
            self.cell({**held, **dict(zip(s.vary, combo, strict=True))})
            for combo in itertools.product(*s.vary.values())
        ]

    def rows(
        self, winners: dict[str, Any] | None = None, only: list[str] | None = None
    ) -> list[dict[str, Any]]:
        """(stage, cell, reference, singles: ``single_changes``) of every enabled stage (or of
        ``only``), in config order; a cell may appear in several stages."""
        rows = []
        for s in self.stages:
            if only and s.name not in only:
                continue
            cells = self.cells(s, winners)
            rows += [
                {
                    "stage": s.name,
                    "cell": c.path,
                    "reference": reference_of(s, c, cells).path,
                    "singles": tuple(x.path for x in single_changes(s, c, cells)),
                }
                for c in cells
            ]
        return rows

    def possible_winners(self, stage: Stage | None = None) -> list[dict[str, Any]]:
        """Every winners mapping a stage can see (one per combination of its sources' values);
        without a stage, every one the design can see (the sources of all its stages)."""
        names = stage.sources() if stage else sorted({n for s in self.stages for n in s.sources()})
        sources = [self.stage(name) for name in names]
        options = [[(src.name, v) for v in src.vary[src.primary]] for src in sources]
        return [dict(combo) for combo in itertools.product(*options)] or [{}]

    def all_cells(self) -> list[str]:
        """Every cell path the config can produce, whichever winners are chosen (fixes the
        palette)."""
        paths: dict[str, None] = {}
        for s in self.stages:
            for winners in self.possible_winners(s):
                paths.update(dict.fromkeys(c.path for c in self.cells(s, winners)))
        return sorted(paths)

    # -- runs --------------------------------------------------------------------------------------
    def training_config(self, cell: Cell, seed: int, draw: int | None = None) -> TrainingConfig:
        """The full TrainingConfig of one run: the shared section, each axis's value entered as
        its declaration says (G and μ keep the completion budget matched), the run seed."""
        shared = self.shared_training  # read by the axes, never written
        training = dict(shared)
        for a in AXES:
            a.apply(training, shared, cell[a.name])
        training["seed"] = run_seed(seed, draw)
        return from_dict(TrainingConfig, training, "training")

    def check_matched_budgets(self, stage: Stage, cells: list[Cell]) -> dict[str, Any]:
        """Refuse a stage whose cells would spend different nominal budgets."""
        free = {entry for ax in stage.vary for entry in BY_NAME[ax].rescales}
        budgets = {
            c.path: {
                k: v
                for k, v in self.training_config(c, 0).nominal_budget().items()
                if k not in free
            }
            for c in cells
        }
        if len({json.dumps(b, sort_keys=True) for b in budgets.values()}) > 1:
            lines = "; ".join(f"{p}: {b}" for p, b in budgets.items())
            raise DesignError(f"nominal budgets differ within stage '{stage.name}': {lines}")
        return next(iter(budgets.values()), {})

    # -- base-policy draws and folders -------------------------------------------------------------
    @property
    def draws(self) -> list[int]:
        """The base-policy draws (``base_policy.draws``): each is the seed of its own local base
        policy, under which every cell runs every seed. Empty when the config names one base
        policy (``base_policy.seed``, or a hub model)."""
        return [int(d) for d in self.sections.get("draws", [])]

    def draw_dir(self, draw: int | None) -> Path:
        """Where a draw's base policy, runs, evaluations and analysis live: ``draw=<d>`` under
        the experiment folder; the experiment folder itself without draws."""
        root = self.folder()
        return root if draw is None else Path(Tree(root).draw(draw))

    def pooled_dir(self) -> Path:
        """The analysis over draws (tables, verdicts, reading), beside the draws' folders."""
        return Path(Tree(self.folder()).pooled())

    def folder(self) -> Path:
        """The experiment folder (``root``), or an error naming what is missing."""
        if self.root is None:
            raise DesignError("the design was made from a config without `experiment`: no folder")
        return self.root

    # -- what the report says ----------------------------------------------------------------------
    def stage_title(self, name: str) -> str:
        """``stage 4: KL coefficient β × std scaling`` (position among the declared stages)."""
        order = [s.name for s in self.declared]
        s = self.stage(name)
        title = f"stage {order.index(name) + 1}: " + " × ".join(BY_NAME[ax].label for ax in s.vary)
        # A recipe stage names the recipes it runs besides its reference's (e.g. "(Dr. GRPO)").
        recipes: dict[str, None] = {}
        for winners in self.possible_winners(s):
            cells = self.cells(s, winners)
            for c in cells:
                r = cell_recipe(c.path)
                if r and r != cell_recipe(reference_of(s, c, cells).path):
                    recipes[r.name] = None
        return title + (f" ({', '.join(recipes)})" if recipes else "")

    def stage_caption(self, name: str) -> str:
        """One line naming what a stage varies and what it holds fixed (figure captions), from
        the axis declarations."""
        s = self.stage(name)
        varied = " crossed with ".join(
            f"{BY_NAME[ax].label} over {[BY_NAME[ax].spell(v) for v in vs]}"
            for ax, vs in s.vary.items()
        )
        base = self.baseline_values
        used = {ax for stage in self.declared for ax in (*stage.vary, *stage.fixed)}
        held = []
        for a in AXES:
            # Named as in a cell's path: an axis at its default that no stage names stays unsaid,
            # so adding an axis changes no caption (and no figure job's parameters).
            if a.name in s.vary or not (a.always_named or a.name in s.fixed or a.name in used):
                continue
            value = s.fixed.get(a.name, base[a.name])
            text = (
                f"the winner of stage '{value.stage}' on validation"
                if isinstance(value, WinnerOf)
                else a.spell(value)
            )
            held.append(f"{a.label} {text}")
        t, c = self.shared_training, self.shared_config
        rest = (
            f"std ε={t['std_eps']}, clip ε=({t['clip_eps_low']}, {t['clip_eps_high']}), "
            f"max completion length {t['max_completion_length']}, {c.generation_batch_size} "
            f"completions per step over {c.max_steps // c.num_iterations} generation steps"
        )
        reference = " / ".join(BY_NAME[ax].spell(v) for ax, v in s.reference_values.items())
        return f"{varied} (reference {reference}); {', '.join(held)}, {rest}"
