"""Log-likelihoods of many continuations of one context, scored as a prefix tree in one pass.

The exact task asks, per prompt, for ~11 accepted continuations ``"." * n + gold + eos`` and (its
bounded twin) ~75 unresolved prefixes, all of which share the prompt and their dots: scored one
request a row (lm-eval's way), a policy's forward passes see each prompt ~11 times and its dots
~6 times (15.8 of a study run's 24 s of evaluation, docs/measurements.md). Here the requests of
one context become a trie of their tokens, one row: the context and every continuation prefix
that some continuation goes on from are its nodes, each once, each attending to itself and its
ancestors at the position of its depth (a tree-shaped attention mask); a continuation token's
log-probability is read from its parent node's output. A leaf (the last token of a
continuation, every unresolved one) costs no input at all. A request list's plan (trees, masks,
gather indices) is kept for the next policy of the process, which asks the same requests.

The numbers are lm-eval's log-likelihoods up to float rounding, not bit for bit (another batch
shape and attention mask: up to 7e-6 on a prompt's P(correct) of the default, docs/
measurements.md, 2026-12-07); the greedy flag is lm-eval's (every continuation token is its
parent's argmax).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

Request = tuple[Sequence[int], Sequence[int]]  # (context ids, continuation ids)


@dataclass(frozen=True)
class Tree:
    """The input nodes of one context's trie: each node's token, position and parent (-1 for the
    first), and for each continuation the nodes whose outputs predict its tokens."""

    tokens: list[int]
    positions: list[int]
    parents: list[int]
    reads: list[list[int]]  # per continuation: the node predicting each of its tokens
    targets: list[list[int]]  # per continuation: its tokens


def build_tree(context: Sequence[int], continuations: Sequence[Sequence[int]]) -> Tree:
    """The trie of ``continuations`` after ``context``. Only nodes with a child are inputs: the
    context's tokens, and each continuation prefix that another token follows."""
    if not context or any(not c for c in continuations):
        raise ValueError("a request needs a non-empty context and continuation")
    tokens, positions = list(context), list(range(len(context)))
    parents = list(range(-1, len(context) - 1))
    children: dict[tuple[int, int], int] = {}  # (node, token) -> the node that token makes
    reads = []
    for continuation in continuations:
        node, read = len(context) - 1, []
        for i, token in enumerate(continuation):
            read.append(node)
            if i == len(continuation) - 1:
                break  # a leaf: predicted by its parent, no input of its own
            child = children.get((node, token))
            if child is None:
                child = len(tokens)
                children[(node, token)] = child
                tokens.append(token)
                positions.append(positions[node] + 1)
                parents.append(node)
            node = child
        reads.append(read)
    return Tree(tokens, positions, parents, reads, [list(c) for c in continuations])


def ancestry(tree: Tree) -> list[list[int]]:
    """Each node's ancestors and itself: what it attends to."""
    out: list[list[int]] = []
    for i, parent in enumerate(tree.parents):
        out.append([*(out[parent] if parent >= 0 else []), i])
    return out


@dataclass(frozen=True)
class Batch:
    """One forward pass over several trees, ready to run: the right-padded inputs (a padding node
    attends to itself only), and where each continuation token's log-probability is read."""

    ids: Any  # [B, W] token ids
    positions: Any  # [B, W]
    mask: Any  # [B, 1, W, W] additive: 0 where a node attends, the dtype's minimum elsewhere
    rows: Any  # per continuation token: its tree's row, the node predicting it, the token
    nodes: Any
    tokens: Any
    owners: Any  # per continuation token: its continuation's place in ``requests``
    requests: list[int]  # the requests of this batch, in the order their answers come


