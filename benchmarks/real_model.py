"""The SmolLM2 preset measured on its own model: ``python -m benchmarks.real_model --model DIR``.

Two measurements of a real pretrained instruct model (SmolLM2-135M-Instruct, converted from its
GGUF into a Hugging Face folder by ``grpo_ablation.policy.gguf``) on the locally generated word
problems (``grpo_ablation.tasks.word_problem_generator``), under the preset's prompt template, chat
template, temperature, group size and completion cap (``config/smollm2.yaml``):

``level``: for each difficulty (steps, max_operand), the base policy's greedy and sampled
accuracy on test prompts, its completion lengths, how many completions hit the cap, and how its
groups of G samples split into mixed / all incorrect / all correct: the level to train on is the
one where most groups are mixed (only those carry a GRPO gradient) and few completions are cut.

``cost``: seconds per GRPO training step on the CPU, split into generation and the rest, for the
project trainer with ``sampler: keyed`` and ``sampler: stream`` and for stock TRL, interleaved in
one process (A B C, C B A, ...) so that the machine's drift cancels; the ratios are the figures.

Sampled draws are keyed (``grpo_ablation.keyed_sampling``, evaluation keys of (seed, prompt
tokens, repeat)) unless ``--sampler stream``, and torch is seeded, so a rerun gives the same
numbers.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import pstats
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
import yaml

DEFAULT_MODEL = Path("results/smollm2_model/SmolLM2-135M-Instruct")
PRESET = Path("config/smollm2.yaml")
LEVELS = [(1, 5), (1, 9), (2, 9), (3, 9)]  # (steps, max_operand)
VARIANTS = ("keyed", "stream", "stock")  # project trainer with each sampler, stock TRL
LENGTHS = ("natural", "fixed")  # completions end at eos / every one runs to the cap


def preset(path: Path = PRESET) -> dict[str, Any]:
    """What the measurements take from the preset: prompt, sampling and group settings."""
    cfg = yaml.safe_load(path.read_text())
    t, task = cfg["training"], cfg["task"]
    return {
        "prompt_template": task["prompt_template"],
        "chat_template": bool(task.get("chat_template", True)),
        "temperature": float(t["temperature"]),
        "group_size": int(t["group_size"]),
        "prompts_per_step": int(t["prompts_per_step"]),
        "max_completion_length": int(t["max_completion_length"]),
        "learning_rate": float(t["learning_rate"]),
        "level": (int(cfg["word_problems"]["steps"]), int(cfg["word_problems"]["max_operand"])),
    }


# -- data and model ----------------------------------------------------------------------------
def problem_rows(
    root: Path, level: tuple[int, int], template: str, n_train: int, n_test: int, seed: int = 0
) -> tuple[Any, dict[str, list[dict[str, Any]]]]:
    """Word problems of ``level`` written under ``root`` and read back through the math task (its
    prompt template, gold answers and prompt ids): the task and its train and test rows."""
    from grpo_ablation.tasks.math import MathTask, source_rows
    from grpo_ablation.tasks.word_problem_generator import write_word_problems

    steps, max_operand = level
    folder = write_word_problems(
        root / f"steps={steps}_max={max_operand}", n_train, n_test, seed, steps, max_operand
    )
    task = MathTask(dataset="gsm8k", dataset_path=str(folder), prompt_template=template)
    rows = {split: source_rows(task, split)[0] for split in ("train", "test")}
    return task, rows


def load_policy(model_dir: Path) -> tuple[Any, Any]:
    """Tokenizer and float32 model, with the neutral generation config the training runs use."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from grpo_ablation.sampling import neutral_generation_config

    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    neutral_generation_config(model)
    model.eval()
    return tok, model


def prompt_ids(tok: Any, task: Any, rows: list[dict[str, Any]]) -> list[list[int]]:
    """Token ids of each row's prompt as TRL builds them: the chat template with the assistant's
    turn opened, or the raw text."""
    if not task.chat_template:
        return [tok(r["prompt"])["input_ids"] for r in rows]
    return [
        list(
            tok.apply_chat_template(
                task.prompt(r), add_generation_prompt=True, tokenize=True, return_dict=True
            )["input_ids"]
        )
        for r in rows
    ]


