"""Hypotheses declared in the config before the run, and the report's verdict on each.

A hypothesis compares one cell of a stage with that cell's reference in the stage, on one of the
paired quantities of the results table, paired by seed (Δ = cell − reference). Two kinds:

- ``directional``: a predicted direction (``lower`` or ``higher``) and a minimum effect of interest
  δ ≥ 0. With s the predicted sign: *supported* when the one-sided paired t test of s·Δ > δ
  rejects at α after Holm's correction across the declared directional hypotheses; *refuted* when
  the test of s·Δ < δ rejects (Holm likewise): the data rule out an effect of interest in the
  predicted direction; otherwise *inconclusive*.
- ``equivalence``: a margin m > 0. *Supported* when the two one-sided tests (TOST) reject at α,
  i.e. the 90% interval lies inside ±m; *refuted* when the 95% interval lies wholly outside ±m;
  otherwise *inconclusive*. An interval that includes zero is never read as an equivalence.

Every contrast not declared is *exploratory*: the reading counts those whose 95% interval excludes
zero next to the number expected by chance with no effect at all. A contrast that an axis changes
by construction (G on the mixed-group fraction) is a *manipulation check*, not a finding.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from grpo_ablation.analysis.reading import PAIRING, effects_reading
from grpo_ablation.analysis.render import to_markdown
from grpo_ablation.analysis.stats import holm, mixed_fraction_at, one_sided_p, t_interval, tost_p
from grpo_ablation.analysis.tables import PAIRED, contrast_key
from grpo_ablation.axes import BY_NAME, DesignError
from grpo_ablation.design import Design, Stage, cell_label
from grpo_ablation.layout import Tree

ALPHA = 0.05
KINDS = ("directional", "equivalence")
DIRECTIONS = {"higher": +1, "lower": -1}
VERDICT_COLUMNS = [
    "id",
    "kind",
    "stage",
    "cell",
    "reference",
    "metric",
    "prediction",
    "n",
    "mean",
    "low90",
    "high90",
    "test",
    "p",
    "p_holm",
    "verdict",
    "source",
]
EXPLORATORY, MANIPULATION = "exploratory", "manipulation check"


@dataclass(frozen=True)
class Hypothesis:
    id: str
    kind: str  # one of KINDS
    stage: str
    cell: tuple[tuple[str, Any], ...]  # varied axis -> value: the compared cell within the stage
    metric: str  # a paired quantity of the results table (tables.PAIRED)
    source: str
    direction: int = 0  # directional: +1 higher, −1 lower than the reference
    minimum_effect: float = 0.0  # directional: δ
    margin: float = math.nan  # equivalence: m

    def prediction(self) -> str:
        if self.kind == "equivalence":
            return f"within ±{self.margin:g} of the reference"
        way = "higher" if self.direction > 0 else "lower"
        return f"{way} than the reference by more than {self.minimum_effect:g}"


def _one(spec: dict[str, Any], stages: dict[str, Stage], seen: set[str]) -> Hypothesis:
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
    named = spec.get("cell")
    named = named if isinstance(named, dict) else {stage.primary: named}
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
    extra = set(named) - set(stage.vary)
    if extra:
        raise DesignError(
            f"{where}.cell names {sorted(extra)}, which stage {stage.name!r} does not vary"
        )
    reference = {**values, **stage.reference_values}
    if values == reference:
        raise DesignError(f"{where}.cell is the stage's reference itself: nothing to compare")
    common = {"id": hid, "kind": kind, "stage": stage.name, "metric": metric}
    common["cell"] = tuple(values.items())
    common["source"] = " ".join(str(spec.get("source") or "").split())
    if not common["source"]:
        raise DesignError(f"{where}.source: say where the prediction comes from")
    # A field of the other kind would be silently ignored: refuse it.
    foreign = {"equivalence": ("direction", "minimum_effect"), "directional": ("margin",)}[kind]
    if any(spec.get(f) is not None for f in foreign):
        raise DesignError(f"{where}: {kind} hypotheses take no {' or '.join(foreign)}")
    if kind == "equivalence":
        margin = float(spec.get("margin", math.nan))
        if not margin > 0:
            raise DesignError(f"{where}.margin must be a positive number, got {margin}")
        return Hypothesis(**common, margin=margin)
    direction = DIRECTIONS.get(spec.get("direction"))
    if direction is None:
        raise DesignError(
            f"{where}.direction={spec.get('direction')!r}; expected one of {list(DIRECTIONS)}"
        )
    delta = float(spec.get("minimum_effect", 0.0))
    if not delta >= 0:
        raise DesignError(f"{where}.minimum_effect must be >= 0, got {delta}")
    return Hypothesis(**common, direction=direction, minimum_effect=delta)


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


def _paired(runs: pd.DataFrame, row: dict[str, str], metric: str) -> list[float]:
    of_stage = runs[runs["stage"] == row["stage"]]
    cell = of_stage[of_stage["cell"] == row["cell"]].set_index("seed")[metric]
    ref = of_stage[of_stage["cell"] == row["reference"]].set_index("seed")[metric]
    seeds = sorted(set(cell.index) & set(ref.index))
    return [float(cell[s]) - float(ref[s]) for s in seeds]


def judge(
    hypotheses: list[Hypothesis], diffs: dict[str, list[float]], alpha: float = ALPHA
) -> dict[str, dict[str, Any]]:
    """id -> the test, its numbers and the verdict, from each hypothesis's per-seed paired
    differences (cell − reference). Holm's correction runs across the directional set."""
    directional = [h for h in hypotheses if h.kind == "directional"]

    def p_of(h: Hypothesis, tail: int) -> float:
        # tail +1: s·Δ > δ (the predicted effect); −1: s·Δ < δ (no effect of interest)
        return one_sided_p([h.direction * d for d in diffs[h.id]], h.minimum_effect, tail)

    raw = {h.id: (p_of(h, +1), p_of(h, -1)) for h in directional}
    support = holm([raw[h.id][0] for h in directional])
    refute = holm([raw[h.id][1] for h in directional])
    adjusted = {h.id: (support[i], refute[i]) for i, h in enumerate(directional)}
    out = {}
    for h in hypotheses:
        xs = diffs[h.id]
        iv90, iv95 = t_interval(xs, 1 - 2 * alpha), t_interval(xs, 1 - alpha)
        if h.kind == "equivalence":
            p = tost_p(xs, h.margin)
            p_adj = p
            outside = iv95.defined and (iv95.low > h.margin or iv95.high < -h.margin)
            verdict = "supported" if p < alpha else "refuted" if outside else "inconclusive"
            test = f"TOST, margin ±{h.margin:g}: the 90% interval inside the margin"
        else:
            (p_sup, p_ref), (a_sup, a_ref) = raw[h.id], adjusted[h.id]
            supported, refuted = a_sup < alpha, a_ref < alpha
            verdict = "supported" if supported else "refuted" if refuted else "inconclusive"
            p, p_adj = (p_ref, a_ref) if refuted else (p_sup, a_sup)
            test = f"one-sided paired t, Holm across {len(directional)} directional " + (
                "(rejects an effect of interest)" if refuted else "(the predicted effect)"
            )
        out[h.id] = {
            "n": iv90.n,
            "mean": iv90.mean,
            "low90": iv90.low,
            "high90": iv90.high,
            "test": test,
            "p": p,
            "p_holm": p_adj if h.kind == "directional" else math.nan,
            "verdict": verdict if iv90.defined else "inconclusive",
        }
    return out


