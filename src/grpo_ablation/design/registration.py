"""A study's registration: what it will test and how, recorded before any of its draws trains.

``studies/<experiment>/registration.json`` (tracked with the project) holds the whole config the
study runs (every section, the draws of a look and the prices left out), its SHA-256, each hypothesis with its
full specification, prediction and scope, the looks, the spending rule, the error-control graph
and its initial levels, and the planning SDs with their sources. The study's ledger opens with a
line that holds the registration's SHA-256 (``design/ledger.py``), and every look checks its
config against the registration: the only differences allowed are the ones the study's own
looks make (the draws of the look, the decided hypotheses withdrawn, the stages no open
hypothesis needs left out); any other is refused with the key named. A declaration's proof is
this file and its place in the ledger, not a commit.
"""

from __future__ import annotations

import copy
import datetime
import hashlib
import json
import math
from pathlib import Path
from typing import Any

from grpo_ablation.design.ablation import StageOptions
from grpo_ablation.design.hypotheses import ALPHA, Hypothesis, node_levels
from grpo_ablation.design.ledger import Ledger, LedgerError, open_hypotheses, sha256_file
from grpo_ablation.design.power_section import PowerValues
from grpo_ablation.design.problems import InputError
from grpo_ablation.design.study import StudyConfig
from grpo_ablation.layout import LEDGER, REGISTRATION, STUDIES

# How the study controls its family-wise error (written into every registration).
PROCEDURE = (
    "group-sequential graphical procedure (Maurer & Bretz 2013): the gatekeeper, while open, "
    "holds all of alpha; then the open hypotheses share alpha equally, a decided hypothesis's "
    "level passing in equal parts to the open ones (Holm's graph). A hypothesis's level is split "
    "between its support and refute tests (an equivalence's refute test halved again, one per "
    "side of the margin). Each test's boundaries spend its level with Lan-DeMets spending at the "
    "information fractions of its looks, recomputed at the level it holds at each look, carried "
    "to the t scale at gamma * level (analysis.sequential.carried_level, calibrated by "
    "simulation on the registered looks)."
)


class RegistrationError(InputError):
    """A study without a registration, or a config that differs from it."""


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def study_folder(config: dict[str, Any]) -> Path:
    """The study's tracked folder: ``study.record``, else ``studies/<experiment>`` (relative to
    the working directory, the checkout's root where Snakemake runs)."""
    return Path((config.get("study") or {}).get("record") or Path(STUDIES) / config["experiment"])


def registration_file(config: dict[str, Any]) -> Path:
    return study_folder(config) / REGISTRATION


def ledger_file(config: dict[str, Any]) -> Path:
    return study_folder(config) / LEDGER


# What a registration leaves out of the config: the look's draws, and the prices (with where they
# were measured), which a study may measure again without changing what it tests.
PRICES = (
    "minutes_per_unit",
    "runs_per_unit",
    "minutes_split",
    "minutes_per_push_replicate",
    "minutes_source",
)
# Where jobs run and write their checkpoints, which changes no result: a study may move to a cluster.
PLACEMENT = ("slurm", "checkpoints_dir")


def without_draws(config: dict[str, Any]) -> dict[str, Any]:
    """The config with the look's draws, the prices and the placement left out: what every look
    of the study shares and the registration fixes."""
    body = copy.deepcopy(config)
    for key in PLACEMENT:
        body.pop(key, None)
    (body.get("base_policy") or {}).pop("draws", None)
    for key in PRICES:
        (body.get("power") or {}).pop(key, None)
    return body


def scope(h: Hypothesis, config: dict[str, Any]) -> str:
    """What a verdict on ``h`` generalises to: its unit and the population its units sample."""
    t = config.get("training") or {}
    unit = (
        "the push's replicates (2 x prompts_per_step prompts each, first order along the raw "
        "gradient at the named policy)"
        if h.on_push
        else "base-policy draws (one seed a draw; each draw a base policy warm-started anew)"
    )
    return (
        f"on average over {unit}; task {(config.get('task') or {}).get('kind', '?')}, "
        f"{t.get('max_steps', '?')} steps of {t.get('prompts_per_step', '?')} prompts x "
        f"G = {t.get('group_size', '?')}, this model and split; the effect of {h.stage}'s cell "
        f"{dict(h.cell)} against its reference on {h.metric}"
    )