def _eos_ids(tok: Any, model: Any) -> list[int]:
    """The ids training stops at (TRL's rule, as every generator of the project)."""
    from grpo_ablation.sampling import stop_token_ids

    return stop_token_ids(tok.eos_token_id, model.generation_config.eos_token_id)


def _cut(row: list[int], eos: list[int]) -> tuple[list[int], bool]:
    """A completion up to and including its first eos, and whether it ran to the cap instead."""
    for i, t in enumerate(row):
        if t in eos:
            return row[: i + 1], False
    return row, True


@torch.no_grad()
def generate(
    model: Any,
    tok: Any,
    prompts: list[list[int]],
    *,
    temperature: float | None,
    max_new_tokens: int,
    repeats: int = 1,
    batch_size: int = 48,
    sampler: str = "keyed",
    seed: int = 0,
) -> list[list[tuple[list[int], bool]]]:
    """``repeats`` completions of each prompt under the sampling protocol (greedy when
    ``temperature`` is None): per prompt, [(token ids up to the first eos, hit the cap)]."""
    from grpo_ablation.keyed_sampling import KeyedGumbel, evaluation_keys
    from grpo_ablation.sampling import generate_kwargs, protocol

    torch.manual_seed(seed)
    eos, pad = _eos_ids(tok, model), tok.pad_token_id
    flat = [p for p in prompts for _ in range(repeats)]
    seen: dict[tuple, int] = {}
    out: list[tuple[list[int], bool]] = []
    for i in range(0, len(flat), batch_size):
        batch = flat[i : i + batch_size]
        width = max(len(p) for p in batch)
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in batch])
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in batch])
        extra: dict[str, Any] = {}
        if temperature is not None and sampler == "keyed":
            keys = evaluation_keys(seed, batch, seen)
            extra["logits_processor"] = [KeyedGumbel(keys, temperature, horizon=max_new_tokens)]
        gen = model.generate(
            input_ids=ids,
            attention_mask=mask,
            **generate_kwargs(protocol(temperature, max_new_tokens)),
            pad_token_id=pad,
            eos_token_id=eos,
            **extra,
        )[:, width:]
        out += [_cut(row, eos) for row in gen.tolist()]
    return [out[j * repeats : (j + 1) * repeats] for j in range(len(prompts))]


def score(
    task: Any, tok: Any, rows: list[dict[str, Any]], completions: list[list[tuple[list[int], bool]]]
) -> dict[str, Any]:
    """Accuracy, lengths, cap share and group outcomes of completions (G per prompt) by the
    task's own reward (math-verify; None, a verifier failure, counts as unscored)."""
    reward = task.reward_function()
    texts = [[tok.decode(ids, skip_special_tokens=True) for ids, _ in c] for c in completions]
    G = len(completions[0])
    flat_rows = [r for r in rows for _ in range(G)]
    rewards = reward(
        [r["prompt"] for r in flat_rows],
        [t for group in texts for t in group],
        answer=[r["answer"] for r in flat_rows],
    )
    by_group = [rewards[j * G : (j + 1) * G] for j in range(len(rows))]
    lengths = [len(ids) for c in completions for ids, _ in c]
    capped = [cap for c in completions for _, cap in c]
    scored = [r for r in rewards if r is not None]
    n = len(rows)

    def share(cond) -> float:
        return sum(1 for g in by_group if cond([x or 0.0 for x in g])) / n

    return {
        "prompts": n,
        "G": G,
        "accuracy": sum(scored) / max(1, len(scored)),
        "unscored": len(rewards) - len(scored),
        "mean_length": statistics.fmean(lengths),
        "median_length": statistics.median(lengths),
        "at_cap": sum(capped) / len(capped),
        "mixed": share(lambda g: 0 < sum(g) < len(g)),
        "all_incorrect": share(lambda g: sum(g) == 0),
        "all_correct": share(lambda g: sum(g) == len(g)),
        "example": texts[0][0],
    }


