"""The ablation design as pure functions of the validated config: stages, cells, budgets, paths.

A *stage* is declared in the config: the axes it varies (``vary``, crossed when there are
several; the first is the stage's *primary* axis), values it holds (``fixed``, possibly the
validation winner of an earlier stage), and the primary axis's *reference* value each cell is
compared with. Every other axis stays at the baseline, the shared ``training`` section. Nothing
here is specific to a stage or an axis: axes are declared in ``grpo_ablation.axes``.

A cell is spelled as key=value path segments (``std=population/agg=sequence_mean/G=8``); a cell
shared by two stages is one directory, so it is trained once. The Snakefile calls these functions;
they know nothing of Snakemake and import neither torch nor matplotlib.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from grpo_ablation.axes import AXES, BY_NAME, DesignError, axis, cell_path, defaults, parse_path
from grpo_ablation.choices import RECIPES, Recipe
from grpo_ablation.layout import Tree
from grpo_ablation.settings import from_dict
from grpo_ablation.tasks import get_task
from grpo_ablation.training.options import TrainingConfig

__all__ = ["Cell", "DesignError", "Stage", "WinnerOf"]

TRAINING_DEFAULTS: dict[str, Any] = {f.name: f.default for f in fields(TrainingConfig)}
SELECTION_METRICS = ("greedy_accuracy", "sampled_mean_at_k")


@dataclass(frozen=True, order=True)
class Cell:
    """One combination of axis values; ``path`` names the axes as ``grpo_ablation.axes`` says."""

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

    @property
    def primary(self) -> str:
        return next(iter(self.vary))

    @property
    def reference_values(self) -> dict[str, Any]:
        return {self.primary: self.reference, **self.reference_also}

    def sources(self) -> list[str]:
        """The stages whose winners this one takes."""
        return [v.stage for v in self.fixed.values() if isinstance(v, WinnerOf)]


def _stage(name: str, spec: dict[str, Any]) -> Stage:
    where = f"stages.{name}"
    vary_spec = spec.get("vary") or {}
    if not isinstance(vary_spec, dict) or not vary_spec:
        raise DesignError(f"{where}.vary must map at least one axis to its values")
    vary: dict[str, tuple[Any, ...]] = {}
    for ax, values in vary_spec.items():
        a = axis(ax, f"{where}.vary")
        if not isinstance(values, list) or not values:
            raise DesignError(f"{where}.vary.{ax} must be a non-empty list of values")
        coerced = tuple(a.coerce(v, f"{where}.vary.{ax}") for v in values)
        if len({a.spell(v) for v in coerced}) < len(coerced):
            raise DesignError(
                f"{where}.vary.{ax} lists a value twice (as paths spell it): {values}"
            )
        vary[ax] = coerced
    fixed: dict[str, Any] = {}
    for ax, value in (spec.get("fixed") or {}).items():
        a = axis(ax, f"{where}.fixed")
        if ax in vary:
            raise DesignError(f"{where}: axis {ax!r} is both varied and fixed")
        if isinstance(value, dict):
            if set(value) != {"winner_of"}:
                raise DesignError(f"{where}.fixed.{ax}: expected a value or {{winner_of: <stage>}}")
            fixed[ax] = WinnerOf(str(value["winner_of"]))
        else:
            fixed[ax] = a.coerce(value, f"{where}.fixed.{ax}")
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
    return Stage(
        name,
        vary,
        fixed,
        reference,
        spec.get("selection_metric", "greedy_accuracy"),
        reference_values,
    )


def all_stages(config: dict[str, Any]) -> list[Stage]:
    return [_stage(name, spec) for name, spec in config["stages"].items()]


def stages(config: dict[str, Any]) -> list[Stage]:
    """The enabled stages, in config order."""
    return [
        _stage(name, spec) for name, spec in config["stages"].items() if spec.get("enabled", True)
    ]


def get_stage(config: dict[str, Any], name: str) -> Stage:
    for s in all_stages(config):
        if s.name == name:
            return s
    raise DesignError(f"unknown stage {name!r}; the config declares {list(config['stages'])}")


def stage_names(config: dict[str, Any]) -> list[str]:
    return [s.name for s in stages(config)]


# -- cells -------------------------------------------------------------------------------------
def axis_defaults(config: dict[str, Any]) -> dict[str, Any]:
    """The baseline: every axis at the shared training section's value."""
    return defaults(config["training"], TRAINING_DEFAULTS)


