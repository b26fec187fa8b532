"""What the DAG needs of the config beyond the design (``grpo_ablation.design.ablation``): the checks it
runs before any job, the evaluation section as jobs take it, the draws' base policies, the
environments and the files the analysis rules read. Knows nothing of Snakemake; imports neither
torch nor matplotlib.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from grpo_ablation.design import hypotheses
from grpo_ablation.design.ablation import (
    SEEDS_PER_DRAW,
    SELECTION_METRICS,
    Design,
    Stage,
    WinnerOf,
    listed_draws,
    reference_of,
    stage_of,
)
from grpo_ablation.design.base_policy import base_kind, base_policy_of
from grpo_ablation.design.options import (
    ComputeConfig,
    EvaluationConfig,
    TrainingConfig,
    check_generation,
)
from grpo_ablation.design.packing import packing_error
from grpo_ablation.design.problems import DesignError, Problems
from grpo_ablation.design.resources import ResourcesConfig
from grpo_ablation.device import SHARDED_PRESETS
from grpo_ablation.layout import Tree
from grpo_ablation.packages import INSTALL_GGUF, missing_packages
from grpo_ablation.settings import did_you_mean
from grpo_ablation.tasks import answer_rules, get_task

__all__ = ["DesignError", "check_design"]


# -- checks ------------------------------------------------------------------------------------
def check_design(config: dict[str, Any]) -> Design:
    """Everything the DAG can check before any job runs: names, references, winners' sources,
    matched budgets, each run's training configuration, the declared hypotheses. Every problem is
    named in one pass (checks that do not depend on each other all run; a stage that does not
    parse leaves out the checks of its cells and of the hypotheses that name it). Returns the
    design."""
    problems = Problems()
    for check in (
        evaluation_config,
        check_base_policy,
        check_repeats,
        check_draws,
        check_study,
        check_optional_packages,
        check_packing,
    ):
        with problems.check():
            check(config)
    broken = stage_problems(config)
    problems.found += [p for found in broken.values() for p in found]
    design = Design.of(without_stages(config, broken))
    enabled = set(design.stage_names)
    warnings: dict[str, None] = {}  # in order, each once
    for s in design.declared:
        with problems.check():
            warnings.update(dict.fromkeys(_check_stage(config, design, s, enabled)))
    with problems.check():
        pushed = [h.id for h in hypotheses.declared(design, broken) if h.on_push]
        if design.sections.get("study") and pushed:
            raise DesignError(
                f"hypotheses {pushed} are judged on the push's replicates, but a study's looks "
                "count base-policy draws: withdraw them from the study (enabled: false) and judge "
                "them in a fixed design"
            )
    problems.raise_any()
    for line in [
        *new_stage_warnings(config),
        *warnings,
        *protocol_warnings(config),
        *hypotheses.power_warnings(design),
    ]:
        print(line, file=sys.stderr)
    return design


def stage_problems(config: dict[str, Any]) -> dict[str, list[str]]:
    """Each declared stage that does not parse, with its problems."""
    broken = {}
    for name, spec in (config.get("stages") or {}).items():
        try:
            stage_of(name, spec or {})
        except DesignError as err:
            broken[name] = err.problems
    return broken


def without_stages(config: dict[str, Any], broken: dict[str, Any]) -> dict[str, Any]:
    """``config`` less the stages ``broken``: what the checks of the rest of the design run on."""
    if not broken:
        return config
    return {**config, "stages": {k: v for k, v in config["stages"].items() if k not in broken}}


def _check_stage(config: dict[str, Any], design: Design, s: Stage, enabled: set[str]) -> list[str]:
    """One stage's checks: its selection metric, the winners it takes (another enabled stage
    that varies the axis alone, no cycle), each cell's matched budget, reference and run layout.
    Returns the warnings on its cells' objectives."""
    if s.selection_metric not in SELECTION_METRICS:
        raise DesignError(
            f"stages.{s.name}.selection_metric={s.selection_metric!r}; expected one of "
            f"{list(SELECTION_METRICS)}{did_you_mean(s.selection_metric, SELECTION_METRICS)}"
        )
    if s.name not in enabled:
        return []
    for ax, value in s.fixed.items():
        if not isinstance(value, WinnerOf):
            continue
        src = value.stage
        if src not in enabled or src == s.name:
            raise DesignError(
                f"stages.{s.name}.fixed.{ax} takes the winner of stage {src!r}, which must be "
                "another enabled stage" + did_you_mean(src, enabled - {s.name})
            )
        _check_no_cycle(design, s.name)
        source = design.stage(src)
        if len(source.vary) != 1 or source.primary != ax:
            raise DesignError(
                f"stages.{s.name}.fixed.{ax}: stage {src!r} must vary {ax} alone to have a winner"
            )
    warnings = []
    for winners in design.possible_winners(s):
        cells = design.cells(s, winners)
        design.check_matched_budgets(s, cells)
        for cell in cells:
            reference_of(s, cell, cells)
            check_run_layout(config, design.training_config(cell, 0))
            warnings += objective_warnings(s.name, s.vary, design.training_config(cell, 0))
    return warnings


