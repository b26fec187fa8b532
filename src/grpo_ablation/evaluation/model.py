"""The lm-eval model of a checkpoint under the evaluation protocol, and what is patched into it:
the stripped generation config, the eos stop, keyed sampled tokens, tempered log-likelihoods for
the exact task, timing of generation; lm-eval's seeds and the library versions recorded."""

from __future__ import annotations

import contextlib
import copy
import gc
import hashlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from grpo_ablation.design.options import EvaluationConfig
from grpo_ablation.evaluation.task_folders import exact_tokens
from grpo_ablation.layout import weight_files
from grpo_ablation.samplers import SAMPLERS
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
    backend: str = EvaluationConfig.backend,
    seed: int = EvaluationConfig.seed,
) -> Any:
    hub = {"revision": revision} if revision else {}
    if backend == "vllm":  # GPUs only; not run by the tests here
        from lm_eval.models.vllm_causallms import VLLM

        if device != "cuda":
            raise ValueError("evaluation.backend 'vllm' needs compute.device cuda")
        # add_bos_token=False as for HFLM below. generation_config="vllm": the engine's neutral
        # defaults, not the checkpoint's file; which also drops the file's extra eos ids, so the
        # stop ids are given with every request (vllm_stops).
        built = VLLM(
            pretrained=str(path),
            dtype=dtype,
            batch_size=batch_size,
            seed=seed,
            add_bos_token=False,
            gpu_memory_utilization=0.8,
            generation_config="vllm",
            **hub,
        )
        return _vllm_view(_Engine(built, str(path)), str(path), hub), NOT_READ
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
    lm._grpo_built_for = str(path)  # what load_weights_into checks a later checkpoint against
    remember_tokens(lm)
    remember_pairs(lm)
    batched_loglikelihoods(lm)
    prefix_tree_loglikelihoods(lm)
    ignored = neutral_generation_config(lm.model)  # the protocol is ours, never the checkpoint's
    tok, gen = lm.tokenizer, lm.model.generation_config
    if tok.eos_token_id is None:
        raise ValueError(f"{path}: tokenizer has no eos token; generate_until needs one")
    # Stopping works on ids (task_folders' docstring): the ones training stops at.
    gen.eos_token_id = stop_token_ids(tok.eos_token_id, gen.eos_token_id)
    if gen.pad_token_id is None:
        gen.pad_token_id = tok.pad_token_id
    return lm, ignored


# Token ids of the strings lm-eval encoded in this process, per tokenizer (``remember_tokens``),
# up to a budget of characters remembered (about 10 bytes a character with the ids: ~200 MB).
_TOKENIZED: dict[tuple[Any, ...], list[int]] = {}
_BUDGET_CHARS = 20_000_000
_remembered_chars = 0


def remember_tokens(lm: Any) -> None:
    """Make ``lm.tok_encode`` (HFLM's) remember the ids of each string it encoded, for every model
    of this process with the same tokenizer. lm-eval encodes each log-likelihood request's context
    and context + continuation again for every checkpoint: 63,016 calls taking 2.0 s of a 16.7 s
    evaluation job of the default (2026-12-03), for strings that are the same at every checkpoint
    of a run. The key is everything ``tok_encode`` reads: the tokenizer (its whole definition and
    ``split_special_tokens``), ``add_bos_token``, the prefix token and the arguments. Strings
    beyond the budget (``_BUDGET_CHARS``) are encoded each time, as before. A slow (Python)
    tokenizer has no definition to key on, and is left alone."""
    backend = getattr(lm.tokenizer, "backend_tokenizer", None)
    if backend is None:
        return
    definition = hashlib.sha256(backend.to_str().encode()).hexdigest()
    # split_special_tokens: set on the backend at every encode, not part of its definition
    split = getattr(lm.tokenizer, "split_special_tokens", None)
    tokenizer = (
        type(lm.tokenizer).__name__,
        definition,
        split,
        lm.add_bos_token,
        lm.prefix_token_id,
    )
    encode = lm.tok_encode

    def tok_encode(string: str, *args: Any, **kwargs: Any) -> list[int]:
        global _remembered_chars
        try:
            key = (tokenizer, string, args, tuple(sorted(kwargs.items())))
            hash(key)
        except TypeError:  # an argument that cannot be a key: encode it as it comes
            return encode(string, *args, **kwargs)
        ids = _TOKENIZED.get(key)
        if ids is None:
            ids = list(encode(string, *args, **kwargs))
            if _remembered_chars + len(string) <= _BUDGET_CHARS:
                _TOKENIZED[key] = ids
                _remembered_chars += len(string)
        return list(ids)  # the caller's own list, as from the tokenizer

    lm.tok_encode = tok_encode


