"""Keyed sampling: the draw is softmax(logits / T), and it is a function of the completion's key
alone, so cells with one seed share their random numbers whatever else consumed some."""

import numpy as np
import pytest
import torch
from conformance import G, digit_reward
from scipy import stats as scipy_stats
from transformers import GPT2Config, GPT2LMHeadModel, TrainerCallback

from grpo_ablation.design.options import TrainingConfig
from grpo_ablation.keyed_sampling import (
    KeyedGumbel,
    _from_hash_np,
    _minus_gumbel,
    completion_key,
    evaluation_keys,
    gumbel_choice,
    hash32,
    hash32_int,
    hash_block,
    noise,
    picking_greedily,
    row_words,
    seeded_requests,
    training_keys,
    uniforms,
)
from grpo_ablation.objective.record import ObjectiveRecord
from grpo_ablation.training.rollout_log import read_rollouts
from grpo_ablation.training.train import train

torch.set_num_threads(1)
TINY = dict(group_size=G, prompts_per_step=2, max_completion_length=6, save_steps=2)


def test_the_tensor_hash_is_the_reference_hash_and_a_bijection():
    words = [0, 1, 2, 0xFFFF, 0x10000, 0x7FFFFFFF, 0xFFFFFFFF, *range(3, 5000, 7)]
    assert hash32(torch.tensor(words)).tolist() == [hash32_int(w) for w in words]
    # Consecutive inputs (the vocabulary) map to distinct outputs.
    assert len(set(hash32(torch.arange(200_000)).tolist())) == 200_000


MIN_EXPECTED = 5.0  # the chi-square approximation's rule of thumb, per bin
LOGITS = torch.tensor([3.0, 2.2, 1.0, 0.0, -0.5, -1.0, -2.0, -3.5])


def pooled(counts: torch.Tensor, probs: torch.Tensor) -> tuple[list[float], list[float]]:
    """Observed and expected counts with the rarest categories pooled, from the least probable
    up, until every bin expects at least MIN_EXPECTED draws (a remainder joins the last bin)."""
    n = float(counts.sum())
    observed: list[float] = []
    expected: list[float] = []
    o = e = 0.0
    for i in torch.argsort(probs).tolist():  # rarest first
        o, e = o + float(counts[i]), e + n * float(probs[i])
        if e >= MIN_EXPECTED:
            observed.append(o)
            expected.append(e)
            o = e = 0.0
    if e > 0:
        observed[-1] += o
        expected[-1] += e
    return observed, expected


def chi_square_p(counts: torch.Tensor, probs: torch.Tensor) -> float:
    """Upper tail of Pearson's chi-square over the pooled bins (scipy's chi-square distribution,
    len(bins) - 1 degrees of freedom)."""
    observed, expected = pooled(counts.double(), probs.double())
    assert len(expected) >= 2 and min(expected) >= MIN_EXPECTED, expected
    return float(scipy_stats.chisquare(observed, expected).pvalue)


def keyed_counts(temperature: float, n: int, name: str) -> torch.Tensor:
    keys = [completion_key(name, temperature, i) for i in range(n)]
    chosen = gumbel_choice(LOGITS.expand(n, -1), keys, position=4, temperature=temperature)
    return torch.bincount(chosen, minlength=len(LOGITS)).double()


def test_rare_categories_are_pooled_until_each_bin_expects_five():
    # At T = 0.5 the two rarest categories expect 0.18 and 3.7 of 100 000 draws: on their own
    # their chi-square terms would not follow the distribution the p-value is read from.
    probs = torch.softmax(LOGITS.double() / 0.5, 0)
    counts = torch.arange(1.0, 9.0).double()
    observed, expected = pooled(counts * 1000, probs)
    total = float(counts.sum()) * 1000
    assert min(expected) >= MIN_EXPECTED and sum(expected) == pytest.approx(total)
    assert sum(observed) == total and len(expected) < len(probs)
    assert sorted(expected) == expected  # the bins run from rarest to most probable


