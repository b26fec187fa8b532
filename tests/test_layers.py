"""The layers of the package, bottom up: the ground modules (settings, layout, code, numerics, sampling, samplers,
device, hub, packages, process, the objective's conventions), the tasks, the design (what the
config declares and what is checked before any job), then the jobs' packages, the worker, the
commands and the CLI on top.
Every import, at the top of a module or inside a function, runs downward (no cycle:
test_boundaries.py); the Snakefile imports
the design and the layout alone, so planning a DAG imports no numerical library."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_boundaries import MODULES, ROOT

GROUND = {
    "grpo_ablation.settings",
    "grpo_ablation.layout",
    "grpo_ablation.code",
    "grpo_ablation.numerics",
    "grpo_ablation.sampling",
    "grpo_ablation.samplers",
    "grpo_ablation.keyed_sampling",
    "grpo_ablation.device",
    "grpo_ablation.hub",
    "grpo_ablation.packages",
    "grpo_ablation.process",
    "grpo_ablation.objective",
    "grpo_ablation.objective.conventions",
}


def package_imports(module: str) -> set[str]:
    """The grpo_ablation modules ``module`` imports (a name imported from a package counts as
    the package, unless it is a module of it)."""
    found = set()
    for name in MODULES[module]:
        if not name.startswith("grpo_ablation"):
            continue
        while name not in MODULES and "." in name:
            name = name.rsplit(".", 1)[0]
        if name in MODULES and name != module:
            found.add(name)
    return found


def below(module: str, allowed: set[str]) -> list[str]:
    return sorted(m for m in package_imports(module) if m not in allowed)


def test_the_ground_imports_only_the_ground():
    for module in GROUND & MODULES.keys():
        assert below(module, GROUND) == [], module


TASKS = {m for m in MODULES if m.startswith("grpo_ablation.tasks")}
DESIGN = {m for m in MODULES if m.startswith("grpo_ablation.design")}


def test_the_tasks_stand_on_the_ground():
    for module in TASKS:
        assert below(module, GROUND | TASKS) == [], module


def test_the_design_imports_the_ground_the_tasks_and_itself_only():
    for module in DESIGN:
        assert below(module, GROUND | TASKS | DESIGN) == [], module


def test_only_the_cli_and_its_worker_command_import_the_worker():
    users = sorted(m for m in MODULES if "grpo_ablation.worker" in package_imports(m))
    assert users == ["grpo_ablation.cli", "grpo_ablation.commands", "grpo_ablation.commands.worker"]


def test_the_snakefile_imports_the_design_and_the_layout_alone():
    rules = [ROOT / "Snakefile", *sorted((ROOT / "workflow/rules").glob("*.smk"))]
    imported = {
        name
        for path in rules
        for name in re.findall(r"^\s*(?:from|import) (grpo_ablation[\w.]*)", path.read_text(), re.M)
    }
    # grpo_ablation.code reads source files as text (the rules' code inputs): it imports nothing
    assert imported and all(
        n in ("grpo_ablation.layout", "grpo_ablation.code") or n.startswith("grpo_ablation.design")
        for n in imported
    ), imported


@pytest.mark.parametrize("module", sorted(DESIGN))
def test_the_design_layer_loads_no_numerical_library(module):
    probe = (
        f"import sys, {module}; "
        "print(sorted(m for m in ('torch', 'pandas', 'scipy', 'numpy', 'matplotlib') "
        "if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=Path.cwd()
    )
    assert done.stdout.strip() == "[]", done.stdout
