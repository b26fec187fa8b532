"""Answer rule math_verify (copied into the task folder by grpo_ablation.evaluation.task_folders).

math-verify parses the completion and the target (as \\boxed{target}) and checks equivalence; a
completion it cannot parse, or a verifier error or timeout, counts as incorrect here.
"""

from math_verify import parse, verify

FALLBACK = "[invalid]"
TIMEOUT_S = 5


def _parse(text):
    try:
        return parse(text, parsing_timeout=TIMEOUT_S)
    except Exception:
        return []


def extract(text):
    got = _parse(text)
    return str(got[-1]) if got else FALLBACK


def is_correct(text, gold):
    target, pred = _parse("\\boxed{" + str(gold).strip() + "}"), _parse(text)
    if not target or not pred:
        return False
    try:
        return bool(verify(target, pred, timeout_seconds=TIMEOUT_S))
    except Exception:
        return False
