"""The hypotheses a config declares before the run, and the role of every contrast.

A hypothesis compares one cell of a stage with that cell's reference in the stage, on one of the
paired quantities of the results table (``quantities.PAIRED``), paired by unit (Δ = cell − reference), or on
a push (``PUSH``: the first-order change of a quantity per unit step along the cell's update, at
the policy the hypothesis names, paired by push replicate, with no training noise): a
``directional`` one predicts a direction and a minimum effect of interest δ ≥ 0, an
``equivalence`` one a margin m > 0 (the tests and the verdict rule: ``analysis/hypotheses.py``).
Each declaration is checked against the design before any job runs, and the design's power for it
is computed from the SD the config declares (``power.sd``; ``design/power.py``): a design with
less than 50% power for a hypothesis is warned about then.

Every contrast a stage shows has a role: the hypothesis that judges it, a *manipulation check*
(an axis changes the quantity by construction: G on the mixed-group fraction), a *negative
control* (equal by construction: ``NEGATIVE_CONTROLS``), a *repeat* of an earlier stage's (the
same runs against the same reference: one contrast, counted there), or *exploratory*.

Part of the design layer: no pandas, no numerical library.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grpo_ablation.design import power as _power
from grpo_ablation.design.ablation import Design, Stage, WinnerOf, reference_of
from grpo_ablation.design.axes import BY_NAME, DesignError
from grpo_ablation.design.hypothesis_options import (
    DIRECTIONS,
    KINDS,
    NO_MINIMUM,
    PUSH_POLICIES,
)
from grpo_ablation.design.power_section import PowerValues, or_unknown
from grpo_ablation.design.problems import Problems
from grpo_ablation.design.push import PushConfig
from grpo_ablation.design.quantities import OUTCOME_DEPENDENT, PAIRED
from grpo_ablation.settings import did_you_mean

# The push's quantities (``training/push.py``): a choice's first-order change of one quantity per
# unit L2 step at one policy, the replicates (independent prompt sets and samples) its units.
PUSH = {
    "push_accuracy": ("accuracy", "push on expected accuracy (per unit step)"),
    "push_incorrect_length": (
        "incorrect_length",
        "push on the incorrect-completion length (tokens per unit step)",
    ),
    "push_mixed": ("mixed", "push on P(mixed group) (per unit step)"),
}
# What every quantity a hypothesis may name is called in the reading.
METRICS = {**PAIRED, **{k: label for k, (_, label) in PUSH.items()}}
# The only axes a push compares: it weighs one set of samples by each std scaling and aggregation.
PUSH_AXES = ("std_scaling", "aggregation")
# The choice the push's tables take differences to (GRPO's own: sample std, sequence_mean).
PUSH_REFERENCE = "sample/sequence_mean"

# The roles of contrasts that are not a declared hypothesis's.
EXPLORATORY = "exploratory"
MANIPULATION = "manipulation check"
REPEAT = "repeat of"  # followed by the earlier stage's name
NEGATIVE = "negative control"


def contrast_key(stage: str, cell: str, quantity: str) -> str:
    """How roles and predictions name one contrast: ``stage|cell|quantity``."""
    return f"{stage}|{cell}|{quantity}"


ALPHA = 0.05
# What a look, or a fixed design's test, says of one hypothesis.
SUPPORTED, REFUTED, CONTINUE, INCONCLUSIVE = "supported", "refuted", "continue", "inconclusive"


# Contrasts equal by construction, so their spread over units is a floor of the noise of a
# contrast (a lower bound: under common random numbers these runs stay closer than objectives
# that really differ): (axis, value, reference value) -> (the condition on the cell, why).
# Population and sample std differ by the constant factor sqrt(G/(G-1)) on every advantage, which
# Adam absorbs up to its ε when nothing else in the loss (a KL term) is left unscaled and the
# gradient is not clipped: clipping that binds on some steps and not others scales each step by a
# factor of its own.
NEGATIVE_CONTROLS = {
    ("std_scaling", "population", "sample"): (
        # Clipping that binds on some steps and not others (a step's factor depends on its
        # norm, which the constant scales) is a step-to-step scale Adam does not absorb.
        lambda training: training.beta == 0 and not training.max_grad_norm,
        "population and sample std differ by the constant factor √(G/(G−1)), which Adam absorbs "
        "up to its ε at β = 0 with no gradient clipping",
    )
}


@dataclass(frozen=True)
class Hypothesis:
    id: str
    kind: str  # one of KINDS
    stage: str
    cell: tuple[tuple[str, Any], ...]  # varied axis -> value: the compared cell within the stage
    metric: str  # a paired quantity of the results table (``quantities.NAMEABLE``) or a push
    source: str
    direction: int = 0  # directional: +1 higher, −1 lower than the reference
    minimum_effect: float = 0.0  # directional: δ
    margin: float = math.nan  # equivalence: m
    # The true effect the power analysis assumes: directional s·Δ (default 2δ), equivalence Δ
    # (default 0). The verdict does not use it.
    expected_effect: float = math.nan
    policy: str = ""  # a push hypothesis's policy (``PUSH_POLICIES``); "" for the others

    @property
    def on_push(self) -> bool:
        return self.metric in PUSH

    def prediction(self) -> str:
        if self.kind == "equivalence":
            return f"within ±{self.margin:g} of the reference"
        way = "higher" if self.direction > 0 else "lower"
        return f"{way} than the reference by more than {self.minimum_effect:g}"


def _one(
    spec: dict[str, Any], stages: dict[str, Stage], seen: set[str], broken: Collection[str] = ()
) -> Hypothesis | None:
    """One entry of the config's ``hypotheses`` checked against the design: its id, kind, stage,
    metric, cell and source, then the fields of its kind. None for one that names a stage in
    ``broken`` (a stage whose own problems are named already: its cells are unknown)."""
    hid = str(spec.get("id", ""))
    where = f"hypotheses[{hid or '?'}]"
    if not hid or hid in seen:
        raise DesignError(f"{where}: every hypothesis needs an id of its own")
    seen.add(hid)
    kind = spec.get("kind")
    if kind not in KINDS:
        raise DesignError(
            f"{where}.kind={kind!r}; expected one of {list(KINDS)}{did_you_mean(kind, KINDS)}"
        )
    stage = stages.get(str(spec.get("stage")))
    if spec.get("stage") in broken:
        return None
    if stage is None:
        raise DesignError(
            f"{where}.stage={spec.get('stage')!r} is not an enabled stage; the config runs "
            f"{[*stages, *broken]}{did_you_mean(spec.get('stage'), [*stages, *broken])}"
        )
    metric = spec.get("metric")
    if metric not in METRICS:
        raise DesignError(
            f"{where}.metric={metric!r}; expected one of {list(METRICS)}"
            + did_you_mean(metric, METRICS)
        )
    policy = spec.get("policy")
    if (metric in PUSH) != (policy is not None) or (policy and policy not in PUSH_POLICIES):
        raise DesignError(
            f"{where}.policy={policy!r}: a push metric names the policy it is judged at "
            f"({list(PUSH_POLICIES)}); another metric names none"
        )
    if metric in OUTCOME_DEPENDENT:
        raise DesignError(
            f"{where}.metric={metric!r} exists only where the run's efficiency fit is identified, "
            "which depends on the outcome: judge a hypothesis on an endpoint every run has "
            "(efficiency_late or efficiency_auc); the fits stay as description"
        )
    source = " ".join(str(spec.get("source") or "").split())
    if not source:
        raise DesignError(f"{where}.source: say where the prediction comes from")
    # A field of the other kind would be silently ignored: refuse it.
    foreign = {"equivalence": ("direction", "minimum_effect"), "directional": ("margin",)}[kind]
    if any(spec.get(f) is not None for f in foreign):
        raise DesignError(f"{where}: {kind} hypotheses take no {' or '.join(foreign)}")
    common = {
        "id": hid,
        "kind": kind,
        "stage": stage.name,
        "metric": metric,
        "cell": tuple(_compared_cell(spec.get("cell"), stage, where).items()),
        "source": source,
        "policy": policy or "",
    }
    if kind == "equivalence":
        return Hypothesis(**common, **_equivalence(spec, where))
    return Hypothesis(**common, **_directional(spec, where))


def _compared_cell(named: Any, stage: Stage, where: str) -> dict[str, Any]:
    """The stage's cell a hypothesis names (a value of the primary axis, or axis -> value), every
    axis it leaves out at the stage's reference value."""
    named = named if isinstance(named, dict) else {stage.primary: named}
    extra = set(named) - set(stage.vary)
    if extra:
        raise DesignError(
            f"{where}.cell names {sorted(extra)}, which stage {stage.name!r} does not vary"
        )
    values: dict[str, Any] = {}
    for ax in stage.vary:
        if ax in named:
            value = BY_NAME[ax].coerce(named[ax], f"{where}.cell.{ax}")
            if value not in stage.vary[ax]:
                raise DesignError(
                    f"{where}.cell.{ax}={named[ax]!r} is not among stage {stage.name!r}'s values "
                    f"{list(stage.vary[ax])}"
                )
            values[ax] = value
        elif ax in stage.reference_values:
            values[ax] = stage.reference_values[ax]
        else:
            raise DesignError(f"{where}.cell must name {ax!r}: stage {stage.name!r} crosses it")
    if values == {**values, **stage.reference_values}:
        raise DesignError(f"{where}.cell is the stage's reference itself: nothing to compare")
    return values