@pytest.mark.parametrize("temperature", [1.0, 0.5, 1.7])
def test_the_keyed_draw_is_softmax_of_logits_over_temperature(temperature):
    # Probabilities from 0.5 down to ~1e-3: the tails are where a biased noise would show.
    probs = torch.softmax(LOGITS.double() / temperature, 0)
    n = 100_000
    keys = [completion_key("chi2", temperature, i) for i in range(n)]
    chosen = gumbel_choice(LOGITS.expand(n, -1), keys, position=4, temperature=temperature)
    counts = torch.bincount(chosen, minlength=len(LOGITS)).double()
    assert torch.equal(counts, keyed_counts(temperature, n, "chi2"))
    assert chi_square_p(counts, probs) > 1e-3, (counts / n, probs)
    # The same keys at another position are another, independent draw.
    again = gumbel_choice(LOGITS.expand(n, -1), keys, position=5, temperature=temperature)
    agree = (again == chosen).double().mean().item()
    assert agree == pytest.approx(float((probs**2).sum()), abs=0.01)


@pytest.mark.parametrize("temperature", [1.0, 0.5, 1.7])
@pytest.mark.parametrize("off", [0.9, 1.1])
def test_the_test_sees_a_wrong_temperature(temperature, off):
    # The check above can fail: the same draws judged against softmax(logits / (T · 0.9 or 1.1)).
    counts = keyed_counts(temperature, 100_000, "chi2")
    wrong = torch.softmax(LOGITS.double() / (temperature * off), 0)
    assert chi_square_p(counts, wrong) < 1e-6


def test_the_test_sees_a_wrong_tail():
    # Only the three rarest categories of T = 1 wrong (their mass, 0.57%, moved to the mode).
    probs = torch.softmax(LOGITS.double(), 0)
    wrong = probs.clone()
    wrong[-3:] *= 0.5
    wrong[0] += 1 - float(wrong.sum())
    assert chi_square_p(keyed_counts(1.0, 100_000, "chi2"), wrong) < 1e-6


def test_noise_depends_on_the_key_position_and_token_only():
    a = uniforms([completion_key(1), completion_key(2)], 3, 50)
    assert torch.equal(a, uniforms([completion_key(1), completion_key(2)], 3, 50))
    assert not torch.equal(a[0], a[1])
    assert torch.equal(uniforms([completion_key(2)], 3, 50)[0], a[1])  # not the row's place
    assert ((a > 0) & (a < 1)).all()


def test_rows_whose_first_word_collides_still_get_their_own_noise():
    # A (key, position) is hashed to two 32-bit words; a collision of one word (probability
    # 2^-32 per pair of positions) must not hand two rows the same noise vector.
    first = torch.tensor([7, 7], dtype=torch.int64)
    u = noise(first, torch.tensor([1, 2], dtype=torch.int64), 1000)
    assert (u[0] != u[1]).float().mean() > 0.99
    assert len(set(u[0].tolist())) == 1000  # one-to-one over the vocabulary
    same = noise(first, torch.tensor([3, 3], dtype=torch.int64), 1000)
    assert torch.equal(same[0], same[1])  # both words equal: the same noise, as it must be


def reference_hash(key: int, position: int, v: int) -> int:
    """The noise word of (key, position, token v), from hash32_int alone."""
    low, high = key & 0xFFFFFFFF, key >> 32
    first = hash32_int(low ^ hash32_int(high ^ hash32_int(position)))
    second = hash32_int(high ^ hash32_int(low ^ hash32_int(position ^ 0x9E3779B9)))
    return hash32_int(hash32_int(first ^ hash32_int(v)) ^ second)


