"""The disk a design's checkpoints need (``grpo-ablation disk``, the cost probe, the run's own
statement before its first job), and the parameters of a model folder's weights. Imports neither
torch nor transformers, so the Snakefile can say it before a run.

Disk model (``checkpoint_disk_bytes``): a checkpoint holds the weights (``n_params`` x bytes of the
saved dtype) and, where kept, AdamW's state: two moment tensors (``exp_avg``, ``exp_avg_sq``) per
parameter. ``torch.optim.AdamW`` creates them with ``torch.zeros_like(param)``, so they have the
*parameter's* dtype: bfloat16 parameters get bfloat16 moments (2 x 2 = 4 bytes per parameter),
float32 parameters (also under ``bf16=True`` autocast, where the parameters stay float32) get
float32 moments (8 bytes per parameter). The per-tensor ``step`` scalars, the scheduler, RNG state
and tokenizer are ignored (kilobytes). ``train.train`` keeps the policy's parameters in float32
whatever ``compute.dtype`` (bfloat16 is autocast), so the project's own runs save float32 weights
and float32 moments: ``--dtype float32``.
"""

from __future__ import annotations

import math
from pathlib import Path

from grpo_ablation.device import OPTIMIZER_STATE_POLICIES as POLICIES

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "float64": 8}
ADAMW_MOMENTS = 2  # exp_avg and exp_avg_sq, each shaped and typed like the parameter


def checkpoint_disk_bytes(
    n_params: int,
    weight_bytes_per_param: int,
    optimizer_bytes_per_param: int,
    checkpoints_per_run: int,
    runs: int,
    policy: str = "newest",
    peak: bool = False,
) -> int:
    """Bytes of checkpoint weights and optimizer state over ``runs`` finished runs.

    ``optimizer_bytes_per_param`` is the optimizer state per parameter (AdamW: 2 x the parameter
    dtype's bytes, see ``adamw_bytes_per_param``). ``"all"``: every checkpoint holds weights and
    optimizer state. ``"newest"``: every checkpoint holds weights, one per run holds the optimizer
    state. ``peak=True`` adds, for ``"newest"``, the moment between a save and the pruning of the
    previous checkpoint, when a run holds two optimizer states (all runs at once, at worst)."""
    if policy not in POLICIES:
        raise ValueError(f"unknown optimizer-state policy {policy!r}; expected one of {POLICIES}")
    if (
        min(n_params, weight_bytes_per_param, checkpoints_per_run, runs) < 1
        or optimizer_bytes_per_param < 0
    ):
        raise ValueError("sizes and counts must be positive")
    weights = checkpoints_per_run * weight_bytes_per_param
    if policy == "all":
        optimizer = checkpoints_per_run * optimizer_bytes_per_param
    else:
        optimizer = min(2 if peak else 1, checkpoints_per_run) * optimizer_bytes_per_param
    return runs * n_params * (weights + optimizer)


def weights_parameters(folder: Path) -> int | None:
    """The parameters in a model folder's safetensors weights (read from their headers), None
    where it holds none."""
    from safetensors import safe_open

    n = 0
    for file in sorted(Path(folder).glob("*.safetensors")):
        with safe_open(str(file), "numpy") as f:
            for name in f.keys():  # noqa: SIM118
                n += math.prod(f.get_slice(name).get_shape())
    return n or None


def adamw_bytes_per_param(param_dtype: str) -> int:
    """AdamW's moments per parameter: two tensors in the parameter's dtype."""
    return ADAMW_MOMENTS * DTYPE_BYTES[param_dtype]


def _fmt(n: int) -> str:
    return f"{n:,} B = {n / 1e9:.1f} GB = {n / 2**30:.1f} GiB"


def disk_report(
    n_params: int, dtype: str, optimizer_dtype: str | None, checkpoints_per_run: int, runs: int
) -> str:
    """The disk checkpoints need, optimizer state kept in the newest checkpoint of each run vs in
    all of them (AdamW: two moments per parameter, in the parameter dtype; ``grpo-ablation disk``)."""
    for name in (dtype, optimizer_dtype or dtype):
        if name not in DTYPE_BYTES:
            raise SystemExit(f"disk: dtype {name!r}; expected one of {sorted(DTYPE_BYTES)}")
    w = DTYPE_BYTES[dtype]
    o = adamw_bytes_per_param(optimizer_dtype or dtype)
    args = (n_params, w, o, checkpoints_per_run, runs)
    return "\n".join(
        [
            f"{runs} runs x {checkpoints_per_run} checkpoints, {n_params:,} parameters: weights "
            f"{w} B/param ({dtype}), AdamW state {o} B/param ({optimizer_dtype or dtype})",
            f"newest: {_fmt(checkpoint_disk_bytes(*args, 'newest'))}",
            f"        peak while saving {_fmt(checkpoint_disk_bytes(*args, 'newest', peak=True))}",
            f"all:    {_fmt(checkpoint_disk_bytes(*args, 'all'))}",
        ]
    )