# What power.measured_on may name, and where the config holds it.
PROTOCOL = {
    "max_steps": lambda c: (c.get("training") or {}).get("max_steps"),
    "group_size": lambda c: (c.get("training") or {}).get("group_size"),
    "prompts_per_step": lambda c: (c.get("training") or {}).get("prompts_per_step"),
    "max_completion_length": lambda c: (c.get("training") or {}).get("max_completion_length"),
    "task": lambda c: (c.get("task") or {}).get("kind"),
    "model": lambda c: (
        (c.get("base_policy") or {}).get("name") or (c.get("base_policy") or {}).get("kind")
    ),
}


def protocol_warnings(config: dict[str, Any]) -> list[str]:
    """A warning where the planning SDs and minutes were measured on another protocol than the
    one this config runs (``power.measured_on``, and an SD entry's own ``max_steps``), or where
    the config does not say what they were measured on: its power and cost are then guesses
    until a pilot of its own."""
    power = config.get("power") or {}
    if not power.get("sd") and "minutes_per_unit" not in power:
        return []
    pilot = (
        "pilot it: run one or two draws (base_policy.draws), read the SDs observed in "
        "pooled/tables/hypotheses.csv (sd) and the minutes in its benchmarks/, set power.sd, "
        "power.minutes_per_unit and power.measured_on"
    )
    measured = power.get("measured_on")
    if not measured:
        return [
            "WARNING: power.measured_on is not given: the plan's SDs and minutes may come from "
            f"another protocol than this one; {pilot}"
        ]
    out = []
    differ = {k: (v, PROTOCOL[k](config)) for k, v in measured.items() if PROTOCOL[k](config) != v}
    if differ:
        said = ", ".join(f"{k} {was} (this design: {now})" for k, (was, now) in differ.items())
        out.append(
            f"WARNING: power.sd and power.minutes_per_unit were measured on another protocol "
            f"({said}): the plan's power and cost figures are guesses for this design; {pilot}"
        )
    steps = PROTOCOL["max_steps"](config)
    for metric, value in (power.get("sd") or {}).items():
        for e in value if isinstance(value, list) else []:
            if e.get("max_steps", steps) != steps:
                out.append(
                    f"WARNING: power.sd.{metric}: {e['run']!r} was measured at "
                    f"{e['max_steps']} steps; this design runs {steps}"
                )
    return out


def new_stage_warnings(config: dict[str, Any]) -> list[str]:
    """A stage named close to an earlier one: most likely a typo in an override that added a
    stage where it meant to change one (merged configs keep the first file's stages first, a
    later file's new ones after them). New stages are legitimate: a warning, not a refusal."""
    names = list(config.get("stages") or {})
    return [
        f"WARNING: stages.{name} is a new stage{hint}"
        for i, name in enumerate(names)
        if (hint := did_you_mean(name, names[:i]))
    ]


def objective_warnings(stage: str, vary: dict[str, Any], cfg: TrainingConfig) -> list[str]:
    """What a cell's objective does that its config does not say out loud: a CISPO weight capped
    below 1 (TRL's cispo with epsilon_high unset caps at epsilon, 0.2 by default: the ratio
    drops out), and a stage that varies the ratio on rollouts whose ratio is exactly 1 (μ = 1, no
    vLLM correction), where every term gives the same gradient."""
    out = []
    if cfg.ratio == "cispo" and cfg.cispo_cap < 1:
        out.append(
            f"warning: stage {stage!r}: a cispo cell caps its weight at {cfg.cispo_cap:g} < 1, "
            "so the weight is that constant wherever r exceeds it and the ratio drops out"
        )
    at_one = cfg.num_iterations == 1 and cfg.generation_backend != "vllm"
    if {"ratio", "ratio_level"} & set(vary) and at_one:
        out.append(
            f"warning: stage {stage!r} varies the policy ratio at num_iterations 1: every "
            "ratio is exactly 1, so its cells differ only in their diagnostics"
        )
    return out


def check_optional_packages(config: dict[str, Any]) -> None:
    """A base policy converted from a GGUF needs the optional packages: say so before any job."""
    spec = config["base_policy"].get("gguf")
    if not spec:
        return
    missing = missing_packages(spec)
    if missing:
        raise DesignError(
            f"base_policy.gguf needs the optional package(s) {', '.join(missing)}, not installed "
            f"in this environment; install them with {INSTALL_GGUF}"
        )


