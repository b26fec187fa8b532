"""How transformers' ``generate`` runs in training (``compute.generation_cache`` and
``compute.generation_weights``): its KV cache, torch.compile of its decoding step, and the weights
it reads. None of it changes the sampling protocol or the keyed noise; the objective record states
what ran.
"""

from __future__ import annotations

from typing import Any

import torch

# transformers' cache_implementation for each generation_cache (None: its dynamic default).
CACHE_IMPLEMENTATIONS = {"dynamic": None, "static": "static", "static_compiled": "static"}


def compile_generation(generation_config: Any, generation_cache: str) -> None:
    """Turn torch.compile of the decoding step on in ``generation_config`` (TRL's, which turns it
    off) for ``static_compiled``; on any device, the CPU included (transformers compiles on GPUs
    alone unless told). The prefill and the logits processors run outside the compiled step."""
    if generation_cache != "static_compiled":
        return
    from transformers import CompileConfig

    compile_config = CompileConfig(fullgraph=False)
    compile_config._compile_all_devices = True  # not an argument of its constructor
    generation_config.disable_compile = False
    generation_config.compile_config = compile_config


class GenerationWeights:
    """A bfloat16 copy of the policy for ``generate`` (``generation_weights: bfloat16``), refreshed
    from the master weights whenever the optimizer step has moved since its last refresh, so each
    generation batch reads its step's weights rounded to bfloat16. Built on first use from the
    unwrapped model (not deep-copied: a prepared model's forward is accelerate's autocast wrapper,
    bound to the original)."""

    def __init__(self) -> None:
        self.model: Any = None
        self.step: int | None = None

    def policy(self, master: Any, step: int) -> Any:
        """The copy holding ``master``'s weights of optimizer step ``step``."""
        if self.model is None:
            self.model = type(master)._from_config(master.config, dtype=torch.bfloat16)
            self.model.to(master.device).eval().requires_grad_(False)
            self.model.generation_config = master.generation_config
        if self.step != step:
            self.refresh(master)
            self.step = step
        return self.model

    @torch.no_grad()
    def refresh(self, master: Any) -> None:
        """Every parameter and buffer of ``master`` cast into the copy (one pass, no allocation)."""
        ours = dict(self.model.named_parameters()) | dict(self.model.named_buffers())
        theirs = dict(master.named_parameters()) | dict(master.named_buffers())
        if ours.keys() != theirs.keys():
            raise RuntimeError(
                "the bfloat16 copy for generation and the policy name other tensors: "
                f"{sorted(ours.keys() ^ theirs.keys())[:4]}"
            )
        for name, tensor in ours.items():
            tensor.copy_(theirs[name])
