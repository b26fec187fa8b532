"""The study look job (``grpo-ablation study-look``): a sequential study's look judged
(``analysis/study.py``), recorded in its ledger, and the next look's override written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from grpo_ablation.analysis.study import judge_look
from grpo_ablation.design.ledger import LedgerError, open_hypotheses
from grpo_ablation.design.problems import DesignError

if TYPE_CHECKING:
    import pandas as pd


def write_look(
    design: Any, out: Path | None = None, means: pd.DataFrame | None = None
) -> dict[str, Any]:
    """Judge the look the design's draws make (``study.draws[:n]`` for the look's n) under the
    study's registration, record it in the ledger (and in ``out``), and write the next look's
    override config (``studies/<name>/next.yaml``, ``registration.next_override``). Refused before any
    judging: a study not registered, a ledger that does not open with its registration or was
    edited, a design that differs from the registered one (``registration.check``).
    ``means``: the draws' means (the pooled job's draw_means.csv, of these draws); by default
    computed from the draws' records as the pooled job computes them."""
    import yaml

    from grpo_ablation.analysis import draws, hypotheses, loading
    from grpo_ablation.design import registration as reg
    from grpo_ablation.design.hypotheses import declared, planned_rows
    from grpo_ablation.design.records import draw_source, numbers_sha, read_records, study_records
    from grpo_ablation.layout import NEXT_LOOK

    plan = design.sections.get("study") or {}
    if not plan.get("looks"):
        raise DesignError("the config declares no study (study.looks: draws at each look)")
    k = design.study_look
    if k is None:
        raise LedgerError(
            f"this design ran draws {design.draws}; a look runs study.draws[:n], n in "
            f"{plan['looks']}"
        )
    named = {"experiment": design.folder().name, "study": plan}
    registered, ledger, earlier, still = reg.look_state(named, k)
    looks, planned_draws = registered["looks"], registered["draws"]
    wrong = reg.design_differences(registered, k, still, design.sections)
    if wrong:
        raise reg.RegistrationError(
            "the design differs from the study's registration:\n  " + "\n  ".join(wrong[:12])
        )
    hyps = declared(design)
    runs = draws.draw_means(draws.load_draws(design)) if means is None else means
    if sorted(set(runs["draw"])) != sorted(design.draws):
        raise LedgerError(
            f"the draw means given hold draws {sorted(set(runs['draw']))}, the look judges "
            f"{design.draws}: run this look's pooled job first"
        )
    rows = planned_rows(design, loading.compared_rows(runs))
    records = hypotheses.push_records(design, [draw_source(design, d) for d in design.draws])
    diffs = hypotheses.differences(hyps, runs, rows, design, records)
    record = judge_look(
        hyps,
        diffs,
        looks,
        earlier,
        registered["spending"],
        registered["alpha"],
        registered["gatekeeper"],
    )
    record["registration"] = ledger.registration()
    record["draws"] = design.draws
    # what the look read of each draw: its records' numbers, checked as they are read
    record["records"] = {
        str(d): numbers_sha(read_records(draw_source(design, d), record["registration"]))
        for d in design.draws
    }
    record = ledger.append(record, k + 1)
    if out is not None:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    k = record["look"]
    still = set(open_hypotheses(record))
    nxt = study_records(design) / NEXT_LOOK
    if k < len(looks) and still:
        override = reg.next_override(registered, still, planned_draws[: looks[k]])
        nxt.write_text(
            f"# Written by `grpo-ablation study-look` after look {k}: look {k + 1}'s draws, the "
            "decided hypotheses withdrawn and the stages the open ones need.\n"
            + yaml.safe_dump(override, sort_keys=True)
        )
    elif nxt.exists():
        nxt.unlink()  # the study is over
    return record
