"""The wheels of a GPU node with a site PyTorch (envs/site_torch_wheels.py, `make gpu-wheels`):
which packages are carried, on a hand-written lock and node list, and the folder's size limit.
With SITE_TORCH_FOLDER set (`make test-gpu-pins`, in the venv that stands for the node), also
that venv: only node packages beside the folder, the CPU torch, the roots from the folder."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "envs"))

import site_torch_wheels as stw  # noqa: E402
from gpu_pins_cpu import locked, name  # noqa: E402

LOCK = """\
apkg==1.0
    # via -r envs/gpu-vllm.in
bdep==2.0
    # via apkg
cnode==3.0
    # via
    #   apkg
    #   bdep
old-only==1.1
    # via apkg
torch==2.13.0
    # via apkg
unrelated==4.0
    # via vllm
xextra==5.0
    # via cnode
"""
NODE = """\
# a node
Cnode==3.1
d_node
torch==2.11.0+cu130
"""
REQUIRES = {
    "apkg": [
        "bdep>=2",
        "cnode[fast]",
        "torch>=2",
        "old-only; python_version < '3.12'",
        "zextra; extra == 'all'",  # an extra nobody asks for
    ],
    "bdep": ["CNode<3.1"],  # the node's 3.1 does not meet it
    "cnode": ["d-node", "xextra; extra == 'fast'", "not-anywhere"],  # the node's own: not read
    "old-only": [],
    "xextra": [],
}


def select(python_version: str) -> tuple[stw.Selection, list[dict[str, str]]]:
    batches = []

    def requires(batch: dict[str, str]) -> dict[str, list[str]]:
        batches.append(batch)
        return {n: REQUIRES[n] for n in batch}

    node = stw.node_packages(NODE)
    return stw.select(["apkg"], locked(LOCK), node, python_version, requires), batches


def test_the_closure_carries_what_the_roots_need_and_the_node_lacks():
    sel, batches = select("3.12")
    assert sel.carry == {"apkg": "1.0", "bdep": "2.0", "xextra": "5.0"}
    assert sel.node == {"cnode": {"fast"}}  # read for its extra, not carried
    assert sel.never == {"torch"}
    assert sel.required_by["xextra"] == {"cnode"}
    assert sel.node_conflicts == ["bdep requires CNode<3.1; the node has 3.1"]
    assert batches == [{"apkg": "1.0"}, {"bdep": "2.0", "cnode": "3.0"}, {"xextra": "5.0"}]
    # under Python 3.11 the marker holds
    assert select("3.11")[0].carry == {**sel.carry, "old-only": "1.1"}


def test_the_node_list_parses_to_normal_names_and_versions():
    assert stw.node_packages(NODE) == {"cnode": "3.1", "d-node": None, "torch": "2.11.0+cu130"}
    node = stw.node_packages((ROOT / "envs/site_torch_node.txt").read_text())
    assert node["torch"].startswith("2.11.0") and node["transformers"] == "5.17.0"
    assert not set(stw.ROOTS) & set(node)  # what the folder is for is not on the node
    lines = [ln for ln in (ROOT / "envs/site_torch_node.txt").read_text().splitlines()]
    names = [ln.split("==")[0] for ln in lines if ln and not ln.startswith("#")]
    assert names == sorted(names) and all(n == name(n) for n in names)


def test_a_requirement_outside_the_lock_and_the_node_stops_the_selection():
    def requires(batch):
        return {n: ["missing-pkg"] for n in batch}

    with pytest.raises(SystemExit, match="missing-pkg"):
        stw.select(["apkg"], locked(LOCK), {}, "3.12", requires)


def test_the_manifest_totals_the_wheels_and_stops_over_the_limit():
    def wheel(n: str, size: int) -> dict:
        return {"name": n, "file": f"{n}-1-py3-none-any.whl", "bytes": size}

    under = stw.manifest([wheel("b", 10), wheel("a", 5)], "3.12", [], [])
    assert under["total_bytes"] == 15 and under["count"] == 2
    assert [w["name"] for w in under["wheels"]] == ["a", "b"]
    stw.check_size(under)
    over = stw.manifest([wheel("big", stw.LIMIT_BYTES), wheel("small", 2_500_000)], "3.12", [], [])
    with pytest.raises(SystemExit, match=r"2\.5 MB over the limit of 60 MB.*big-1-py3"):
        stw.check_size(over)


def test_only_pure_python_wheels_count_as_pure():
    assert stw.pure(Path("sqlitedict-2.1.0-py3-none-any.whl"))
    assert stw.pure(Path("word2number-1.1-py2.py3-none-any.whl"))
    assert not stw.pure(Path("greenlet-3.5.6-cp312-cp312-manylinux_2_28_x86_64.whl"))


FOLDER = os.environ.get("SITE_TORCH_FOLDER")
in_stand_in = pytest.mark.skipif(not FOLDER, reason="only in the venv that stands for the node")


@in_stand_in
def test_the_stand_in_holds_node_packages_beside_the_folder_and_the_cpu_torch():
    import torch

    assert torch.version.cuda is None, torch.__version__
    node = stw.node_packages((ROOT / "envs/site_torch_node.txt").read_text())
    folder = Path(FOLDER).resolve()
    carried, elsewhere = {}, {}
    for dist in metadata.distributions():
        where = Path(dist.locate_file("")).resolve()
        (carried if where == folder else elsewhere)[name(dist.metadata["Name"])] = dist.version
    assert set(stw.ROOTS) <= set(carried)
    # a package neither on the node nor in the folder would be missing there; one of the
    # folder's may also stand here (the lock's typer needs pydantic) and is shadowed by it
    strays = {n: v for n, v in elsewhere.items() if n not in node and carried.get(n) != v}
    assert not strays


@in_stand_in
def test_the_roots_import_from_the_folder_and_pip_check_passes():
    for module in ("trl", "datasets", "lm_eval", "math_verify", "snakemake"):
        origin = importlib.util.find_spec(module).origin
        assert Path(origin).resolve().is_relative_to(Path(FOLDER).resolve()), origin
    done = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
