"""The ablated choices as data: one ``Axis`` per choice, everything else derives from ``AXES``.

An axis names a field of the training configuration, the key that spells it in a cell's path
(``std=sample``), the values it may take, and how a value enters a run's training configuration
(most set their field; G and μ also rescale what keeps the completion budget matched). Cells, the
``cell`` wildcard, value validation, captions and figure labels are built from these declarations.

To add an axis: append one ``Axis`` below (plus the objective code that reads its field). A new
axis is named in a cell's path only where a cell departs from its default, so every existing run
directory keeps its path and nothing is retrained. The first three axes are always named: their
paths predate this rule.

Importable without torch or matplotlib: the DAG is built from it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from grpo_ablation.design.problems import DesignError
from grpo_ablation.objective.conventions import (
    AGGREGATIONS,
    BASELINE_NAMES,
    RATIO_LEVELS,
    RATIOS,
    SCALINGS,
    ZERO_VARIANCE,
)
from grpo_ablation.settings import did_you_mean

# How a value enters the training section: (section being built, the shared section with every
# option at its value or declared default, value).
Enter = Callable[[dict[str, Any], dict[str, Any], Any], None]


@dataclass(frozen=True)
class Axis:
    name: str  # the field of the training configuration it sets (training.<name>)
    key: str  # how a cell's path spells it: <key>=<value>
    label: str  # how captions, tables and figures call it
    kind: type  # str, int or float
    choices: tuple[str, ...] | None = None  # the names a choice may take; None for a number
    minimum: float | None = None
    always_named: bool = False  # in every cell path, even at its default
    # Nominal-budget entries this axis changes by design (the stage's budget check ignores them).
    rescales: tuple[str, ...] = ()
    enter: Enter | None = None  # None: set training.<name> to the value
    # What a reader should expect when this axis varies; the calculations sheet prints it.
    expectation: str = ""
    # Paired quantities this axis changes by construction: their contrasts are manipulation
    # checks, not findings (the report keeps them out of the exploratory count).
    manipulates: tuple[str, ...] = ()

    def coerce(self, value: Any, where: str) -> Any:
        """``value`` as this axis's type, or a DesignError naming ``where`` and what is allowed."""
        if self.choices is not None:
            if value not in self.choices:
                raise DesignError(
                    f"{where}: unknown {self.label} {value!r}; expected one of {list(self.choices)}"
                    + did_you_mean(value, self.choices)
                )
            return value
        try:
            if isinstance(value, bool) or not math.isfinite(float(value)):
                raise ValueError
            if self.kind is int and float(value) != int(value):
                raise ValueError
            out = self.kind(value)
        except (TypeError, ValueError, OverflowError):
            raise DesignError(
                f"{where}: {self.label} must be a{'n integer' if self.kind is int else ' number'}, "
                f"got {value!r}"
            ) from None
        if self.minimum is not None and out < self.minimum:
            raise DesignError(f"{where}: {self.label} must be >= {self.minimum}, got {value!r}")
        return out

    def spell(self, value: Any) -> str:
        """The value as written in a path segment (``0.04``, ``4``, ``sample``)."""
        return f"{value:g}" if self.kind is float else str(value)

    def pattern(self) -> str:
        if self.choices:
            return "|".join(re.escape(c) for c in sorted(self.choices, key=len, reverse=True))
        return r"\d+" if self.kind is int else r"[0-9.e+-]+"

    def apply(self, training: dict[str, Any], shared: dict[str, Any], value: Any) -> None:
        (self.enter or _set(self.name))(training, shared, value)


def _set(name: str) -> Enter:
    def enter(training: dict[str, Any], shared: dict[str, Any], value: Any) -> None:
        training[name] = value

    return enter