def remember_pairs(lm: Any) -> None:
    """Make ``lm._encode_pair`` (lm-eval's split of a log-likelihood request into context and
    continuation ids) remember its result per (context, continuation), for every model of this
    process with the same tokenizer: the exact task asks the same 2,195 pairs of each of a
    run's 14 test-split policies, and each pair's two ``tok_encode`` calls still went through
    the remembered ids above (103,168 calls in one study-protocol job, 2026-12-06). Keyed as
    ``remember_tokens`` keys, which the pair's ids depend on only; the caller gets lists of its
    own."""
    backend = getattr(lm.tokenizer, "backend_tokenizer", None)
    if backend is None or lm.backend != "causal":
        return
    tokenizer = (
        type(lm.tokenizer).__name__,
        hashlib.sha256(backend.to_str().encode()).hexdigest(),
        getattr(lm.tokenizer, "split_special_tokens", None),
        lm.add_bos_token,
        lm.prefix_token_id,
    )
    encode_pair, loglikelihood = lm._encode_pair, lm.loglikelihood

    def encoded_at_once(requests: list[Any], *args: Any, **kwargs: Any) -> Any:
        missing = {
            req.args
            for req in requests
            if req.args[0] != "" and (tokenizer, *req.args) not in _PAIRS
        }
        if len(_PAIRS) + len(missing) <= _PAIRS_BUDGET:
            for pair, ids in zip(missing, encode_pairs(lm, list(missing)), strict=True):
                _PAIRS[(tokenizer, *pair)] = ids
        return loglikelihood(requests, *args, **kwargs)

    def remembered(context: str, continuation: str) -> tuple[list[int], list[int]]:
        key = (tokenizer, context, continuation)
        ids = _PAIRS.get(key)
        if ids is None:
            ids = encode_pair(context, continuation)
            if len(_PAIRS) < _PAIRS_BUDGET:
                _PAIRS[key] = (list(ids[0]), list(ids[1]))
            return ids
        return list(ids[0]), list(ids[1])

    lm._encode_pair = remembered
    lm.loglikelihood = encoded_at_once


def encode_pairs(lm: Any, pairs: list[tuple[str, str]]) -> list[tuple[list[int], list[int]]]:
    """lm-eval's ``_encode_pair`` of a causal model for each (non-empty context, continuation),
    its strings encoded in one call of the tokenizer: the context's trailing spaces moved to the
    continuation, the whole and the context encoded as ``HFLM.tok_encode`` encodes them (its
    special-token setting, none for a string that starts with the prefix token's text), the
    continuation the whole's ids after the context's. 17,588 pairs one at a time took ~0.8 of an
    evaluation job's ~8 CPU s of the default (docs/measurements.md, 2026-12-07)."""
    from lm_eval.models.utils import _add_special_kwargs

    split = []
    for context, continuation in pairs:
        n_spaces = len(context) - len(context.rstrip())
        if n_spaces > 0:
            context, continuation = context[:-n_spaces], context[-n_spaces:] + continuation
        split.append((context, context + continuation))
    bos_text = lm.tokenizer.decode(lm.prefix_token_id)  # lm-eval's has_bos_prefix
    strings = {s for both in split for s in both}
    plain = sorted(s for s in strings if not s.startswith(bos_text))
    prefixed = sorted(strings.difference(plain))
    ids: dict[str, list[int]] = {}
    for group, kwargs in (
        (plain, _add_special_kwargs(None, lm.add_bos_token)),
        (prefixed, {"add_special_tokens": False}),
    ):
        if group:
            ids.update(zip(group, lm.tokenizer(group, **kwargs)["input_ids"], strict=True))
    return [(list(ids[c]), ids[w][len(ids[c]) :]) for c, w in split]


_PAIRS: dict[tuple[Any, ...], tuple[list[int], list[int]]] = {}
_PAIRS_BUDGET = 1_000_000  # pairs remembered (a short pair ~0.5 KB): beyond it, encoded each time


