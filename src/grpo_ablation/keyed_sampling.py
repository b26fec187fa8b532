"""Keyed sampling: each token's random draw is a function of which completion it belongs to.

A token is drawn by Gumbel-max: argmax_v (logits_v / T + g_v) is a draw from softmax(logits / T)
when the g_v are independent standard Gumbel variables. Here g_v = -log(-log u_v), with u_v
computed from a hash of (the completion's key, the token's position, v). The key names the
completion: (seed, generation step, prompt id, occurrence, slot in the group) in training, the
generation step being the index of the generation batch (the optimizer step divided by the
update epochs μ, so cells with another μ generate on the same prompts with the same noise),
(seed, prompt, repeat) in evaluation. So two runs with one seed draw the same completion wherever
their policies put the same token first, whatever random numbers anything else consumed before
(common random numbers across cells), and a resumed run draws what an uninterrupted one would.
With the global random stream instead (``stream``), one extra random number consumed anywhere
shifts every later draw, and cells decouple for reasons that have nothing to do with their
objectives.

The uniforms come from a 32-bit integer hash (lowbias32, by C. Wellons) computed in exact integer
arithmetic (uint32 numpy arrays on the CPU, several positions at once; int32 tensors on other
devices, whose two's-complement products wrap as uint32's do), so one key gives the same noise on
any device: u = (h + 1/2) / 2^32, which truncates
the Gumbel variable to [-3.13, 22.87] (each tail has probability about 1e-10). A hash is a
bijection of 32-bit words, so the noises of one token's vocabulary entries are distinct. A
(key, position) enters through two 32-bit words, so two positions share their whole noise
vector with probability 2^-64 per pair (with one word it was 2^-32: about one pair per
generation batch at 10^5 positions).

Only the draw changes: the processor sees the logits after every step the protocol applies
(none by default; see :mod:`grpo_ablation.sampling`) and returns a one-hot distribution on the
Gumbel-max token, which transformers' own sampling then picks with probability one. Training
generates greedily after it (:func:`picking_greedily`), which picks the same token without the
softmax and multinomial draw. On the CPU that draw took numbers from torch's global stream at
every token, so the shuffle TRL then draws from the same stream (the order in which the batch's
rows enter the loss: the same sum, rounded differently) depended on how long the step's
completions were. It no longer does. The change moved each run's numbers at the rounding level,
which training can amplify: of the default's 26 runs one diverged, by -0.025 greedy accuracy.
"""

from __future__ import annotations

import copy
import hashlib
import inspect
from typing import Any

import numpy as np
import torch

from grpo_ablation.sampling import SAMPLING_ONLY

_M32 = 0xFFFFFFFF
_M64 = (1 << 64) - 1


def completion_key(*parts: Any) -> int:
    """A 63-bit key naming one completion (the same parts give the same key everywhere; 63 bits
    so that it fits a signed int64 tensor)."""
    text = "\x1f".join(map(str, parts)).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little") >> 1


def _signed(word: int) -> int:
    """A 32-bit word as the int32 that holds its bits (two's complement)."""
    word &= _M32
    return word - (1 << 32) if word >> 31 else word


def _shifted_xor_(x: torch.Tensor, shift: int) -> None:
    # x ^= x >> shift as on uint32: int32's shift copies the sign bit, which the mask clears.
    high = x >> shift
    high &= _M32 >> shift
    x ^= high


def _hash32_(x: torch.Tensor) -> torch.Tensor:
    """lowbias32 in place on an int32 tensor of 32-bit words: its products wrap mod 2^32 (two's
    complement), so the words are uint32's, with one kernel a product where int64 took six."""
    _shifted_xor_(x, 16)
    x *= _signed(0x7FEB352D)
    _shifted_xor_(x, 15)
    x *= _signed(0x846CA68B)
    _shifted_xor_(x, 16)
    return x


def _int32(words: torch.Tensor) -> torch.Tensor:
    """Integer tensors of 32-bit words (int64 values in [0, 2^32), or any int32) as int32."""
    return words if words.dtype == torch.int32 else (words & _M32).to(torch.int32)


def hash32(x: torch.Tensor) -> torch.Tensor:
    """lowbias32 on int64 tensors holding 32-bit words (a bijection of [0, 2^32)), as int64."""
    return _hash32_(_int32(x)).to(torch.int64) & _M32


def hash32_int(x: int) -> int:
    """The same hash on a Python int (the reference the tensor version is tested against)."""
    x &= _M32
    x ^= x >> 16
    x = (x * 0x7FEB352D) & _M32
    x ^= x >> 15
    x = (x * 0x846CA68B) & _M32
    return x ^ (x >> 16)