def _equivalence(spec: dict[str, Any], where: str) -> dict[str, float]:
    margin = float(spec.get("margin", math.nan))
    if not margin > 0:
        raise DesignError(f"{where}.margin must be a positive number, got {margin}")
    expected = float(spec.get("expected_effect", 0.0))
    if not abs(expected) < margin:
        raise DesignError(
            f"{where}.expected_effect={expected} lies outside the margin ±{margin}: "
            "equivalence could not be shown"
        )
    return {"margin": margin, "expected_effect": expected}


def _directional(spec: dict[str, Any], where: str) -> dict[str, Any]:
    direction = DIRECTIONS.get(spec.get("direction"))
    if direction is None:
        raise DesignError(
            f"{where}.direction={spec.get('direction')!r}; expected one of {list(DIRECTIONS)}"
            + did_you_mean(spec.get("direction"), DIRECTIONS)
        )
    delta = float(spec.get("minimum_effect", NO_MINIMUM))
    if not delta >= 0:
        raise DesignError(f"{where}.minimum_effect must be >= 0, got {delta}")
    expected = float(spec.get("expected_effect", 2 * delta if delta > 0 else math.nan))
    if math.isfinite(expected) and not expected > delta:
        raise DesignError(
            f"{where}.expected_effect={expected} must exceed minimum_effect={delta}: an effect at "
            "the boundary is detected with probability α whatever the design"
        )
    return {"direction": direction, "minimum_effect": delta, "expected_effect": expected}


