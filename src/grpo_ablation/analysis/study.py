"""A study that stops when it has decided: its looks, judged one at a time under its
registration (``design/registration.py``), and the ledger that records them.

At each look the hypotheses still open are judged on the units trained so far
(``analysis/sequential.py``) by a group-sequential graphical procedure (Maurer & Bretz 2013,
``registration.PROCEDURE``): a gatekeeper, where declared, holds all of α until it is decided;
the open hypotheses share α, and a hypothesis decided at any look passes its level to the open
ones, which are judged again at the same look. Each test's boundaries spend its current level
with Lan–DeMets spending at the information fractions of its looks, carried to the t scale at
γ·level (``sequential.carried_level``). A hypothesis supported or refuted stays so; its cells
leave later looks. Futility is non-binding (nothing stops for it), so the level holds whatever a
user does between looks. Each look records a repeated confidence interval beside its estimate.

The **ledger** (``studies/<experiment>/ledger.jsonl``, tracked) opens with the registration's
SHA-256 and holds one line per look: the units, levels, boundaries, every statistic and decision,
and the SHA-256 of each table the look read, each line chained to the one before by its hash;
``ledger.head`` pins its last line (``Ledger``).
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from statistics import NormalDist
from typing import TYPE_CHECKING, Any

import numpy as np

from grpo_ablation.analysis import sequential as seq
from grpo_ablation.analysis.stats import sample_sd
from grpo_ablation.design.hypotheses import ALPHA, Hypothesis, node_levels, test_levels
from grpo_ablation.design.ledger import LedgerError
from grpo_ablation.design.study import StudyConfig

if TYPE_CHECKING:
    pass

NORMAL = NormalDist()


def levels(
    hypotheses: list[Hypothesis],
    alpha: float = ALPHA,
    decided: set[str] | None = None,
    gatekeeper: str | None = None,
) -> dict[str, tuple[float, float]]:
    """id -> (support level, refute level) of each open hypothesis under the study's graph
    (``registration.node_levels``): with no gatekeeper and none decided, α / (2m) each, an
    equivalence's refute test at half of it (either side of the margin)."""
    nodes = node_levels([h.id for h in hypotheses], decided or set(), alpha, gatekeeper)
    return {h.id: test_levels(h, nodes[h.id]) for h in hypotheses if h.id in nodes}


def _boundary(fractions: list[float], level: float, df: int, planned: list[int], spending: str):
    """(t boundary, γ) of the look at ``fractions[-1]`` for a test holding ``level`` now: the
    spending boundaries of γ·level at the fractions of its looks (Maurer & Bretz: recomputed at
    the level the test holds), the last carried to ``df``."""
    if not level > 0 or df < 1:
        return math.inf, 1.0
    gamma = seq.carried_level(tuple(planned), level, spending)
    z = seq.spending_boundaries(fractions, gamma * level, spending)[-1]
    return seq.t_boundary(z, df), gamma


