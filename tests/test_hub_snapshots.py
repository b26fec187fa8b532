"""Revisions that hold offline: the cluster-shaped config, with its model and data set named by hub
id at pinned commits, runs every job (the ``kl`` stage's reference model included) offline from a
hub cache that holds those commits only (no ``refs/``, as a commit-pinned download leaves it);
a revision the cache lacks stops the run, naming it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import cache_revision_only, snakemake

from grpo_ablation.policy.standin import build_standin_model
from grpo_ablation.tasks.word_problem_generator import write_word_problems

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
MODEL, MODEL_REVISION = "standin-org/qwen2-tiny", "a" * 40
DATA_REVISION = "cc7b047b6e5bb11b4f1af84efc572db110a51b3c"  # openai/gsm8k, as the preset pins it


@pytest.fixture(scope="module")
def hub(tmp_path_factory) -> dict:
    """An HF_HOME whose hub cache holds the stand-in model and data set at one commit each."""
    root = tmp_path_factory.mktemp("hub_snapshots")
    data = write_word_problems(root / "content" / "gsm8k", 200, 24, 0)
    corpus = [f"{r['question']} {r['answer']}" for r in _rows(data)]
    corpus.append("system user assistant You are a helpful assistant. The answer is \\boxed{}")
    model = build_standin_model(root / "content" / "model", corpus, seed=0)
    cache = root / "hf" / "hub"
    snapshots = {
        "model": cache_revision_only(cache, MODEL, MODEL_REVISION, model, "model"),
        "data": cache_revision_only(cache, "openai/gsm8k", DATA_REVISION, data, "dataset"),
    }
    return {"root": root, "hf_home": root / "hf", **snapshots}


def _rows(data: Path) -> list[dict]:
    from grpo_ablation.tasks.source import Source

    return Source(str(data), "main").read("train")[0]


def _config(hub: dict, name: str, model_revision: str) -> tuple[Path, dict]:
    config = yaml.safe_load((ROOT / "config/cluster_smoke.yaml").read_text())
    del config["stand_in"], config["word_problems"]
    config |= {"results_dir": str(hub["root"] / name), "seeds": [0]}
    config["task"] |= {"dataset_path": None, "revision": DATA_REVISION}
    config["base_policy"] = {"kind": "hub", "name": MODEL, "revision": model_revision}
    config["training"] |= {"max_steps": 2, "save_steps": 2}
    for stage in ("std_scaling", "aggregation"):
        config["stages"][stage]["enabled"] = False
    config["stages"]["kl"] |= {"enabled": True, "vary": {"beta": [0.0, 0.04]}}
    path = hub["root"] / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path, config


def _offline(hub: dict) -> dict[str, str]:
    return {"HF_HOME": str(hub["hf_home"]), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


def test_every_job_runs_offline_from_revision_only_snapshots(hub):
    assert not any(hub["hf_home"].rglob("refs"))
    path, config = _config(hub, "pinned", MODEL_REVISION)
    snakemake(path, timeout=1200, env=_offline(hub))
    exp = Path(config["results_dir"]) / config["experiment"]
    base = json.loads((exp / "base" / "base_policy.json").read_text())
    assert base["model"] == str(hub["model"]) and base["config"]["name"] == MODEL
    manifest = json.loads((exp / "data" / "manifest.json").read_text())
    assert manifest["source"]["path"] == "openai/gsm8k"
    assert manifest["source"]["revision"] == DATA_REVISION
    assert manifest["splits"]["test"]["count"] == 24
    fetched = json.loads((exp / "prefetch.json").read_text())
    assert fetched["model"]["cache"] == str(hub["model"])
    assert fetched["task"]["root"] == str(hub["data"].resolve())
    kl = [p for p in exp.glob("runs/**/run_info.json") if "beta=0.04" in str(p)]
    assert kl, "the kl cell (a reference model loaded from the snapshot) trained"
    assert json.loads((kl[0].parent / "objective.json").read_text())["beta"] == 0.04
    summary = json.loads((exp / "eval" / "base" / "test" / "summary.json").read_text())
    assert summary["checkpoints"][0]["checkpoint"] == str(hub["model"])


def test_a_revision_missing_from_the_cache_is_named(hub):
    missing = "0" * 40
    path, config = _config(hub, "missing", missing)
    with pytest.raises(AssertionError):
        snakemake(path, timeout=600, env=_offline(hub))
    log = Path(config["results_dir"]) / config["experiment"] / "logs" / "prefetch.log"
    assert f"model {MODEL} at revision {missing} is not in the hub cache" in log.read_text()