def declared(design: Design, broken: Collection[str] = ()) -> list[Hypothesis]:
    """The config's hypotheses, checked against the design (a stage, cell or metric that does not
    exist stops the DAG before any job, naming the hypothesis; every such problem at once). A
    hypothesis of a stage in ``broken`` (left out of the design for problems of its own) is left
    out unchecked."""
    stages = {s.name: s for s in design.stages}
    seen: set[str] = set()
    problems = Problems()
    hyps = []
    for spec in design.sections.get("hypotheses") or []:
        with problems.check():
            h = _one(spec, stages, seen, broken)
            hyps += [h] if h else []
    for h in hyps:
        if h.on_push:
            with problems.check():
                push_choices(h, design)
    problems.raise_any()
    return hyps


def hypothesis_choices(design: Design) -> list[str]:
    """The push choices the declared push hypotheses compare, with the tables' reference: what a
    push replicate beyond ``push.full_replicates`` measures (none without push hypotheses)."""
    wanted = {c for h in declared(design) if h.on_push for c in push_choices(h, design)}
    return sorted(wanted | {PUSH_REFERENCE}) if wanted else []


def push_choices(h: Hypothesis, design: Design) -> tuple[str, str]:
    """(cell, reference) of a push hypothesis as the push names its choices (``std/aggregation``),
    or an error where the push cannot compare them: the push off, its policy not measured, or a
    cell that differs from the push's run (the baseline) in an axis other than ``PUSH_AXES``."""
    where = f"hypotheses[{h.id}]"
    push = PushConfig.of(design.sections.get("push"))
    if not push.enabled:
        raise DesignError(f"{where}.metric={h.metric!r} needs the push (push.enabled: true)")
    steps = push.steps
    step = 0 if h.policy == "base" else design.shared_config.max_steps
    if steps is not None and step not in steps:
        raise DesignError(f"{where}.policy={h.policy!r} (step {step}) is not in push.steps={steps}")
    stage = design.stage(h.stage)
    if any(isinstance(v, WinnerOf) for v in stage.fixed.values()):
        raise DesignError(f"{where}: stage {h.stage!r} takes a winner; the push knows no winner")
    cells = design.cells(stage)
    cell = next(c for c in cells if all(c[a] == v for a, v in h.cell))
    ref = reference_of(stage, cell, cells)
    base = design.baseline()
    for c in (cell, ref):
        other = [a for a, v in c.values if a not in PUSH_AXES and v != base[a]]
        if other:
            raise DesignError(
                f"{where}: the push measures the baseline's policy and varies only "
                f"{list(PUSH_AXES)}; cell {c.path!r} also changes {other}"
            )
    spell = {a: BY_NAME[a].spell for a in PUSH_AXES}
    return tuple("/".join(spell[a](c[a]) for a in PUSH_AXES) for c in (cell, ref))  # type: ignore[return-value]


def contrast(h: Hypothesis, rows: list[dict[str, str]], design: Design) -> dict[str, str]:
    """The design row (stage, cell, reference paths) a hypothesis compares."""
    for r in rows:
        if r["stage"] != h.stage:
            continue
        cell = design.parse_cell(r["cell"])
        if all(cell[ax] == v for ax, v in h.cell):
            return r
    raise DesignError(f"hypothesis {h.id!r}: no cell of stage {h.stage!r} matches {dict(h.cell)}")


def node_levels(
    ids: list[str], decided: set[str], alpha: float = ALPHA, gatekeeper: str | None = None
) -> dict[str, float]:
    """Each open hypothesis's share of α under the study's graph (``PROCEDURE``): the gatekeeper
    while it is open holds all of it; else the open ones share it equally."""
    open_ = [i for i in ids if i not in decided]
    if gatekeeper in open_:
        return {i: alpha if i == gatekeeper else 0.0 for i in open_}
    return {i: alpha / len(open_) for i in open_}


def test_levels(h: Hypothesis, node: float) -> tuple[float, float]:
    """(support level, refute level) of a hypothesis holding ``node`` of α."""
    return node / 2, node / 4 if h.kind == "equivalence" else node / 2