def batch(trees: Sequence[Tree], members: Sequence[Sequence[int]], dtype: Any) -> Batch:
    """The forward pass of ``trees``; ``members[b]`` are the request indices of tree b's
    continuations, in its order."""
    import numpy as np
    import torch

    width = max(len(t.tokens) for t in trees)
    ids = np.zeros((len(trees), width), dtype=np.int64)
    positions = np.zeros((len(trees), width), dtype=np.int64)
    allowed = np.broadcast_to(np.eye(width, dtype=bool), (len(trees), width, width)).copy()
    rows, nodes, tokens, owners, requests = [], [], [], [], []
    for b, tree in enumerate(trees):
        n = len(tree.tokens)
        ids[b, :n] = tree.tokens
        positions[b, :n] = tree.positions
        for i, seen in enumerate(ancestry(tree)):
            allowed[b, i, seen] = True
        for i, read, target in zip(members[b], tree.reads, tree.targets, strict=True):
            rows += [b] * len(target)
            nodes += read
            tokens += target
            owners += [len(requests)] * len(target)
            requests.append(i)
    mask = torch.zeros(allowed.shape, dtype=dtype)
    mask.masked_fill_(~torch.from_numpy(allowed), torch.finfo(dtype).min)
    return Batch(
        torch.from_numpy(ids),
        torch.from_numpy(positions),
        mask[:, None],
        *(torch.tensor(x, dtype=torch.long) for x in (rows, nodes, tokens, owners)),
        requests,
    )


def score_batch(
    b: Batch, forward: Callable[[Any, Any, Any], Any], softmax_dtype: Any, device: Any
) -> list[tuple[float, bool]]:
    """(log-likelihood, greedy) of each continuation of the batch, in ``b.requests`` order:
    ``forward(ids, mask, positions)`` returns the logits of the batch's nodes."""
    import torch
    import torch.nn.functional as F

    logits = forward(b.ids.to(device), b.mask.to(device), b.positions.to(device))
    logprobs = F.log_softmax(logits, dim=-1, dtype=softmax_dtype)
    rows, nodes, tokens, owners = (x.to(device) for x in (b.rows, b.nodes, b.tokens, b.owners))
    picked = logprobs[rows, nodes, tokens]
    missed = (logprobs.argmax(dim=-1)[rows, nodes] != tokens).to(picked.dtype)
    count = len(b.requests)
    sums = torch.zeros(count, dtype=picked.dtype, device=device).index_add_(0, owners, picked)
    misses = torch.zeros(count, dtype=picked.dtype, device=device).index_add_(0, owners, missed)
    return [(ll, m == 0) for ll, m in zip(sums.tolist(), misses.tolist(), strict=True)]


def plan(requests: Sequence[Request], trees_per_batch: int, dtype: Any) -> list[Batch]:
    """The forward passes of ``requests``: grouped by context, each group one tree,
    ``trees_per_batch`` trees a pass (largest first, so rows of a pass are of a size)."""
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, (context, _) in enumerate(requests):
        groups.setdefault(tuple(context), []).append(i)
    trees = [
        (build_tree(context, [requests[i][1] for i in members]), members)
        for context, members in groups.items()
    ]
    trees.sort(key=lambda tm: -len(tm[0].tokens))
    return [
        batch([t for t, _ in chunk], [m for _, m in chunk], dtype)
        for chunk in (trees[i : i + trees_per_batch] for i in range(0, len(trees), trees_per_batch))
    ]


# Plans of the request lists seen in this process (a run's policies ask the same ones): the
# latest few, keyed by the requests themselves.
_PLANS: dict[Any, list[Batch]] = {}
_PLANS_KEPT = 8


def tree_loglikelihoods(
    requests: Sequence[Request],
    forward: Callable[[Any, Any, Any], Any],
    trees_per_batch: int,
    softmax_dtype: Any = None,
    device: Any = "cpu",
    mask_dtype: Any = None,
) -> list[tuple[float, bool]]:
    """(log-likelihood, greedy) of each request, in its order, scored as prefix trees; the
    attention mask in ``mask_dtype``, the model's (torch's default dtype if None): SDPA on a GPU
    takes no float32 mask for bfloat16 queries."""
    import torch

    dtype = mask_dtype or torch.get_default_dtype()
    key = (tuple((tuple(c), tuple(k)) for c, k in requests), trees_per_batch, dtype)
    batches = _PLANS.pop(key, None) or plan(requests, trees_per_batch, dtype)
    _PLANS[key] = batches  # the latest last
    while len(_PLANS) > _PLANS_KEPT:
        del _PLANS[next(iter(_PLANS))]
    out: list[tuple[float, bool] | None] = [None] * len(requests)
    for b in batches:
        for i, answer in zip(
            b.requests, score_batch(b, forward, softmax_dtype, device), strict=True
        ):
            out[i] = answer
    return out  # type: ignore[return-value]
