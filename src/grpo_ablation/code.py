"""The source files a job's code depends on: a rule lists them as inputs, so editing any of them
reruns the job, and no list of files is kept by hand.

``sources("analysis.jobs.tables")`` is the module's file and the files of every ``grpo_ablation``
module it imports, directly or through others, at the top or inside a function (read from the
syntax tree, nothing imported). Importable without torch: the DAG is built from it.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = "grpo_ablation"
ROOT = Path(__file__).resolve().parent


def _file(module: str, root: Path = ROOT) -> Path | None:
    """The file of ``grpo_ablation.<module>`` under ``root`` (a module or a package's
    __init__), or None."""
    base = root.joinpath(*module.split(".")) if module else root
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _imports(path: Path, module: str, root: Path = ROOT) -> set[str]:
    """The ``grpo_ablation`` modules ``path`` (the file of ``module``) imports, relative to the
    package: ``from grpo_ablation.x import y`` names x, and x.y where y is a module."""
    found: set[str] = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the module's package upwards
                parts = package.split(".") if package else []
                base = ".".join(
                    parts[: len(parts) - node.level + 1] + ([node.module] if node.module else [])
                )
                full = f"{PACKAGE}.{base}" if base else PACKAGE
            else:
                full = node.module or ""
            names = [full, *(f"{full}.{a.name}" for a in node.names)]
        else:
            continue
        for name in names:
            if name == PACKAGE or name.startswith(PACKAGE + "."):
                rel = name[len(PACKAGE) + 1 :]
                if _file(rel, root) is not None:
                    found.add(rel)
    return found


def sources(*modules: str, root: Path = ROOT) -> list[str]:
    """The files of ``modules`` (relative to the package: ``analysis.jobs.tables``) and of every
    package module they import, transitively; sorted paths as strings. ``root``: the package
    folder to read, by default this one's (the rules pass the workflow's own, so the inputs do
    not move with whichever copy of the package is on the path)."""
    seen: set[str] = set()
    todo = list(modules)
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        path = _file(module, root)
        if path is None:
            raise ValueError(f"{PACKAGE}.{module} is not a module of the package")
        seen.add(module)
        todo += sorted(_imports(path, module, root) - seen)
    return sorted(str(_file(m, root)) for m in seen)