def _hash32_np(x: np.ndarray) -> np.ndarray:
    """hash32 in place on a uint32 array (numpy's uint32 products wrap mod 2^32, which the
    tensor version emulates in int64): the same words in a third of the operations."""
    x ^= x >> 16
    x *= np.uint32(0x7FEB352D)
    x ^= x >> 15
    x *= np.uint32(0x846CA68B)
    x ^= x >> 16
    return x


# Salt of the second row word, so that it is not a function of the first one.
_SECOND = 0x9E3779B9


def row_words(keys: list[int], start: int, count: int) -> tuple[np.ndarray, np.ndarray]:
    """The two 32-bit words of each key's noise row at positions start .. start + count - 1:
    uint32 arrays (count, len(keys))."""
    k = np.array([key & _M64 for key in keys], dtype=np.uint64)
    low = (k & np.uint64(_M32)).astype(np.uint32)
    high = (k >> np.uint64(32)).astype(np.uint32)
    pos = np.arange(start, start + count, dtype=np.uint64) & np.uint64(_M32)
    at_first = _hash32_np(pos.astype(np.uint32))[:, None]
    at_second = _hash32_np(pos.astype(np.uint32) ^ np.uint32(_SECOND))[:, None]
    first = _hash32_np(low ^ _hash32_np(high ^ at_first))
    second = _hash32_np(high ^ _hash32_np(low ^ at_second))
    return first, second


# hash32 of the vocabulary indices, the same at every position: per vocabulary size (numpy) and
# per (vocabulary size, device) (tensors).
_COLUMNS_NP: dict[int, np.ndarray] = {}
_COLUMNS: dict[tuple[int, torch.device], torch.Tensor] = {}


def _columns_np(vocab: int) -> np.ndarray:
    col = _COLUMNS_NP.get(vocab)
    if col is None:
        col = _COLUMNS_NP[vocab] = _hash32_np(np.arange(vocab, dtype=np.uint32))
    return col


def _columns(vocab: int, device: torch.device) -> torch.Tensor:
    key = (vocab, device)
    col = _COLUMNS.get(key)
    if col is None:
        col = _COLUMNS[key] = _hash32_(torch.arange(vocab, dtype=torch.int32, device=device))
    return col


def hash_block(keys: list[int], start: int, count: int, vocab: int) -> np.ndarray:
    """h[j, row, v], uint32 (count, len(keys), vocab), whose (h + 1/2) / 2^32 is the uniform of
    (keys[row], start + j, v): the CPU's noise, several positions in one pass."""
    first, second = row_words(keys, start, count)
    h = _hash32_np(first[..., None] ^ _columns_np(vocab))
    h ^= second[..., None]
    return _hash32_np(h)


def _from_hash(h: torch.Tensor) -> torch.Tensor:
    """u = (h + 1/2) / 2^32 in float64 from int32 words h (exact: u has 33 significant bits, so
    any order of operations and any library gives these very numbers; float32's 24 would not).
    With the sign bit flipped, an int32 word is the uint32 one less 2^31, so u is that plus
    2^31 + 1/2, times 2^-32 (a power of two: exact)."""
    h ^= _signed(1 << 31)
    return h.double().add_(2.0**31 + 0.5).mul_(2.0**-32)


def _from_hash_np(h: np.ndarray) -> np.ndarray:
    """``_from_hash`` in numpy (the same exact numbers)."""
    u = h.astype(np.float64)
    u += 0.5
    u /= 2.0**32
    return u


def uniforms(keys: list[int], position: int, vocab: int, device: Any = "cpu") -> torch.Tensor:
    """u[row, v] in (0, 1), float64: a function of (keys[row], position, v) only. On the CPU
    the hash runs in numpy, elsewhere in tensors on the device; the same words either way."""
    device = torch.device(device)
    if device.type == "cpu":
        return torch.from_numpy(_from_hash_np(hash_block(keys, position, 1, vocab)[0]))
    words = device_row_words(keys, position, 1, device)
    return noise(words[0, 0], words[1, 0], vocab)


def device_row_words(keys: list[int], start: int, count: int, device: Any) -> torch.Tensor:
    """``row_words`` as one int32 tensor (2, count, len(keys)) on ``device``: one copy from the
    host for ``count`` positions."""
    first, second = row_words(keys, start, count)
    return torch.from_numpy(np.stack([first, second]).view(np.int32)).to(device)


def noise(first: torch.Tensor, second: torch.Tensor, vocab: int) -> torch.Tensor:
    """u[row, v] from a row's two 32-bit words (int32, or int64 in [0, 2^32)): two rows share
    their noise vector only if both words agree (2^-64 per pair), and within a row v -> u is
    one-to-one (hash32 is a bijection). On the words' device, with no copy to or from the host."""
    first, second = _int32(first), _int32(second)
    h = first[:, None] ^ _columns(vocab, first.device)[None, :]
    _hash32_(h)
    h ^= second[:, None]
    return _from_hash(_hash32_(h))


