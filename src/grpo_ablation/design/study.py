"""The ``study`` section, declared once: a sequential study's draws, looks, spending rule,
gatekeeper and tracked folder (``grpo_ablation.design.registration`` registers it;
``grpo_ablation.analysis.sequential`` spends its alpha). Its schema part is written from these
declarations. ``gatekeeper`` and ``record`` fill in nothing when left out, so a registered
study's validated config (and its design hash) stays what it was."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from grpo_ablation.settings import REQUIRED, check_options, from_dict, option

# The Lan-DeMets spending functions analysis.sequential.SPENDING implements (tested equal).
SPENDING_RULES = ("obrien_fleming", "pocock")


@dataclass(frozen=True)
class StudyConfig:
    """A sequential study: looks at growing numbers of base-policy draws."""

    draws: list[int] = option(
        REQUIRED,
        "every draw the study may train, in the order the looks take them",
        minimum=0,
        min_items=1,
    )
    looks: list[int] = option(
        REQUIRED,
        "draws at each look (increasing; the last is the study's maximum)",
        minimum=2,
        min_items=1,
    )
    spending: str = option(
        "obrien_fleming",
        "the Lan-DeMets error-spending function of every test's boundaries: {choices}",
        choices=SPENDING_RULES,
    )
    gatekeeper: str | None = option(
        None,
        "a declared hypothesis (the positive control) tested first at the whole alpha; the "
        "others hold no level until it is decided, then share all of it",
        absent=True,
    )
    record: str | None = option(
        None,
        "the study's tracked folder (registration.json, ledger.jsonl, ledger.head): default "
        "studies/<experiment>, relative to the working directory",
        absent=True,
    )

    def __post_init__(self) -> None:
        check_options(self, "study")

    @classmethod
    def of(cls, section: dict[str, Any] | None) -> StudyConfig:
        """The config's ``study`` section (draws and looks given; any other key left out takes
        its default)."""
        return from_dict(cls, section, "study")