def check_packing(config: dict[str, Any]) -> None:
    """resources.runs_per_gpu packs runs of one GPU and one process each."""
    resources = ResourcesConfig.of(config.get("resources"))
    compute = ComputeConfig.of(config.get("compute"))
    gpus = resources.gpus_per_train_job * compute.processes_per_train_job
    problem = packing_error(asdict(resources), gpus)
    if problem:
        raise DesignError(problem)


def check_run_layout(config: dict[str, Any], cfg: TrainingConfig) -> None:
    """What a run's options need of its processes and its generation backend: resampling selects
    groups over the whole generation batch in one process; curve policies are saved by rank 0
    from unsharded weights; compute's generation options are transformers'."""
    compute = ComputeConfig.of(config.get("compute"))
    try:
        check_generation(compute, cfg)
    except ValueError as error:
        raise DesignError(str(error)) from None
    nproc = compute.processes_per_train_job
    if cfg.zero_variance == "resample" and nproc > 1:
        raise DesignError(
            "zero_variance resample runs in one process per run; set "
            f"compute.processes_per_train_job: 1 (it is {nproc})"
        )
    preset = compute.accelerate_config
    if cfg.curve_points and nproc > 1 and preset in SHARDED_PRESETS:
        raise DesignError(
            f"training.curve_points={cfg.curve_points} saves curve policies from rank 0, which "
            f"holds only a shard of the weights under compute.accelerate_config {preset!r}; set "
            "training.curve_points: 0 (the curve is then the checkpoints') or use ddp or zero2"
        )


def _check_no_cycle(design: Design, start: str, path: tuple[str, ...] = ()) -> None:
    """Depth first along the winners a stage takes: a stage met again on its own path is a cycle
    (two stages taking the winner of one source are not)."""
    if start in path:
        raise DesignError(f"stages take each other's winners in a cycle through {start!r}")
    for source in design.stage(start).sources():
        _check_no_cycle(design, source, (*path, start))


def evaluation_config(config: dict[str, Any]) -> dict[str, Any]:
    """The evaluation section as jobs need it: every option resolved (``EvaluationConfig``),
    training's generation length and the compute section's device and precision filled in (one
    answer protocol for training and evaluation), the sampled metric decided."""
    ev = EvaluationConfig.of(config.get("evaluation"))
    length = int(Design.of(config).shared_training["max_completion_length"])
    if ev.max_gen_toks not in (None, length):
        raise DesignError(
            f"evaluation.max_gen_toks={ev.max_gen_toks} differs from training.max_completion_length="
            f"{length}: evaluation must generate as training does; drop evaluation.max_gen_toks"
        )
    if ev.batch_size == "auto" and ev.backend != "vllm":
        raise DesignError(
            "evaluation.batch_size 'auto' needs evaluation.backend vllm: with hf, lm-eval sizes "
            "batches by trial and the padding of a batch changes the numbers; give an integer"
        )
    compute = ComputeConfig.of(config.get("compute"))
    return asdict(ev) | {
        "max_gen_toks": length,
        "sampled_metric": sampled_metric(config),
        "device": compute.device,
        "dtype": compute.dtype,
    }


def sampled_metric(config: dict[str, Any]) -> str:
    """``exact`` or ``mean_at_k``: exact needs a task whose answer rule's accepted completions
    can be enumerated (``answer_rules.ENUMERABLE``) and the local base's character tokenizer (one
    token per character)."""
    ev = EvaluationConfig.of(config.get("evaluation"))
    task, base = get_task(config["task"]), base_kind(config["base_policy"])
    enumerable = task.answer_rule in answer_rules.ENUMERABLE
    possible = enumerable and base == "local" and not config.get("stand_in")
    if ev.sampled_metric == "exact" and not possible:
        raise DesignError(
            f"evaluation.sampled_metric=exact: task {task.kind!r} with base_policy.kind {base!r} "
            f"cannot enumerate its accepted completions (needs an answer rule in "
            f"{list(answer_rules.ENUMERABLE)} and the local character tokenizer); use mean_at_k"
        )
    exact = ev.sampled_metric == "exact" or (ev.sampled_metric == "auto" and possible)
    if exact and ev.backend != "hf" and float(ev.temperature) != 1.0:
        raise DesignError(
            "evaluation.sampled_metric exact at temperature != 1 needs evaluation.backend hf "
            "(vLLM's log-likelihoods are at temperature 1)"
        )
    return "exact" if exact else "mean_at_k"


# The config sections the prefetch rule reads (it reruns when one changes).
PREFETCH_SECTIONS = ("task", "base_policy", "evaluation", "stand_in", "word_problems")


def needs_prefetch(config: dict[str, Any]) -> bool:
    """Whether any job reads hub content or content made locally in its place (a stand-in, word
    problems, a converted GGUF): then the prefetch rule runs first."""
    return bool(
        config.get("stand_in")
        or config.get("word_problems")
        or base_kind(config["base_policy"]) == "hub"
        or get_task(config["task"]).hub_data
        or EvaluationConfig.of(config.get("evaluation")).external_benchmarks
    )