def _minus_gumbel(u: torch.Tensor) -> torch.Tensor:
    """log(-log u) = -g for uniforms u (float64), in place: elementwise, so a block of positions
    gives each position the numbers it would give alone (tests/test_keyed_sampling.py)."""
    return u.log_().neg_().log_()


def _gumbel_argmax(
    scores: torch.Tensor,
    minus_gumbel: torch.Tensor,
    temperature: float,
    work: torch.Tensor | None = None,
) -> torch.Tensor:
    """argmax_v (scores_v / T - log(-log u_v)), in float64, from ``minus_gumbel`` = log(-log u).
    ``work``: a contiguous float64 tensor of the scores' shape to compute in, reused across
    positions (the same operations on the same shapes as a fresh tensor, so the same numbers)."""
    x = torch.empty_like(minus_gumbel) if work is None else work
    if temperature == 1.0:  # division by 1 is exact: nothing to do
        torch.sub(scores, minus_gumbel, out=x)  # in float64: the scores widen exactly
    else:
        x.copy_(scores)
        x /= temperature
        x -= minus_gumbel
    return x.argmax(dim=-1)


def gumbel_choice(
    scores: torch.Tensor, keys: list[int], position: int, temperature: float
) -> torch.Tensor:
    """argmax_v (scores_v / T + g_v): one token per row, drawn from softmax(scores / T)."""
    u = uniforms(keys, position, scores.shape[-1], scores.device)
    return _gumbel_argmax(scores, _minus_gumbel(u), temperature)


# The CPU hashes the noise of several positions at once: at most this many words per block, and
# this many positions (up to the horizon, when the caller gives one; otherwise _UNBOUNDED_BLOCK).
_BLOCK_WORDS = 1 << 20
_MAX_BLOCK = 64
_UNBOUNDED_BLOCK = 16
# Other devices take the rows' two words of this many positions in one copy (8 bytes a row each).
_ROW_WORDS_BLOCK = 1024


class KeyedGumbel:
    """A transformers logits processor that makes the sampled token the keyed Gumbel-max one.

    ``keys`` holds one key per row of the batch ``generate`` receives; positions count from the
    length of the first call's input (the padded prompt). The returned scores are 0 on the chosen token and -inf
    elsewhere, so temperature and sampling afterwards leave the choice as it is. ``horizon``, the
    most positions ``generate`` will ask for (its max_new_tokens), only sizes the blocks of
    positions whose noise the CPU hashes together: the draws are the same without it.
    """

    # Devices whose noise numpy hashes on the host, blocks of positions at once; on any other the
    # tensors hash it where the scores are (a test sets it empty to run that path on the CPU).
    host_hashed: tuple[str, ...] = ("cpu",)

    def __init__(self, keys: list[int], temperature: float, horizon: int | None = None) -> None:
        self.keys, self.temperature = list(keys), float(temperature)
        self.horizon = horizon
        self.start: int | None = None
        self._block: tuple[int, int, torch.Tensor] | None = None  # first position, vocab, -g
        self._words: tuple[int, torch.Tensor] | None = None  # first position, device_row_words
        self._work: torch.Tensor | None = None  # _gumbel_argmax's

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if scores.shape[0] != len(self.keys):
            raise RuntimeError(
                f"keyed sampling got {scores.shape[0]} rows for {len(self.keys)} keys"
            )
        if self.start is None:
            self.start = input_ids.shape[1]
        position, vocab = input_ids.shape[1] - self.start, scores.shape[-1]
        if scores.device.type in self.host_hashed:
            minus_gumbel = self._noise(position, vocab)
        else:
            minus_gumbel = self._device_noise(position, vocab, scores.device)
        work = self._work
        if work is None or work.shape != scores.shape or work.device != scores.device:
            work = self._work = torch.empty_like(minus_gumbel)
        choice = _gumbel_argmax(scores, minus_gumbel, self.temperature, work)
        return torch.full_like(scores, -torch.inf).scatter_(1, choice[:, None], 0.0)

    def _device_noise(self, position: int, vocab: int, device: torch.device) -> torch.Tensor:
        """This position's log(-log u) hashed on ``device``. The rows' words come from the host
        once for a block of positions (the horizon's, up to _ROW_WORDS_BLOCK), so a token waits on
        no copy; the hash runs in int32, the narrowest type whose products wrap exactly, and the
        uniforms in float64, the narrowest that holds them."""
        words = self._words
        if (
            words is None
            or words[1].device != device
            or not 0 <= position - words[0] < len(words[1][0])
        ):
            within = self.horizon and position < self.horizon
            left = self.horizon - position if within else _UNBOUNDED_BLOCK
            count = min(left, _ROW_WORDS_BLOCK)
            words = self._words = (position, device_row_words(self.keys, position, count, device))
        j = position - words[0]
        return _minus_gumbel(noise(words[1][0, j], words[1][1, j], vocab))

    def _noise(self, position: int, vocab: int) -> torch.Tensor:
        """This position's log(-log u) (rows x vocab), from the block of positions hashed and
        transformed with it."""
        block = self._block
        if block is None or block[1] != vocab or not 0 <= position - block[0] < len(block[2]):
            left = self.horizon - position if self.horizon else _UNBOUNDED_BLOCK
            fits = _BLOCK_WORDS // max(1, len(self.keys) * vocab)
            count = max(1, min(left, fits, _MAX_BLOCK))
            u = torch.from_numpy(_from_hash_np(hash_block(self.keys, position, count, vocab)))
            block = self._block = (position, vocab, _minus_gumbel(u))
        return block[2][position - block[0]]


