"""A study that stops when it has decided: its looks, judged one at a time, and the ledger that
records them.

At each look the declared hypotheses still open are judged on the units trained so far
(``analysis/sequential.py``): each of the 2·m tests of the m hypotheses at α / (2m) (Bonferroni,
the bound at Holm's first step; Holm's step-down across looks would need a closed testing
procedure of its own), its boundary spending the Lan–DeMets O'Brien–Fleming-type share of that
level the look's information fraction allows, an equivalence's refute test at half of it (its
two sides). A hypothesis supported or refuted stays so; its cells leave later looks. Futility is
non-binding (nothing stops for it), so the level holds whatever a user does between looks.

The **ledger** (``study/ledger.jsonl``) holds one line per look: the units, the boundaries used,
every statistic and decision, and the SHA-256 of each table the look read, each line chained to
the one before by its hash. A look is appended only as the next one; an earlier look is never
rewritten (the same look judged again on the same tables is the same line, and is kept; on other
tables it is refused), and a ledger whose earlier lines were edited is refused when read.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist
from typing import Any

from grpo_ablation.analysis import sequential as seq
from grpo_ablation.design.hypotheses import ALPHA, Hypothesis

NORMAL = NormalDist()


class LedgerError(ValueError):
    """The ledger refuses a look, or was edited."""


def sha256_file(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _line(entry: dict[str, Any]) -> str:
    return json.dumps(entry, sort_keys=True, separators=(",", ":"))


@dataclass
class Ledger:
    path: Path

    def entries(self) -> list[dict[str, Any]]:
        """Every look recorded, in order; an edited or reordered ledger is refused."""
        if not self.path.exists():
            return []
        lines = self.path.read_text().splitlines()
        previous = ""
        out = []
        for k, line in enumerate(lines, start=1):
            entry = json.loads(line)
            if entry.get("look") != k or entry.get("previous") != previous:
                raise LedgerError(
                    f"{self.path}: line {k} is not look {k} chained to the line before it: the "
                    "ledger was edited, and a study's earlier looks cannot be rewritten"
                )
            previous = hashlib.sha256(line.encode()).hexdigest()
            out.append(entry)
        return out

    def append(self, entry: dict[str, Any], look: int) -> dict[str, Any]:
        """Record ``entry`` (without ``look`` and ``previous``) as look ``look``: the next one,
        or one in the ledger judged again, which is kept as it is when it is the same and refused
        otherwise."""
        done = self.entries()
        body = {k: v for k, v in entry.items() if k not in ("look", "previous")}
        if look <= len(done):
            recorded = done[look - 1]
            # compared as the ledger writes them: a NaN statistic equals itself there
            same = {k: v for k, v in recorded.items() if k not in ("look", "previous")}
            if _line(same) != _line(body):
                raise LedgerError(
                    f"look {look} is in the ledger with other numbers or tables; the ledger "
                    "keeps the first"
                )
            return recorded
        if look != len(done) + 1:
            raise LedgerError(f"look {look} cannot come before look {len(done) + 1}")
        lines = self.path.read_text().splitlines() if self.path.exists() else []
        previous = hashlib.sha256(lines[-1].encode()).hexdigest() if lines else ""
        record = {**body, "look": len(done) + 1, "previous": previous}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as fh:
            fh.write(_line(record) + "\n")
        return record


def levels(hypotheses: list[Hypothesis], alpha: float = ALPHA) -> dict[str, tuple[float, float]]:
    """id -> (support level, refute level) of each test: α / (2m), an equivalence's refute test
    at half of it (either side of the margin)."""
    each = alpha / (2 * max(1, len(hypotheses)))
    return {h.id: (each, each / 2 if h.kind == "equivalence" else each) for h in hypotheses}


def judge_look(
    hypotheses: list[Hypothesis],
    diffs: dict[str, list[float]],
    planned: list[int],
    earlier: list[dict[str, Any]],
    spending: str = "obrien_fleming",
    alpha: float = ALPHA,
) -> dict[str, Any]:
    """The next look's record: for every hypothesis still open, its statistics on ``diffs`` (its
    per-unit differences so far), the boundaries of this look (given those the ``earlier`` looks
    of the ledger used) and its decision; a hypothesis decided earlier keeps its decision.
    ``planned``: the units at each planned look (the last is the study's maximum)."""
    k = len(earlier)
    if k >= len(planned):
        raise LedgerError(f"the study planned {len(planned)} looks; all are in the ledger")
    last = k == len(planned) - 1
    # The levels are fixed by the first look's family: later looks judge only the open
    # hypotheses (the next look's config declares no others), at the levels they started with.
    first = earlier[0]["levels"] if earlier else {}
    level = {
        h.id: tuple(first.get(h.id, v))
        for h, v in zip(hypotheses, levels(hypotheses, alpha).values(), strict=True)
    }
    units = {h.id: len(diffs[h.id]) for h in hypotheses}
    record: dict[str, Any] = {
        "planned": planned,
        "levels": {**first, **{h: list(v) for h, v in level.items()}},
        "statistics": {},
        "boundaries": {},
        # every decision so far, those of hypotheses no longer declared included
        "decisions": dict(earlier[-1]["decisions"]) if earlier else {},
    }
    for h in hypotheses:
        before = [e["decisions"].get(h.id) for e in earlier]
        if before and before[-1] in (seq.SUPPORTED, seq.REFUTED):
            record["decisions"][h.id] = before[-1]
            continue
        past = [e for e in earlier if h.id in e["boundaries"]]
        fractions = [e["statistics"][h.id]["units"] / planned[-1] for e in past]
        fractions.append(1.0 if last else min(units[h.id] / planned[-1], 1.0))
        if any(b <= a for a, b in itertools.pairwise(fractions)):
            raise LedgerError(f"hypothesis {h.id!r}: look {k + 1} has no more units than the last")
        bounds = [
            seq.next_boundary(fractions, [e["boundaries"][h.id][i] for e in past], lv, spending)
            for i, lv in enumerate(level[h.id])
        ]
        sup, ref, df = seq.look_statistics(
            h.kind,
            diffs[h.id],
            direction=h.direction,
            minimum_effect=h.minimum_effect,
            margin=h.margin,
        )
        record["statistics"][h.id] = {
            "units": units[h.id],
            "mean": sum(diffs[h.id]) / units[h.id] if units[h.id] else math.nan,
            "support_t": sup,
            "refute_t": ref,
            "df": df,
        }
        record["boundaries"][h.id] = bounds
        record["decisions"][h.id] = seq.decide(sup, ref, df, *bounds, last)
    return record


def planning_boundaries(looks: list[int], level: float) -> list[float]:
    """The boundary each look will use, O'Brien-Fleming-type spending of ``level`` carried to
    the t scale at the look's df (a look of 4 draws needs t ≥ 13.8 where z needs 3.34)."""
    fractions = [n / looks[-1] for n in looks]
    return [
        seq.t_boundary(z, n - 1)
        for z, n in zip(seq.spending_boundaries(fractions, level), looks, strict=True)
    ]


# What a study's plan adds to each hypothesis's row (``plan_with_looks``).
SEQUENTIAL_COLUMNS = ["power_with_looks", "expected_draws"]


def plan_with_looks(
    design: Any, gpu_hours_per_unit: float = math.nan, alpha: float = ALPHA
) -> list[dict[str, Any]]:
    """``design.hypotheses.plan_rows`` (at the study's most draws) with, for each directional
    hypothesis of a sequential study (``study.looks``), its power with the looks and the draws it
    expects to use at its expected effect (``sequential.expected_units``, its refute test the
    mirror boundary); NaN for the others (an equivalence; a push, whose units are replicates).
    Each look's boundary is ``planning_boundaries``' (the SD's own noise left out, as in the z
    design). Without a study, the rows as they are."""
    from grpo_ablation.design.hypotheses import Plan, declared, family_level, plan_rows

    rows = plan_rows(design, gpu_hours_per_unit, alpha)
    looks = (design.sections.get("study") or {}).get("looks")
    if not looks:
        return rows
    hyps, plan = {h.id: h for h in declared(design)}, Plan.of(design)
    boundary = planning_boundaries(looks, family_level(list(hyps.values()), alpha))
    for row in rows:
        drift = _drift(hyps[row["id"]], plan, looks)
        row.update(power_with_looks=math.nan, expected_draws=math.nan)
        if drift is not None:
            draws, power = seq.expected_units(looks, boundary, drift)
            row.update(power_with_looks=power, expected_draws=draws)
    return rows


def _drift(h: Hypothesis, plan: Any, looks: list[int]) -> float | None:
    """A directional hypothesis's score drift at its expected effect, per unit of information at
    the study's most draws ((effect − δ) / SD · √n); None where nothing is planned (another
    kind, a push hypothesis, no SD or no expected effect)."""
    sd = plan.declared_sd(h)
    if h.kind != "directional" or h.on_push or not sd > 0 or not math.isfinite(h.expected_effect):
        return None
    return (h.expected_effect - h.minimum_effect) / sd * math.sqrt(looks[-1])


def _still_open(design: Any, alpha: float) -> dict[str, list[float]]:
    """id -> the probability that the hypothesis is still open after each look, at its expected
    effect (``planning_boundaries``). A directional one: its sequential stopping probabilities,
    either side. An equivalence: one minus the largest probability that any single look up to
    this one supports it, Φ((m − c·se − Δ)/se) − Φ((c·se − m − Δ)/se) (a lower bound on its
    stopping, so an upper bound on what it costs). A push hypothesis is taken as open to the last
    look."""
    from grpo_ablation.design.hypotheses import Plan, declared, family_level

    looks = [int(n) for n in design.sections["study"]["looks"]]
    hyps, plan = declared(design), Plan.of(design)
    level = family_level(hyps, alpha)
    boundary = planning_boundaries(looks, level)
    out = {}
    for h in hyps:
        sd, still, drift = plan.declared_sd(h), [1.0] * len(looks), _drift(h, plan, looks)
        if drift is not None:
            stopped = itertools.accumulate(
                up + down for up, down in seq.stop_probabilities(looks, boundary, drift)
            )
            still = [1.0 - p for p in stopped]
        elif h.kind == "equivalence" and not h.on_push and sd > 0:
            delta = h.expected_effect if math.isfinite(h.expected_effect) else 0.0
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


def open_hypotheses(record: dict[str, Any]) -> list[str]:
    """The hypotheses a look left open (those the next look trains cells for)."""
    return [h for h, v in record["decisions"].items() if v == seq.CONTINUE]


def write_look(design: Any, out: Path | None = None, spending: str | None = None) -> dict[str, Any]:
    """Judge the look the design's draws make (``study.draws[:n]`` for the look's n), record it
    in the ledger (and in ``out``), and write the next look's override config
    (``study/next.yaml``): the next ``study.looks`` count of ``study.draws``, the decided
    hypotheses withdrawn (the open ones stay as declared) and only the stages the open ones name.
    Returns the look's record."""
    import yaml

    from grpo_ablation.analysis import draws, hypotheses
    from grpo_ablation.design.hypotheses import declared
    from grpo_ablation.layout import TABLE, Tree

    plan = design.sections.get("study") or {}
    looks, planned_draws = [int(n) for n in plan.get("looks") or []], list(plan.get("draws") or [])
    if not looks:
        raise ValueError("the config declares no study (study.looks: draws at each look)")
    tree = Tree(design.folder())
    ledger = Ledger(Path(tree.study_ledger()))
    k = design.study_look
    if k is None:
        raise LedgerError(
            f"this design ran draws {design.draws}; a look runs study.draws[:n], n in {looks}"
        )
    earlier = ledger.entries()[:k]
    if len(earlier) < k:
        raise LedgerError(f"look {k + 1} needs looks 1 to {k} in the ledger first")
    hyps = declared(design)
    runs = draws.draw_means(draws.load_draws(design))
    rows = draws.draw_rows(design, design.draws[0])
    records = hypotheses.push_records(design, [design.draw_dir(d) for d in design.draws])
    diffs = hypotheses.differences(hyps, runs, rows, design, records)
    record = judge_look(
        hyps, diffs, looks, earlier, spending or plan.get("spending", "obrien_fleming")
    )
    read = [Path(Tree(design.draw_dir(d)).table(TABLE["results"])) for d in design.draws]
    record["draws"] = design.draws
    record["tables"] = {str(p): sha256_file(p) for p in read}
    record = ledger.append(record, k + 1)
    if out is not None:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    k = record["look"]
    still = set(open_hypotheses(record))
    nxt = Path(tree.study_next())
    if k < len(looks) and still:
        specs = design.sections.get("hypotheses") or []
        needed = {h["stage"] for h in specs if h["id"] in still}
        override = {
            "base_policy": {"draws": planned_draws[: looks[k]]},
            # the decided ones withdrawn; the open ones stay as the configs before declare them
            "hypotheses": {h["id"]: {"enabled": False} for h in specs if h["id"] not in still},
            "stages": {s.name: {"enabled": False} for s in design.stages if s.name not in needed},
        }
        nxt.write_text(
            f"# Written by `grpo-ablation study look` after look {k}: look {k + 1}'s draws, the "
            "decided hypotheses withdrawn and the stages the open ones need.\n"
            + yaml.safe_dump(override, sort_keys=True)
        )
    elif nxt.exists():
        nxt.unlink()  # the study is over
    return record
