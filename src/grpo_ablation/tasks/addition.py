"""The embedded default task: addition of two small numbers, scored by a program.

A prompt is ``"47+8="``; a completion is an optional run of ``.`` filler, then the sum, then eos.
The filler lets the policy change its length without changing its correctness, which is what the
length-aggregation stage needs. ``difficulty`` is the number of carries the sum needs (0, 1, 2, ...):
carry-free sums are the ones a small warm-started policy nearly always solves.

Answer-extraction rule (the only one; ``extract_answer``): the completion, as TRL decodes it
(special tokens removed), with surrounding whitespace stripped, must be a run of zero or more
``.`` followed by one or more digits and nothing else. The digits are the answer, compared with the
reference as a string (so ``055`` is not ``55``). Anything else is unparseable and scores as
incorrect.

Rewards have three outcomes: 1.0 (correct), 0.0 (incorrect) and *scoring failed*. Failures are off
by default and injected at ``failure_rate``, deterministically from a hash of (prompt id, completion
text, failure seed), so reruns reproduce them. ``score_completion`` raises ``ScoringError``; the
TRL reward function returns ``None`` for that completion.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from grpo_ablation import settings
from grpo_ablation.layout import MANIFEST
from grpo_ablation.tasks import Prompt
from grpo_ablation.tasks.splits import check_disjoint, sha256, write_split_files

GENERATOR_VERSION = "addition-v1"
SPLITS: tuple[str, ...] = ("train", "validation", "test")
REWARD_KINDS: tuple[str, ...] = ("binary", "graded")

_ANSWER_RE = re.compile(r"\.*(\d+)")


class ScoringError(RuntimeError):
    """A completion could not be scored (the group becomes ``failed_scoring``)."""


@dataclass(frozen=True)
class AdditionTask:
    """The addition task (``task.kind: addition``); implements ``grpo_ablation.tasks.Task``."""

    kind: ClassVar[str] = "addition"
    answer_rule: ClassVar[str] = "full_match_digits"
    chat_template: ClassVar[bool] = False  # the character tokenizer has none
    hub_data: ClassVar[bool] = False
    local_base: ClassVar[bool] = True
    # Seed of the split generator; the same config always writes byte-identical files.
    seed: int = 1234
    # Operands: a in [0, a_max], b in [0, b_max]; the prompt shows them in a random order. The
    # default (two digits plus one digit) is small enough for a tiny model to learn on a laptop and
    # still mixes carry-free sums (nearly always solved) with carry sums (often missed).
    a_max: int = 99
    b_max: int = 9
    # Number of distinct problems per split; a+b and b+a count as one problem and a problem appears
    # in one split only. Validation and test are drawn first, so n_train does not change them.
    n_train: int = 500
    n_validation: int = 100
    n_test: int = 200
    # Reward variant: "binary" (1 correct, 0 incorrect) or "graded" (graded_base +
    # graded_gap * correct + deterministic noise in [-graded_noise, graded_noise]); the graded
    # variant has tiny absolute gaps that group standardisation blows up to unit scale.
    reward_kind: str = "binary"
    graded_base: float = 0.5
    graded_gap: float = 0.01
    graded_noise: float = 0.002
    # Fraction of completions whose scoring fails (deterministic in prompt id, text, failure_seed).
    failure_rate: float = 0.0
    failure_seed: int = 0
    # Extra fields a caller may want recorded; kept out of the generator itself.
    notes: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if min(self.a_max, self.b_max) < 0:
            raise ValueError("a_max and b_max must be non-negative")
        if min(self.n_train, self.n_validation, self.n_test) < 0:
            raise ValueError("split sizes must be non-negative")
        if self.reward_kind not in REWARD_KINDS:
            raise ValueError(f"reward_kind must be one of {REWARD_KINDS}, got {self.reward_kind!r}")
        if not 0.0 <= self.failure_rate <= 1.0:
            raise ValueError("failure_rate must be in [0, 1]")

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AdditionTask:
        return settings.from_dict(cls, d, "task")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def config_hash(self) -> str:
        return sha256(json.dumps(self.to_dict(), sort_keys=True).encode())

    # -- the Task protocol (grpo_ablation.tasks) ---------------------------------------------
    def write_splits(self, out_dir: Path, fetched: dict[str, Any] | None = None) -> dict[str, Any]:
        return write_splits(self, out_dir)  # generated: no source files to check

    def prefetch(self) -> dict[str, Any]:
        return {}  # generated locally: nothing to download

    def prompt(self, row: dict[str, Any]) -> Prompt:
        return row["prompt"]

    def reward_function(self) -> Callable[..., list[float | None]]:
        return make_reward_function(self)

    def sft_pairs(self, rows: list[dict[str, Any]]) -> list[tuple[Prompt, str]]:
        """The bare answer per row, for warm-starting a pretrained base on this task. (The local
        character GPT-2 uses ``base_policy.sft_completion``, with its hesitation model.)"""
        return [(r["prompt"], r["answer"]) for r in rows]


def _unit_hash(*parts: object) -> float:
    """A deterministic uniform number in [0, 1) from the parts (stable across processes)."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def count_carries(a: int, b: int) -> int:
    carries, carry = 0, 0
    while a or b:
        carry = int(a % 10 + b % 10 + carry >= 10)
        carries += carry
        a, b = a // 10, b // 10
    return carries