def verdicts_table(
    hypotheses: list[Hypothesis],
    runs: pd.DataFrame,
    rows: list[dict[str, str]],
    design: Design,
) -> pd.DataFrame:
    """One row per declared hypothesis, in declaration order (the columns of VERDICT_COLUMNS)."""
    compared = {h.id: contrast(h, rows, design) for h in hypotheses}
    diffs = {h.id: _paired(runs, compared[h.id], h.metric) for h in hypotheses}
    judged = judge(hypotheses, diffs)
    out = [
        {
            "id": h.id,
            "kind": h.kind,
            "stage": h.stage,
            "cell": cell_label(compared[h.id]["cell"]),
            "reference": cell_label(compared[h.id]["reference"]),
            "metric": h.metric,
            "prediction": h.prediction(),
            **judged[h.id],
            "source": h.source,
        }
        for h in hypotheses
    ]
    return pd.DataFrame(out, columns=VERDICT_COLUMNS)


def contrast_roles(design: Design, rows: list[dict[str, str]]) -> dict[str, str]:
    """``stage|cell|quantity`` -> the contrast's role: ``hypothesis <id>``, the manipulation check
    an axis declares (its quantity changes by construction when the axis moves), or absent
    (exploratory)."""
    roles: dict[str, str] = {}
    stages = {s.name: s for s in design.stages}
    for r in rows:
        cell, ref = (design.parse_cell(r[k]) for k in ("cell", "reference"))
        for ax in stages[r["stage"]].vary:
            if cell[ax] != ref[ax]:
                for q in BY_NAME[ax].manipulates:
                    roles[contrast_key(r["stage"], r["cell"], q)] = MANIPULATION
    for h in declared(design):
        if h.stage not in stages or all(r["stage"] != h.stage for r in rows):
            continue  # rows of other stages only (a figure job's)
        r = contrast(h, rows, design)
        roles[contrast_key(h.stage, r["cell"], h.metric)] = f"hypothesis {h.id}"
    return roles


