"""A hypothesis's options, declared once: its kinds, directions and push policies, and every key
of a ``hypotheses.<id>`` entry but the compared cell (free-form: a value of the stage's primary
axis or axis -> value) and the metric (its own block, written from the registries of quantities).
Their schema part is written from these declarations; ``grpo_ablation.design.hypotheses`` checks
an entry against the design. Apart from ``hypotheses`` so that the design (``ablation``, which
reads ``enabled``) can import it."""

from __future__ import annotations

from dataclasses import dataclass

from grpo_ablation.settings import REQUIRED, option

KINDS = ("directional", "equivalence")
DIRECTIONS = {"higher": +1, "lower": -1}
# The policies a push hypothesis may be judged at: the base policy (step 0), or the final
# checkpoint of the push's run (the baseline cell's first seed). A push can flip sign between
# them, so a push hypothesis names one.
PUSH_POLICIES = ("base", "final")
# A directional hypothesis's minimum effect where it gives none.
NO_MINIMUM = 0.0


@dataclass(frozen=True, kw_only=True)  # required keys among defaulted ones
class HypothesisOptions:
    """A declared hypothesis's keys, but its cell and metric. Each key that only one kind takes
    fills in nothing where left out (registered hypotheses validate unchanged)."""

    enabled: bool = option(True, "false withdraws the hypothesis a config before this one declared")
    kind: str = option(
        REQUIRED,
        "directional: cell - reference lies beyond minimum_effect in the given direction "
        "(one-sided paired t); equivalence: within ±margin (two one-sided tests: the 90% interval "
        "inside the margin); the support and refute tests of all hypotheses form one Holm family "
        "at 0.05",
        choices=KINDS,
    )
    stage: str = option(REQUIRED, "an enabled stage")
    policy: str | None = option(
        None,
        "a push metric's policy (and only a push metric's): the base policy, or the final "
        "checkpoint of the push's run; a push can change sign between them",
        choices=PUSH_POLICIES,
        absent=True,
    )
    direction: str | None = option(
        None,
        "directional: the sign of cell - reference predicted, {choices}",
        choices=DIRECTIONS,
        absent=True,
    )
    minimum_effect: float = option(
        NO_MINIMUM, f"directional: δ ({NO_MINIMUM:g} when not given)", minimum=0, absent=True
    )
    margin: float | None = option(
        None, "equivalence: the margin m of ±m", exclusive_minimum=0, absent=True
    )
    expected_effect: float | None = option(
        None,
        "the true effect the power analysis assumes (not the verdict): directional, the "
        "predicted-direction effect s·Δ, beyond minimum_effect (default twice it); equivalence, "
        "the true Δ, inside the margin (default 0)",
        absent=True,
    )
    source: str = option(REQUIRED, "where the prediction comes from", min_length=1)
