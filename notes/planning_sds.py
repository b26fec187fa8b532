"""Planning SDs from a finished study's records: for each hypothesis a config declares, the SD
over the recorded draws of its metric's per-draw paired difference (its cell's run against its
reference's run of the same draw), with its df and the records it rests on; a hypothesis whose
cell or reference the study never trained is said to have no measurement there.

    python notes/planning_sds.py --records config/config.yaml config/study.yaml --draws 12-39 \\
        --configfile config/config.yaml config/study.yaml config/study_group_size.yaml

``--records``: the recorded study's config (its records in ``studies/<experiment>/draw=<d>/``,
each checked against its ledger as a look checks it); ``--configfile``: the config whose
hypotheses are to be planned. A cell path names the same run in every stage that trains it, so
a contrast is read wherever the study trained both of its runs.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from grpo_ablation.analysis.draws import draw_means, load_draws
from grpo_ablation.analysis.stats import sample_sd
from grpo_ablation.design.ablation import Design
from grpo_ablation.design.hypotheses import contrast, declared
from grpo_ablation.design.ledger import Ledger
from grpo_ablation.design.records import record_folder, recorded_draws, study_records
from grpo_ablation.design.schema import load_config
from grpo_ablation.layout import LEDGER


def draw_span(text: str) -> list[int]:
    """``12-39`` or ``12,13,20``: the draws."""
    if "-" in text:
        low, high = (int(x) for x in text.split("-"))
        return list(range(low, high + 1))
    return [int(x) for x in text.split(",")]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--records", nargs="+", type=Path, required=True)
    p.add_argument("--draws", type=draw_span, required=True)
    p.add_argument("--configfile", nargs="+", type=Path, required=True)
    a = p.parse_args()

    config = load_config(a.records)
    config["base_policy"]["draws"] = a.draws
    source = Design.of(config)
    study = study_records(source)
    if study is None:
        raise SystemExit(f"{a.records} declares no study (study.looks): it has no records")
    checked = recorded_draws(study, a.draws, Ledger(study / LEDGER))
    if checked != a.draws:
        raise SystemExit(f"draws {sorted(set(a.draws) - set(checked))} have no records in {study}")
    means = draw_means(load_draws(source))
    runs = means.drop_duplicates(["cell", "draw"]).set_index(["cell", "draw"])

    target = Design.of(load_config(a.configfile))
    rows = target.rows(target.possible_winners()[0])
    print(f"records: {record_folder(study, a.draws[0])}/records.json .. draw={a.draws[-1]}")
    for h in declared(target):
        row = contrast(h, rows, target)
        missing = [c for c in (row["cell"], row["reference"]) if c not in runs.index.levels[0]]
        if missing:
            print(f"{h.id}: no measurement, {study.name} trained no run of {missing}")
            continue
        diffs = [
            float(runs.loc[(row["cell"], d), h.metric] - runs.loc[(row["reference"], d), h.metric])
            for d in a.draws
        ]
        finite = [x for x in diffs if math.isfinite(x)]
        print(
            f"{h.id}: {row['cell']} - {row['reference']} on {h.metric}, {len(finite)} draws: "
            f"mean {sum(finite) / len(finite):+.4f}, SD {sample_sd(finite):.4f} on "
            f"{len(finite) - 1} df"
        )


if __name__ == "__main__":
    main()