def planning_levels(
    hypotheses: list[Hypothesis], gatekeeper: str | None = None, alpha: float = ALPHA
) -> dict[str, tuple[float, float]]:
    """Each hypothesis's (support, refute) levels as planned: those ``node_levels`` gives at the
    start, save that with a gatekeeper the others are planned at the levels they hold once it is
    decided (before that they hold none; the gatekeeper at α)."""
    ids = [h.id for h in hypotheses]
    nodes = node_levels(ids, set(), alpha, gatekeeper)
    if gatekeeper in nodes:
        nodes = {**node_levels(ids, {gatekeeper}, alpha), gatekeeper: alpha}
    return {h.id: test_levels(h, nodes[h.id]) for h in hypotheses}


def family_level(hypotheses: list[Hypothesis], alpha: float = ALPHA) -> float:
    """The level each one-sided test is first compared with: Holm's first step over the 2·m tests
    of the m declared hypotheses (the bound at which power is computed)."""
    return alpha / (2 * max(1, len(hypotheses)))


def power_at(h: Hypothesis, sd: float, n: int, level: float) -> float:
    """The fixed-sample power of ``n`` units with per-unit SD ``sd`` for ``h`` at its expected
    effect and the one-sided ``level``."""
    if h.kind == "equivalence":
        return _power.tost_power(h.expected_effect, h.margin, sd, n, level)
    return _power.one_sided_power(h.expected_effect - h.minimum_effect, sd, n, level)


def expected_power_at(h: Hypothesis, sd: float, n: int, level: float, df: float) -> float:
    """``power_at`` averaged over the SD's uncertainty on ``df`` degrees of freedom; NaN for a
    push hypothesis, without an expected effect or without the df."""
    if h.on_push or not math.isfinite(h.expected_effect):
        return math.nan
    if h.kind == "equivalence":
        return _power.expected_power(lambda s: power_at(h, s, n, level), sd, df)
    return _power.expected_one_sided_power(h.expected_effect - h.minimum_effect, sd, n, level, df)


def design_power(h: Hypothesis, sd: float, n: int, level: float) -> dict[str, Any]:
    """What ``n`` units with per-unit SD ``sd`` can do for ``h`` at the one-sided ``level``: the
    power at its expected effect, the minimum detectable effect (directional: the true s·Δ found
    with 80% power; equivalence: the smallest margin shown with 80% power at the expected Δ) and
    the units its expected effect needs for 80% (None where no number of units reaches it)."""
    e = h.expected_effect
    if h.kind == "equivalence":
        mde = _power.smallest_margin(sd, n, level, e)
    else:
        mde = h.minimum_effect + _power.minimum_detectable_effect(sd, n, level)
    known = math.isfinite(e) and sd > 0
    needed = _power.units_needed(lambda k: power_at(h, sd, k, level)) if known else None
    return {
        "power": power_at(h, sd, n, level) if known else math.nan,
        "mde": mde,
        "units_needed": math.nan if needed is None else float(needed),
    }


def planning_sd(value: Any, metric: str) -> tuple[float, float]:
    """(SD, its df) of one ``power.sd`` entry: a number (df unknown: NaN), or a list of earlier
    runs of the same protocol, each ``{sd, df, run}``, pooled by their degrees of freedom
    (``power.pooled_sd``); a run must be named, so the pool says where it comes from."""
    if not isinstance(value, list):
        return float(value), math.nan
    for e in value:
        if not (isinstance(e, dict) and {"sd", "df", "run"} <= set(e) and str(e["run"]).strip()):
            raise DesignError(
                f"power.sd.{metric}: each earlier run needs sd, df and run, got {e!r}"
            )
    sd, df = _power.pooled_sd([(float(e["sd"]), int(e["df"])) for e in value])
    return sd, float(df)


def replication_factor(k: int, same_seed: float = 0.0, other_seed: float = 0.0) -> float:
    """SD(cell − mean of k reference runs) / SD(cell − its same-seed reference run) for runs of
    equal variance, the cell correlated ρ₁ with the same-seed run (shared random numbers) and ρ₀
    with the others, the reference runs ρ₀ among themselves:
    √([1 + (1 + (k−1)ρ₀)/k − 2(ρ₁ + (k−1)ρ₀)/k] / (2(1 − ρ₁))). At ρ₀ = 0 and k = 3: 0.816 at
    ρ₁ = 0, 1.00 at ρ₁ = 0.5, 1.29 at ρ₁ = 0.75: replication pays only while runs share little."""
    if k <= 1:
        return 1.0
    r1, r0 = same_seed, other_seed
    return math.sqrt((1 + (1 + (k - 1) * r0) / k - 2 * (r1 + (k - 1) * r0) / k) / (2 * (1 - r1)))


def price_source(section: dict[str, Any]) -> str:
    """Where the ``power`` section's SDs and minutes come from: its ``source``, and the minutes'
    own ``minutes_source`` where the price was measured again (a registered study's source is
    fixed, its price is not)."""
    values = PowerValues.of(section)
    source = " ".join((values.source or "").split())
    again = " ".join((values.minutes_source or "").split())
    return f"{source}; minutes measured again: {again}" if again else source


