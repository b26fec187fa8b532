"""The package's boundaries, as docs/design.md states them: evaluation imports nothing from training,
nothing imports the CLI, and building the DAG imports neither torch nor matplotlib (nor the other
heavy libraries), so `snakemake -n` stays fast and runs where they are not installed."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "grpo_ablation"
HEAVY = ("torch", "matplotlib", "seaborn", "transformers", "trl", "lm_eval", "accelerate")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """Every module ``path`` imports, at the top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
    return found


MODULES = {module_name(p): imports(p) for p in sorted(PACKAGE.rglob("*.py"))}


def test_the_import_scan_sees_the_package():
    assert {"grpo_ablation.cli", "grpo_ablation.commands.evaluate"} <= MODULES.keys()
    assert "grpo_ablation.design.options" in MODULES["grpo_ablation.design.checks"]


@pytest.mark.parametrize("module", sorted(m for m in MODULES if ".evaluation" in m))
def test_evaluation_imports_nothing_from_training(module):
    assert not {i for i in MODULES[module] if i.startswith("grpo_ablation.training")}


def test_nothing_imports_the_cli():
    users = [
        m
        for m, found in MODULES.items()
        if m != "grpo_ablation.cli"
        and any(i == "grpo_ablation.cli" or i.startswith("grpo_ablation.cli.") for i in found)
    ]
    assert users == []


PROBE = """
import atexit, sys
atexit.register(lambda: sys.stderr.write(
    "HEAVY:" + ",".join(m for m in {heavy!r} if m in sys.modules) + "\\n"))
from snakemake.cli import main
sys.argv = ["snakemake", "-n", "--cores", "1", "--configfile", {config!r},
            "--config", "results_dir={results}"]
main()
"""


def heavy_imports_of_a_dry_run(config: str, results: Path) -> list[str]:
    code = PROBE.format(heavy=HEAVY, config=config, results=results)
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    line = next(x for x in out.splitlines() if x.startswith("HEAVY:"))
    return [m for m in line[len("HEAVY:") :].split(",") if m]


@pytest.mark.slow  # starts processes of its own
@pytest.mark.parametrize("config", ["config/config.yaml", "config/cluster.yaml"])
def test_building_the_dag_imports_no_heavy_library(config, tmp_path):
    assert heavy_imports_of_a_dry_run(config, tmp_path) == []


def test_the_job_worker_key_covers_nested_modules(tmp_path, monkeypatch):
    from grpo_ablation import worker

    copy = tmp_path / "grpo_ablation"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(worker, "PACKAGE_DIR", copy)
    before = worker.code_key()
    nested = copy / "training" / "trainer.py"
    nested.write_text(nested.read_text() + "\n# edited\n")
    assert worker.code_key() != before
    assert os.path.exists(copy / "worker.py")


def private_imports(path: Path) -> list[str]:
    """``from grpo_ablation.<module> import _name``: a private helper used across modules."""
    return [
        f"{node.module}.{a.name}"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("grpo_ablation")
        for a in node.names
        if a.name.startswith("_")
    ]


def test_no_module_imports_another_modules_private_names(tmp_path):
    found = {module_name(p): private_imports(p) for p in sorted(PACKAGE.rglob("*.py"))}
    found = {m: names for m, names in found.items() if names}
    assert found == {}
    # the scan sees such an import where there is one
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from grpo_ablation.numerics import _private, public\n")
    assert private_imports(probe) == ["grpo_ablation.numerics._private"]


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports (at the top or inside a function; ``from
    package import module`` counts as importing the module)."""
    return {m: {i for i in found if i in MODULES and i != m} for m, found in MODULES.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def test_the_package_has_no_import_cycle():
    """No module imports, directly or through others, a module that imports it: the analysis runs
    one way (tables -> figures, tables -> reading), and so does every other layer."""
    assert cycles(import_graph()) == []
    # the scan sees a cycle where there is one, imports inside functions included
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_import_scan_counts_imports_inside_functions():
    assert (
        "grpo_ablation.analysis.plots.saving" in MODULES["grpo_ablation.analysis.jobs.push_report"]
    )


def test_the_figures_import_no_torch():
    """The figure jobs draw what other jobs computed (the worked example's token weights come from
    the calculations job's table): neither figure module imports torch or the objective's
    formulas."""
    figures = ("jobs.figures", "jobs.pooled_figures", "plots.per_stage", "plots.over_draws")
    for module in (f"grpo_ablation.analysis.{m}" for m in figures):
        assert not {i for i in MODULES[module] if i == "torch" or ".formulas" in i}, module