def judge_look(
    hypotheses: list[Hypothesis],
    diffs: dict[str, list[float]],
    planned: list[int],
    earlier: list[dict[str, Any]],
    spending: str = "obrien_fleming",
    alpha: float = ALPHA,
    gatekeeper: str | None = None,
) -> dict[str, Any]:
    """The next look's record: for every hypothesis still open, its statistics on ``diffs`` (its
    per-unit differences so far), the level it holds, its t boundaries and its decision, judged
    again at the same look whenever a decision passes on a level (``PROCEDURE``); a hypothesis
    decided earlier keeps its decision. Each statistic comes with its repeated confidence
    interval (Jennison & Turnbull): mean ± c·se, c the look's support boundary, which covers
    the effect at every look at once with probability 1 − 2·level.
    ``planned``: the units at each planned look (the last is the study's maximum)."""
    k = len(earlier)
    if k >= len(planned):
        raise LedgerError(f"the study planned {len(planned)} looks; all are in the ledger")
    last = k == len(planned) - 1
    decisions = dict(earlier[-1]["decisions"]) if earlier else {}
    decided = {i for i, v in decisions.items() if v in (seq.SUPPORTED, seq.REFUTED)}
    family = [h.id for h in hypotheses] + [
        i for i in decisions if i not in {h.id for h in hypotheses}
    ]
    record: dict[str, Any] = {
        "planned": planned,
        "alpha": alpha,
        "gatekeeper": gatekeeper,
        "levels": {},
        "statistics": {},
        "boundaries": {},
        "decisions": decisions,  # every decision so far, withdrawn hypotheses' included
    }
    open_ = [h for h in hypotheses if h.id not in decided]
    for h in open_:
        units = len(diffs[h.id])
        fractions = [
            e["statistics"][h.id]["units"] / planned[-1] for e in earlier if h.id in e["statistics"]
        ]
        fractions.append(1.0 if last else min(units / planned[-1], 1.0))
        if any(b <= a for a, b in itertools.pairwise(fractions)):
            raise LedgerError(f"hypothesis {h.id!r}: look {k + 1} has no more units than the last")
        sup, ref, df = seq.look_statistics(
            h.kind,
            diffs[h.id],
            direction=h.direction,
            minimum_effect=h.minimum_effect,
            margin=h.margin,
        )
        finite = [x for x in diffs[h.id] if math.isfinite(x)]
        record["statistics"][h.id] = {
            "units": units,
            "mean": sum(finite) / len(finite) if finite else math.nan,
            "se": sample_sd(finite) / math.sqrt(len(finite)) if len(finite) > 1 else math.nan,
            "support_t": sup,
            "refute_t": ref,
            "df": df,
            "fractions": fractions,
        }
    while True:  # judged again while a decision passes its level on
        nodes = node_levels(family, decided, alpha, gatekeeper)
        newly = []
        for h in open_:
            if h.id in decided:
                continue
            st = record["statistics"][h.id]
            pair = test_levels(h, nodes[h.id])
            (c_sup, gamma), (c_ref, _) = (
                _boundary(st["fractions"], lv, st["df"], planned, spending) for lv in pair
            )
            half = c_sup * st["se"]
            st["rci"] = [st["mean"] - half, st["mean"] + half]
            record["levels"][h.id] = list(pair)
            record["boundaries"][h.id] = {"support_t": c_sup, "refute_t": c_ref, "gamma": gamma}
            verdict = seq.decide(st["support_t"], st["refute_t"], st["df"], c_sup, c_ref, last)
            decisions[h.id] = verdict
            if verdict in (seq.SUPPORTED, seq.REFUTED):
                newly.append(h.id)
        if not newly:
            return record
        decided |= set(newly)


def planned_boundaries(
    looks: list[int], level: float, spending: str, calibrated: bool = True
) -> list[float]:
    """The t boundary each look will use for a test that holds ``level`` throughout (a look of 4
    draws of 8 needs t ≥ 14.4 at 0.0125 where z needs 3.34); ``calibrated=False``: the plain
    carry (γ = 1), whose error on few df exceeds the level."""
    gamma = seq.carried_level(tuple(looks), level, spending) if calibrated else 1.0
    return seq.carried_boundaries(looks, level, spending, gamma)


# What a study's plan adds to each hypothesis's row (``plan_with_looks``).
SEQUENTIAL_COLUMNS = [
    "power_with_looks",
    "expected_power_with_looks",
    "expected_draws",
    "decided_at_look_1",
]


def _stops(design: Any, h: Hypothesis, sd_df: float) -> list[tuple[float, float]] | None:
    """``sequential.simulated_stops`` of a directional hypothesis at its expected effect and
    planned levels, the looks' t boundaries as the study will use them; with ``sd_df`` the SD's
    own uncertainty included. None where nothing is planned (another kind, a push hypothesis, no
    SD or no expected effect)."""
    from grpo_ablation.design.hypotheses import Plan, declared, planning_levels

    study = StudyConfig.of(design.sections["study"])
    looks, spending = [int(n) for n in study.looks], study.spending
    sd = Plan.of(design).declared_sd(h)
    if h.kind != "directional" or h.on_push or not sd > 0 or not math.isfinite(h.expected_effect):
        return None
    support, refute = planning_levels(declared(design), study.gatekeeper)[h.id]
    return seq.simulated_stops(
        looks,
        planned_boundaries(looks, support, spending),
        planned_boundaries(looks, refute, spending),
        (h.expected_effect - h.minimum_effect) / sd,
        sd_df,
    )


def plan_with_looks(
    design: Any, gpu_hours_per_unit: float = math.nan, alpha: float = ALPHA
) -> list[dict[str, Any]]:
    """``design.hypotheses.plan_rows`` (at the study's most draws) with, for each directional
    hypothesis of a sequential study (``study.looks``), simulated on t statistics with the
    looks' t boundaries: its power at the declared SD, its expected power over that SD's
    uncertainty (where its df is declared), the draws it expects to use, and the probability
    that its first look supports it (over the SD's uncertainty where known). NaN for the others
    (an equivalence; a push hypothesis, refused in a study). Without a study, the rows as they
    are."""
    from grpo_ablation.design.hypotheses import Plan, declared, plan_rows

    rows = plan_rows(design, gpu_hours_per_unit, alpha)
    looks = (design.sections.get("study") or {}).get("looks")
    if not looks:
        return rows
    hyps, plan = {h.id: h for h in declared(design)}, Plan.of(design)
    for row in rows:
        row.update({c: math.nan for c in SEQUENTIAL_COLUMNS})
        h = hyps[row["id"]]
        point = _stops(design, h, math.nan)
        if point is None:
            continue
        df = plan.declared_df(h)
        spread = _stops(design, h, df) if df >= 1 else None
        stopped = sum(up + down for up, down in point)
        row.update(
            power_with_looks=sum(up for up, _ in point),
            expected_power_with_looks=math.nan if spread is None else sum(up for up, _ in spread),
            expected_draws=sum(n * (u + d) for n, (u, d) in zip(looks, point, strict=True))
            + looks[-1] * (1 - stopped),
            decided_at_look_1=(spread or point)[0][0],
        )
    return rows