@dataclass(frozen=True)
class Plan:
    """The config's ``power`` section read against its design: the unit of replication, how many
    the design has, the declared per-unit SDs and what one unit costs."""

    unit: str  # "draw" (several base-policy draws) or "seed"
    units: int
    sd: dict[str, float]
    minutes_per_unit: float
    source: str
    # A push hypothesis's units: the push replicates of every draw (each draw's policy measured
    # on replicates of its own), and what one replicate costs (job minutes at one policy).
    replicates: int = 0
    minutes_per_replicate: float = math.nan

    # the degrees of freedom behind each SD (NaN where a single number was declared)
    sd_df: dict[str, float] = field(default_factory=dict)
    # stage -> k where the stage's reference runs k times a seed (stages.<s>.reference_replicates)
    replicated: dict[str, int] = field(default_factory=dict)
    # metric -> power.reference_correlation's measurement (same_seed, other_seed, ratio, k);
    # independent runs where none is declared
    correlation: dict[str, dict[str, float]] = field(default_factory=dict)

    @classmethod
    def of(cls, design: Design) -> Plan:
        section = design.sections.get("power") or {}
        tested = set(design.draws) | set((design.sections.get("study") or {}).get("draws") or [])
        for metric, value in (section.get("sd") or {}).items():
            for e in value if isinstance(value, list) else []:
                own = sorted(tested & set(e.get("draws") or []))
                if own:
                    raise DesignError(
                        f"power.sd.{metric}: {e['run']!r} was measured on draws {own}, which this "
                        "design tests: a planning SD never holds the data of the test it sizes"
                    )
        declared = {str(k): planning_sd(v, k) for k, v in (section.get("sd") or {}).items()}
        sd = {k: v[0] for k, v in declared.items()}
        ids = {h["id"] for h in design.sections.get("hypotheses") or []}
        unknown = sorted(set(sd) - set(METRICS) - ids)
        if unknown:
            raise DesignError(
                f"power.sd names {unknown}; expected metrics of {list(METRICS)} or a declared "
                "hypothesis (its own SD)"
            )
        unit = "draw" if len(design.draws) > 1 else "seed"
        units = len(design.draws) if unit == "draw" else len(design.sections.get("seeds", []))
        looks = (design.sections.get("study") or {}).get("looks")
        if looks:  # a sequential study is planned at its most draws, whatever look this is
            unit, units = "draw", int(looks[-1])
        # minutes_per_unit was measured on a unit of runs_per_unit runs (this design's unit,
        # one run a cell and seed, unless declared): this design's unit, its replicated
        # references' k − 1 extra runs a seed included, is priced at the measured unit's mean run
        values = PowerValues.of(section)
        minutes = or_unknown(values.minutes_per_unit)
        if design.reference_replicates or values.runs_per_unit:
            seeds = _seeds_per_unit(design, unit)
            runs = len(design.all_cells()) * seeds
            extra = sum((k - 1) * seeds for k in design.reference_replicates.values())
            minutes *= (runs + extra) / (values.runs_per_unit or runs)
        push = PushConfig.of(design.sections.get("push"))
        rho = section.get("reference_correlation") or {}
        return cls(
            unit,
            units,
            sd,
            minutes,
            price_source(section),
            push.replicates * max(1, len(design.draws)) if push.enabled else 0,
            or_unknown(values.minutes_per_push_replicate),
            {k: v[1] for k, v in declared.items()},
            {s.name: s.reference_replicates for s in design.stages if s.reference_replicates > 1},
            {m: v for m, v in rho.items() if m != "source"},
        )

    def declared_sd(self, h: Hypothesis) -> float:
        """The SD the config declares for ``h``'s metric (one run against its same-seed
        reference), scaled where its stage's reference is a mean of k runs
        (``replication_factor`` at the declared correlations)."""
        sd = self.sd.get(h.id, self.sd.get(h.metric, math.nan))
        k = 1 if h.on_push else self.replicated.get(h.stage, 1)
        measured = self.correlation.get(h.metric)
        if k <= 1 or measured is None:
            return sd * replication_factor(k)
        return sd * (
            measured["ratio"]
            if measured["k"] == k
            else replication_factor(k, measured["same_seed"], measured["other_seed"])
        )

    def declared_df(self, h: Hypothesis) -> float:
        """The degrees of freedom behind ``h``'s declared SD (NaN: unknown)."""
        return self.sd_df.get(h.id, self.sd_df.get(h.metric, math.nan))

    def units_of(self, h: Hypothesis) -> tuple[int, str]:
        """(how many units, their name) a hypothesis is judged on: push replicates for a push
        metric, the design's draws or seeds otherwise."""
        return (self.replicates, "replicate") if h.on_push else (self.units, self.unit)

    def minutes(self, units: float, h: Hypothesis | None = None) -> float:
        """Wall minutes of ``units`` units of ``h`` on the machine the config targets (NaN:
        unknown)."""
        per = self.minutes_per_replicate if h is not None and h.on_push else self.minutes_per_unit
        return units * per

    def cost(self, design: Design) -> str:
        """What the design costs here, in minutes, and where the minutes come from."""
        steps = design.shared_config.max_steps
        runs = runs_per_unit(design, self.unit) * self.units
        what = f"{self.units} {self.unit}s: {runs} training runs of {steps} steps"
        if not math.isfinite(self.minutes_per_unit):
            return (
                f"Cost: unknown for this design's {what} (no power.minutes_per_unit: run one "
                f"{self.unit} and set it from its benchmarks/)."
            )
        return (
            f"Cost here: about {self.minutes(self.units):.0f} min for this design's {what} "
            f"({self.minutes_per_unit:.2g} min a {self.unit}).\nWhere the minutes and SDs come "
            f"from: {self.source or 'the config does not say (power.source)'}."
        )


