"""Small helpers for the documented configuration dataclasses.

A config section declared as a dataclass gives each field as ``option(default, help, ...)``: its
help text and constraints travel as metadata (TRL's ``GRPOConfig`` style), so the checks
(``check_options``) and the config schema's section (``grpo_ablation.design.schema``) follow from the
one declaration. An option added after runs were trained declares ``neutral``, the value that
reproduces the behaviour from before it existed: ``identity`` (what a rerun trigger compares)
leaves it out at that value, so declaring it keeps every finished run.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Collection, Iterable
from typing import Any, TypeVar

T = TypeVar("T")
# The default of an option the config must give (the schema lists it under its section's
# ``required``): a dataclass field without a default.
REQUIRED: Any = dataclasses.MISSING


def spell_choices(choices: Iterable[str]) -> str:
    """``a, b or c``: how a help text lists the choices of an option."""
    choices = tuple(choices)
    return " or ".join(filter(None, [", ".join(choices[:-1]), choices[-1]]))


def option(
    default: Any,
    help: str,
    *,
    recorded: bool | str = True,
    neutral: Any = dataclasses.MISSING,
    choices: Collection[str] | None = None,
    words: tuple[str, ...] = (),
    minimum: float | None = None,
    exclusive_minimum: float | None = None,
    maximum: float | None = None,
    min_items: int | None = None,
    absent: bool = False,
    null: bool = False,
    pattern: str | None = None,
    min_length: int | None = None,
) -> Any:
    """A declared option. ``recorded`` (training options): True, or why the objective record
    leaves the field out (it is not part of what the run optimises, or the record states it in
    other words). ``neutral`` (an option added after runs were trained): the value that
    reproduces the behaviour from before the option existed. A configuration at that value leaves
    the option out of its ``identity``, the train jobs' rerun trigger, so adding the option
    retrains no finished run; a value away from it (a default changed later included) enters the
    identity and retrains the runs it changes. ``{choices}`` in the help text is the list of
    ``choices``, spelled from the registry that declares them; ``choices`` may be the registry
    itself (a dict), whose names the checks and the schema then read as they are at the time.
    ``words``: the words a numeric option takes beside its numbers (``auto``). A list default is
    copied for each instance; a list option's choices and bounds are its items', ``min_items``
    its length's. A value of None (an optional option) meets every bound. ``REQUIRED``: no
    default, the config gives it. ``absent``: None stands for the key left out, and the schema
    fills in no default (a key added after configs were registered: they validate unchanged);
    with ``null`` a config may also give None itself. ``pattern``: the regular expression a text
    option matches, ``min_length`` its shortest length (the schema's)."""
    if choices and "{choices}" in help:
        help = help.replace("{choices}", spell_choices(choices))
    bounds = {"minimum": minimum, "exclusiveMinimum": exclusive_minimum, "maximum": maximum}
    metadata = {
        "help": help,
        "recorded": recorded,
        "neutral": neutral,
        "choices": choices,
        "words": words,
        "bounds": {k: v for k, v in bounds.items() if v is not None},
        "min_items": min_items,
        "absent": absent,
        "null": null,
        "pattern": pattern,
        "min_length": min_length,
    }
    if isinstance(default, list):
        return dataclasses.field(default_factory=default.copy, metadata=metadata)
    if default is REQUIRED:
        return dataclasses.field(metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def default_of(f: dataclasses.Field) -> Any:
    """The declared default of an option (a list default made by its factory; ``REQUIRED``
    where it has none)."""
    if f.default is dataclasses.MISSING and f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


def did_you_mean(word: Any, choices: Iterable[Any]) -> str:
    """``; did you mean x?`` (or ``x or y``) where a choice is close to a misspelt ``word``
    (difflib), else empty: the tail of every "unknown name" message."""
    import difflib

    near = difflib.get_close_matches(str(word), [str(c) for c in choices], n=2, cutoff=0.6)
    return f"; did you mean {' or '.join(near)}?" if near else ""


def unknown_keys(where: str, keys: Iterable[str], known: Collection[str]) -> list[str]:
    """A line for each of ``keys`` not ``known`` at ``where`` (a config path, empty at the top):
    ``where.key: unknown key`` with the key meant where one is close, else the known keys."""
    return [
        f"{where + '.' if where else ''}{key}: unknown key"
        + (did_you_mean(key, known) or f" (known: {', '.join(sorted(known))})")
        for key in keys
        if key not in known
    ]


def check_option(section: str, name: str, value: Any, meta: Any) -> None:
    """``value`` within its declared choices and bounds, or a ValueError naming the option (each
    item of a list)."""
    if isinstance(value, list):
        if len(value) < (meta.get("min_items") or 0):
            raise ValueError(f"{section}.{name} needs at least {meta['min_items']} item(s)")
        for item in value:
            check_option(section, name, item, meta)
        return
    if meta["choices"] is not None and value not in meta["choices"]:
        raise ValueError(
            f"{section}.{name}: unknown {name.replace('_', ' ')} {value!r}; expected one of "
            f"{list(meta['choices'])}{did_you_mean(value, meta['choices'])}"
        )
    if value is None or value in meta.get("words", ()):
        return
    for bound, limit in meta["bounds"].items():
        if {"minimum": value < limit, "exclusiveMinimum": value <= limit, "maximum": value > limit}[
            bound
        ]:
            words = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<="}[bound]
            raise ValueError(f"{section}.{name} must be {words} {limit}, got {value!r}")


def check_options(obj: Any, section: str) -> None:
    """Every declared option of dataclass ``obj`` (config section ``section``) checked."""
    for f in dataclasses.fields(obj):
        check_option(section, f.name, getattr(obj, f.name), f.metadata)


def from_dict(cls: type[T], data: dict[str, Any] | None, section: str) -> T:
    """Build dataclass ``cls`` from ``data``, naming any key it does not know or lacks."""
    data = dict(data or {})
    known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(
            f"unknown key(s) {', '.join(map(repr, unknown))} in config section '{section}'; "
            f"known keys: {', '.join(sorted(known))}"
        )
    missing = [k for k in required(cls) if k not in data]
    if missing:
        raise ValueError(f"config section '{section}' lacks {', '.join(map(repr, missing))}")
    return cls(**data)


def part_of(cls: type[T], data: dict[str, Any] | None, section: str) -> T:
    """Dataclass ``cls`` from the keys of ``data`` it declares, any other left out taking its
    declared default: the declared part of a section whose other keys are read elsewhere (a
    stage's vary, fixed and reference; a base policy's kind-specific fields)."""
    known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    return from_dict(cls, {k: v for k, v in (data or {}).items() if k in known}, section)


def declared_default(cls: type, name: str) -> Any:
    """The declared default of option ``name`` of dataclass ``cls``: for a reader of a config
    the schema has not filled in yet (``config.get(name, declared_default(cls, name))``)."""
    return default_of(cls.__dataclass_fields__[name])


def neutral_of(cls: type, name: str) -> Any:
    """The declared ``neutral`` value of option ``name`` of dataclass ``cls``: what a record
    written before the option existed ran at."""
    return cls.__dataclass_fields__[name].metadata["neutral"]


def required(cls: type) -> list[str]:
    """The options of dataclass ``cls`` declared ``REQUIRED``, in order."""
    return [f.name for f in dataclasses.fields(cls) if default_of(f) is REQUIRED]


def identity(obj: Any) -> dict[str, Any]:
    """Dataclass ``obj``'s fields (``dataclasses.asdict``) less each option at its declared
    ``neutral`` value: what tells one configuration from another for a rerun trigger (a train
    job's params). While no option is at a declared neutral value, ``asdict(obj)`` itself."""
    data = dataclasses.asdict(obj)
    for f in dataclasses.fields(obj):
        neutral = f.metadata.get("neutral", dataclasses.MISSING)
        if neutral is not dataclasses.MISSING and data[f.name] == neutral:
            del data[f.name]
    return data


def config_hash(data: Any) -> str:
    """SHA-256 of the canonical JSON of ``data`` (dataclasses allowed)."""
    if dataclasses.is_dataclass(data) and not isinstance(data, type):
        data = dataclasses.asdict(data)
    blob = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()
