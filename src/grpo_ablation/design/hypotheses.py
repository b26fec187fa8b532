"""The hypotheses a config declares before the run, and the role of every contrast.

A hypothesis compares one cell of a stage with that cell's reference in the stage, on one of the
paired quantities of the results table (``PAIRED``), paired by unit (Δ = cell − reference): a
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
from dataclasses import dataclass
from typing import Any

from grpo_ablation.design import power as _power
from grpo_ablation.design.ablation import Design, Stage
from grpo_ablation.design.axes import BY_NAME, DesignError

# The quantities a hypothesis may compare: the paired quantities of the results table.
PAIRED = {
    "greedy_final": "final greedy accuracy",
    "sampled_final": "final sampled accuracy",
    "length_incorrect_late": "incorrect-completion length, last ¼ of steps (tokens)",
    "test_length_incorrect": "incorrect-completion length on test, final (tokens)",
    "fraction_mixed": "mixed-group fraction",
    "efficiency_auc": "area under the efficiency curve (mean sampled accuracy over training)",
    "efficiency_late": "late accuracy (mean sampled accuracy over the last half of the curve points)",
    "efficiency_A": "efficiency fit: asymptote A",
    "efficiency_log10_C_mid": "efficiency fit: log10 C_mid (generated tokens to half the gain)",
}
# Quantities that exist only where the outcome allowed them: an efficiency fit is identified only
# when the run gained (or lost) beyond two standard errors and saturated within its compute, so
# its parameters are defined on runs selected by their results. They describe; a declared
# hypothesis must not use them (the late accuracy is the endpoint every run has).
OUTCOME_DEPENDENT = ("efficiency_A", "efficiency_log10_C_mid")

# The roles of contrasts that are not a declared hypothesis's.
EXPLORATORY = "exploratory"
MANIPULATION = "manipulation check"
REPEAT = "repeat of"  # followed by the earlier stage's name
NEGATIVE = "negative control"


def contrast_key(stage: str, cell: str, quantity: str) -> str:
    """How roles and predictions name one contrast: ``stage|cell|quantity``."""
    return f"{stage}|{cell}|{quantity}"


ALPHA = 0.05


KINDS = ("directional", "equivalence")


DIRECTIONS = {"higher": +1, "lower": -1}


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
    metric: str  # a paired quantity of the results table (``PAIRED``)
    source: str
    direction: int = 0  # directional: +1 higher, −1 lower than the reference
    minimum_effect: float = 0.0  # directional: δ
    margin: float = math.nan  # equivalence: m
    # The true effect the power analysis assumes: directional s·Δ (default 2δ), equivalence Δ
    # (default 0). The verdict does not use it.
    expected_effect: float = math.nan

    def prediction(self) -> str:
        if self.kind == "equivalence":
            return f"within ±{self.margin:g} of the reference"
        way = "higher" if self.direction > 0 else "lower"
        return f"{way} than the reference by more than {self.minimum_effect:g}"


def _one(spec: dict[str, Any], stages: dict[str, Stage], seen: set[str]) -> Hypothesis:
    """One entry of the config's ``hypotheses`` checked against the design: its id, kind, stage,
    metric, cell and source, then the fields of its kind."""
    hid = str(spec.get("id", ""))
    where = f"hypotheses[{hid or '?'}]"
    if not hid or hid in seen:
        raise DesignError(f"{where}: every hypothesis needs an id of its own")
    seen.add(hid)
    kind = spec.get("kind")
    if kind not in KINDS:
        raise DesignError(f"{where}.kind={kind!r}; expected one of {list(KINDS)}")
    stage = stages.get(str(spec.get("stage")))
    if stage is None:
        raise DesignError(
            f"{where}.stage={spec.get('stage')!r} is not an enabled stage; the config runs "
            f"{list(stages)}"
        )
    metric = spec.get("metric")
    if metric not in PAIRED:
        raise DesignError(f"{where}.metric={metric!r}; expected one of {list(PAIRED)}")
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
        )
    delta = float(spec.get("minimum_effect", 0.0))
    if not delta >= 0:
        raise DesignError(f"{where}.minimum_effect must be >= 0, got {delta}")
    expected = float(spec.get("expected_effect", 2 * delta if delta > 0 else math.nan))
    if math.isfinite(expected) and not expected > delta:
        raise DesignError(
            f"{where}.expected_effect={expected} must exceed minimum_effect={delta}: an effect at "
            "the boundary is detected with probability α whatever the design"
        )
    return {"direction": direction, "minimum_effect": delta, "expected_effect": expected}


def declared(design: Design) -> list[Hypothesis]:
    """The config's hypotheses, checked against the design (a stage, cell or metric that does not
    exist stops the DAG before any job, naming the hypothesis)."""
    stages = {s.name: s for s in design.stages}
    seen: set[str] = set()
    return [_one(spec, stages, seen) for spec in design.sections.get("hypotheses") or []]


def contrast(h: Hypothesis, rows: list[dict[str, str]], design: Design) -> dict[str, str]:
    """The design row (stage, cell, reference paths) a hypothesis compares."""
    for r in rows:
        if r["stage"] != h.stage:
            continue
        cell = design.parse_cell(r["cell"])
        if all(cell[ax] == v for ax, v in h.cell):
            return r
    raise DesignError(f"hypothesis {h.id!r}: no cell of stage {h.stage!r} matches {dict(h.cell)}")


def family_level(hypotheses: list[Hypothesis], alpha: float = ALPHA) -> float:
    """The level each one-sided test is first compared with: Holm's first step over the 2·m tests
    of the m declared hypotheses (the bound at which power is computed)."""
    return alpha / (2 * max(1, len(hypotheses)))


def design_power(h: Hypothesis, sd: float, n: int, level: float) -> dict[str, Any]:
    """What ``n`` units with per-unit SD ``sd`` can do for ``h`` at the one-sided ``level``: the
    power at its expected effect, the minimum detectable effect (directional: the true s·Δ found
    with 80% power; equivalence: the smallest margin shown with 80% power at the expected Δ) and
    the units its expected effect needs for 80% (None where no number of units reaches it)."""
    e = h.expected_effect
    if h.kind == "equivalence":

        def power_at(k: int) -> float:
            return _power.tost_power(e, h.margin, sd, k, level)

        mde = _power.smallest_margin(sd, n, level, e)
    else:

        def power_at(k: int) -> float:
            return _power.one_sided_power(e - h.minimum_effect, sd, k, level)

        mde = h.minimum_effect + _power.minimum_detectable_effect(sd, n, level)
    known = math.isfinite(e) and sd > 0
    needed = _power.units_needed(power_at) if known else None
    return {
        "power": power_at(n) if known else math.nan,
        "mde": mde,
        "units_needed": math.nan if needed is None else float(needed),
    }


@dataclass(frozen=True)
class Plan:
    """The config's ``power`` section read against its design: the unit of replication, how many
    the design has, the declared per-unit SDs and what one unit costs."""

    unit: str  # "draw" (several base-policy draws) or "seed"
    units: int
    sd: dict[str, float]
    minutes_per_unit: float
    source: str

    @classmethod
    def of(cls, design: Design) -> Plan:
        section = design.sections.get("power") or {}
        sd = {str(k): float(v) for k, v in (section.get("sd") or {}).items()}
        unknown = sorted(set(sd) - set(PAIRED))
        if unknown:
            raise DesignError(f"power.sd names {unknown}; expected metrics of {list(PAIRED)}")
        unit = "draw" if len(design.draws) > 1 else "seed"
        units = len(design.draws) if unit == "draw" else len(design.sections.get("seeds", []))
        minutes = float(section.get("minutes_per_unit", math.nan))
        return cls(unit, units, sd, minutes, " ".join(str(section.get("source", "")).split()))

    def minutes(self, units: float) -> float:
        """Wall minutes of ``units`` units on the machine the config targets (NaN: unknown)."""
        return units * self.minutes_per_unit


def power_warnings(design: Design, alpha: float = ALPHA) -> list[str]:
    """A warning per declared hypothesis whose power at the design's units, from the declared SD,
    is below 50% (or unknown: no SD declared for its metric, or no expected effect): the rows of
    ``plan_rows`` that fail. Said before any job runs."""
    out = []
    for r in plan_rows(design, alpha=alpha):
        where = f"WARNING: hypothesis {r['id']!r}"
        if not math.isfinite(r["sd_declared"]):
            out.append(
                f"{where}: no per-unit SD declared for {r['metric']} (power.sd), so the design's "
                "power for it is unknown"
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
    "units",
    "level",
    "power",
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
    from the cost calibration)."""
    hyps = declared(design)
    plan, level = Plan.of(design), family_level(hyps, alpha)
    rows = []
    for h in hyps:
        sd = plan.sd.get(h.metric, math.nan)
        p = design_power(h, sd, plan.units, level)
        rows.append(
            {
                "id": h.id,
                "kind": h.kind,
                "metric": h.metric,
                "expected": h.expected_effect,
                "boundary": h.margin if h.kind == "equivalence" else h.minimum_effect,
                "sd_declared": sd,
                "units": f"{plan.units} {plan.unit}s",
                "level": level,
                **p,
                "minutes_needed": plan.minutes(p["units_needed"]),
                "gpu_hours_needed": p["units_needed"] * gpu_hours_per_unit,
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