def _still_open(design: Any, alpha: float) -> dict[str, list[float]]:
    """id -> the probability that the hypothesis is still open after each look, at its expected
    effect (``_stops`` at the declared SD). An equivalence: one minus the largest probability
    that any single look up to this one supports it, on the z scale at its planned level
    (Φ((m − c·se − Δ)/se) − Φ((c·se − m − Δ)/se): a lower bound on its stopping, so an upper
    bound on what it costs). A push hypothesis is taken as open to the last look."""
    from grpo_ablation.design.hypotheses import Plan, declared, planning_levels

    study = StudyConfig.of(design.sections["study"])
    looks, spending = [int(n) for n in study.looks], study.spending
    hyps, plan = declared(design), Plan.of(design)
    levels = planning_levels(hyps, study.gatekeeper, alpha)
    out = {}
    for h in hyps:
        sd, still = plan.declared_sd(h), [1.0] * len(looks)
        stops = _stops(design, h, math.nan)
        if stops is not None:
            still = [1.0 - p for p in itertools.accumulate(u + d for u, d in stops)]
        elif h.kind == "equivalence" and not h.on_push and sd > 0:
            delta = h.expected_effect if math.isfinite(h.expected_effect) else 0.0
            boundary = planned_boundaries(looks, levels[h.id][0], spending)
            best = 0.0
            for k, (n, c) in enumerate(zip(looks, boundary, strict=True)):
                se = sd / math.sqrt(n)
                inside = NORMAL.cdf((h.margin - c * se - delta) / se) - NORMAL.cdf(
                    (c * se - h.margin - delta) / se
                )
                best = max(best, inside)
                still[k] = 1.0 - best
        out[h.id] = still
    return out


def study_minutes(design: Any, alpha: float = ALPHA) -> tuple[float, float]:
    """(most, expected) wall minutes of a sequential study on the machine its ``power`` section
    prices (a run at the unit's mean run). Between two looks every draw trains the runs of the
    stages named by a hypothesis still open (a stage no hypothesis names: until the first look);
    the expected cost weighs each run by the probability that it is still needed, hypotheses
    and stages taken as independent, at the hypotheses' expected effects. NaN without a study."""
    from grpo_ablation.design.hypotheses import Plan, declared

    looks = [int(n) for n in (design.sections.get("study") or {}).get("looks") or []]
    if not looks:
        return math.nan, math.nan
    still = _still_open(design, alpha)
    naming: dict[str, list[str]] = {}
    for h in declared(design):
        naming.setdefault(h.stage, []).append(h.id)
    runs: dict[str, int] = {}  # cell path -> runs a draw
    stages_of: dict[str, list[str]] = {}
    for s in design.stages:
        winners = next(iter(design.possible_winners(s)), None)
        for c in design.cells(s, winners):
            runs[c.path] = len(design.seeds_of(c.path))
            stages_of.setdefault(c.path, []).append(s.name)
    price = Plan.of(design).minutes_per_unit / sum(runs.values())

    def needed(stage: str, k: int) -> float:
        """P(the stage trains in the segment before look k)."""
        if k == 0:
            return 1.0
        closed = math.prod(1 - still[h][k - 1] for h in naming.get(stage, []))
        return 1 - closed

    expected = 0.0
    for k, n in enumerate(looks):
        draws = n - (looks[k - 1] if k else 0)
        per_draw = sum(
            r * (1 - math.prod(1 - needed(s, k) for s in stages_of[path]))
            for path, r in runs.items()
        )
        expected += draws * per_draw * price
    return looks[-1] * sum(runs.values()) * price, expected


def _draws_span(draws: list[int]) -> str:
    """``12-39`` for a run of consecutive draws, else the draws listed."""
    ds = sorted(int(d) for d in draws)
    if ds and ds == list(range(ds[0], ds[-1] + 1)):
        return f"{ds[0]}-{ds[-1]}" if len(ds) > 1 else str(ds[0])
    return ", ".join(map(str, ds))