# Where a config that declares no planning figures borrows them: the shipped default's power
# section, measured on its own protocol (power.measured_on), so that `plan` prices and powers any
# design, each figure said to be borrowed and warned about where the protocols differ.
REFERENCE_CONFIG = "config/config.yaml"


def _seeds_per_unit(design: Design, unit: str) -> int:
    return len(design.seeds) if unit == "draw" else 1


def runs_per_unit(design: Design, unit: str) -> int:
    """Training runs of one unit (a draw: every cell at every seed; a seed: every cell), before
    any replicated reference's extra runs."""
    return len(design.all_cells()) * _seeds_per_unit(design, unit)


# The parts of a unit's minutes (power.minutes_split): the per-draw jobs (warm start, base
# evaluation, push, tables, figures), the other per-run jobs (evaluation, diagnostics), training.
MINUTES_PARTS = ("draw", "run", "training")


@dataclass(frozen=True)
class Footprint:
    """What a unit of a design runs, as its minutes scale: base-policy draws (a fraction where a
    draw's seeds are the units), training runs, and steps a run."""

    draws: float
    runs: int
    steps: int


def rescaled_minutes(
    minutes: float, split: dict[str, float], measured: Footprint, here: Footprint
) -> float:
    """``minutes`` measured on a unit of ``measured``, rescaled to a unit of ``here``: each part of
    ``split`` (measured job-seconds or shares: only their ratios count) in proportion to what it
    scales with, draws, runs, and runs × steps."""
    total = sum(split[p] for p in MINUTES_PARTS)
    return minutes * (
        split["draw"] / total * here.draws / measured.draws
        + split["run"] / total * here.runs / measured.runs
        + split["training"] / total * (here.runs * here.steps) / (measured.runs * measured.steps)
    )


def footprint(design: Design) -> Footprint:
    """A unit of ``design`` (``Plan.of``'s): a draw with every cell at every seed, or a seed of
    the design's one draw (the draw's jobs shared among its seeds); a replicated reference's
    extra runs included."""
    plan = Plan.of(design)
    seeds = _seeds_per_unit(design, plan.unit)
    extra = sum((k - 1) * seeds for k in design.reference_replicates.values())
    draws = 1.0 if plan.unit == "draw" else 1 / plan.units
    runs = runs_per_unit(design, plan.unit) + extra
    return Footprint(draws, runs, design.shared_config.max_steps)


def borrowed_power(config: dict[str, Any], root: Path) -> dict[str, Any] | None:
    """The power section `plan` uses for ``config`` where it declares neither ``power.sd`` nor
    ``power.minutes_per_unit`` (None where it declares either): ``REFERENCE_CONFIG``'s under
    ``root``, its minutes a unit rescaled to ``config``'s draws, runs and steps by its
    ``minutes_split`` (``rescaled_minutes``), its source saying so."""
    import yaml

    own = config.get("power") or {}
    if own.get("sd") or "minutes_per_unit" in own:
        return None
    reference = yaml.safe_load((root / REFERENCE_CONFIG).read_text())
    power = {
        k: v
        for k, v in reference["power"].items()
        if k not in ("minutes_source", "minutes_split", "runs_per_unit")
    }
    there, here = footprint(Design.of(reference)), footprint(Design.of(config))
    split = reference["power"]["minutes_split"]
    power["minutes_per_unit"] = rescaled_minutes(power["minutes_per_unit"], split, there, here)
    power["runs_per_unit"] = here.runs  # priced as it stands: Plan.of rescales it no further
    measured = ", ".join(f"{k} {v}" for k, v in (power.get("measured_on") or {}).items())
    total = sum(split[p] for p in MINUTES_PARTS)
    shares = ", ".join(f"{p} {split[p] / total:.0%}" for p in MINUTES_PARTS)
    power["source"] = (
        f"this config declares no power.sd or power.minutes_per_unit, so both are borrowed from "
        f"{REFERENCE_CONFIG}, measured on its protocol ({measured}; SDs per base-policy draw), "
        f"the minutes rescaled from its {reference['power']['minutes_per_unit']:g} min a draw of "
        f"{there.runs} runs of {there.steps} steps to this design's draws, runs and steps by how "
        f"they divide (power.minutes_split: {shares}). Its source: "
        + price_source(reference["power"])
    )
    return power