def hypothesis_record(h: Hypothesis, config: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": h.kind,
        "stage": h.stage,
        "cell": dict(h.cell),
        "metric": h.metric,
        "direction": h.direction,
        "minimum_effect": h.minimum_effect,
        "margin": None if math.isnan(h.margin) else h.margin,
        "expected_effect": None if math.isnan(h.expected_effect) else h.expected_effect,
        "prediction": h.prediction(),
        "scope": scope(h, config),
        "source": h.source,
    }


def build(config: dict[str, Any], now: str | None = None) -> dict[str, Any]:
    """The registration of a (validated) study config."""
    from grpo_ablation.design.ablation import Design
    from grpo_ablation.design.hypotheses import declared, planning_sd

    study = StudyConfig.of(config["study"])
    design = Design.of(config)
    hyps = declared(design)
    body = without_draws(config)
    gatekeeper = study.gatekeeper
    if gatekeeper is not None and gatekeeper not in {h.id for h in hyps}:
        raise RegistrationError(
            f"study.gatekeeper={gatekeeper!r} is not a declared hypothesis; expected one of "
            f"{[h.id for h in hyps]}"
        )
    power = config.get("power") or {}
    return {
        "experiment": config["experiment"],
        "registered": now or datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "design_sha256": sha256_text(canonical(body)),
        "alpha": ALPHA,
        "draws": list(study.draws),
        "looks": [int(n) for n in study.looks],
        "spending": study.spending,
        "gatekeeper": gatekeeper,
        "procedure": PROCEDURE,
        "initial_levels": node_levels([h.id for h in hyps], set(), ALPHA, gatekeeper),
        "hypotheses": {h.id: hypothesis_record(h, config) for h in hyps},
        "planning_sd": {
            m: dict(zip(("sd", "df"), planning_sd(v, m), strict=True))
            | ({"runs": v} if isinstance(v, list) else {})
            for m, v in (power.get("sd") or {}).items()
        },
        "planning_source": " ".join((PowerValues.of(power).source or "").split()),
        "config": body,
    }


def read(config: dict[str, Any]) -> dict[str, Any]:
    """The study's registration, or an error saying how to make one."""
    path = registration_file(config)
    if not path.exists():
        raise RegistrationError(
            f"the study {config['experiment']!r} is not registered ({path} is missing): register "
            "it before any of its draws trains, with `grpo-ablation study-register --configfile "
            "<the same config files>`, and commit the folder"
        )
    return json.loads(path.read_text())


def register(config: dict[str, Any], trained: list[Path]) -> Path:
    """Write the registration and open the ledger with it; refused when one exists (the same
    design: nothing to do) or when any of ``trained`` (the study's draw folders) exists."""
    path = registration_file(config)
    if path.exists():
        if read(config)["design_sha256"] == sha256_text(canonical(without_draws(config))):
            return path
        raise RegistrationError(f"{path} registers another design: a registration is not changed")
    started = [str(p) for p in trained if p.exists()]
    if started:
        raise RegistrationError(
            f"the study's draws have results already ({', '.join(started[:3])}): a study is "
            "registered before any of its draws trains"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(build(config), indent=2, sort_keys=True) + "\n")
    Ledger(ledger_file(config)).open(hashlib.sha256(path.read_bytes()).hexdigest())
    return path


def design_differences(
    registered: dict[str, Any], look: int, still_open: set[str], sections: dict[str, Any]
) -> list[str]:
    """``differences`` between the design sections look ``look`` must run (given the hypotheses
    still open) and ``sections`` (a design.json's), the draws and the prices left out of both."""
    from grpo_ablation.design.ablation import Design

    def plain(value: dict[str, Any]) -> dict[str, Any]:
        out = json.loads(json.dumps(value, default=list))
        out.pop("draws", None)
        # the registration keeps the config's keys sorted: the declared order is not the design
        out["hypotheses"] = {h["id"]: h for h in out.get("hypotheses") or []}
        for key in PRICES:
            (out.get("power") or {}).pop(key, None)
        return out

    expected = Design.of(expected_config(registered, look, still_open)).sections
    return differences(plain(expected), plain(sections))


