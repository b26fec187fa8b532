"""Device memory between the steps of a job (issue #39, "Calibration with vLLM"): the cost probe trains
in a process of its own, so that its evaluation starts with none of training's memory held; the curve
evaluation keeps one vLLM engine for all policies of a run, loading each policy's weights into it,
and shuts it down at the end. vLLM is not installed here: its engine is a stand-in that records
what it is asked (engines built, weights loaded, prefix caches reset, shut downs)."""

from __future__ import annotations

import json
import math
import os
import sys
import types
from pathlib import Path

import pytest

from grpo_ablation.design.schema import load_config
from grpo_ablation.training import cost_probe

ROOT = Path(__file__).resolve().parents[1]


def test_a_function_in_its_own_process_returns_its_result_or_fails_loudly():
    from grpo_ablation.process import in_own_process

    assert in_own_process(math.factorial, 5) == 120
    with pytest.raises(RuntimeError, match=r"factorial failed in its own process \(exit code 1\)"):
        in_own_process(math.factorial, -1)  # raises there
    with pytest.raises(RuntimeError, match=r"_exit failed in its own process \(exit code 3\)"):
        in_own_process(os._exit, 3)  # dies there without a result


def test_the_cost_probe_trains_in_a_process_of_its_own_and_keeps_the_larger_peak(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    """measure() hands the base policy and training to in_own_process, evaluates the checkpoint
    it names here, and reports the larger of the training process's peak and its own."""
    from grpo_ablation.device import PeakMemory
    from grpo_ablation.evaluation import evaluate
    from grpo_ablation.policy import prefetch

    ckpt = tmp_path / "run" / "checkpoint-2"
    ckpt.mkdir(parents=True)
    (ckpt / "model.safetensors").write_bytes(b"w" * 1000)
    (ckpt / "optimizer.pt").write_bytes(b"o" * 3000)
    ran, evaluated = [], []

    def trained(fn, *args):
        ran.append((fn, args))
        return {
            "sft_step_s": 0.5,
            "wall_s": 10.0,
            "timed_s": 4.0,
            "times": {
                "warmup_s": 1.5,
                "step_s": 2.0,
                "save_s": 0.5,
                "generation_tokens_per_s": None,
                "update_tokens_per_s": None,
            },
            "checkpoint": str(ckpt),
            "peak": PeakMemory(host_rss_bytes=2**50, gpu_allocated_bytes=None),
            "gpu_total_bytes": None,
        }

    monkeypatch.setattr(cost_probe, "in_own_process", trained)
    monkeypatch.setattr(prefetch, "prefetch", lambda config: None)
    monkeypatch.setattr(
        evaluate, "evaluate_checkpoints", lambda c, task_dir, *a, **k: evaluated.append(c)
    )
    config = load_config(ROOT / "config/smoke.yaml")
    m = cost_probe.measure(config, 2, tmp_path)
    assert ran == [(cost_probe.train_steps, (config, 2, tmp_path))]
    assert evaluated == [[(2, ckpt)], [(2, ckpt)]]  # test, then validation
    assert (m.train_step_s, m.train_setup_s, m.sft_step_s) == (2.0, 6.0, 0.5)
    assert (m.train_warmup_s, m.train_save_s) == (1.5, 0.5)
    assert (m.weights_bytes, m.optimizer_bytes) == (1000, 3000)
    assert m.peak_memory_kind == "host RSS" and m.peak_memory_bytes == 2**50  # the child's
    assert m.train_peak_gpu_bytes is None and m.gpu_total_bytes is None  # no GPU plan on CPU
    monkeypatch.setattr(
        cost_probe,
        "in_own_process",
        lambda fn, *a: trained(fn, *a) | {"peak": PeakMemory(1, None)},
    )
    assert 1 < cost_probe.measure(config, 2, tmp_path).peak_memory_bytes < 2**50  # this one's


# --- one vLLM engine for the curve ----------------------------------------------------------------


class _Params:
    """vllm.SamplingParams as sampler_generation uses it."""

    def __init__(self, temperature: float, seed: int | None = None) -> None:
        self.temperature, self.seed = temperature, seed

    def clone(self) -> _Params:
        return _Params(self.temperature, self.seed)


class _Core:
    def __init__(self, log: dict) -> None:
        self.log = log

    def shutdown(self, timeout: float | None = None) -> None:
        self.log["shutdowns"] += 1


class _LLM:
    """vllm.LLM: the weights it holds, and what it was asked."""

    def __init__(self, log: dict, path: str) -> None:
        self.log, self.weights = log, path
        self.llm_engine = types.SimpleNamespace(engine_core=_Core(log))

    def collective_rpc(self, method, timeout=None, args=(), kwargs=None):
        self.log["rpc"].append((method, args, kwargs))
        assert method == "reload_weights" and not args and set(kwargs) == {"weights_path"}
        self.weights = kwargs["weights_path"]
        return [None]

    def reset_prefix_cache(self, reset_running_requests=False, reset_connector=False) -> bool:
        self.log["resets"].append(self.weights)
        return True


def _fake_vllm_class(log: dict) -> type:
    class VLLM:
        """lm-eval's VLLM: ``model`` is the engine; the methods our patches wrap."""

        def __init__(self, pretrained: str, **kwargs) -> None:
            log["engines"].append(pretrained)
            assert kwargs["gpu_memory_utilization"] == 0.8
            self.model = _LLM(log, pretrained)
            self.tokenizer = types.SimpleNamespace(eos_token_id=1)

        def modify_gen_kwargs(self, gen_kwargs: dict):
            return dict(gen_kwargs), [], 8

        def _model_generate(self, requests, generate=False, sampling_params=None):
            log["generated"].append((self.model.weights, [p.seed for p in sampling_params]))
            return []

    return VLLM


def _policy(root: Path, step: int, tokenizer: str = "chars") -> Path:
    folder = root / f"step-{step}"
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(bytes([step]) * 16)
    (folder / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_layer": 2}))
    (folder / "tokenizer.json").write_text(json.dumps({"model": tokenizer}))
    # What a tokenizer loaded from a folder adds when saved again: no difference that counts.
    loaded = {"is_local": True, "local_files_only": False} if step % 2 else {}
    (folder / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 32} | loaded))
    (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": [1, 2]}))
    return folder


@pytest.fixture
def fake_vllm(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict:
    """A task folder of a keyed sampled task, lm-eval's VLLM and simple_evaluate stood in for: the
    evaluation of a policy reads the weights its engine holds (accuracy = step / 100) and samples
    one prompt twice."""
    import lm_eval
    import lm_eval.tasks

    log = {"engines": [], "rpc": [], "resets": [], "generated": [], "shutdowns": 0, "stops": []}
    module = types.ModuleType("lm_eval.models.vllm_causallms")
    module.VLLM = _fake_vllm_class(log)
    monkeypatch.setitem(sys.modules, "lm_eval.models.vllm_causallms", module)
    # A task is built as its name (the curve builds it once and gives it to every evaluation).
    manager = types.SimpleNamespace(load=lambda names: {"tasks": {n: n for n in names}})
    monkeypatch.setattr(lm_eval.tasks, "TaskManager", lambda **kwargs: manager)

    def simple_evaluate(model, tasks, **kwargs):
        gen, _, _ = model.modify_gen_kwargs({"do_sample": True})
        log["stops"].append(gen["stop_token_ids"])
        model._model_generate([[5, 6], [5, 6]], True, [_Params(1.0), _Params(1.0)])
        step = int(Path(model.model.weights).name.removeprefix("step-"))
        return {"results": {tasks[0]: {"correct,answer": step / 100}}}

    monkeypatch.setattr(lm_eval, "simple_evaluate", simple_evaluate)
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    (tmp_path / "test.jsonl").write_text('{"prompt": "1+1=", "answer": "2"}\n')
    manifest = {
        "tasks": {"sampled": "toy_sampled"},
        "sampler": "keyed",
        "chat_template": False,
        "sampled_metric": "mean_at_k",
        "test": str(tmp_path / "test.jsonl"),
    }
    (tasks / "manifest.json").write_text(json.dumps(manifest))
    return {"log": log, "tasks": tasks, "root": tmp_path}


def _curve(fake: dict, policies: list[tuple[int, Path]], out: str = "curve") -> dict:
    from grpo_ablation.evaluation.evaluate import evaluate_curve

    options = {"device": "cuda", "backend": "vllm", "seed": 3}
    return evaluate_curve(policies, fake["tasks"], fake["root"] / out, **options)


def test_one_vllm_engine_serves_every_policy_of_a_curve(fake_vllm: dict) -> None:
    log, root = fake_vllm["log"], fake_vllm["root"]
    policies = [(s, _policy(root / "run", s)) for s in (2, 5, 9)]
    curve = _curve(fake_vllm, policies)
    paths = [str(p.resolve()) for _, p in policies]
    assert log["engines"] == paths[:1], "one engine, built for the first policy"
    assert log["rpc"] == [("reload_weights", (), {"weights_path": p}) for p in paths[1:]]
    assert log["resets"] == paths[1:], "the prefix cache emptied after each load"
    # Each policy evaluated on its own weights, loaded before its evaluation.
    assert [p["accuracy"] for p in curve["points"]] == [0.02, 0.05, 0.09]
    assert [w for w, _ in log["generated"]] == paths
    # Every policy patched once, afresh: its keyed repeats count from 0 as on an engine of its own
    # (patches stacked on the last policy's would count on, and seed differently).
    seeds = [s for _, s in log["generated"]]
    assert seeds[0] == seeds[1] == seeds[2] and len(set(seeds[0])) == 2 and None not in seeds[0]
    assert log["stops"] == [[1, 2]] * 3  # every policy's generation config read
    assert log["shutdowns"] == 1, "the engine shut down at the end"
    # A rerun reads every point back and builds no engine; a changed policy alone builds one.
    _curve(fake_vllm, policies)
    assert len(log["engines"]) == 1 and log["shutdowns"] == 1
    (policies[1][1] / "model.safetensors").write_bytes(b"new weights")
    again = _curve(fake_vllm, policies)
    assert log["engines"] == [paths[0], paths[1]] and log["shutdowns"] == 2
    assert [p["accuracy"] for p in again["points"]] == [0.02, 0.05, 0.09]


def test_a_policy_with_another_tokenizer_is_refused_and_the_engine_still_shut_down(
    fake_vllm: dict,
) -> None:
    log, root = fake_vllm["log"], fake_vllm["root"]
    policies = [(1, _policy(root / "run", 1)), (4, _policy(root / "run", 4, tokenizer="words"))]
    with pytest.raises(ValueError, match="its config or tokenizer differs"):
        _curve(fake_vllm, policies)
    assert len(log["engines"]) == 1 and log["rpc"] == [] and log["shutdowns"] == 1


def test_release_drops_the_engine_and_load_weights_into_needs_one(fake_vllm: dict) -> None:
    from grpo_ablation.evaluation.model import load_lm, load_weights_into, release_lm

    policy = _policy(fake_vllm["root"] / "run", 3)
    lm, ignored = load_lm(policy, "cuda", 8, "bfloat16", backend="vllm")
    assert ignored == {"not read": "vLLM engine with generation_config='vllm'"}
    release_lm(lm)
    assert fake_vllm["log"]["shutdowns"] == 1 and "model" not in vars(lm)
    release_lm(None)  # nothing held: the collector and CUDA's cache alone
    with pytest.raises(ValueError, match="its model was not built by load_lm"):
        load_weights_into(types.SimpleNamespace(), policy)


def test_exact_probabilities_shut_their_engine_down_even_on_an_error(
    fake_vllm: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The mixed-group calibration asks each policy for its exact probabilities before the curve
    starts an engine of its own in the same process: each engine is shut down when its policy is
    done (its wrappers hold it in a reference cycle that would keep it up until a collection)."""
    import lm_eval

    from grpo_ablation.evaluation import evaluate

    log, tasks = fake_vllm["log"], fake_vllm["tasks"]
    manifest = json.loads((tasks / "manifest.json").read_text())
    manifest["tasks"]["exact_bounded"] = "toy_exact"
    (tasks / "manifest.json").write_text(json.dumps(manifest))
    stand_in = lm_eval.simple_evaluate
    monkeypatch.setattr(
        lm_eval,
        "simple_evaluate",
        lambda model, tasks, **k: stand_in(model, tasks, **k) | {"samples": {tasks[0]: []}},
    )
    monkeypatch.setattr(evaluate, "ready_for_exact", lambda *a: None)
    monkeypatch.setattr(evaluate, "load_rule", lambda *a: None)
    monkeypatch.setattr(evaluate, "score_exact", lambda *a, **k: [])
    policy = _policy(fake_vllm["root"] / "run", 3)
    options = {"device": "cuda", "backend": "vllm"}
    assert evaluate.exact_probabilities(policy, tasks, **options) == []
    assert len(log["engines"]) == 1 and log["shutdowns"] == 1

    def refuse(*args):
        raise ValueError("not enumerable")

    monkeypatch.setattr(evaluate, "ready_for_exact", refuse)
    with pytest.raises(ValueError, match="not enumerable"):
        evaluate.exact_probabilities(policy, tasks, **options)
    assert len(log["engines"]) == 2 and log["shutdowns"] == 2


def test_the_hf_curve_loads_a_model_per_policy_and_no_engine(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """With transformers every policy has a model of its own, as before; the vLLM helpers are
    never called."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from grpo_ablation.evaluation import evaluate
    from grpo_ablation.evaluation.task_folders import write_task
    from grpo_ablation.policy.tokenizer import build_char_tokenizer

    test = tmp_path / "test.jsonl"
    rows = [
        {"prompt_id": f"p{i}", "prompt": f"{i}+1=", "answer": str(i + 1), "difficulty": 1}
        for i in range(4)
    ]
    test.write_text("".join(json.dumps(row) + "\n" for row in rows))
    write_task(test, tmp_path / "tasks", "toy", max_gen_toks=4, k=2, temperature=1.0)
    tok = build_char_tokenizer()
    policies = []
    for step in (1, 2):
        torch.manual_seed(step)
        cfg = GPT2Config(
            n_layer=1,
            n_embd=16,
            n_head=2,
            n_positions=32,
            vocab_size=len(tok),
            eos_token_id=tok.eos_token_id,
            pad_token_id=tok.pad_token_id,
        )
        GPT2LMHeadModel(cfg).save_pretrained(tmp_path / f"step-{step}")
        tok.save_pretrained(tmp_path / f"step-{step}")
        policies.append((step, tmp_path / f"step-{step}"))
    loads, released = [], []
    load_lm = evaluate.load_lm
    monkeypatch.setattr(
        evaluate, "load_lm", lambda path, *a: loads.append(path) or load_lm(path, *a)
    )
    monkeypatch.setattr(evaluate, "load_weights_into", lambda *a: pytest.fail("no engine in hf"))
    monkeypatch.setattr(evaluate, "release_lm", released.append)
    curve = evaluate.evaluate_curve(policies, tmp_path / "tasks", tmp_path / "curve", batch_size=4)
    assert loads == [str(p.resolve()) for _, p in policies]
    assert released == [None]
    assert [p["step"] for p in curve["points"]] == [1, 2] and curve["metric"] == "mean_at_k"