def test_the_cpu_and_device_paths_hash_the_reference_words():
    # The CPU hashes blocks of positions in numpy; other devices hash one position at a time
    # in int32 tensors (run here on the CPU). Both are the reference hash, so a run draws the
    # same tokens on either, and the noise of every earlier version of the code.
    keys = [completion_key("block", i) for i in range(5)] + [0, 2**63 - 1]
    for vocab in (3, 81, 1000):
        for start in (0, 7, 2**32 + 3):
            block = hash_block(keys, start, 3, vocab)
            assert block.shape == (3, len(keys), vocab)
            for j in range(3):
                first, second = row_words(keys, start + j, 1)
                words = torch.from_numpy(np.concatenate([first, second]).astype(np.int64))
                on_device = noise(words[0], words[1], vocab)
                cpu = uniforms(keys, start + j, vocab)
                assert torch.equal(cpu, on_device)
                assert torch.equal(cpu, (torch.from_numpy(block[j]).double() + 0.5) / 2.0**32)
            for row, v in [(0, 0), (3, vocab - 1), (len(keys) - 1, vocab // 2)]:
                assert int(block[1, row, v]) == reference_hash(keys[row], start + 1, v)


def test_a_block_of_positions_gets_the_gumbel_noise_of_each_position_alone():
    # The processor takes log(-log u) of a whole block of positions at once; torch's log must
    # give every position the very numbers it gives that position alone (vectorised loops and
    # their tails alike), or the block would change the draws at the rounding level.
    keys = [completion_key("gumbel", i) for i in range(32)]
    for count, rows, vocab in [(10, 32, 81), (3, 7, 1000), (64, 5, 3), (5, 1, 49_152)]:
        block = torch.from_numpy(_from_hash_np(hash_block(keys[:rows], 11, count, vocab)))
        together = _minus_gumbel(block.clone())
        for j in range(count):
            alone = _minus_gumbel(uniforms(keys[:rows], 11 + j, vocab))
            assert torch.equal(together[j], alone)
            assert torch.equal(alone, torch.log(-torch.log(block[j])))  # the formula, unfused


@pytest.mark.parametrize("horizon", [None, 1, 4, 30])
def test_the_processor_draws_the_same_tokens_whatever_its_blocks(horizon):
    # The processor hashes the noise of several positions at once (up to its horizon): each
    # position must still get exactly gumbel_choice's token, past the horizon and across blocks.
    keys = [completion_key("processor", i) for i in range(6)]
    torch.manual_seed(0)
    scores = torch.randn(40, len(keys), 81) * 3
    processor = KeyedGumbel(keys, 0.7, horizon=horizon)
    ids = torch.zeros(len(keys), 5, dtype=torch.long)
    for position in range(40):
        out = processor(ids, scores[position])
        chosen = gumbel_choice(scores[position], keys, position, 0.7)
        assert torch.equal(out.argmax(dim=-1), chosen)
        assert (out == 0).sum() == len(keys) and torch.isinf(out).sum() == out.numel() - len(keys)
        ids = torch.cat([ids, ids[:, :1]], dim=1)


@pytest.mark.parametrize(
    ("rows", "vocab", "temperature", "horizon", "blocks"),
    [
        (6, 81, 0.7, 30, [(0, 30), (30, 16)]),  # the horizon's, then blocks of 16 past it
        (3, 1000, 1.0, None, [(0, 16), (16, 16), (32, 16)]),
        (2, 49_152, 1.3, 12, [(0, 12), (12, 16), (28, 16)]),
        (5, 3, 0.5, 2000, [(0, 1024)]),  # at most 1024 positions a copy
    ],
)
def test_the_device_path_draws_the_host_paths_tokens_with_one_copy_of_row_words(
    monkeypatch, rows, vocab, temperature, horizon, blocks
):
    # Other devices hash in int32 tensors where the scores are, their rows' words copied from the
    # host once for a block of positions (not at every token). Run here on the CPU, that path
    # must give the numpy path's scores bit for bit, past the horizon too.
    from grpo_ablation import keyed_sampling

    keys = [completion_key("device", i) for i in range(rows)]
    torch.manual_seed(1)
    scores = torch.randn(40, rows, vocab) * 4
    copies = []
    real = keyed_sampling.device_row_words
    monkeypatch.setattr(
        keyed_sampling,
        "device_row_words",
        lambda *a: copies.append(a[1:3]) or real(*a),
    )
    host = KeyedGumbel(keys, temperature, horizon=horizon)
    device = KeyedGumbel(keys, temperature, horizon=horizon)
    device.host_hashed = ()
    ids = torch.zeros(rows, 3, dtype=torch.long)
    for position in range(40):
        assert torch.equal(device(ids, scores[position]), host(ids, scores[position]))
        ids = torch.cat([ids, ids[:, :1]], dim=1)
    assert copies == blocks  # (first position, positions) of each copy from the host


def test_training_keys_name_prompt_slot_and_occurrence():
    keys = training_keys(0, 5, ["p", "p", "q", "q"], group_size=2, offset=0)
    assert len(set(keys)) == 4
    # A rank holding the second half of a batch gives its rows the slots they have in the batch.
    assert training_keys(0, 5, ["q", "q"], 2, offset=2) == keys[2:]
    # The same prompt twice in one batch: same slot, next occurrence, other noise.
    twice = training_keys(0, 5, ["p", "p", "p", "p"], 2, 0)
    assert len(set(twice)) == 4
    assert keys != training_keys(1, 5, ["p", "p", "q", "q"], 2, 0)  # the seed
    assert keys != training_keys(0, 6, ["p", "p", "q", "q"], 2, 0)  # the step
    seen: dict = {}
    first = evaluation_keys(0, [[1, 2], [1, 2], [3]], seen)
    assert len(set(first)) == 3 and evaluation_keys(0, [[1, 2]], seen)[0] not in first


def tiny_model() -> GPT2LMHeadModel:
    torch.manual_seed(0)
    config = GPT2Config(vocab_size=16, n_positions=32, n_embd=16, n_layer=1, n_head=2)
    return GPT2LMHeadModel(config).eval()


def test_generate_with_the_processor_ignores_the_global_stream():
    model = tiny_model()
    prompts = torch.tensor([[1, 2, 3], [1, 2, 3], [4, 5, 6]])
    keys = [completion_key("g", i) for i in range(3)]

    def draw(global_seed: int) -> torch.Tensor:
        torch.manual_seed(global_seed)
        return model.generate(
            prompts,
            attention_mask=torch.ones_like(prompts),
            do_sample=True,
            temperature=0.8,
            top_k=0,
            max_new_tokens=8,
            pad_token_id=0,
            logits_processor=[KeyedGumbel(keys, 0.8)],
        )

    first = draw(0)
    assert torch.equal(first, draw(1234))
    assert not torch.equal(first[0], first[1]), "two slots of one prompt draw apart"


def test_a_greedy_pick_after_the_processor_draws_its_tokens_and_no_random_number():
    """Training generates greedily after the keyed processor (``picking_greedily``): the same
    tokens as the sampled call, and torch's global stream as it was (the sampled call draws from
    it at every token)."""
    from transformers import GenerationConfig

    model = tiny_model()
    prompts = torch.tensor([[1, 2, 3], [1, 2, 3], [4, 5, 6]])
    keys = [completion_key("g", i) for i in range(3)]
    sampled = GenerationConfig(
        do_sample=True, temperature=0.8, top_k=0, top_p=1.0, max_new_tokens=8, pad_token_id=0
    )

    def draw(config: GenerationConfig) -> tuple[torch.Tensor, torch.Tensor]:
        torch.manual_seed(0)
        out = model.generate(
            prompts,
            attention_mask=torch.ones_like(prompts),
            generation_config=config,
            logits_processor=[KeyedGumbel(keys, 0.8)],
        )
        return out, torch.random.get_rng_state()

    greedy = picking_greedily(sampled)
    assert not greedy.do_sample and greedy.temperature is None
    assert sampled.do_sample and sampled.temperature == 0.8, "the caller's config is left alone"
    (tokens, stream_after), (expected, sampled_after) = draw(greedy), draw(sampled)
    assert torch.equal(tokens, expected)
    torch.manual_seed(0)
    assert torch.equal(stream_after, torch.random.get_rng_state())
    assert not torch.equal(sampled_after, stream_after)


class ConsumeRandomNumbers(TrainerCallback):
    """What another objective does to the global stream: consume random numbers in between."""

    def on_step_begin(self, args, state, control, **kwargs):
        torch.rand(state.global_step + 1)


def completions(setup, out, sampler: str, callbacks=(), **objective) -> list:
    model, data = setup
    cfg = TrainingConfig(max_steps=4, sampler=sampler, **TINY, **objective)
    train(model, data, out, cfg, reward_func=digit_reward, callbacks=list(callbacks))
    rows = read_rollouts(out / "rollouts").sort_values(["step", "group_index", "completion_index"])
    return list(zip(rows["step"], rows["completion"], strict=True))


def test_keyed_rollouts_do_not_depend_on_other_random_numbers(setup, tmp_path):
    plain = completions(setup, tmp_path / "a", "keyed")
    shifted = completions(setup, tmp_path / "b", "keyed", [ConsumeRandomNumbers()])
    assert plain == shifted
    # With the global stream the same interference changes the rollouts.
    stream = completions(setup, tmp_path / "c", "stream")
    stream_shifted = completions(setup, tmp_path / "d", "stream", [ConsumeRandomNumbers()])
    assert stream != stream_shifted


def test_every_cell_of_a_seed_draws_the_same_step_zero_rollouts(setup, tmp_path):
    cells = [
        dict(std_scaling="sample", aggregation="sequence_mean"),
        dict(std_scaling="none", aggregation="constant"),
        dict(std_scaling="batch", aggregation="token_mean"),
    ]
    step0 = [
        [c for c in completions(setup, tmp_path / str(i), "keyed", **cell) if c[0] == 0]
        for i, cell in enumerate(cells)
    ]
    assert step0[0] and step0[0] == step0[1] == step0[2]


def test_the_sampler_is_recorded_and_with_vllm_it_names_the_seeded_request():
    record = ObjectiveRecord.from_config(TrainingConfig(), 1)
    assert record.sampler.startswith("keyed Gumbel-max") and "keyed Gumbel-max" in record.describe()
    assert ObjectiveRecord.from_config(TrainingConfig(sampler="stream"), 1).sampler.startswith(
        "the global"
    )
    vllm = ObjectiveRecord.from_config(TrainingConfig(generation_backend="vllm"), 1)
    assert vllm.sampler.startswith("vLLM with a per-request seed")
    with pytest.raises(ValueError, match="unknown sampler"):
        TrainingConfig(sampler="gumbel")


class FakeParams:
    """The part of vllm.SamplingParams the keyed path uses (vLLM is not installed here)."""

    def __init__(self, temperature: float, seed: int | None = None) -> None:
        self.temperature, self.seed = temperature, seed

    def clone(self) -> "FakeParams":
        return FakeParams(self.temperature, self.seed)


def test_vllm_requests_are_seeded_by_their_completions_keys():
    shared = FakeParams(1.0)
    keys = training_keys(0, 3, ["p", "p", "q"], group_size=2, offset=0)
    seeded = seeded_requests([shared] * 3, keys)
    assert [p.seed for p in seeded] == keys and shared.seed is None  # copies, not the shared one
    with pytest.raises(RuntimeError, match="2 requests for 3 keys"):
        seeded_requests([shared] * 2, keys)


def test_vllm_evaluation_seeds_each_sampled_request_by_prompt_and_repeat():
    from grpo_ablation.evaluation.model import sampler_generation

    class FakeVLLM:
        def __init__(self) -> None:
            self.calls: list[list] = []

        def _model_generate(self, requests, generate=False, sampling_params=None):
            self.calls.append(sampling_params)
            return requests

    seeds = []
    for _ in range(2):  # two checkpoints' evaluations: the same seeds on the same (prompt, repeat)
        lm = FakeVLLM()
        sampler_generation(lm, "keyed", seed=5, backend="vllm")
        lm._model_generate([[1, 2], [1, 2], [3]], True, FakeParams(1.0))
        lm._model_generate([[1, 2]], True, [FakeParams(1.0)])
        lm._model_generate([[1, 2]], True, FakeParams(0.0))  # greedy: untouched
        mixed = [FakeParams(0.0), FakeParams(1.0)]  # a batch of a greedy and a sampled request
        lm._model_generate([[7], [7]], True, mixed)
        assert (
            lm.calls[-1][0].seed is None
            and lm.calls[-1][1].seed == evaluation_keys(5, [[7]], {})[0]
        )
        lm._model_generate([[1, 2]], False, None)  # log-likelihood: untouched
        assert lm.calls[2][0].seed is None and lm.calls[4] is None
        seeds.append([p.seed for call in lm.calls[:2] for p in call])
    assert seeds[0] == seeds[1]
    first = seeds[0]
    assert first[0] != first[1] and first[3] not in first[:3]  # repeats 0, 1, then 2 of [1, 2]
    assert first == evaluation_keys(5, [[1, 2], [1, 2], [3], [1, 2]], {})


def test_vllm_stream_seeds_follow_the_runs_seed_and_the_process():
    from grpo_ablation.keyed_sampling import stream_seeds
    from grpo_ablation.samplers import sampler_description

    def seeds(seed: int, process: int) -> list[int]:
        torch.manual_seed(seed)
        return stream_seeds(4, process)

    assert seeds(0, 0) == seeds(0, 0)  # a rerun draws the same requests
    assert len(set(seeds(0, 0))) == 4  # the requests of one call draw apart
    # Runs of other seeds, and other processes of one run, draw other noise (TRL alone would give
    # every run's engine the seed of its process index).
    assert not set(seeds(0, 0)) & set(seeds(1, 0))
    assert not set(seeds(0, 0)) & set(seeds(0, 1))
    assert sampler_description("stream", vllm=True).startswith("vLLM with a per-request seed drawn")