def batched_loglikelihoods(lm: Any) -> None:
    """Replace HFLM's ``_loglikelihood_tokens`` by one that gives the same numbers bit for bit
    with less Python work per request. lm-eval's runs ~10 tensor operations per request around
    each batch's forward pass (a slice, an argmax, a new tensor, a comparison, a gather, a sum):
    with the tokenization, 3.8 CPU s of a study-protocol run's 25.5 s evaluation job besides
    15.8 s of forward passes, 2.9 s with this and ``remember_pairs`` (docs/measurements.md,
    2026-12-06). Here the batches are lm-eval's own (its ``Collator``,
    order, one-token-continuation groups and batch size), each built and forwarded as lm-eval
    builds it (right-padded with zeros, ``log_softmax`` over the whole batch in the model's
    dtype), so the forward pass and its log-probabilities are the same tensors; the argmax is
    taken once a batch (per position, so the same indices), the continuation's log-probabilities
    gathered once a batch (exact copies), and each request's sum is still ``sum()`` over its own
    contiguous row of them, as lm-eval sums its gathered ``[1, n]`` tensor. Causal models with a
    fixed batch size only (the evaluation's); anything else keeps lm-eval's."""
    if lm.backend != "causal" or not isinstance(lm.batch_size, int):
        return
    if getattr(lm.model.config, "_attn_implementation", None) not in TREE_ATTENTION:
        return  # flash attention, say, reads no 4D mask: every node would see every other
    import torch
    import torch.nn.functional as F
    from lm_eval.models.utils import Collator

    def loglikelihood_tokens(
        requests: list[tuple[tuple[str, str], list[int], list[int]]],
        disable_tqdm: bool = False,
        override_bs: int | None = None,
    ) -> list[tuple[float, bool]]:
        # lm-eval's order and groups (huggingface.py, _loglikelihood_tokens): longest first,
        # requests whose context + continuation[:-1] agree scored from one row.
        re_ord = Collator(
            requests,
            sort_fn=lambda req: (-len(req[1] + req[2]), tuple(req[1] + req[2])),
            group_by="contexts" if lm.logits_cache else None,
            group_fn=lambda req: req[-2] + req[-1][:-1],
        )
        res: list[tuple[float, bool]] = []
        # properties lm-eval reads per request (max_length checks the config each time)
        max_length, device = lm.max_length, lm.device
        for chunk in re_ord.get_batched(n=lm.batch_size, batch_fn=None):
            rows = []
            for _, context_enc, continuation_enc in chunk:
                assert len(context_enc) > 0 and 0 < len(continuation_enc) <= max_length
                # truncated from the left as lm-eval does; its last token is never an input
                rows.append((context_enc + continuation_enc)[-(max_length + 1) :][:-1])
            width = max(len(r) for r in rows)
            batch = torch.tensor(
                [r + [0] * (width - len(r)) for r in rows], dtype=torch.long, device=device
            )
            logprobs = F.log_softmax(lm._model_call(batch), dim=-1, dtype=lm.softmax_dtype)
            greedy = logprobs.argmax(dim=-1).tolist()
            for (request_str, context_enc, cont), row, logp, best in zip(
                chunk, rows, logprobs, greedy, strict=True
            ):
                end = len(row)
                start = end - len(cont)
                logits = logp[start:end].unsqueeze(0)
                for string, cont_toks, _ in re_ord.get_cache(
                    req_str=request_str, cxt_toks=context_enc, cont_toks=cont, logits=logits
                ):
                    n = len(cont_toks)
                    # lm-eval: greedy match on the last n positions, log-probabilities gathered
                    # from the first n (the same positions unless a group's splits differ)
                    index = torch.tensor(cont_toks, dtype=torch.long, device=device)
                    picked = logp[start : start + n].gather(1, index.unsqueeze(-1)).squeeze(-1)
                    answer = (float(picked.sum()), best[start:end][-n:] == list(cont_toks))
                    res.append(answer)
                    if string is not None:
                        lm.cache_hook.add_partial("loglikelihood", string, answer)
        return re_ord.get_original(res)

    lm._loglikelihood_tokens = loglikelihood_tokens


# The attention implementations that apply a 4D additive mask as given: the trees' mask.
TREE_ATTENTION = ("sdpa", "eager")