def sd_sources(design: Design) -> list[str]:
    """Where the SD each declared hypothesis is planned on comes from: a line per ``power.sd``
    entry it uses (the hypotheses it serves, its value and df, the earlier runs it pools), or
    that none is declared."""
    sds = (design.sections.get("power") or {}).get("sd") or {}
    used: dict[str, list[str]] = {}
    for h in declared(design):
        used.setdefault(h.id if h.id in sds else h.metric, []).append(h.id)
    out = []
    for key, ids in used.items():
        head = f"{key} ({', '.join(ids)})"
        if key not in sds:
            out.append(f"{head}: no SD declared (power.sd.{key}), so its power is unknown")
            continue
        sd, df = planning_sd(sds[key], key)
        runs = (
            "; ".join(str(e["run"]) for e in sds[key])
            if isinstance(sds[key], list)
            else "a number without its runs (see the source above)"
        )
        on = f" on {df:.0f} df" if math.isfinite(df) else ""
        out.append(f"{head}: SD {sd:.3g}{on}, from {runs}")
    return out


def power_warnings(design: Design, alpha: float = ALPHA) -> list[str]:
    """A warning per declared hypothesis whose power at the design's units, from the declared SD,
    is below 50% (or unknown: no SD declared for its metric, or no expected effect): the rows of
    ``plan_rows`` that fail. Said before any job runs."""
    out = []
    for r in plan_rows(design, alpha=alpha):
        where = f"WARNING: hypothesis {r['id']!r}"
        if not math.isfinite(r["sd_declared"]):
            guess = (
                ""
                if (design.sections.get("power") or {}).get("sd")
                else f" (`grpo-ablation plan` guesses it from {REFERENCE_CONFIG}'s SDs)"
            )
            out.append(
                f"{where}: no per-unit SD declared for {r['metric']} (power.sd), so the design's "
                f"power for it is unknown{guess}"
            )
        elif not math.isfinite(r["expected"]):
            out.append(
                f"{where} declares no expected_effect (its minimum_effect is 0), so its power is "
                f"unknown; with {r['units']} it detects >= {_plain(r['mde'])}"
            )
        elif not r["power"] >= 0.5:
            need, unit = r["units_needed"], r["units"].split()[-1]
            out.append(
                f"{where} has {r['power']:.0%} power with {r['units']} (declared SD "
                f"{r['sd_declared']:g} of {r['metric']}, one-sided level {r['level']:.4g}); it "
                f"detects >= {_plain(r['mde'])}"
                + (f"; {need:.0f} {unit} would reach 80%" if math.isfinite(need) else "")
            )
    return out


PLAN_COLUMNS = [
    "id",
    "kind",
    "metric",
    "expected",
    "boundary",
    "sd_declared",
    "sd_df",
    "units",
    "level",
    "power",
    "expected_power",
    "mde",
    "units_needed",
    "minutes_needed",
    "gpu_hours_needed",
]


def plan_rows(
    design: Design, gpu_hours_per_unit: float = math.nan, alpha: float = ALPHA
) -> list[dict[str, Any]]:
    """Before any run: each declared hypothesis's power at the design's units from the declared
    SD (``power.sd``), its minimum detectable effect (directional: the true effect found with 80%
    power; equivalence: the smallest margin shown), the units its expected effect or margin needs,
    and what they cost here (``power.minutes_per_unit``) and on a cluster (``gpu_hours_per_unit``,
    from the cost probe)."""
    hyps = declared(design)
    gatekeeper = (design.sections.get("study") or {}).get("gatekeeper")
    plan, levels = Plan.of(design), planning_levels(hyps, gatekeeper, alpha)
    rows = []
    for h in hyps:
        sd, level = plan.declared_sd(h), levels[h.id][0]
        units, unit = plan.units_of(h)
        p = design_power(h, sd, units, level)
        df = plan.declared_df(h)
        p["expected_power"] = expected_power_at(h, sd, units, level, df)
        rows.append(
            {
                "id": h.id,
                "kind": h.kind,
                "metric": h.metric,
                "expected": h.expected_effect,
                "boundary": h.margin if h.kind == "equivalence" else h.minimum_effect,
                "sd_declared": sd,
                "sd_df": plan.declared_df(h),
                "units": f"{units} {unit}s",
                "level": level,
                **p,
                "minutes_needed": plan.minutes(p["units_needed"], h),
                # a push runs where the plan's cost probe does not reach
                "gpu_hours_needed": math.nan
                if h.on_push
                else p["units_needed"] * gpu_hours_per_unit,
            }
        )
    return rows


def _plain(x: float) -> str:
    return f"{x:.3g}" if math.isfinite(x) else "nothing"


def negative_control(design: Design, row: dict[str, str]) -> str | None:
    """Why a design row's contrast is a negative control (``NEGATIVE_CONTROLS``), or None."""
    cell, ref = (design.parse_cell(row[k]) for k in ("cell", "reference"))
    changed = [ax for ax, _ in cell.values if cell[ax] != ref[ax]]
    if len(changed) != 1:
        return None
    (ax,) = changed
    spell = BY_NAME[ax].spell
    control = NEGATIVE_CONTROLS.get((ax, spell(cell[ax]), spell(ref[ax])))
    return control[1] if control and control[0](design.training_config(cell, 0)) else None