def make_cell(config: dict[str, Any], values: dict[str, Any]) -> Cell:
    base = axis_defaults(config)
    full = {**base, **values}
    return Cell(cell_path(full, base), tuple((a.name, full[a.name]) for a in AXES))


def parse_cell(config: dict[str, Any], path: str) -> Cell:
    """The cell of ``path``; a path that is not the cell's own spelling (an axis named at its
    default, another order) is refused, so one cell never trains in two folders."""
    cell = make_cell(config, parse_path(path, axis_defaults(config)))
    if cell.path != path.strip("/"):
        raise DesignError(f"cell path {path!r} is spelled {cell.path!r}")
    return cell


def baseline(config: dict[str, Any]) -> Cell:
    return make_cell(config, {})


def stage_cells(
    config: dict[str, Any], stage: str | Stage, winners: dict[str, Any] | None = None
) -> list[Cell]:
    """The cells of one stage: the product of its varied values (first axis outermost), its fixed
    values, every other axis at the baseline. ``winners`` maps a source stage to its winner."""
    s = stage if isinstance(stage, Stage) else get_stage(config, stage)
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
        make_cell(config, {**held, **dict(zip(s.vary, combo, strict=True))})
        for combo in itertools.product(*s.vary.values())
    ]


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


def design_rows(
    config: dict[str, Any], winners: dict[str, Any] | None = None, only: list[str] | None = None
) -> list[dict[str, Any]]:
    """(stage, cell, reference, singles: ``single_changes``) of every enabled stage (or of
    ``only``), in config order; a cell may appear in several stages."""
    rows = []
    for s in stages(config):
        if only and s.name not in only:
            continue
        cells = stage_cells(config, s, winners)
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


def possible_winners(config: dict[str, Any], stage: Stage) -> list[dict[str, Any]]:
    """Every winners mapping a stage can see (one per combination of its sources' values)."""
    options = [
        [(src, v) for v in get_stage(config, src).vary[get_stage(config, src).primary]]
        for src in stage.sources()
    ]
    return [dict(combo) for combo in itertools.product(*options)] or [{}]


def all_cells(config: dict[str, Any]) -> list[str]:
    """Every cell path the config can produce, whichever winners are chosen (fixes the palette)."""
    paths: dict[str, None] = {}
    for s in stages(config):
        for winners in possible_winners(config, s):
            paths.update(dict.fromkeys(c.path for c in stage_cells(config, s, winners)))
    return sorted(paths)


# -- runs --------------------------------------------------------------------------------------
def completions_per_step(config: dict[str, Any]) -> int:
    t = {**TRAINING_DEFAULTS, **config["training"]}
    return int(t["prompts_per_step"]) * int(t["group_size"])


def training_config(
    config: dict[str, Any], cell: Cell, seed: int, draw: int | None = None
) -> TrainingConfig:
    """The full TrainingConfig of one run: the shared section, each axis's value entered as its
    declaration says (G and μ keep the completion budget matched), the run seed."""
    shared = {**TRAINING_DEFAULTS, **{k: v for k, v in config["training"].items() if k != "seed"}}
    training = dict(shared)
    for a in AXES:
        a.apply(training, shared, cell[a.name])
    training["seed"] = run_seed(seed, draw)
    return from_dict(TrainingConfig, training, "training")


# Seeds below this under base-policy draws, so that every (draw, seed) gets its own run seed.
SEEDS_PER_DRAW = 1000


def run_seed(seed: int, draw: int | None) -> int:
    """The seed a run trains with: the seed itself, or under draws 1000 * draw + seed, so that
    seed s of two draws shares neither its prompt order nor its sampling noise (the pooled interval
    takes the draws' seed noise as independent)."""
    return seed if draw is None else SEEDS_PER_DRAW * int(draw) + int(seed)