def prefix_tree_loglikelihoods(lm: Any) -> None:
    """Score HFLM's log-likelihood requests as prefix trees (``prefix_tree``): the requests of
    one context in one row, each shared token once. The exact task's requests of a policy are
    ~11 continuations of each prompt sharing it and their dots (~75 more for the bounded twin,
    which then cost no input at all): ~4x fewer input tokens for the exact task, ~25x for the
    bounded one. The same log-likelihoods up to float rounding (~1e-6), not bit for bit as
    ``batched_loglikelihoods``: the reported numbers are the same at their printed precision
    (docs/measurements.md, 2026-12-07). The logits are divided by the sampling temperature
    ``ready_for_exact`` sets. Requests longer than the model's context keep the batched path
    (lm-eval truncates them from the left, which a tree does not), as do models that are not
    causal, batch sizes that are not fixed and attention that reads no 4D mask."""
    if lm.backend != "causal" or not isinstance(lm.batch_size, int):
        return
    if getattr(lm.model.config, "_attn_implementation", None) not in TREE_ATTENTION:
        return  # flash attention, say, reads no 4D mask: every node would see every other
    import torch

    from grpo_ablation.evaluation.prefix_tree import tree_loglikelihoods

    batched = lm._loglikelihood_tokens

    def forward(ids: Any, mask: Any, positions: Any) -> Any:
        with torch.no_grad():
            logits = lm.model(input_ids=ids, attention_mask=mask, position_ids=positions).logits
        temperature = getattr(lm, TEMPERATURE_ATTRIBUTE, 1.0)
        return logits if temperature == 1.0 else logits / temperature

    def loglikelihood_tokens(
        requests: list[tuple[tuple[str, str], list[int], list[int]]],
        disable_tqdm: bool = False,
        override_bs: int | None = None,
    ) -> list[tuple[float, bool]]:
        max_length = lm.max_length  # a property that reads the config each time
        if any(len(ctx) + len(cont) > max_length for _, ctx, cont in requests):
            return batched(requests, disable_tqdm, override_bs)
        pairs = [(ctx, cont) for _, ctx, cont in requests]
        res = tree_loglikelihoods(
            pairs, forward, lm.batch_size, lm.softmax_dtype, lm.device, lm.model.dtype
        )
        for (string, _, _), answer in zip(requests, res, strict=True):
            if string is not None:
                lm.cache_hook.add_partial("loglikelihood", string, answer)
        return res

    lm._loglikelihood_tokens = loglikelihood_tokens


# The sampling temperature the exact task's log-likelihoods are tempered by (``ready_for_exact``).
TEMPERATURE_ATTRIBUTE = "_grpo_temperature"


# What a vLLM checkpoint's own generation config leaves unread (results.json records it).
NOT_READ = {"not read": "vLLM engine with generation_config='vllm'"}
# The files a checkpoint evaluated on another checkpoint's engine must share with it: the
# architecture, and the tokenizer and chat template that lm-eval's VLLM read when it was built.
SHARED_FILES = (
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
    "chat_template.jinja",
    "chat_template.json",
)
# Keys of those JSON files that say where from, how or by what they were loaded and saved, not
# what they hold (a tokenizer loaded from a folder saves local_files_only and is_local).
_PROVENANCE_KEYS = {
    "_name_or_path",
    "name_or_path",
    "transformers_version",
    "_commit_hash",
    "local_files_only",
    "is_local",
    "cache_dir",
    "revision",
    "token",
}


@dataclass(frozen=True)
class _Engine:
    """lm-eval's VLLM as built, never patched (it owns the vLLM engine, its tokenizer and
    settings), and the checkpoint it was built for."""

    lm: Any
    built_for: str


def _vllm_view(engine: _Engine, path: str, hub: dict[str, Any]) -> Any:
    """lm-eval's model of checkpoint ``path`` on ``engine``: a shallow copy of the unpatched VLLM
    (the engine, tokenizer and settings shared), patched here with the checkpoint's stops; the
    caller's patches (sampler_generation, ready_for_exact, time_generation) go on the copy too. So an
    engine reused for the next checkpoint gets that checkpoint's patches once, never a second
    layer over the last one's (sampler_generation's repeat counts start again)."""
    from transformers import GenerationConfig

    lm = copy.copy(engine.lm)
    lm._grpo_engine = engine
    checkpoint = GenerationConfig.from_pretrained(path, **hub)
    vllm_stops(lm, stop_token_ids(lm.tokenizer.eos_token_id, checkpoint.eos_token_id))
    return lm