def _mixed_at_group_size(
    reference: dict[str, Any], cell: dict[str, Any], G_ref: int, G: int
) -> float:
    """Predicted Δ mixed fraction (cell − reference) if both runs' groups came from one
    distribution of per-prompt success probabilities: the larger groups predict the smaller ones'
    mixed fraction without a model (``stats.mixed_fraction_at``), and the other run's is observed."""

    def counts(summary: dict[str, Any]) -> dict[int, int]:
        return {int(k): int(n) for k, n in summary.get("groups_by_correct", {}).items()}

    if G_ref <= G:
        mine = counts(cell)
        return mixed_fraction_at(mine, G, G) - mixed_fraction_at(mine, G, G_ref)
    ref = counts(reference)
    return mixed_fraction_at(ref, G_ref, G) - mixed_fraction_at(ref, G_ref, G_ref)


# The value each manipulation check predicts, by (axis, quantity): from the diagnostics summaries
# of the reference run and the cell's run (same seed), and the two values of the axis.
PREDICTIONS = {("group_size", "fraction_mixed"): _mixed_at_group_size}


def manipulation_predictions(
    exp: Path, design: Design, rows: list[dict[str, str]]
) -> dict[str, float]:
    """``stage|cell|quantity`` -> the difference to the reference a manipulation check predicts
    (mean over seeds of the prediction from each seed's reference run)."""
    out: dict[str, float] = {}
    stages = {s.name: s for s in design.stages}
    for r in rows:
        cell, ref = (design.parse_cell(r[k]) for k in ("cell", "reference"))
        changed = [ax for ax in stages[r["stage"]].vary if cell[ax] != ref[ax]]
        if len(changed) != 1:
            continue
        (ax,) = changed
        for q in BY_NAME[ax].manipulates:
            predicted = [
                PREDICTIONS[(ax, q)](
                    *(
                        json.loads(Path(Tree(exp).diagnostics_summary(c, s)).read_text())
                        for c in (r["reference"], r["cell"])
                    ),
                    ref[ax],
                    cell[ax],
                )
                for s in design.seeds
            ]
            out[contrast_key(r["stage"], r["cell"], q)] = float(np.mean(predicted))
    return out


def _number(x: float, metric: str, signed: bool = True) -> str:
    digits = 2 if "length" in metric else 3
    return f"{x:{'+' if signed else ''}.{digits}f}"


