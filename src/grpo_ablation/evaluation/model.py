"""The lm-eval model of a checkpoint under the evaluation protocol, and what is patched into it:
the stripped generation config, the eos stop, keyed sampled tokens, tempered log-likelihoods for
the exact task, timing of generation; lm-eval's seeds and the library versions recorded."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

from grpo_ablation.evaluation.task_folders import exact_tokens
from grpo_ablation.sampling import neutral_generation_config, stop_token_ids


def evaluation_versions() -> dict[str, str]:
    out = {}
    for lib in ("lm_eval", "transformers", "torch", "datasets"):
        try:
            out[lib] = metadata.version(lib.replace("_", "-"))
        except metadata.PackageNotFoundError:
            out[lib] = "absent"
    return out


def load_lm(
    path: Path | str,
    device: str,
    batch_size: int,
    dtype: str,
    revision: str | None = None,
    backend: str = "hf",
    seed: int = 0,
) -> Any:
    hub = {"revision": revision} if revision else {}
    if backend == "vllm":  # GPUs only; not run by the tests here
        from lm_eval.models.vllm_causallms import VLLM

        if device != "cuda":
            raise ValueError("evaluation.backend 'vllm' needs compute.device cuda")
        # add_bos_token=False as for HFLM below. generation_config="vllm": the engine's neutral
        # defaults, not the checkpoint's file; which also drops the file's extra eos ids, so the
        # stop ids are given with every request (vllm_stops).
        lm = VLLM(
            pretrained=str(path),
            dtype=dtype,
            batch_size=batch_size,
            seed=seed,
            add_bos_token=False,
            gpu_memory_utilization=0.8,
            generation_config="vllm",
            **hub,
        )
        from transformers import GenerationConfig

        checkpoint = GenerationConfig.from_pretrained(str(path), **hub)
        vllm_stops(lm, stop_token_ids(lm.tokenizer.eos_token_id, checkpoint.eos_token_id))
        return lm, {"not read": "vLLM engine with generation_config='vllm'"}
    from lm_eval.models.huggingface import HFLM

    # add_bos_token=False: the prompt is tokenized as TRL tokenizes it (no added special tokens).
    lm = HFLM(
        pretrained=str(path),
        device=device,
        batch_size=batch_size,
        dtype=dtype,
        add_bos_token=False,
        **hub,
    )
    ignored = neutral_generation_config(lm.model)  # the protocol is ours, never the checkpoint's
    tok, gen = lm.tokenizer, lm.model.generation_config
    if tok.eos_token_id is None:
        raise ValueError(f"{path}: tokenizer has no eos token; generate_until needs one")
    # Stopping works on ids (task_folders' docstring): the ones training stops at.
    gen.eos_token_id = stop_token_ids(tok.eos_token_id, gen.eos_token_id)
    if gen.pad_token_id is None:
        gen.pad_token_id = tok.pad_token_id
    return lm, ignored


def vllm_stops(lm: Any, ids: list[int]) -> None:
    """Make lm-eval's vLLM requests stop where training stops and decode as HFLM decodes: every
    request's SamplingParams gets ``stop_token_ids`` (lm-eval gives only the eos *string*, and vLLM
    with generation_config="vllm" knows only the tokenizer's eos id) and ``skip_special_tokens``
    (lm-eval keeps special tokens in the text, where the answer rule would read past the end)."""
    inner = lm.modify_gen_kwargs

    def modify(gen_kwargs: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        out, until, max_gen_toks = inner(gen_kwargs, *args, **kwargs)
        return out | {"stop_token_ids": list(ids), "skip_special_tokens": True}, until, max_gen_toks

    lm.modify_gen_kwargs = modify


@contextlib.contextmanager
def without_env_probe() -> Iterator[None]:
    """Skip lm-eval's per-call environment dump (``pip list`` and ``git`` subprocesses).

    It costs ~0.7 s per checkpoint and nothing is lost: versions are recorded in results.json.
    """
    import lm_eval.evaluator as ev

    saved = {
        name: getattr(ev, name)
        for name in ("add_env_info", "get_git_commit_hash")
        if hasattr(ev, name)
    }
    try:
        for name in saved:
            setattr(ev, name, lambda *args, **kwargs: None)
        yield
    finally:
        for name, fn in saved.items():
            setattr(ev, name, fn)


def time_generation(lm: Any) -> list[float]:
    """Wrap ``lm.generate_until`` so the seconds spent generating accumulate in the returned cell."""
    spent = [0.0]
    inner = lm.generate_until

    def timed(*args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - t

    lm.generate_until = timed
    return spent


def ready_for_exact(lm: Any, manifest: dict[str, Any], backend: str, ckpt: str) -> None:
    """Check that the enumeration holds for this checkpoint's tokenizer, and make lm-eval's
    log-likelihoods those of the sampling distribution softmax(logits / T)."""
    got = exact_tokens(lm.tokenizer)
    if got != manifest["exact"]:
        raise ValueError(
            f"{ckpt}: the exact task was written for tokens {manifest['exact']} but this "
            f"checkpoint's tokenizer has {got}; write the tasks again for this tokenizer"
        )
    temperature = float(manifest["temperature"])
    if backend != "hf":
        if temperature != 1.0:
            raise ValueError("exact metric at temperature != 1 needs evaluation.backend hf")
        return
    inner = lm._model_call  # HFLM's forward for log-likelihoods (generation does not use it)

    def tempered(*args: Any, **kwargs: Any) -> Any:
        return inner(*args, **kwargs) / temperature

    lm._model_call = tempered


def keyed_generation(lm: Any, seed: int, backend: str = "hf") -> None:
    """Draw lm-eval's sampled tokens by keyed Gumbel-max (``grpo_ablation.keyed_sampling``): the
    key of a row is (seed, its prompt's tokens, how many times that prompt was sampled before in
    this evaluation), so each checkpoint meets the same noise on the same (prompt, repeat). With
    vLLM the key seeds the request instead."""
    from grpo_ablation.keyed_sampling import KeyedGumbel, evaluation_keys, seeded_requests

    if backend == "vllm":
        vllm_generate, vllm_seen = lm._model_generate, {}

        def seeded(requests: list[list[int]], generate: bool = False, sampling_params: Any = None):
            if not generate or sampling_params is None:
                return vllm_generate(requests, generate, sampling_params)
            params = (
                sampling_params
                if isinstance(sampling_params, list)
                else [sampling_params] * len(requests)
            )
            # Only sampled requests are keyed and counted as repeats (a batch may hold greedy ones
            # too: lm-eval's vLLM batches by length, not by sampling settings).
            drawn = [i for i, p in enumerate(params) if p.temperature]
            keys = evaluation_keys(seed, [requests[i] for i in drawn], vllm_seen)
            seeded = dict(
                zip(drawn, seeded_requests([params[i] for i in drawn], keys), strict=True)
            )
            return vllm_generate(
                requests, generate, [seeded.get(i, p) for i, p in enumerate(params)]
            )

        lm._model_generate = seeded
        return
    inner, seen, pad = lm._model_generate, {}, lm.tokenizer.pad_token_id

    def keyed(context: Any, max_length: int, stop: list[str], **kwargs: Any) -> Any:
        if not kwargs.get("do_sample"):
            return inner(context, max_length, stop, **kwargs)
        rows = []
        for ids in context.tolist():
            start = next((i for i, t in enumerate(ids) if t != pad), len(ids))
            rows.append(ids[start:])  # lm-eval pads on the left
        processor = KeyedGumbel(evaluation_keys(seed, rows, seen), kwargs.get("temperature", 1.0))
        return inner(context, max_length, stop, logits_processor=[processor], **kwargs)

    lm._model_generate = keyed


def lm_eval_seeds(seed: int) -> dict[str, int]:
    """lm-eval's four seeds, all set to ``seed``."""
    return {
        "random_seed": seed,
        "numpy_random_seed": seed,
        "torch_random_seed": seed,
        "fewshot_random_seed": seed,
    }