def _shared_content(folder: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in SHARED_FILES:
        f = folder / name
        if not f.is_file():
            continue
        if f.suffix == ".json":
            held = json.loads(f.read_text())
            if isinstance(held, dict):
                held = {k: v for k, v in held.items() if k not in _PROVENANCE_KEYS}
            out[name] = held
        else:
            out[name] = f.read_bytes()
    return out


def load_weights_into(lm: Any, path: Path | str) -> tuple[Any, dict[str, Any]]:
    """lm-eval's model of the local checkpoint ``path`` on the model ``lm`` (one ``load_lm`` or
    this function returned), without building another: ``path`` must share the architecture and
    tokenizer of the checkpoint ``lm`` was built for (SHARED_FILES): the curve policies of one run
    do. ``lm`` is not to be used after.

    With HF (``_weights_into_hf``) the weights are copied into ``lm``'s model, which is returned,
    its patches kept (``ready_for_exact``'s too): for log-likelihoods only, since the generation
    config and the samplers' state are the first checkpoint's. With vLLM the running engine's
    weights are replaced by ``path``'s, its prefix cache emptied (its blocks hold the last
    weights' keys and values), and a new model object patched for ``path`` as ``load_lm``
    patches one.

    How (vLLM 0.31.0, the version envs/gpu-vllm.in pins; files of its wheel): lm-eval builds
    ``vllm.LLM(**model_args)``, whose engine core runs in a process of its own by default
    (VLLM_ENABLE_V1_MULTIPROCESSING=1: vllm/v1/engine/llm_engine.py:180-191), so no worker or model
    object is reachable from here: TRL's colocated ``llm_engine.model_executor.driver_worker.
    model_runner.model.load_weights`` needs the in-process engine (llm_engine.py:130-132) that
    ``distributed_executor_backend="external_launcher"`` forces (vllm/config/parallel.py:985-987).
    ``LLM.collective_rpc`` (vllm/entrypoints/llm.py:572-601) calls a worker method by name in
    either mode; its arguments travel as msgpack, so a method name and a string need no
    VLLM_ALLOW_INSECURE_SERIALIZATION (a callable, as ``LLM.apply_model`` sends, does:
    vllm/v1/serial_utils.py:220-234). The GPU worker's ``reload_weights(*args, **kwargs)``
    (vllm/v1/worker/gpu_worker.py:566-568) calls the model runner's ``reload_weights(
    weights_iterator=None, weights_path=None, is_checkpoint_format=True)`` (vllm/v1/worker/
    gpu_model_runner.py:5492-5580): with ``weights_path`` it points the model config at that folder
    (5532-5537) and loads its files with the engine's own loader into the model in place, the
    tensors keeping their storage so that captured CUDA graphs stay valid
    (vllm/model_executor/model_loader/reload/layerwise.py:366-369). ``LLM.reset_prefix_cache``
    (llm.py:802-807) then drops the blocks cached under the old weights. Checked against the
    source only: no GPU ran it here.
    """
    engine: _Engine | None = getattr(lm, "_grpo_engine", None)
    if engine is None:
        return _weights_into_hf(lm, Path(path)), NOT_READ_HF
    path = str(path)
    if _shared_content(Path(path)) != _shared_content(Path(engine.built_for)):
        raise ValueError(
            f"{path}: its config or tokenizer differs from {engine.built_for}'s, whose vLLM engine "
            "would evaluate it: evaluate it with an engine of its own (a process of its own)"
        )
    llm = engine.lm.model
    llm.collective_rpc("reload_weights", kwargs={"weights_path": path})
    if llm.reset_prefix_cache() is False:
        raise RuntimeError(f"{path}: vLLM did not reset its prefix cache after loading weights")
    return _vllm_view(engine, path, {}), NOT_READ


# What a checkpoint's own generation config says when its weights go into another's model.
NOT_READ_HF = {"not read": "weights loaded into the model of another checkpoint"}


def loadable_into(lm: Any, path: Path | str) -> bool:
    """Whether ``load_weights_into(lm, path)`` can give ``lm`` the weights of ``path`` (HF)."""
    return getattr(lm, "_grpo_engine", None) is None and not _not_loadable_into_hf(lm, Path(path))


def _not_loadable_into_hf(lm: Any, path: Path) -> str:
    """Why the weights of ``path`` cannot go into ``lm``'s model (empty if they can)."""
    built_for = getattr(lm, "_grpo_built_for", None)
    if built_for is None:
        return "its model was not built by load_lm"
    if _shared_content(path) != _shared_content(Path(built_for)):
        return f"its config or tokenizer differs from {built_for}'s"
    files = weight_files(path)
    if not files or any(f.suffix != ".safetensors" for f in files):
        return "its weights are not safetensors files"
    return ""


def _weights_into_hf(lm: Any, path: Path) -> Any:
    """``lm`` (an HFLM of ``load_lm``) with the weights of ``path``'s safetensors files copied into
    its model: the same tensors, bit for bit, as a model built from ``path`` holds; only the tied
    weights may be absent from the files (the one they are tied to is copied)."""
    from safetensors.torch import load_file

    refused = _not_loadable_into_hf(lm, path)
    if refused:
        raise ValueError(f"{path}: {refused}: load it with load_lm")
    state: dict[str, Any] = {}
    for f in weight_files(path):
        state.update(load_file(f))
    missing, unexpected = lm.model.load_state_dict(state, strict=False)
    tied = set(getattr(lm.model, "_tied_weights_keys", None) or ())
    if unexpected or set(missing) - tied:
        raise ValueError(f"{path}: weights missing {missing} or unexpected {unexpected}")
    lm._grpo_built_for = str(path)
    return lm


def release_lm(lm: Any | None) -> None:
    """Give back the memory ``lm`` (lm-eval's model, or None) holds once the caller drops it: a
    vLLM engine shut down (its engine-core process ends), then the garbage collected and torch's
    CUDA cache emptied. ``lm`` is not to be used after."""
    engine: _Engine | None = getattr(lm, "_grpo_engine", None)
    if engine is not None:
        llm = vars(engine.lm).pop("model", None)
        vars(lm).pop("model", None)
        core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
        if core is not None and hasattr(core, "shutdown"):
            core.shutdown()
        del llm, core
    gc.collect()
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()


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
    if backend != "hf" or temperature == 1.0:
        if temperature != 1.0:
            raise ValueError("exact metric at temperature != 1 needs evaluation.backend hf")
        return  # at T = 1 the logits are already the sampling distribution's (x / 1.0 == x)
    if getattr(lm, TEMPERATURE_ATTRIBUTE, None) == temperature:
        return  # made ready before (a model given the next checkpoint's weights)
    setattr(lm, TEMPERATURE_ATTRIBUTE, temperature)  # the prefix trees' forward
    inner = lm._model_call  # HFLM's forward for log-likelihoods (generation does not use it)

    def tempered(*args: Any, **kwargs: Any) -> Any:
        return inner(*args, **kwargs) / temperature

    lm._model_call = tempered


def sampler_generation(lm: Any, sampler: str, seed: int, backend: str) -> None:
    """Give lm-eval's sampled generation what the registered ``sampler`` adds
    (``grpo_ablation.samplers.SAMPLERS``): keyed draws by Gumbel-max noise whose key of a row is
    (seed, its prompt's tokens, how many times that prompt was sampled before in this
    evaluation), so each checkpoint meets the same noise on the same (prompt, repeat); with vLLM
    the key seeds the request instead. A sampler that adds nothing leaves lm-eval's draw."""
    entry = SAMPLERS[sampler]
    if backend == "vllm":
        if entry.vllm_arguments is None:
            return
        vllm_generate, vllm_seen, arguments = lm._model_generate, {}, entry.vllm_arguments

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
            given = arguments(
                seed, [requests[i] for i in drawn], vllm_seen, [params[i] for i in drawn]
            )
            seeded = dict(zip(drawn, given, strict=True))
            return vllm_generate(
                requests, generate, [seeded.get(i, p) for i, p in enumerate(params)]
            )

        lm._model_generate = seeded
        return
    if entry.hf_arguments is None:
        return
    inner, seen, pad, hf_arguments = (
        lm._model_generate,
        {},
        lm.tokenizer.pad_token_id,
        entry.hf_arguments,
    )

    def drawn(context: Any, max_length: int, stop: list[str], **kwargs: Any) -> Any:
        if not kwargs.get("do_sample"):
            return inner(context, max_length, stop, **kwargs)
        rows = []
        for ids in context.tolist():
            start = next((i for i, t in enumerate(ids) if t != pad), len(ids))
            rows.append(ids[start:])  # lm-eval pads on the left
        added = hf_arguments(seed, rows, seen, kwargs.get("temperature", 1.0))
        return inner(context, max_length, stop, **added, **kwargs)

    lm._model_generate = drawn


def lm_eval_seeds(seed: int) -> dict[str, int]:
    """lm-eval's four seeds, all set to ``seed``."""
    return {
        "random_seed": seed,
        "numpy_random_seed": seed,
        "torch_random_seed": seed,
        "fewshot_random_seed": seed,
    }