def verdicts_reading(verdicts: pd.DataFrame, unit: str = "seed") -> str:
    """The reading's opening: each declared hypothesis with its prediction, source, test and
    verdict (reStructuredText)."""
    if verdicts.empty:
        return (
            "**Declared hypotheses**: none. The config declares no prediction (``hypotheses:``), "
            "so every contrast below is exploratory.\n"
        )
    lines = [
        f"**Declared hypotheses** ({len(verdicts)}, written in the config before the run; "
        f"α = {ALPHA}; Δ is cell minus reference {PAIRING[unit]}, mean [90% t interval]):",
        "",
    ]
    for _, v in verdicts.iterrows():
        m = str(v["metric"])
        p = "" if not math.isfinite(v["p"]) else f", p = {v['p']:.3g}"
        if math.isfinite(v["p_holm"]):
            p += f" (Holm {v['p_holm']:.3g})"
        interval = (
            f"{_number(v['mean'], m)} [{_number(v['low90'], m)}, {_number(v['high90'], m)}]"
            if int(v["n"]) >= 2 and math.isfinite(v["low90"])
            else f"no interval (fewer than two {unit}s with a finite value)"
        )
        lines.append(
            f"- ``{v['id']}``: **{str(v['verdict']).upper()}**. ``{v['cell']}`` − "
            f"``{v['reference']}`` ({v['stage']}), {PAIRED[m]}: predicted {v['prediction']}; "
            f"Δ = {interval} over {int(v['n'])} {unit}{'' if int(v['n']) == 1 else 's'}; "
            f"{v['test']}{p}. Source: {v['source']}."
        )
    return "\n".join(lines) + "\n"


def write_verdicts(
    design: Design, rows: list[dict[str, Any]], runs: pd.DataFrame, out: Path
) -> list[Path]:
    """hypotheses.csv and hypotheses.md under ``out``, from the design's rows and their runs."""
    verdicts = verdicts_table(declared(design), runs, rows, design)
    out.mkdir(parents=True, exist_ok=True)
    verdicts.to_csv(out / "hypotheses.csv", index=False)
    (out / "hypotheses.md").write_text(verdicts_reading(verdicts) + "\n" + to_markdown(verdicts))
    return [out / "hypotheses.csv", out / "hypotheses.md"]


def write_reading(
    effects: list[Path],
    out: Path,
    verdicts: Path | None = None,
    calibration: Path | None = None,
    coupling: Path | None = None,
    push: Path | None = None,
    efficiency: Path | None = None,
) -> Path:
    """The report's reading (reStructuredText): the verdicts on the declared hypotheses
    (``verdicts``: hypotheses.csv) first, then the stages' ``effects.csv`` in the order given,
    then the mixed-group calibration (``calibration``: calibration.csv) and the coupling of the
    cells' samples (``coupling``: coupling.csv) and the push of each objective (``push``:
    push.csv, with push_cosine.csv beside it); the compute efficiency (``efficiency``:
    efficiency.csv) right after the effects."""
    from grpo_ablation.analysis.calibration import calibration_reading
    from grpo_ablation.analysis.coupling import coupling_reading

    frames = [pd.read_csv(path) for path in effects]
    opening = verdicts_reading(pd.read_csv(verdicts)) if verdicts else ""
    text = effects_reading(pd.concat(frames, ignore_index=True), opening)
    if efficiency:
        from grpo_ablation.analysis.efficiency import efficiency_reading

        text = text.rstrip("\n") + "\n\n" + efficiency_reading(pd.read_csv(efficiency)) + "\n"
    if calibration:
        text = text.rstrip("\n") + "\n\n" + calibration_reading(pd.read_csv(calibration)) + "\n"
    if coupling:
        text = text.rstrip("\n") + "\n\n" + coupling_reading(pd.read_csv(coupling)) + "\n"
    if push:
        from grpo_ablation.analysis.push import push_reading

        cosine = pd.read_csv(Path(push).with_name("push_cosine.csv"))
        text = text.rstrip("\n") + "\n\n" + push_reading(pd.read_csv(push), cosine) + "\n"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    return out