# -- level -------------------------------------------------------------------------------------
def level(
    model_dir: Path,
    levels: list[tuple[int, int]] = LEVELS,
    n_prompts: int = 48,
    n_train: int = 200,
    max_new_tokens: int | None = None,
    batch_size: int = 48,
    sampler: str = "keyed",
    hot: float | None = 1.0,
) -> dict[str, Any]:
    """The base policy at each difficulty: greedy, and G samples at the preset's temperature
    (``hot``: also at that temperature, on the recommended level only)."""
    p = preset()
    cap = max_new_tokens or p["max_completion_length"]
    G, T = p["group_size"], p["temperature"]
    tok, model = load_policy(model_dir)
    rows_out = []
    with tempfile.TemporaryDirectory() as tmp:
        for lv in levels:
            task, rows = problem_rows(Path(tmp), lv, p["prompt_template"], n_train, n_prompts)
            test = rows["test"][:n_prompts]
            ids = prompt_ids(tok, task, test)
            common = dict(max_new_tokens=cap, batch_size=batch_size, sampler=sampler)
            started = time.perf_counter()
            greedy = score(task, tok, test, generate(model, tok, ids, temperature=None, **common))
            sampled = score(
                task, tok, test, generate(model, tok, ids, temperature=T, repeats=G, **common)
            )
            rows_out.append(
                {
                    "steps": lv[0],
                    "max_operand": lv[1],
                    "temperature": T,
                    "greedy": greedy,
                    "sampled": sampled,
                    "seconds": time.perf_counter() - started,
                }
            )
            print(_level_line(rows_out[-1]), flush=True)
        pick = recommend(rows_out)
        hot_row = None
        if hot is not None and pick is not None:
            task, rows = problem_rows(Path(tmp), pick, p["prompt_template"], n_train, n_prompts)
            test = rows["test"][:n_prompts]
            gen = generate(
                model,
                tok,
                prompt_ids(tok, task, test),
                temperature=hot,
                repeats=G,
                max_new_tokens=cap,
                batch_size=batch_size,
                sampler=sampler,
            )
            hot_row = {"steps": pick[0], "max_operand": pick[1], "temperature": hot}
            hot_row["sampled"] = score(task, tok, test, gen)
    return {
        "benchmark": "real_model_level",
        "what": "the base policy per word-problem level: greedy / sampled accuracy, lengths, "
        "groups mixed",
        "target": "most groups mixed at the preset's temperature, few completions at the cap",
        "model": str(model_dir),
        "config": {
            "n_prompts": n_prompts,
            "G": G,
            "temperature": T,
            "max_new_tokens": cap,
            "sampler": sampler,
            "prompt_template": p["prompt_template"],
            "chat_template": p["chat_template"],
            "threads": torch.get_num_threads(),
        },
        "rows": rows_out,
        "hot": hot_row,
        "recommended": list(pick) if pick else None,
    }


def recommend(rows: list[dict[str, Any]], max_cap_share: float = 0.5) -> tuple[int, int] | None:
    """The level whose sampled groups are most often mixed among those with most completions
    under the cap (ties: the easier level, listed first)."""
    fit = [r for r in rows if r["sampled"]["at_cap"] <= max_cap_share] or rows
    if not fit:
        return None
    best = max(fit, key=lambda r: r["sampled"]["mixed"])
    return best["steps"], best["max_operand"]


def _level_line(r: dict[str, Any]) -> str:
    g, s = r["greedy"], r["sampled"]
    return (
        f"| {r['steps']}, {r['max_operand']} | {g['accuracy']:.3f} | {s['accuracy']:.3f} "
        f"| {s['mean_length']:.1f} | {s['at_cap']:.3f} | {g['mean_length']:.1f} "
        f"| {g['at_cap']:.3f} | {s['mixed']:.3f} | {s['all_incorrect']:.3f} "
        f"| {s['all_correct']:.3f} | {g['unscored'] + s['unscored']} | {r['seconds']:.0f} |"
    )