def contrast_roles(
    design: Design, rows: list[dict[str, str]], all_rows: list[dict[str, str]] | None = None
) -> dict[str, str]:
    """``stage|cell|quantity`` -> the contrast's role: ``hypothesis <id>``, the manipulation check
    an axis declares (its quantity changes by construction when the axis moves), a negative
    control (equal by construction: ``NEGATIVE_CONTROLS``), ``repeat of
    <stage>`` (the same runs compared with the same reference in an earlier stage: one contrast,
    counted there), or absent (exploratory). ``all_rows`` (default ``rows``) are every stage's
    rows, in stage order, against which repeats are found when ``rows`` hold one stage."""
    roles: dict[str, str] = {}
    stages = {s.name: s for s in design.stages}
    for r in rows:
        cell, ref = (design.parse_cell(r[k]) for k in ("cell", "reference"))
        for ax in stages[r["stage"]].vary:
            if cell[ax] != ref[ax]:
                for q in BY_NAME[ax].manipulates:
                    roles[contrast_key(r["stage"], r["cell"], q)] = MANIPULATION
    for r in rows:
        if negative_control(design, r):
            for q in PAIRED:
                roles.setdefault(contrast_key(r["stage"], r["cell"], q), NEGATIVE)
    first: dict[tuple[str, str], str] = {}
    for r in all_rows or rows:
        first.setdefault((r["cell"], r["reference"]), r["stage"])
    for r in rows:
        earlier = first.get((r["cell"], r["reference"]), r["stage"])
        if earlier != r["stage"] and r["cell"] != r["reference"]:
            for q in PAIRED:
                roles.setdefault(contrast_key(r["stage"], r["cell"], q), f"{REPEAT} {earlier}")
    everything = all_rows or rows
    for h in declared(design):
        if h.stage not in stages or all(r["stage"] != h.stage for r in everything):
            continue  # rows of other stages only
        r = contrast(h, everything, design)
        # The hypothesis, wherever the same runs are compared with the same reference.
        for other in rows:
            if (other["cell"], other["reference"]) == (r["cell"], r["reference"]):
                roles[contrast_key(other["stage"], other["cell"], h.metric)] = f"hypothesis {h.id}"
    return roles


def analysis_plan(design: Design) -> list[dict[str, Any]]:
    """The analysis plan design.json declares before any run: for every set of rows the stages'
    winners can give (one per combination of the winners of the stages others take), the rows
    compared (stage, cell, reference) and the role of each contrast (``contrast_roles``): which
    are the declared hypotheses, the manipulation checks, the negative controls and the repeats;
    every other contrast is exploratory. The hypotheses form one Holm family (their ids in
    ``sections.hypotheses``)."""
    plan = []
    for winners in design.possible_winners():
        rows = design.rows(winners)
        plan.append(
            {
                "winners": winners,
                "rows": [[r["stage"], r["cell"], r["reference"]] for r in rows],
                "roles": contrast_roles(design, rows),
            }
        )
    return plan


def planned_roles(design: Design, rows: list[dict[str, Any]]) -> dict[str, str]:
    """The roles of ``rows``' contrasts as design.json's plan declared them (``analysis_plan``),
    checked against what this code gives them (a plan written by other code is refused, naming
    the contrasts that differ); computed, for a design made from a config (no plan)."""
    if design.plan is None:
        return contrast_roles(design, rows)
    compared = [[r["stage"], r["cell"], r["reference"]] for r in rows]
    entry = next((e for e in design.plan if e["rows"] == compared), None)
    if entry is None:
        raise DesignError(
            "design.json's analysis plan has no entry for these rows (stages "
            f"{sorted({r['stage'] for r in rows})}): rerun the design rule"
        )
    roles = contrast_roles(design, rows)
    if entry["roles"] != roles:
        differ = sorted(
            k for k in roles.keys() | entry["roles"].keys() if roles.get(k) != entry["roles"].get(k)
        )
        raise DesignError(
            f"design.json declared other roles for {differ[:5]} than this code gives them: it was "
            "written by other code; rerun the design rule"
        )
    return entry["roles"]


def planned_rows(design: Design, compared: list[list[str]]) -> list[dict[str, Any]]:
    """The rows (``Design.rows``) whose (stage, cell, reference) are ``compared``, in that order:
    those of design.json's plan entry that compares them (``analysis_plan``), whose winners give
    them; for a design made from a config (no plan), of the winners it can see. What the analysis
    over draws reads a draw's rows by, from its per-run table (no selection file)."""
    if design.plan is not None:
        candidates = [e["winners"] for e in design.plan if e["rows"] == compared]
    else:
        candidates = design.possible_winners()
    for winners in candidates:
        rows = design.rows(winners)
        if [[r["stage"], r["cell"], r["reference"]] for r in rows] == compared:
            return rows
    raise DesignError(
        "design.json's analysis plan has no entry comparing these rows (stages "
        f"{sorted({s for s, _, _ in compared})}): the tables are not this design's; rerun the "
        "design and tables rules"
    )
