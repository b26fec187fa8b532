"""lm-eval's samples scored by the declared answer rule: one row per completion (or, for the exact
task, per prompt), each checked against lm-eval's own aggregate; lm-eval's built-in benchmarks
as labelled extra columns."""

from __future__ import annotations

import json
from typing import Any

# How every results.json and table labels an lm-eval built-in benchmark (never the headline).
EXTERNAL_PROTOCOL = "external benchmark, its own protocol"


def score_samples(
    samples: list[dict], role: str, task: str, tokenizer: Any, max_gen_toks: int, rule: Any
) -> list[dict]:
    rows = []
    samples = sorted(samples, key=lambda s: s["doc_id"])
    # Token counts of every raw generation in one tokenizer call (one call per text costs ~0.1 s
    # per checkpoint, a visible share of a tiny model's evaluation).
    texts = [text for s in samples for text in s["resps"][0]]
    counts = iter(len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"])
    for s in samples:
        # One instance per document whose resps hold its `repeats` raw generations.
        gold = str(s["target"]).strip()
        context = s["arguments"][0][0]  # the exact text the model was prompted with
        for rep, text in enumerate(s["resps"][0]):
            n_tok = next(counts)
            rows.append(
                {
                    "task": role,
                    "task_name": task,
                    "doc_id": s["doc_id"],
                    "repeat": rep,
                    **s["doc"],
                    "target": s["target"],
                    "context": context,
                    "generated": text,
                    "extracted": rule.extract(text),
                    "correct": int(rule.is_correct(text, gold)),
                    "completion_chars": len(text),
                    "completion_tokens": n_tok,
                    # eos counts inside max_gen_toks: a text of max_gen_toks tokens never emitted eos.
                    "truncated": int(n_tok >= max_gen_toks),
                }
            )
    return rows


def score_exact(
    samples: list[dict], task: str, res: dict[str, Any], exact: Any, bounded: bool
) -> list[dict]:
    """One row per document: its exact P(correct) (and unresolved mass where ``bounded``),
    recomputed from the logged log-likelihoods and checked against lm-eval's aggregate."""
    rows = []
    for s in sorted(samples, key=lambda s: s["doc_id"]):
        lls = [float(r[0]) for r in s["filtered_resps"]]
        kinds = [kind for kind, _ in exact.doc_continuations(s["doc"], bounded)]
        rows.append(
            {
                "task": "exact",
                "task_name": task,
                "doc_id": s["doc_id"],
                **s["doc"],
                "target": s["target"],
                "context": s["arguments"][0][0],
                **exact.probabilities(kinds, lls),
                "n_continuations": len(lls),
            }
        )
    for metric in ("p_correct", "p_unresolved") if bounded else ("p_correct",):
        value, recomputed = res[f"{metric},none"], mean([r[metric] for r in rows])
        if abs(value - recomputed) > 1e-9:
            raise RuntimeError(f"{task}: lm-eval {metric}={value} but samples give {recomputed}")
    return rows


def mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


# Headline metric of a built-in task, in lm-eval's order of preference.
EXTERNAL_METRICS = (
    "exact_match,strict-match",
    "exact_match,flexible-extract",
    "math_verify,none",
    "exact_match,none",
    "acc,none",
)


def run_external(lm: Any, tasks: list[str], limit: int | None, seeds: dict[str, int]) -> dict:
    """lm-eval built-in benchmarks on an already loaded model, one labelled entry per task.

    Their data come from the Hugging Face cache (filled by the prefetch rule): jobs run offline.
    """
    import lm_eval
    from lm_eval.tasks import TaskManager

    out = lm_eval.simple_evaluate(
        model=lm,
        tasks=list(tasks),
        task_manager=TaskManager(),
        limit=limit,
        verbosity="WARNING",
        **seeds,
    )
    entries = {}
    for task in tasks:
        res = out["results"].get(task, {})
        metric = next((m for m in EXTERNAL_METRICS if isinstance(res.get(m), int | float)), None)
        entries[task] = {
            "value": float(res[metric]) if metric else None,
            "metric": metric,
            "protocol": EXTERNAL_PROTOCOL,
            "n_shot": out.get("n-shot", {}).get(task),
            "results": json.loads(json.dumps(res, default=str)),
        }
    return entries


def score_tasks(
    out: dict[str, Any],
    roles: dict[str, str],
    run_roles: list[str],
    tokenizer: Any,
    rule: Any,
    exact: Any,
) -> tuple[list[dict], dict[str, Any]]:
    """One checkpoint's lm-eval output (``out``) scored: every sample row and, per task role but
    the exact ones, its metric, stderr and sample counts (checked against the rows)."""
    rows: list[dict] = []
    metrics: dict[str, Any] = {}
    for role, task in roles.items():
        if role not in run_roles:
            continue
        if role.startswith("exact"):
            bounded = role == "exact_bounded"
            samples, res = out["samples"][task], out["results"][task]
            rows += score_exact(samples, task, res, exact, bounded)
            continue
        cfg = out["configs"][task]
        max_gen = int(cfg["generation_kwargs"]["max_gen_toks"])
        task_rows = score_samples(out["samples"][task], role, task, tokenizer, max_gen, rule)
        rows += task_rows
        res = out["results"][task]
        metric = "correct"
        value = res[f"{metric},answer"]
        # lm-eval's number and the per-sample log must tell the same story.
        recomputed = mean([r["correct"] for r in task_rows])
        if abs(value - recomputed) > 1e-9:
            raise RuntimeError(f"{task}: lm-eval {metric}={value} but samples give {recomputed}")
        stderr = res.get(f"{metric}_stderr,answer")
        metrics[role] = {
            "value": value,
            "stderr": stderr if isinstance(stderr, float) else None,
            "n_examples": len({r["doc_id"] for r in task_rows}),
            "n_samples": len(task_rows),
            "repeats": int(cfg.get("repeats", 1)),
            "mean_completion_chars": mean([r["completion_chars"] for r in task_rows]),
            "truncation_rate": mean([r["truncated"] for r in task_rows]),
            "generation_kwargs": cfg["generation_kwargs"],
        }
    return rows, metrics


def checkpoint_numbers(
    step: int, ckpt: str, rows: list[dict], metrics: dict[str, Any], manifest: dict[str, Any]
) -> dict[str, Any]:
    """The numbers of one checkpoint, first in its results.json: the headline accuracies (the
    sampled one exact where the task enumerates its accepted completions), mean@k and pass@k, the
    incorrect completions' length, and the protocol's k, temperature and length."""
    sampled_rows = [r for r in rows if r["task"] == "sampled"]
    by_doc: dict[int, int] = {}
    for r in sampled_rows:
        by_doc[r["doc_id"]] = max(by_doc.get(r["doc_id"], 0), r["correct"])
    exact_rows = [r for r in rows if r["task"] == "exact"]
    exact_p = mean([r["p_correct"] for r in exact_rows]) if exact_rows else None
    unresolved = [r["p_unresolved"] for r in exact_rows if r["p_unresolved"] is not None]
    return {
        "step": step,
        "checkpoint": str(ckpt),
        "greedy_accuracy": metrics["greedy"]["value"],
        # The headline sampled metric: expected accuracy under the sampled protocol, exact
        # where the task's accepted completions are enumerable, else estimated by mean@k.
        "sampled_accuracy": metrics["sampled"]["value"] if exact_p is None else exact_p,
        "sampled_metric": manifest["sampled_metric"],
        # P(correct) lies in [exact, exact + unresolved] per prompt (evaluation/exact.py);
        # the unresolved mass is computed at the last checkpoint of a run (null elsewhere).
        "sampled_exact": exact_p,
        "sampled_exact_unresolved": mean(unresolved) if unresolved else None,
        "sampled_exact_unresolved_max": max(unresolved) if unresolved else None,
        "greedy_accuracy_stderr": metrics["greedy"]["stderr"],
        "sampled_mean_at_k": metrics["sampled"]["value"],
        "sampled_mean_at_k_stderr": metrics["sampled"]["stderr"],
        # Any of the k correct; computed from the samples, not reported by lm-eval.
        "sampled_pass_at_k": mean(list(by_doc.values())),
        # Mean length in tokens (eos not counted) of the incorrect sampled completions.
        "sampled_incorrect_tokens": mean(
            [r["completion_tokens"] for r in sampled_rows if not r["correct"]]
        ),
        "k": metrics["sampled"]["repeats"],
        "temperature": float(metrics["sampled"]["generation_kwargs"]["temperature"]),
        "max_gen_toks": manifest["max_gen_toks"],
        "n_examples": metrics["greedy"]["n_examples"],
    }