def next_override(
    registered: dict[str, Any], still_open: set[str], draws: list[int]
) -> dict[str, Any]:
    """The override config of the look that trains ``draws``, given the hypotheses still open:
    every registered hypothesis not open withdrawn, every registered stage no open hypothesis
    names left out."""
    body = registered["config"]
    needed = {registered["hypotheses"][h]["stage"] for h in still_open}
    return {
        "base_policy": {"draws": list(draws)},
        "hypotheses": {
            h: {"enabled": False} for h in registered["hypotheses"] if h not in still_open
        },
        "stages": {
            s: {"enabled": False}
            for s, spec in (body.get("stages") or {}).items()
            if s not in needed and StageOptions.of(spec, s).enabled
        },
    }


def expected_config(registered: dict[str, Any], look: int, still_open: set[str]) -> dict[str, Any]:
    """The config look ``look`` (0-based) runs: the registered one at look 0, with the override
    ``next_override`` makes after it."""
    from snakemake.utils import update_config

    config = copy.deepcopy(registered["config"])
    draws = registered["draws"][: registered["looks"][look]]
    if look == 0:
        config.setdefault("base_policy", {})["draws"] = draws
        return config
    update_config(config, next_override(registered, still_open, draws))
    return config


def differences(registered: Any, now: Any, where: str = "") -> list[str]:
    """The keys where ``now`` differs from ``registered``, each with both values."""
    if isinstance(registered, dict) and isinstance(now, dict):
        out = []
        for k in sorted(set(registered) | set(now), key=str):
            at = f"{where}.{k}" if where else str(k)
            if k not in now:
                out.append(f"{at}: registered, now missing")
            elif k not in registered:
                out.append(f"{at}: not registered (added: {canonical(now[k])[:80]})")
            else:
                out += differences(registered[k], now[k], at)
        return out
    if canonical(registered) != canonical(now):
        return [f"{where}: registered {canonical(registered)[:80]}, now {canonical(now)[:80]}"]
    return []


def check(config: dict[str, Any], look: int, still_open: set[str]) -> dict[str, Any]:
    """The registration, after checking that ``config`` is the one look ``look`` must run given
    the hypotheses the ledger left open; a difference is refused with its keys named."""
    registered = read(config)
    wrong = differences(
        without_draws(expected_config(registered, look, still_open)), without_draws(config)
    )
    drawn = list((config.get("base_policy") or {}).get("draws") or [])
    if drawn != registered["draws"][: registered["looks"][look]]:
        wrong.append(f"base_policy.draws: look {look + 1} trains study.draws[:n], not {drawn}")
    if wrong:
        raise RegistrationError(
            f"the config differs from the registration of study {config['experiment']!r} "
            f"({registration_file(config)}), which no look may change:\n  "
            + "\n  ".join(wrong[:12])
        )
    return registered


def look_state(
    config: dict[str, Any], k: int
) -> tuple[dict[str, Any], Ledger, list[dict[str, Any]], set[str]]:
    """What look ``k + 1`` of a study stands on: its registration, its ledger, the looks before
    it and the hypotheses they left open. Refused: a study not registered, a ledger that opens
    with another registration or was edited, an earlier look missing."""
    registered = read(config)
    ledger = Ledger(ledger_file(config))
    if ledger.registration() != sha256_file(registration_file(config)):
        raise LedgerError(f"{ledger.path} opens with another registration than the study's")
    earlier = ledger.entries()[:k]
    if len(earlier) < k:
        raise LedgerError(f"look {k + 1} needs looks 1 to {k} in the ledger first")
    still = set(open_hypotheses(earlier[-1])) if earlier else set(registered["hypotheses"])
    return registered, ledger, earlier, still


def check_registered(config: dict[str, Any]) -> None:
    """Before any job of a study's look: ``look_state`` holds, and the config is the one this
    look must run (``check``); each refusal names what to do."""
    from grpo_ablation.design.ablation import Design

    k = Design.of(config).study_look
    if k is not None:
        check(config, k, look_state(config, k)[3])
