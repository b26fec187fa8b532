"""The ``tracking`` section, declared once: which trackers every training run reports its live
curves to (TRL's ``report_to``). The train rule passes it as a resource, not a parameter, so
switching it on or off retrains nothing (``grpo_ablation.training.tracking`` sets them up)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from grpo_ablation.settings import check_options, from_dict, option

TRACKERS = ("tensorboard", "wandb", "trackio")


@dataclass(frozen=True)
class TrackingConfig:
    """Live curves of every training run, named by its cell and seed."""

    report_to: list[str] = option(
        [],
        "tensorboard (event files in runs/<cell>/seed=<s>/tensorboard/, `pip install tensorboardX` "
        "is in the pins), wandb (offline under the run folder unless WANDB_MODE says otherwise; "
        "`pip install wandb`), trackio (`pip install trackio`)",
        choices=TRACKERS,
    )

    def __post_init__(self) -> None:
        check_options(self, "tracking")

    @classmethod
    def of(cls, section: dict[str, Any] | None) -> TrackingConfig:
        """The config's ``tracking`` section (any key left out takes its default)."""
        return from_dict(cls, section, "tracking")
