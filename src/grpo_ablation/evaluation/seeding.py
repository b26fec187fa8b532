"""The seed of one evaluation job, keyed by the unit it evaluates."""

from __future__ import annotations

import hashlib


def evaluation_seed(seed: int, *, run_seed: int | None = None, draw: int | None = None) -> int:
    """The seed one evaluation job runs with (lm-eval's four seeds, the keyed sampler's keys):
    ``evaluation.seed`` mixed with the unit evaluated, so that units do not share their
    sampled-metric noise (the analysis takes the noise of its units as independent).

    A run's evaluation (every checkpoint, the validation split, the curve policies) is keyed by its
    run seed (``design.run_seed``: a function of (draw, seed)), so the cells of one (draw, seed)
    keep common random numbers, as they do in training, and differ from every other (draw, seed);
    a base policy's by its draw. The single base policy of a config without draws keeps
    ``evaluation.seed`` itself. The mixing is a hash with a tag per kind, so a run seed never
    meets a draw's seed; 32 bits, numpy's seed range."""
    if run_seed is not None and draw is not None:
        raise ValueError("an evaluation is keyed by a run seed or by a draw, not both")
    if run_seed is None and draw is None:
        return int(seed)
    kind, value = ("run", run_seed) if run_seed is not None else ("draw", draw)
    digest = hashlib.sha256(f"evaluation,{int(seed)},{kind},{int(value)}".encode()).digest()
    return int.from_bytes(digest[:4], "little")