def carryless_sum(a: int, b: int) -> int:
    """Digit-wise sum mod 10: the systematic error of forgetting every carry."""
    out, scale = 0, 1
    while a or b:
        out += (a % 10 + b % 10) % 10 * scale
        a, b, scale = a // 10, b // 10, scale * 10
    return out


def make_row(a: int, b: int) -> dict[str, Any]:
    lo, hi = sorted((a, b))
    return {
        "prompt_id": f"add-{lo}-{hi}",  # order-free, so a+b and b+a share an id
        "prompt": f"{a}+{b}=",
        "answer": str(a + b),
        "difficulty": count_carries(a, b),
        "a": a,
        "b": b,
    }


def problem_universe(cfg: AdditionTask) -> list[tuple[int, int]]:
    """Every distinct problem as a sorted pair (lo, hi), in a fixed order."""
    pairs = {tuple(sorted((a, b))) for a in range(cfg.a_max + 1) for b in range(cfg.b_max + 1)}
    return sorted(pairs)  # type: ignore[arg-type]


def generate_splits(cfg: AdditionTask) -> dict[str, list[dict[str, Any]]]:
    """Shuffle the problem universe with the seed and deal it to validation, test, then train."""
    universe = problem_universe(cfg)
    need = cfg.n_train + cfg.n_validation + cfg.n_test
    if need > len(universe):
        raise ValueError(
            f"splits ask for {need} problems (n_train {cfg.n_train} + n_validation "
            f"{cfg.n_validation} + n_test {cfg.n_test}) but a <= {cfg.a_max}, b <= {cfg.b_max} "
            f"has only {len(universe)} distinct ones"
        )
    rng = random.Random(f"{GENERATOR_VERSION}:{cfg.seed}")
    rng.shuffle(universe)
    out: dict[str, list[dict[str, Any]]] = {}
    start = 0
    for split, n in (
        ("validation", cfg.n_validation),
        ("test", cfg.n_test),
        ("train", cfg.n_train),
    ):
        rows = []
        for lo, hi in universe[start : start + n]:
            a, b = (lo, hi) if rng.random() < 0.5 else (hi, lo)  # show both orders
            rows.append(make_row(a, b))
        out[split] = rows
        start += n
    check_disjoint(out)
    return {s: out[s] for s in SPLITS}


def write_splits(cfg: AdditionTask, out_dir: Path) -> dict[str, Any]:
    """Write ``{train,validation,test}.jsonl`` and ``manifest.json``; return the manifest."""
    requested = {"train": cfg.n_train, "validation": cfg.n_validation, "test": cfg.n_test}
    files = write_split_files(generate_splits(cfg), Path(out_dir), requested)
    manifest = {
        "generator_version": GENERATOR_VERSION,
        "generator_seed": cfg.seed,
        "task_config": cfg.to_dict(),
        "task_config_sha256": cfg.config_hash(),
        "answer_rule": cfg.answer_rule,
        "answer_extraction": "strip whitespace; fullmatch r'\\.*(\\d+)'; digits compared as strings",
        "splits": files,
    }
    (out_dir / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def extract_answer(text: str) -> str | None:
    """The answer digits under the one extraction rule, or None when unparseable."""
    m = _ANSWER_RE.fullmatch(text.strip())
    return m.group(1) if m else None


def is_correct(completion: str, answer: str) -> bool:
    return extract_answer(completion) == str(answer)


def score_completion(cfg: AdditionTask, prompt_id: str, completion: str, answer: str) -> float:
    """Reward of one completion; raises ``ScoringError`` for an injected scoring failure."""
    if (
        cfg.failure_rate > 0
        and _unit_hash("fail", cfg.failure_seed, prompt_id, completion) < cfg.failure_rate
    ):
        raise ScoringError(f"scoring failed for prompt {prompt_id} (injected)")
    correct = is_correct(completion, answer)
    if cfg.reward_kind == "binary":
        return 1.0 if correct else 0.0
    noise = (
        2 * _unit_hash("noise", cfg.failure_seed, prompt_id, completion) - 1
    ) * cfg.graded_noise
    return cfg.graded_base + cfg.graded_gap * correct + noise


def make_reward_function(cfg: AdditionTask) -> Callable[..., list[float | None]]:
    """A reward function with TRL's signature; ``answer`` and ``prompt_id`` come from the dataset."""

    def addition_reward(
        prompts: list[str],
        completions: list[str],
        answer: list[str],
        prompt_id: list[str],
        **kwargs: Any,
    ) -> list[float | None]:
        out: list[float | None] = []
        for completion, ans, pid in zip(completions, answer, prompt_id, strict=True):
            try:
                out.append(score_completion(cfg, pid, completion, ans))
            except ScoringError:
                out.append(None)  # TRL turns None into NaN; the group is failed_scoring
        return out

    addition_reward.__name__ = f"addition_{cfg.reward_kind}"
    return addition_reward