def base_policy_lookup_only(config: dict[str, Any]) -> bool:
    """Whether the base_policy job only looks a hub model up (no warm start: nothing computed)."""
    base = config["base_policy"]
    return base_kind(base) == "hub" and base_policy_of(base).sft_steps == 0


def base_policy_gpus(config: dict[str, Any]) -> int:
    """GPUs of the base_policy job: one where it warm-starts a hub model on CUDA (the local
    character GPT-2 warm-starts on the CPU; a hub model with sft_steps 0 is only looked up)."""
    hub = base_kind(config["base_policy"]) == "hub"
    warm = hub and not base_policy_lookup_only(config)
    return int(warm and ComputeConfig.of(config.get("compute")).device == "cuda")


def uses_vllm(config: dict[str, Any]) -> bool:
    training = config.get("training", {})
    return (
        training.get("generation_backend") == "vllm"
        or EvaluationConfig.of(config.get("evaluation")).backend == "vllm"
    )


def conda_env(config: dict[str, Any]) -> str:
    """The jobs' conda environment file (repository-relative): envs/grpo-gpu.yaml, the pin set with
    vLLM (another transformers and Python, envs/gpu-vllm.in), where the config uses vLLM."""
    return "envs/grpo-gpu.yaml" if uses_vllm(config) else "envs/grpo.yaml"


# -- base-policy draws ---------------------------------------------------------------------------
def draw_base_policy(config: dict[str, Any], draw: int | None) -> dict[str, Any]:
    """The base_policy section one draw's warm start runs with: the draw is its seed."""
    base = {k: v for k, v in config["base_policy"].items() if k != "draws"}
    return base if draw is None else {**base, "seed": int(draw)}


def check_base_policy(config: dict[str, Any]) -> None:
    """The base_policy section's other keys are its kind's fields (the schema lists only those
    shared, ``base_policy``): a misspelt one is named before any job, not when the job starts."""
    base_policy_of(config["base_policy"])


def check_repeats(config: dict[str, Any]) -> None:
    """A seed listed twice names the same runs twice: they would count as two units of the
    analysis (a value a stage varies twice: ``ablation.stage_of``)."""
    seeds = list(config.get("seeds", []))
    if len(set(seeds)) != len(seeds):
        raise DesignError(f"seeds={seeds}: a seed is listed more than once; list each once")


def check_study(config: dict[str, Any]) -> None:
    """A study's draws are distinct, its looks increasing counts of them, and the draws the
    config trains are those of one look (``study.draws[:n]``): else a look would judge draws
    twice, or others than the ledger records."""
    study = config.get("study")
    if not study:
        return
    draws, looks = list(study["draws"]), [int(n) for n in study["looks"]]
    if len({repr(d) for d in draws}) != len(draws):
        raise DesignError(f"study.draws={draws}: a draw is listed more than once; list each once")
    if looks != sorted(set(looks)) or looks[-1] > len(draws):
        raise DesignError(
            f"study.looks={looks}: expected increasing numbers of draws, the last at most the "
            f"{len(draws)} of study.draws"
        )
    trained = listed_draws(config["base_policy"])
    if not any(trained == draws[:n] for n in looks):
        raise DesignError(
            f"base_policy.draws={trained} are not the draws of a look: a look at n draws trains "
            f"study.draws[:n] for n in study.looks={looks}"
        )


def check_draws(config: dict[str, Any]) -> None:
    base = config["base_policy"]
    listed = listed_draws(base)
    if "draws" not in base:
        return
    if base_kind(base) != "local":
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
    exp: str,
    cells_by_stage: dict[str, list[str]],
    seeds_of: Callable[[str], list[int]],
    sources: list[str],
) -> dict[str, Any]:
    """The files the tables and figures read (Snakemake input): every run's test evaluation,
    calibration probabilities, efficiency curve and diagnostics (each cell at its seeds:
    ``Design.seeds_of``, a replicated reference at more), and the selections of the stages whose
    winners others take."""
    cells = dict.fromkeys(c for cs in cells_by_stage.values() for c in cs)
    runs = [(c, s) for c in cells for s in seeds_of(c)]
    tree = Tree(exp)
    files: dict[str, Any] = {
        "evals": [tree.summary(c, s) for c, s in runs],
        "diagnostics": [
            f for c, s in runs for f in (tree.steps(c, s), tree.diagnostics_summary(c, s))
        ],
        "calibration": [tree.calibration(c, s) for c, s in runs],
        "curves": [tree.curve(c, s) for c, s in runs],
    }
    if sources:
        files["selection"] = [tree.selection(s) for s in sources]
    return files
