"""The ``power`` section's own values, declared once: the planning minutes and where they and the
SDs were measured. Their schema part is written from these declarations; its structured keys
(``sd``: a number or a list of earlier runs per metric, ``minutes_split``, ``measured_on``,
``reference_correlation``: objects of their own) stay described by hand in the schema.
``grpo_ablation.design.hypotheses`` reads the section (``Plan.of``). None of them fills in a
default: a value left out is unknown, and the plan says so rather than guess."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from grpo_ablation.settings import option, part_of


@dataclass(frozen=True)
class PowerValues:
    """The power section's keys that hold one value each."""

    minutes_per_unit: float | None = option(
        None,
        "wall minutes one unit (a base-policy draw with its seeds, or a seed) adds to the DAG on "
        "the machine the config targets, measured: the units a hypothesis needs are priced with "
        "it",
        exclusive_minimum=0,
        absent=True,
    )
    runs_per_unit: int | None = option(
        None,
        "the training runs of the unit minutes_per_unit was measured on (default: this design's, "
        "one a cell and seed): a design of other cells, or with a replicated reference, is priced "
        "at that unit's mean run",
        minimum=1,
        absent=True,
    )
    minutes_source: str | None = option(
        None,
        "where minutes_per_unit (and runs_per_unit) were measured, where that is not source's "
        "account: a price measured again, for instance on a draw of a registered study's own "
        "protocol (the plan prints it after source)",
        absent=True,
    )
    minutes_per_push_replicate: float | None = option(
        None,
        "job minutes of one push replicate at one policy, measured: prices the replicates a push "
        "hypothesis needs",
        exclusive_minimum=0,
        absent=True,
    )
    source: str | None = option(None, "where the SDs and the minutes were measured", absent=True)

    @classmethod
    def of(cls, section: dict[str, Any] | None) -> PowerValues:
        """The section's values (its structured keys not read)."""
        return part_of(cls, section, "power")


def or_unknown(value: float | None) -> float:
    """A declared number, NaN where the config gives none (a plan unknown, not guessed)."""
    return math.nan if value is None else float(value)