def _group_size(training: dict[str, Any], shared: dict[str, Any], G: int) -> None:
    """A fixed completion budget per step: a larger G means fewer prompts per step."""
    budget = int(shared["prompts_per_step"]) * int(shared["group_size"])
    if budget % G:
        raise DesignError(
            f"G={G} does not divide the {budget} completions per step "
            "(training.prompts_per_step x training.group_size)"
        )
    training.update(group_size=G, prompts_per_step=budget // G)


def _update_epochs(training: dict[str, Any], shared: dict[str, Any], mu: int) -> None:
    """μ optimizer steps per generation batch at a fixed number of generation batches: the run
    samples as many completions as at the shared μ and takes μ times the optimizer steps;
    checkpoints fall at the same completion counts."""
    mu0, steps, save = (int(shared[k]) for k in ("num_iterations", "max_steps", "save_steps"))
    if steps % mu0 or save % mu0:
        raise DesignError(
            f"training.max_steps={steps} and training.save_steps={save} must be multiples of "
            f"training.num_iterations={mu0}"
        )
    training.update(num_iterations=mu, max_steps=steps // mu0 * mu, save_steps=save // mu0 * mu)


AXES: tuple[Axis, ...] = (
    Axis(
        "std_scaling",
        "std",
        "std scaling",
        str,
        choices=SCALINGS,
        always_named=True,
        expectation=(
            "with beta = 0 and no gradient clipping, a constant rescaling of every advantage "
            "(population vs sample std at a fixed G: a factor sqrt(G/(G-1))) is absorbed by Adam "
            "up to its epsilon, so population and sample cells should agree up to seed noise; "
            "under clipping (the Trainer's 1.0 unless training.max_grad_norm says otherwise) a "
            "step's clip factor depends on its norm, which the factor scales, so they need not"
        ),
    ),
    Axis(
        "aggregation",
        "agg",
        "length aggregation",
        str,
        choices=AGGREGATIONS,
        always_named=True,
        expectation="aggregations weight tokens of long and short completions differently",
    ),
    Axis(
        "group_size",
        "G",
        "group size G",
        int,
        minimum=2,
        always_named=True,
        enter=_group_size,
        expectation="at a fixed completion budget, a larger G means fewer prompts per step",
        # P(mixed) = 1 - p^G - (1 - p)^G grows with G at every p strictly between 0 and 1
        manipulates=("fraction_mixed",),
    ),
    Axis(
        "beta",
        "beta",
        "KL coefficient β",
        float,
        minimum=0.0,
        expectation=(
            "beta > 0 adds beta times the k3 estimate of KL to the reference policy; the "
            "advantage scale now competes with it, so std scaling need no longer be absorbed"
        ),
    ),
    Axis(
        "num_iterations",
        "mu",
        "update epochs μ",
        int,
        minimum=1,
        rescales=("optimizer_steps", "num_iterations"),
        enter=_update_epochs,
        expectation=(
            "with mu = 1 the policy that sampled is the policy being updated, so the ratio is "
            "exactly 1 at every token and ratio clipping never fires; with mu > 1 the later "
            "epochs see ratios away from 1 and clipping becomes active"
        ),
    ),
    Axis(
        "zero_variance",
        "zv",
        "zero-variance groups",
        str,
        choices=ZERO_VARIANCE,
        expectation=(
            "all-correct and all-incorrect groups have advantage 0 under every std scaling, so "
            "with beta = 0 filtering them changes only the normaliser: the step's gradient is "
            "multiplied by the inverse of the kept share (of completions; of groups under "
            "group_token_mean; of tokens under token_mean), a factor that changes from step to "
            "step, which Adam does not absorb as it would a constant one; resampling keeps "
            "every completion of the batch in the loss and fills it with mixed groups, at the "
            "cost of more generated completions per step (the calculations sheet gives the "
            "expected number), so it compares with keep at the same optimizer-side budget and "
            "a larger generation budget, both recorded"
        ),
    ),
    Axis(
        "learning_rate",
        "lr",
        "learning rate",
        float,
        minimum=0.0,
        rescales=("learning_rate",),
        expectation=(
            "at learning rate 0 the run never leaves the base policy: against a trained cell its "
            "contrast is the whole effect of training, a positive control that shows a design "
            "can see an effect at all"
        ),
    ),
    Axis(
        "max_grad_norm",
        "clip",
        "gradient clipping (max norm; 0: off)",
        float,
        minimum=0.0,
        expectation=(
            "clipping scales a step's gradient by min(1, c / its norm): where it binds on some "
            "steps and not others, a constant factor on the advantages (population vs sample "
            "std) changes which steps are clipped and by how much, which Adam does not absorb; "
            "with clipping off (0) the two should agree up to Adam's epsilon"
        ),
    ),
    Axis(
        "ratio",
        "ratio",
        "policy ratio",
        str,
        choices=RATIOS,
        expectation=(
            "at mu = 1 every ratio is exactly 1, so clipped, cispo (cap at least 1), sapo and "
            "vespo give the same gradient A grad log pi under one aggregation and differ only in "
            "the diagnostics; they part where ratios move: mu > 1, or a generator whose "
            "probabilities differ from the trainer's. Vary it with num_iterations > 1"
        ),
    ),
    Axis(
        "ratio_level",
        "level",
        "ratio level",
        str,
        choices=RATIO_LEVELS,
        expectation=(
            "per completion (GSPO) every token of a completion shares one ratio, the exp of its "
            "mean token log-ratio; at mu = 1 both levels are 1 everywhere and the gradients are "
            "equal"
        ),
    ),
    Axis(
        "baseline",
        "baseline",
        "baseline",
        str,
        choices=BASELINE_NAMES,
        expectation=(
            "leave-one-out is n/(n-1) times the group-mean advantage (G/(G-1) = 8/7 at G = 8), "
            "with or without a std: a constant factor that Adam absorbs up to its epsilon "
            "without gradient clipping, and that changes which steps clipping binds on with it"
        ),
    ),
)
BY_NAME: dict[str, Axis] = {a.name: a for a in AXES}


def axis(name: str, where: str = "config") -> Axis:
    try:
        return BY_NAME[name]
    except KeyError:
        raise DesignError(
            f"{where}: unknown axis {name!r}; expected one of {list(BY_NAME)}"
            + did_you_mean(name, BY_NAME)
        ) from None


def check_choices(obj: Any, where: str = "training") -> None:
    """Every named-choice axis's value on ``obj`` (a training config or objective record)."""
    for a in AXES:
        if a.choices is not None and hasattr(obj, a.name):
            a.coerce(getattr(obj, a.name), where)


def defaults(training: dict[str, Any], training_defaults: dict[str, Any]) -> dict[str, Any]:
    """Every axis's default: the shared training section's value, else the dataclass default."""
    out = {}
    for a in AXES:
        value = training.get(a.name, training_defaults.get(a.name))
        out[a.name] = a.coerce(value, f"training.{a.name}")
    return out


def cell_path(values: dict[str, Any], default: dict[str, Any]) -> str:
    """``std=.../agg=.../G=...`` then ``key=value`` for every other axis off its default."""
    return "/".join(
        f"{a.key}={a.spell(values[a.name])}"
        for a in AXES
        if a.always_named or values[a.name] != default[a.name]
    )


def parse_path(path: str, default: dict[str, Any]) -> dict[str, Any]:
    """The values of a cell path; axes it does not name are at their default."""
    by_key = {a.key: a for a in AXES}
    values = dict(default)
    for segment in path.strip("/").split("/"):
        key, _, text = segment.partition("=")
        if key not in by_key:
            raise DesignError(f"cell path {path!r}: unknown key {key!r}")
        a = by_key[key]
        values[a.name] = a.coerce(text, f"cell path {path!r}")
    return values


def path_regex() -> str:
    """The ``cell`` wildcard: the always-named segments, then optional ones in axis order."""
    named = [f"{a.key}=(?:{a.pattern()})" for a in AXES if a.always_named]
    optional = [f"(?:/{a.key}=(?:{a.pattern()}))?" for a in AXES if not a.always_named]
    return "/".join(named) + "".join(optional)


# Paths list the always-named axes first; an axis declared after them must not be always named.
assert all(a.always_named for a in AXES[: sum(a.always_named for a in AXES)]), "always-named first"


@dataclass(frozen=True)
class Recipe:
    """A published combination of the ablated choices: cells with these values are labelled so."""

    name: str
    values: dict[str, str]  # axis -> value, every other axis free
    source: str


RECIPES: tuple[Recipe, ...] = (
    Recipe(
        "GRPO",
        {"std_scaling": "sample", "aggregation": "sequence_mean"},
        "Shao et al. 2024, DeepSeekMath (arXiv 2402.03300)",
    ),
    Recipe(
        "Dr. GRPO",
        {"std_scaling": "none", "aggregation": "constant"},
        "Liu et al. 2025, Understanding R1-Zero-Like Training (arXiv 2503.20783)",
    ),
    Recipe(
        "Lite PPO",
        {"std_scaling": "batch", "aggregation": "token_mean"},
        "Liu et al. 2025, Tricks or Traps? A Deep Dive into RL for LLM Reasoning (arXiv 2508.08221)",
    ),
)
