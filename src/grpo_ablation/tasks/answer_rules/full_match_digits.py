"""Answer rule full_match_digits (copied into the task folder by grpo_ablation.evaluation.task_folders).

The completion, whitespace stripped, must be zero or more '.' then one or more digits and nothing
else; the digits are compared with the target as strings ("055" is not "55", "55.3" is invalid).
"""

import re

_ANSWER = re.compile(r"\.*(\d+)")
FALLBACK = "[invalid]"


def extract(text):
    m = _ANSWER.fullmatch(text.strip())
    return m.group(1) if m else FALLBACK


def is_correct(text, gold):
    return extract(text) == str(gold).strip()