def check_matched_budgets(
    config: dict[str, Any], stage: Stage, cells: list[Cell]
) -> dict[str, Any]:
    """Refuse a stage whose cells would spend different nominal budgets."""
    free = {entry for ax in stage.vary for entry in BY_NAME[ax].rescales}
    budgets = {
        c.path: {
            k: v for k, v in training_config(config, c, 0).nominal_budget().items() if k not in free
        }
        for c in cells
    }
    if len({json.dumps(b, sort_keys=True) for b in budgets.values()}) > 1:
        lines = "; ".join(f"{p}: {b}" for p, b in budgets.items())
        raise DesignError(f"nominal budgets differ within stage '{stage.name}': {lines}")
    return next(iter(budgets.values()), {})


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


# -- checks ------------------------------------------------------------------------------------
def check_design(config: dict[str, Any]) -> None:
    """Everything the DAG can check before any job runs: names, references, winners' sources,
    matched budgets, each run's training configuration, the declared hypotheses."""
    # Imported here: the hypotheses are judged on this module's design (it imports this one).
    from grpo_ablation.analysis import hypotheses

    evaluation_config(config)
    check_draws(config)
    axis_defaults(config)
    declared = all_stages(config)
    enabled = set(stage_names(config))
    for s in declared:
        if s.selection_metric not in SELECTION_METRICS:
            raise DesignError(
                f"stages.{s.name}.selection_metric={s.selection_metric!r}; expected one of "
                f"{list(SELECTION_METRICS)}"
            )
        if s.name not in enabled:
            continue
        for ax, value in s.fixed.items():
            if not isinstance(value, WinnerOf):
                continue
            src = value.stage
            if src not in enabled or src == s.name:
                raise DesignError(
                    f"stages.{s.name}.fixed.{ax} takes the winner of stage {src!r}, which must be "
                    "another enabled stage"
                )
            _check_no_cycle(config, s.name)
            source = get_stage(config, src)
            if len(source.vary) != 1 or source.primary != ax:
                raise DesignError(
                    f"stages.{s.name}.fixed.{ax}: stage {src!r} must vary {ax} alone to have a winner"
                )
        for winners in possible_winners(config, s):
            cells = stage_cells(config, s, winners)
            check_matched_budgets(config, s, cells)
            for cell in cells:
                reference_of(s, cell, cells)
                check_run_layout(config, training_config(config, cell, 0))
    hypotheses.declared(config)


# Launch presets whose processes hold shards of the weights (a rank-0 save would be partial).
SHARDED_PRESETS = ("zero3", "fsdp")


def check_run_layout(config: dict[str, Any], cfg: TrainingConfig) -> None:
    """What a run's options need of its processes: resampling selects groups over the whole
    generation batch in one process; curve policies are saved by rank 0 from unsharded weights."""
    compute = config.get("compute", {})
    nproc = int(compute.get("processes_per_train_job", 1))
    if cfg.zero_variance == "resample" and nproc > 1:
        raise DesignError(
            "zero_variance resample runs in one process per run; set "
            f"compute.processes_per_train_job: 1 (it is {nproc})"
        )
    preset = compute.get("accelerate_config", "ddp")
    if cfg.curve_points and nproc > 1 and preset in SHARDED_PRESETS:
        raise DesignError(
            f"training.curve_points={cfg.curve_points} saves curve policies from rank 0, which "
            f"holds only a shard of the weights under compute.accelerate_config {preset!r}; set "
            "training.curve_points: 0 (the curve is then the checkpoints') or use ddp or zero2"
        )


def _check_no_cycle(config: dict[str, Any], start: str, path: tuple[str, ...] = ()) -> None:
    """Depth first along the winners a stage takes: a stage met again on its own path is a cycle
    (two stages taking the winner of one source are not)."""
    if start in path:
        raise DesignError(f"stages take each other's winners in a cycle through {start!r}")
    for source in get_stage(config, start).sources():
        _check_no_cycle(config, source, (*path, start))


