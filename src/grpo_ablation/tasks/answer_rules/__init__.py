"""The declared answer rules, implemented for lm-eval: one module per rule, each defining
extract(text) (what the rule reads as the answer, for the sample log) and is_correct(text, gold).
A task folder gets the rule's module followed by ``metric.py`` (the metric lm-eval calls), copied
as text, so the folder is self-contained and its files are part of every evaluation's key."""

from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).parent
# rule name -> its module's file
RULES: dict[str, Path] = {
    "full_match_digits": _HERE / "full_match_digits.py",
    "math_verify": _HERE / "math_verify.py",
}
METRIC = _HERE / "metric.py"
# The rules whose accepted completions evaluation/exact.py enumerates (with a tokenizer of one token
# per character): a task whose rule is one of them gets the exact sampled accuracy.
ENUMERABLE: tuple[str, ...] = ("full_match_digits",)


def module_text(rule: str) -> str:
    """The text of the task folder's answer module: the rule, then the shared metric."""
    return RULES[rule].read_text() + "\n\n" + METRIC.read_text()