# transformers' LogitsProcessorList reads each processor's signature at every token (to decide
# whether to pass extra arguments); computed once here, inspect returns it at a third of the cost.
KeyedGumbel.__call__.__signature__ = inspect.signature(KeyedGumbel.__call__)  # type: ignore[attr-defined]


def picking_greedily(config: Any) -> Any:
    """A copy of ``config`` (a transformers ``GenerationConfig``) for a ``generate`` call whose
    tokens ``KeyedGumbel`` chooses: greedy, since the processor leaves one token at 0 and the rest
    at -inf, so argmax picks the token a sampled call would (with probability one). The sampled
    call's softmax and multinomial draw (about 70 us a token for 32 rows of an 81-token
    vocabulary on the CPU, as much as the processor itself) are skipped, and so are the warpers
    sampling adds after the processor, which change nothing on a one-hot; its sampling-only
    fields are unset, as greedy wants them. A shallow copy: ``generate`` deep-copies the config it
    is given, and only attributes of the copy's own are set here."""
    picked = copy.copy(config)
    picked.do_sample = False
    for name in SAMPLING_ONLY:
        setattr(picked, name, None)
    return picked


def seeded_requests(sampling_params: list[Any], keys: list[int]) -> list[Any]:
    """vLLM's keyed sampling: a copy of each request's ``sampling_params`` (``vllm.SamplingParams``)
    seeded by its completion's key. vLLM then draws a seeded request from a generator of
    its own (an exponential race over the vocabulary per token, the Gumbel-max draw in another
    form), so its tokens depend on its key and its logits, not on the batch or on any other random
    number: common random numbers across cells, as the hash gives transformers. Not the same
    numbers as the hash: a run with vLLM is coupled to other vLLM runs, not to transformers ones."""
    if len(sampling_params) != len(keys):
        raise RuntimeError(
            f"keyed vLLM sampling got {len(sampling_params)} requests for {len(keys)} keys"
        )
    requests = []
    for params, key in zip(sampling_params, keys, strict=True):
        params = params.clone()
        params.seed = int(key)
        requests.append(params)
    return requests


def stream_seeds(n: int, process: int) -> list[int]:
    """vLLM's stream sampling: a seed for each of ``n`` requests of process ``process``, drawn from
    torch's global stream (the run's seed and every number drawn before). TRL seeds a colocated
    engine with its process index alone, so without these every run, whatever its seed, would
    draw the same noise; the process index stays in the key, as TRL has it, because processes
    seeded alike draw alike and one prompt's group may span them."""
    import torch

    return [completion_key(int(d), process) for d in torch.randint(0, 2**62, (n,))]


def training_keys(seed: int, step: int, prompt_ids: list[str], group_size: int, offset: int):
    """The keys of rows of a generation batch: row j is slot (offset + j) mod G of its group; a
    prompt met again in the batch (at the same slot) counts as its next occurrence. Pass the whole
    batch (offset 0) and slice, so that occurrences are counted over every rank."""
    seen: dict[tuple[str, int], int] = {}
    keys = []
    for j, pid in enumerate(prompt_ids):
        slot = (offset + j) % group_size
        occurrence = seen.get((pid, slot), 0)
        seen[(pid, slot)] = occurrence + 1
        keys.append(completion_key("train", seed, step, pid, occurrence, slot))
    return keys


def evaluation_keys(seed: int, contexts: list[list[int]], seen: dict[tuple, int]) -> list[int]:
    """The keys of a batch of evaluation prompts (token ids, padding removed): the r-th time a
    prompt is sampled in one evaluation (``seen`` counts them) is its repeat r."""
    keys = []
    for ids in contexts:
        prompt = tuple(ids)
        repeat = seen.get(prompt, 0)
        seen[prompt] = repeat + 1
        keys.append(completion_key("eval", seed, ",".join(map(str, prompt)), repeat))
    return keys