def evaluation_config(config: dict[str, Any]) -> dict[str, Any]:
    """The evaluation section as jobs need it: training's generation length and the compute
    section's device and precision filled in (one answer protocol for training and evaluation)."""
    ev = dict(config["evaluation"])
    length = int({**TRAINING_DEFAULTS, **config["training"]}["max_completion_length"])
    if ev.get("max_gen_toks") not in (None, length):
        raise DesignError(
            f"evaluation.max_gen_toks={ev['max_gen_toks']} differs from training.max_completion_length="
            f"{length}: evaluation must generate as training does; drop evaluation.max_gen_toks"
        )
    ev["max_gen_toks"] = length
    ev.setdefault("sampler", "keyed")
    ev["sampled_metric"] = sampled_metric(config)
    ev["device"] = config["compute"]["device"]
    ev["dtype"] = config["compute"]["dtype"]
    return ev


def sampled_metric(config: dict[str, Any]) -> str:
    """``exact`` or ``mean_at_k``: exact needs a task that declares its accepted completions
    enumerable and the local base's character tokenizer (one token per character)."""
    asked = config["evaluation"].get("sampled_metric", "auto")
    task, base = get_task(config["task"]), config["base_policy"].get("kind", "local")
    possible = task.enumerable and base == "local" and not config.get("stand_in")
    if asked == "exact" and not possible:
        raise DesignError(
            f"evaluation.sampled_metric=exact: task {task.kind!r} with base_policy.kind {base!r} "
            "cannot enumerate its accepted completions (needs an enumerable task and the local "
            "character tokenizer); use mean_at_k"
        )
    exact = asked == "exact" or (asked == "auto" and possible)
    ev = config["evaluation"]
    if exact and ev.get("backend", "hf") != "hf" and float(ev.get("temperature", 1.0)) != 1.0:
        raise DesignError(
            "evaluation.sampled_metric exact at temperature != 1 needs evaluation.backend hf "
            "(vLLM's log-likelihoods are at temperature 1)"
        )
    return "exact" if exact else "mean_at_k"


def needs_prefetch(config: dict[str, Any]) -> bool:
    """Whether any job reads hub content (or its stand-in): then the prefetch rule runs first."""
    return bool(
        config.get("stand_in")
        or config["base_policy"].get("kind") == "hub"
        or get_task(config["task"]).hub_data
        or config["evaluation"].get("external_benchmarks")
    )


def uses_vllm(config: dict[str, Any]) -> bool:
    training = config.get("training", {})
    return (
        training.get("generation_backend") == "vllm"
        or config.get("evaluation", {}).get("backend") == "vllm"
    )


def conda_env(config: dict[str, Any]) -> str:
    """The jobs' conda environment file (repository-relative): envs/grpo-gpu.yaml, the pin set with
    vLLM (another transformers and Python, envs/gpu-vllm.in), where the config uses vLLM."""
    return "envs/grpo-gpu.yaml" if uses_vllm(config) else "envs/grpo.yaml"


def experiment_dir(config: dict[str, Any]) -> Path:
    return Path(config.get("results_dir", "results")) / config["experiment"]


# -- base-policy draws ---------------------------------------------------------------------------
def draws(config: dict[str, Any]) -> list[int]:
    """The base-policy draws (``base_policy.draws``): each is the seed of its own local base
    policy, under which every cell runs every seed. Empty when the config names one base policy
    (``base_policy.seed``, or a hub model)."""
    return [int(d) for d in config["base_policy"].get("draws") or []]


def draw_dir(config: dict[str, Any], draw: int | None) -> Path:
    """Where a draw's base policy, runs, evaluations and analysis live: ``draw=<d>`` under the
    experiment folder; the experiment folder itself without draws. Splits, evaluation tasks and
    the calculations sheet are shared by all draws and stay at the experiment folder."""
    root = experiment_dir(config)
    return root if draw is None else Path(Tree(root).draw(draw))


def draw_base_policy(config: dict[str, Any], draw: int | None) -> dict[str, Any]:
    """The base_policy section one draw's warm start runs with: the draw is its seed."""
    base = {k: v for k, v in config["base_policy"].items() if k != "draws"}
    return base if draw is None else {**base, "seed": int(draw)}


def pooled_dir(config: dict[str, Any]) -> Path:
    """The analysis over draws (tables, verdicts, reading), beside the draws' folders."""
    return Path(Tree(experiment_dir(config)).pooled())


