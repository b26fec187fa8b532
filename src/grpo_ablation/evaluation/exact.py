"""Exact expected accuracy of the ``full_match_digits`` rule, by enumerating what it accepts.

Under the sampling protocol (softmax(logits / T), stop at eos or after ``max_len`` tokens, eos
counted), P(correct) of a prompt is the sum of the probabilities of the completions the rule
accepts. With a tokenizer of one token per character (checked by the evaluation before it trusts
this), the accepted completions are enumerable, except for the tokens that decode to nothing
(special tokens the decoder skips) or to whitespace (stripped at the ends), which may appear in an
accepted completion in many places. So the completions are split at the first such token:

- *accepted*: ``"." * n + gold`` then eos (n + len(gold) + 1 <= max_len), or with no eos when it
  fills ``max_len`` exactly (a truncated completion the rule still accepts);
- *unresolved*: a canonical prefix that can still become accepted (dots, or dots and a prefix of
  gold), followed by a token that decodes to nothing, or by whitespace where whitespace can still
  be stripped (at the very start, or after the whole answer).

Every accepted completion is either in the first set or begins with one of the second, and these
events are disjoint, so P(correct) lies in [A, A + U], A and U their summed probabilities: the
exact metric is A, and U is reported beside it (on a trained character model it is tiny).

This file is copied next to the lm-eval task (``grpo_exact.py``, with ``grpo_exact.json`` holding
the tokenizer's eos and skipped tokens and ``max_len``): :func:`doc_to_choice` and
:func:`process_results` are the exact task's functions, their ``_bounded`` twins those of the task
that also asks for the unresolved prefixes. Standard library only, as lm-eval imports it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

SPEC_FILE = "grpo_exact.json"
ACCEPTED, UNRESOLVED = "accepted", "unresolved"


def continuations(
    gold: str, max_len: int, eos: str, empty: list[str], space: list[str], bounded: bool = True
) -> list[tuple[str, str]]:
    """(kind, text) of every accepted completion and (``bounded``) every unresolved prefix of
    ``gold``. The unresolved ones are ~7 in 8 of the continuations: the evaluation asks for them
    at the checkpoints where it reports the bound."""
    gold = str(gold).strip()
    d = len(gold)
    if not gold.isdigit() or d > max_len:
        raise ValueError(f"answer {gold!r} is not digits that fit in {max_len} tokens")
    out: list[tuple[str, str]] = []
    # Canonical prefixes, and whether whitespace may follow them (before anything, or after the
    # whole answer: strip() removes it). Dots only while the answer still fits after them.
    nodes = [("." * m, m == 0) for m in range(max_len - d + 1)]
    for n in range(max_len - d + 1):
        nodes += [("." * n + gold[:i], i == d) for i in range(1, d + 1)]
        full = "." * n + gold
        out.append((ACCEPTED, full + eos if len(full) < max_len else full))
    for node, spaced in nodes if bounded else []:
        if len(node) < max_len:  # else the completion ends here
            out += [(UNRESOLVED, node + t) for t in [*empty, *(space if spaced else [])]]
    return out


def probabilities(kinds: list[str], logliks: list[float]) -> dict[str, float | None]:
    """A (accepted mass) and U (unresolved mass, None where no unresolved prefix was asked for)
    from each continuation's log-probability."""
    mass = {ACCEPTED: 0.0, UNRESOLVED: 0.0}
    for kind, ll in zip(kinds, logliks, strict=True):
        mass[kind] += math.exp(ll)
    bounded = UNRESOLVED in kinds
    return {"p_correct": mass[ACCEPTED], "p_unresolved": mass[UNRESOLVED] if bounded else None}


_SPEC: dict[str, Any] = {}


def _spec() -> dict[str, Any]:
    if not _SPEC:
        _SPEC.update(json.loads(Path(__file__).with_name(SPEC_FILE).read_text()))
    return _SPEC


def doc_continuations(doc: dict[str, Any], bounded: bool) -> list[tuple[str, str]]:
    s = _spec()
    return continuations(doc["answer"], s["max_len"], s["eos"], s["empty"], s["space"], bounded)


def doc_to_choice(doc: dict[str, Any]) -> list[str]:
    """lm-eval: the accepted continuations, whose log-likelihoods are asked for."""
    return [text for _, text in doc_continuations(doc, bounded=False)]


def doc_to_choice_bounded(doc: dict[str, Any]) -> list[str]:
    """lm-eval: the accepted and the unresolved continuations."""
    return [text for _, text in doc_continuations(doc, bounded=True)]


def process_results(doc: dict[str, Any], results: list[tuple[float, bool]]) -> dict[str, Any]:
    """lm-eval: one document's P(correct) (lm-eval averages it)."""
    return {"p_correct": _scored(doc, results, bounded=False)["p_correct"]}


def process_results_bounded(
    doc: dict[str, Any], results: list[tuple[float, bool]]
) -> dict[str, Any]:
    """lm-eval: one document's P(correct) and unresolved mass."""
    return _scored(doc, results, bounded=True)


def _scored(doc: dict[str, Any], results: list[tuple[float, bool]], bounded: bool) -> dict:
    kinds = [kind for kind, _ in doc_continuations(doc, bounded)]
    return probabilities(kinds, [float(ll) for ll, _ in results])
