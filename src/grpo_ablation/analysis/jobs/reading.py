"""The report's reading (reStructuredText, and its HTML view), composed from the tables job's
files: the verdicts on the declared hypotheses first (``prose.verdicts.verdicts_reading``), then one
paragraph per stage from the effects table (``prose.effects.effects_reading``), then the compute
efficiency, the mixed-group calibration, the coupling of the cells' samples and the push of each
objective. It computes no number: every one is read from ``tables/``."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from grpo_ablation.analysis.hypotheses import VERDICT_COLUMNS, uncounted_pairs
from grpo_ablation.analysis.prose.calibration import calibration_reading
from grpo_ablation.analysis.prose.coupling import coupling_reading
from grpo_ablation.analysis.prose.effects import effects_reading
from grpo_ablation.analysis.prose.efficiency import efficiency_reading
from grpo_ablation.analysis.prose.push import push_reading
from grpo_ablation.analysis.prose.verdicts import verdicts_reading
from grpo_ablation.analysis.render import html_view
from grpo_ablation.layout import PUSH_TABLE


def write_reading(
    effects: list[Path],
    out: Path,
    view: Path,
    verdicts: Path | None = None,
    calibration: Path | None = None,
    coupling: Path | None = None,
    push: Path | None = None,
    efficiency: Path | None = None,
) -> list[Path]:
    """The report's reading (reStructuredText, ``out``; its HTML view, ``view``, the report's
    item): the verdicts on the declared hypotheses (``verdicts``: hypotheses.csv) first, then the
    effects (``effects``: the tables job's effects.csv, one long table with a stage column;
    several are read in the order given), the compute efficiency (``efficiency``:
    efficiency.csv), the mixed-group calibration (``calibration``: calibration.csv), the coupling
    of the cells' samples (``coupling``: coupling.csv) and the push of each objective (``push``:
    push.csv, with push_cosine.csv beside it)."""
    frames = [pd.read_csv(path) for path in effects]
    judged = pd.read_csv(verdicts) if verdicts else pd.DataFrame(columns=VERDICT_COLUMNS)
    opening = verdicts_reading(judged) if verdicts else ""
    text = effects_reading(pd.concat(frames, ignore_index=True), opening)
    if efficiency:
        late = efficiency_reading(
            pd.read_csv(efficiency), declared=uncounted_pairs(judged, pd.concat(frames))
        )
        text = text.rstrip("\n") + "\n\n" + late + "\n"
    if calibration:
        text = text.rstrip("\n") + "\n\n" + calibration_reading(pd.read_csv(calibration)) + "\n"
    if coupling:
        text = text.rstrip("\n") + "\n\n" + coupling_reading(pd.read_csv(coupling)) + "\n"
    if push:
        cosine = pd.read_csv(Path(push).with_name(PUSH_TABLE["push_cosine"]))
        text = text.rstrip("\n") + "\n\n" + push_reading(pd.read_csv(push), cosine) + "\n"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    view.write_text(html_view(text))
    return [out, view]