def level_table(result: dict[str, Any]) -> str:
    c = result["config"]
    lines = [
        f"Levels: {c['n_prompts']} test prompts each, G={c['G']} at T={c['temperature']} "
        f"({c['sampler']}), cap {c['max_new_tokens']} tokens, {c['threads']} thread(s)",
        "",
        "| steps, max operand | greedy acc | sampled acc | sampled mean len | sampled at cap "
        "| greedy mean len | greedy at cap | groups mixed | all incorrect | all correct "
        "| unscored | s |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [_level_line(r) for r in result["rows"]]
    hot = result.get("hot")
    if hot:
        s = hot["sampled"]
        lines += [
            "",
            f"T={hot['temperature']} at level ({hot['steps']}, {hot['max_operand']}): "
            f"accuracy {s['accuracy']:.3f}, mean length {s['mean_length']:.1f}, at cap "
            f"{s['at_cap']:.3f}, mixed {s['mixed']:.3f}, all incorrect {s['all_incorrect']:.3f}, "
            f"all correct {s['all_correct']:.3f}",
        ]
    lines += ["", f"Recommended level (steps, max_operand): {result['recommended']}"]
    return "\n".join(lines)


# -- cost --------------------------------------------------------------------------------------
class _Clock:
    """Seconds spent in the model's ``generate`` (an instance attribute wrapping the bound
    method, which the project trainer's keyed sampler wraps in turn), the completion tokens it
    returned (up to the first eos), its decoding steps, and the keyed processor's time."""

    def __init__(self, model: Any, eos: list[int]) -> None:
        self.eos = eos
        self.generate_s = self.tokens = self.decode_steps = self.calls = self.prompt_width = 0
        self.keyed_s = self.hash_s = 0.0
        inner = model.generate

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            out = inner(*args, **kwargs)
            self.generate_s += time.perf_counter() - started
            width = kwargs["input_ids"].shape[1] if "input_ids" in kwargs else args[0].shape[1]
            new = out[:, width:].tolist()
            self.calls += 1
            self.prompt_width += width
            self.decode_steps += len(new[0]) if new else 0
            self.tokens += sum(len(_cut(row, self.eos)[0]) for row in new)
            return out

        model.generate = timed


@contextlib.contextmanager
def _timed_keyed(clock: _Clock) -> Iterator[None]:
    """Time KeyedGumbel's call (its noise included) and its noise blocks (the hash and the Gumbel
    transform), on the class, for one run."""
    from grpo_ablation.keyed_sampling import KeyedGumbel

    call, noise = KeyedGumbel.__call__, KeyedGumbel._noise

    def timed_call(self, *a: Any, **kw: Any) -> Any:
        started = time.perf_counter()
        try:
            return call(self, *a, **kw)
        finally:
            clock.keyed_s += time.perf_counter() - started

    def timed_noise(self, *a: Any, **kw: Any) -> Any:
        started = time.perf_counter()
        try:
            return noise(self, *a, **kw)
        finally:
            clock.hash_s += time.perf_counter() - started

    KeyedGumbel.__call__, KeyedGumbel._noise = timed_call, timed_noise
    try:
        yield
    finally:
        KeyedGumbel.__call__, KeyedGumbel._noise = call, noise


def _reset_peak_rss() -> bool:
    """Reset this process's peak resident set (Linux: ``echo 5 > /proc/self/clear_refs``), so that
    ``peak_memory`` measures one run; False where the kernel refuses it."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _trainer(
    kind: str,
    model_dir: Path,
    rows: list[dict[str, Any]],
    out: Path,
    steps: int,
    p: dict[str, Any],
    fixed: bool = False,
):
    """A trainer of ``kind`` (``keyed`` / ``stream``: the project's with that sampler; ``stock``:
    TRL's GRPOTrainer) on the preset's group, batch, cap, temperature and sampling protocol;
    ``fixed``: eos barred before the cap (min_new_tokens), the same work for every variant."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from grpo_ablation.design.options import TrainingConfig
    from grpo_ablation.sampling import SAMPLING
    from grpo_ablation.training.trainer import AblationGRPOTrainer

    G, cap, T = p["group_size"], p["max_completion_length"], p["temperature"]
    args = GRPOConfig(
        output_dir=str(out),
        per_device_train_batch_size=G * p["prompts_per_step"],
        num_generations=G,
        max_completion_length=cap,
        max_steps=steps,
        learning_rate=p["learning_rate"],
        temperature=T,
        top_k=SAMPLING["top_k"],
        top_p=SAMPLING["top_p"],
        min_p=SAMPLING["min_p"],
        repetition_penalty=SAMPLING["repetition_penalty"],
        beta=0.0,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        bf16=False,
        seed=0,
        data_seed=0,
        disable_tqdm=True,
        logging_steps=1,
        disable_dropout=True,
        log_level="error",
        loss_type="grpo",
        scale_rewards="group" if kind == "stock" else "none",
        gradient_checkpointing=False,
        generation_kwargs={"min_new_tokens": cap} if fixed else None,
    )
    tok, model = load_policy(model_dir)
    model.train()
    clock = _Clock(model, _eos_ids(tok, model))
    common: dict[str, Any] = dict(
        model=model,
        args=args,
        train_dataset=Dataset.from_list(rows),
        processing_class=tok,
        reward_funcs=p["reward"],
    )
    if kind == "stock":
        return GRPOTrainer(**common), clock
    options = TrainingConfig(
        group_size=G,
        prompts_per_step=p["prompts_per_step"],
        max_completion_length=cap,
        temperature=T,
        beta=0.0,
        learning_rate=p["learning_rate"],
        max_steps=steps,
        save_steps=steps,
        sampler=kind,
    )
    return AblationGRPOTrainer(**common, options=options, run_dir=out), clock


def _one_step_run(kind, model_dir, rows, out, steps, p, fixed=False) -> dict[str, Any]:
    """One training run of ``steps`` steps: its seconds, generation seconds, tokens and peak RSS
    (setup excluded from the times, included in the memory)."""
    from transformers import TrainerCallback

    from grpo_ablation.device import peak_memory

    reset = _reset_peak_rss()
    trainer, clock = _trainer(kind, model_dir, rows, out, steps, p, fixed)
    spans: list[float] = []

    class Steps(TrainerCallback):
        def on_step_begin(self, *a: Any, **k: Any) -> None:
            spans.append(-time.perf_counter())

        def on_step_end(self, *a: Any, **k: Any) -> None:
            spans[-1] += time.perf_counter()

    trainer.add_callback(Steps())
    with _timed_keyed(clock), contextlib.redirect_stdout(io.StringIO()):
        started = time.perf_counter()
        trainer.train()
        wall = time.perf_counter() - started
    step_s = sum(spans) / len(spans)
    gen_s = clock.generate_s / steps
    return {
        "variant": kind,
        "steps": steps,
        "train_wall_s": wall,
        "step_s": step_s,
        "generation_s": gen_s,
        "rest_s": step_s - gen_s,
        "tokens_per_step": clock.tokens / steps,
        "tokens_per_generation_s": clock.tokens / clock.generate_s,
        "decode_steps_per_step": clock.decode_steps / steps,
        "prompt_width": clock.prompt_width / max(1, clock.calls),
        "ms_per_decode_step": 1000 * clock.generate_s / max(1, clock.decode_steps),
        "keyed_processor_s": clock.keyed_s / steps,
        "keyed_hash_s": clock.hash_s / steps,
        "peak_rss_mb": peak_memory().host_rss_mb,
        "peak_rss_reset": reset,
    }


def cost(
    model_dir: Path,
    steps: int = 2,
    rounds: int = 2,
    level_: tuple[int, int] | None = None,
    profile: bool = False,
    max_new_tokens: int | None = None,
    lengths: tuple[str, ...] = LENGTHS,
) -> dict[str, Any]:
    """Seconds per GRPO step of the project trainer (keyed, stream) and stock TRL, interleaved
    with the order alternating, after one warm-up step; for each of ``lengths``: ``natural``
    (completions end at eos, as the preset trains) and ``fixed`` (eos barred before the cap, so
    every variant does the same work and the ratios price the samplers and trainers alone)."""
    p = preset()
    p["max_completion_length"] = max_new_tokens or p["max_completion_length"]
    lv = level_ or p["level"]
    cells = [(mode, kind) for mode in lengths for kind in VARIANTS]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        task, data = problem_rows(root, lv, p["prompt_template"], 200, 8)
        p["reward"] = task.reward_function()
        # As many prompts as a step takes: every step of every variant trains on the same
        # prompts (the project's sampler orders a data set otherwise than TRL's, and a longer
        # prompt is more work), whatever order each draws them in.
        rows = [
            {"prompt_id": r["prompt_id"], "prompt": task.prompt(r), "answer": r["answer"]}
            for r in data["train"][: p["prompts_per_step"]]
        ]
        # first-call costs (imports, kernels, allocator) out of the timed runs
        _one_step_run("stock", model_dir, rows, root / "warmup", 1, p)
        runs: dict[str, dict[str, list[dict[str, Any]]]] = {
            mode: {v: [] for v in VARIANTS} for mode in lengths
        }
        for r in range(rounds):
            for mode, kind in cells if r % 2 == 0 else list(reversed(cells)):
                out = root / f"{mode}-{kind}{r}"
                run = _one_step_run(kind, model_dir, rows, out, steps, p, mode == "fixed")
                runs[mode][kind].append(run | {"lengths": mode})
                print(json.dumps(runs[mode][kind][-1]), flush=True)
        profiled = _profile(model_dir, rows, root / "profile", p) if profile else None

    def ratio(mode: str, a: str, b: str, key: str) -> float:
        pairs = zip(runs[mode][a], runs[mode][b], strict=True)
        return statistics.median(x[key] / y[key] for x, y in pairs)

    return {
        "benchmark": "real_model_cost",
        "what": "seconds per GRPO step on the CPU: project trainer keyed / stream, stock TRL",
        "target": "keyed step_s within 1.1x of stream and of stock (fixed lengths: same work)",
        "model": str(model_dir),
        "config": {
            "steps": steps,
            "rounds": rounds,
            "G": p["group_size"],
            "prompts_per_step": p["prompts_per_step"],
            "max_completion_length": p["max_completion_length"],
            "temperature": p["temperature"],
            "level": list(lv),
            "threads": torch.get_num_threads(),
            "lengths": list(lengths),
        },
        "runs": runs,
        "medians": {
            mode: {
                v: {k: statistics.median(x[k] for x in runs[mode][v]) for k in _COST_KEYS}
                for v in VARIANTS
            }
            for mode in lengths
        },
        "ratios": {
            mode: {
                f"{a}/{b} {key}": ratio(mode, a, b, key)
                for a, b in (("keyed", "stream"), ("keyed", "stock"), ("stream", "stock"))
                for key in ("step_s", "generation_s", "ms_per_decode_step", "rest_s")
            }
            for mode in lengths
        },
        "profile": profiled,
    }


_COST_KEYS = (
    "step_s",
    "generation_s",
    "rest_s",
    "prompt_width",
    "decode_steps_per_step",
    "tokens_per_step",
    "tokens_per_generation_s",
    "ms_per_decode_step",
    "keyed_processor_s",
    "keyed_hash_s",
    "peak_rss_mb",
)


def _profile(model_dir: Path, rows: list[dict[str, Any]], out: Path, p) -> str:
    """cProfile of one keyed step: the 25 functions with the most own time, then the keyed
    sampler's own functions."""
    trainer, _ = _trainer("keyed", model_dir, rows, out, 1, p)
    prof = cProfile.Profile()
    with contextlib.redirect_stdout(io.StringIO()):
        prof.enable()
        trainer.train()
        prof.disable()
    text = io.StringIO()
    stats = pstats.Stats(prof, stream=text).sort_stats("tottime")
    stats.print_stats(25)
    stats.print_stats("keyed_sampling")
    return text.getvalue()


def cost_table(result: dict[str, Any]) -> str:
    c = result["config"]
    lines = [
        f"Cost: G={c['G']} x {c['prompts_per_step']} prompts per step, cap "
        f"{c['max_completion_length']}, T={c['temperature']}, level {tuple(c['level'])}, "
        f"{c['steps']} steps x {c['rounds']} rounds, {c['threads']} thread(s); medians",
    ]
    for mode, medians in result["medians"].items():
        lines += [
            "",
            f"lengths: {mode}",
            "",
            "| variant | s / step | generation s | rest s | prompt width | decode steps "
            "| tokens / step | tokens / gen s | ms / decode step | keyed processor s (hash) "
            "| peak RSS MB |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for v in VARIANTS:
            x = medians[v]
            lines.append(
                f"| {v} | {x['step_s']:.2f} | {x['generation_s']:.2f} | {x['rest_s']:.2f} "
                f"| {x['prompt_width']:.0f} | {x['decode_steps_per_step']:.1f} "
                f"| {x['tokens_per_step']:.0f} | {x['tokens_per_generation_s']:.1f} "
                f"| {x['ms_per_decode_step']:.1f} | {x['keyed_processor_s']:.2f} "
                f"({x['keyed_hash_s']:.2f}) | {x['peak_rss_mb']:.0f} |"
            )
    lines += ["", "| ratio (median of the rounds) | " + " | ".join(result["ratios"]) + " |"]
    lines += ["|---|" + "---|" * len(result["ratios"])]
    first = next(iter(result["ratios"].values()))
    for k in first:
        values = " | ".join(f"{r[k]:.3f}" for r in result["ratios"].values())
        lines.append(f"| {k} | {values} |")
    return "\n".join(lines)


def bench_level(model_dir: Path = DEFAULT_MODEL) -> dict[str, Any]:
    """``level`` for benchmarks.bench (skipped without the converted model folder)."""
    if not (model_dir / "config.json").exists():
        return {"benchmark": "real_model_level", "skipped": f"no model folder at {model_dir}"}
    return level(model_dir)


def bench_cost(model_dir: Path = DEFAULT_MODEL) -> dict[str, Any]:
    """``cost`` for benchmarks.bench (skipped without the converted model folder)."""
    if not (model_dir / "config.json").exists():
        return {"benchmark": "real_model_cost", "skipped": f"no model folder at {model_dir}"}
    return cost(model_dir)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--only", choices=("level", "cost"), default=None)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    parser.add_argument("--prompts", type=int, default=48, help="level: test prompts per level")
    parser.add_argument("--max-new-tokens", type=int, default=None, help="default: the preset's")
    parser.add_argument("--batch-size", type=int, default=48, help="level: rows per generate")
    parser.add_argument("--sampler", choices=("keyed", "stream"), default="keyed")
    parser.add_argument("--no-hot", action="store_true", help="level: skip T=1.0")
    parser.add_argument(
        "--levels", default=None, help="level: e.g. '1,5 1,9' (steps,max_operand each)"
    )
    parser.add_argument("--steps", type=int, default=2, help="cost: steps per run")
    parser.add_argument("--rounds", type=int, default=2, help="cost: interleaved rounds")
    parser.add_argument(
        "--lengths", nargs="+", choices=LENGTHS, default=list(LENGTHS), help="cost: modes"
    )
    parser.add_argument("--profile", action="store_true", help="cost: cProfile one keyed step")
    a = parser.parse_args()
    torch.set_num_threads(a.threads)
    levels = (
        [tuple(int(x) for x in lv.split(",")) for lv in a.levels.split()] if a.levels else LEVELS
    )
    results = []
    if a.only in (None, "level"):
        r = level(
            a.model,
            levels,
            n_prompts=a.prompts,
            max_new_tokens=a.max_new_tokens,
            batch_size=a.batch_size,
            sampler=a.sampler,
            hot=None if a.no_hot else 1.0,
        )
        results.append(r)
        print(level_table(r), flush=True)
    if a.only in (None, "cost"):
        r = cost(
            a.model,
            steps=a.steps,
            rounds=a.rounds,
            profile=a.profile,
            max_new_tokens=a.max_new_tokens,
            lengths=tuple(a.lengths),
        )
        results.append(r)
        print(cost_table(r), flush=True)
        if r["profile"]:
            print(r["profile"])
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