def verdict_rows(registered: dict[str, Any], entries: list[dict[str, Any]]) -> list[dict[str, str]]:
    """A study's verdicts as its ledger holds them, one row per registered hypothesis: its
    prediction, Δ (mean over draws) with its repeated confidence interval and the coverage it has
    (1 − 2·level at the look), the decision, and the look and draws it rests on: the look that
    decided it, or the last look that judged it while it is open."""
    from grpo_ablation.analysis.render import interval
    from grpo_ablation.design.hypotheses import METRICS

    rows = []
    for name, h in registered["hypotheses"].items():
        judged = [e for e in entries if name in e.get("statistics", {})]
        decided = [e for e in judged if e["decisions"].get(name) in (seq.SUPPORTED, seq.REFUTED)]
        at = decided[0] if decided else (judged[-1] if judged else None)
        cell = ", ".join(f"{k}={v}" for k, v in h["cell"].items())
        row = {
            "hypothesis": f"`{name}`",
            "prediction": f"{cell} {h['prediction']} ({METRICS[h['metric']]})",
            "Δ [repeated CI]": "not judged yet",
            "verdict": "not judged yet",
            "look": "",
            "draws": "",
        }
        if at is not None:
            st, m = at["statistics"][name], h["metric"]
            low, high = st.get("rci", [math.nan, math.nan])
            coverage = 1 - 2 * at["levels"][name][0]
            delta = interval(m, st["mean"], low, high, st["units"], signed=True)
            row |= {
                "Δ [repeated CI]": f"{delta} ({coverage:.1%})",
                "verdict": (f"**{at['decisions'][name]}**" if decided else "open (continues)"),
                "look": str(at["look"]),
                "draws": f"{st['units']} ({_draws_span(at['draws'][: st['units']])})",
            }
        rows.append(row)
    return rows


def verdict_table(study: Path) -> str:
    """``verdict_rows`` of the study in ``study`` (its registration and ledger), as Markdown."""
    import pandas as pd

    from grpo_ablation.analysis.render import to_markdown
    from grpo_ablation.design.ledger import Ledger
    from grpo_ablation.layout import LEDGER, REGISTRATION

    registered = json.loads((study / REGISTRATION).read_text())
    entries = Ledger(study / LEDGER).entries()
    return to_markdown(pd.DataFrame(verdict_rows(registered, entries)))


def simulated_family_error(
    kinds: list[str],
    looks: list[int],
    gatekeeper: int | None = None,
    alpha: float = ALPHA,
    spending: str = "obrien_fleming",
    n: int = 400_000,
    seed: int = 20261207,
    calibrated: bool = True,
) -> float:
    """The share of ``n`` simulated studies in which the whole procedure (``judge_look``: the
    graph, the recycling within a look, the t boundaries at γ·level) decides any hypothesis when
    every one lies at its null boundary, where both of its verdicts are wrong: one t path per
    hypothesis, independent (``kinds``: each one's kind, an equivalence's refute test at half its
    support level; ``gatekeeper``: the index of the one tested first). Paths of its own seed,
    not the calibration's."""
    m = len(kinds)
    ids = [str(i) for i in range(m)]
    gate = None if gatekeeper is None else ids[gatekeeper]
    paths = np.stack([seq.t_paths(looks, n, seed + i) for i in range(m)], axis=1)  # [n, m, looks]
    bounds: dict[float, list[float]] = {}

    def boundary(level: float) -> np.ndarray:
        if level not in bounds:
            bounds[level] = (
                planned_boundaries(looks, level, spending, calibrated)
                if level > 0
                else [math.inf] * len(looks)
            )
        return np.array(bounds[level])

    decided = np.zeros((n, m), dtype=bool)
    for k in range(len(looks)):
        while True:
            new = np.zeros_like(decided)
            # the state of the graph: which hypotheses are decided (few patterns in practice)
            patterns, inverse = np.unique(decided, axis=0, return_inverse=True)
            for p, pattern in enumerate(patterns):
                rows = inverse.ravel() == p
                nodes = node_levels(ids, {ids[i] for i in np.flatnonzero(pattern)}, alpha, gate)
                for i, hid in enumerate(ids):
                    if hid not in nodes:
                        continue
                    sup = nodes[hid] / 2
                    ref = nodes[hid] / 4 if kinds[i] == "equivalence" else sup
                    t = paths[rows, i, k]
                    crossed = (t >= boundary(sup)[k]) | (-t >= boundary(ref)[k])
                    new[rows, i] = crossed & ~decided[rows, i]
            if not new.any():
                break
            decided |= new
    return float(decided.any(axis=1).mean())
