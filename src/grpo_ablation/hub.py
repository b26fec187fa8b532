"""The hub and the offline rule: compute jobs work offline, from the cache the prefetch rule filled
(``work_offline``, set by every process's ``bootstrap``), and load a hub model or data set from its
cached snapshot at a pinned revision (``hub_snapshot``). Only prefetch goes online."""

from __future__ import annotations

import os
from pathlib import Path

# Compute jobs work offline, from the cache the prefetch rule filled: these are set by default in
# every job (a user's own setting wins; nothing here ever unsets them). Only prefetch goes online.
OFFLINE_VARS = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
# vLLM reports usage to its servers unless told not to: a node without internet would wait on it.
QUIET_VARS = ("VLLM_NO_USAGE_STATS", "DO_NOT_TRACK")


# vLLM, Triton and torch.compile keep compiled kernels under the home folder by default: on a
# cluster a shared, quota-bound file system that concurrent jobs write at once. A job keeps them
# in the node's temporary folder (SLURM's per-job TMPDIR where the site sets one).
CACHE_VARS = {
    "VLLM_CACHE_ROOT": "vllm",
    "TRITON_CACHE_DIR": "triton",
    "TORCHINDUCTOR_CACHE_DIR": "inductor",
}


def work_offline() -> None:
    """Set the offline and no-telemetry variables and the kernel caches' folders unless the user
    set them (before datasets, lm-eval or vLLM import)."""
    import tempfile

    for var in (*OFFLINE_VARS, *QUIET_VARS):
        os.environ.setdefault(var, "1")
    root = Path(tempfile.gettempdir()) / f"grpo-ablation-{os.getuid()}"
    for var, name in CACHE_VARS.items():
        os.environ.setdefault(var, str(root / name))


def hub_snapshot(
    repo_id: str, revision: str | None, repo_type: str = "model", download: bool = False
) -> Path:
    """The local folder of ``repo_id`` at ``revision`` in the hub cache (``download``: fetch it
    first; only the prefetch rule does). Jobs load this folder, never the bare id: offline, a
    bare id needs a ``refs/main`` that a commit-pinned download does not write, and online it
    would read ``main``, not the pinned commit."""
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    # Offline (HF_HUB_OFFLINE), a download reads the cache alone. huggingface-hub 1.x (the GPU
    # lock's) does not fall back to the cache by itself for a commit hash whose file listing it
    # did not cache: it raises OfflineModeIsEnabled.
    local = not download or constants.is_offline_mode()
    try:
        folder = snapshot_download(
            repo_id, repo_type=repo_type, revision=revision, local_files_only=local
        )
    except LocalEntryNotFoundError as err:
        raise FileNotFoundError(
            f"{repo_type} {repo_id} at revision {revision or 'main'} is not in the hub cache "
            f"{constants.HF_HUB_CACHE}: run the prefetch rule with this HF_HOME"
        ) from err
    return Path(folder)