def check_draws(config: dict[str, Any]) -> None:
    base, listed = config["base_policy"], draws(config)
    if "draws" not in base:
        return
    if base.get("kind", "local") != "local":
        raise DesignError(
            "base_policy.draws needs base_policy.kind local: a hub model is one base policy"
        )
    if "seed" in base:
        raise DesignError(
            "base_policy has both seed and draws; the draws are the base policies' seeds, so give "
            "one of them"
        )
    if not listed or len(set(listed)) != len(listed):
        raise DesignError(f"base_policy.draws={listed}: expected distinct seeds, at least one")
    if any(not 0 <= int(s) < SEEDS_PER_DRAW for s in config.get("seeds", [])):
        raise DesignError(
            f"seeds={config['seeds']}: under base_policy.draws a seed must lie in "
            f"[0, {SEEDS_PER_DRAW}) (seed s of draw d trains with seed {SEEDS_PER_DRAW}*d + s)"
        )


# -- what the report reads and says --------------------------------------------------------------
def report_inputs(
    exp: str, cells_by_stage: dict[str, list[str]], seeds: list[int], sources: list[str]
) -> dict[str, Any]:
    """The files the tables and figures read (Snakemake input): every run's test evaluation,
    calibration probabilities, efficiency curve and diagnostics, and the selections of the stages whose winners others take."""
    cells = dict.fromkeys(c for cs in cells_by_stage.values() for c in cs)
    runs = [(c, s) for c in cells for s in seeds]
    tree = Tree(exp)
    files: dict[str, Any] = {
        "evals": [tree.summary(c, s) for c, s in runs],
        "diagnostics": [
            tree.diagnostics(c, s, f) for c, s in runs for f in ("steps.csv", "summary.json")
        ],
        "calibration": [tree.calibration(c, s) for c, s in runs],
        "curves": [tree.curve(c, s) for c, s in runs],
    }
    if sources:
        files["selection"] = [tree.selection(s) for s in sources]
    return files


def read_winners(paths: list[Path]) -> dict[str, Any]:
    """Source stage -> winner, from the selection files."""
    out = {}
    for p in paths:
        data = json.loads(Path(p).read_text())
        out[data["stage"]] = data["winner"]
    return out


def stage_title(config: dict[str, Any], name: str) -> str:
    """``stage 4: KL coefficient β × std scaling`` (position among the declared stages)."""
    order = [s.name for s in all_stages(config)]
    s = get_stage(config, name)
    title = f"stage {order.index(name) + 1}: " + " × ".join(BY_NAME[ax].label for ax in s.vary)
    # A recipe stage names the recipes it runs besides its reference's (e.g. "(Dr. GRPO)").
    recipes: dict[str, None] = {}
    for winners in possible_winners(config, s):
        cells = stage_cells(config, s, winners)
        for c in cells:
            r = cell_recipe(c.path)
            if r and r != cell_recipe(reference_of(s, c, cells).path):
                recipes[r.name] = None
    return title + (f" ({', '.join(recipes)})" if recipes else "")


def stage_caption(config: dict[str, Any], name: str) -> str:
    """One line naming what a stage varies and what it holds fixed (figure captions), from the
    axis declarations."""
    s = get_stage(config, name)
    varied = " crossed with ".join(
        f"{BY_NAME[ax].label} over {[BY_NAME[ax].spell(v) for v in vs]}"
        for ax, vs in s.vary.items()
    )
    base = axis_defaults(config)
    used = {ax for stage in all_stages(config) for ax in (*stage.vary, *stage.fixed)}
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
    t = {**TRAINING_DEFAULTS, **config["training"]}
    rest = (
        f"std ε={t['std_eps']}, clip ε=({t['clip_eps_low']}, {t['clip_eps_high']}), "
        f"max completion length {t['max_completion_length']}, {completions_per_step(config)} "
        f"completions per step over {t['max_steps'] // int(t['num_iterations'])} generation steps"
    )
    reference = " / ".join(BY_NAME[ax].spell(v) for ax, v in s.reference_values.items())
    return f"{varied} (reference {reference}); {', '.join(held)}, {rest}"
