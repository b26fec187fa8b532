"""Write into a folder the wheels that a GPU node with a site PyTorch and no package index lacks
(`make gpu-wheels`): trl, datasets, lm-eval, math-verify, Snakemake and its Slurm executor, and
everything they need that the node (envs/site_torch_node.txt) does not hold, at the versions of
envs/gpu-vllm.lock.txt, for CPython on x86-64 manylinux. On the node:
    python -m pip install --no-index --no-deps --target DIR OUT_DIR/*.whl; export PYTHONPATH=DIR

What is needed is read from each wheel's METADATA (Requires-Dist), not from the lock's `# via`
lines: a `# via` line names the package that asked, not for which extra or under which marker,
so the lock's graph carries whatever vLLM's extras pulled in (`pydantic[email]` reads as
"email-validator via pydantic") and is resolved for Python 3.13, not the node's. Markers are
evaluated for the target Python on Linux; an extra is followed only where a package asks for it
(`fsspec[http]`), and of a package the node holds, only the extra's own requirements are read
(the rest is the node's). Left out: the node's packages, whatever their version (a requirement they
do not meet is listed in the manifest's `node_conflicts`), and the CUDA stack and vLLM.

A package with no wheel on the index (sqlitedict, ...) is built here with `pip wheel --no-deps`
and kept only if the result is pure Python. OUT_DIR/manifest.json lists every wheel (name,
version, file, SHA-256, bytes), the total, the target, and what was left out and why. The
folder must fit in LIMIT_BYTES; wheels of earlier runs that are no longer needed are deleted.

Usage: python envs/site_torch_wheels.py OUT_DIR [--python-version 3.12] [--stand-in DIR]
(--stand-in DIR: also write DIR/requirements.txt and DIR/constraints.txt, the pins of a CPU venv
that stands for the node in `make test-gpu-pins`; --python-version is then that venv's.)
"""

from __future__ import annotations

import argparse
import email.parser
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gpu_pins_cpu import CPU_TORCH, NOT_ON_PYTHON_311, locked, name
from packaging.requirements import Requirement
from packaging.utils import parse_wheel_filename
from packaging.version import Version

HERE = Path(__file__).parent
ROOTS = (
    "trl",
    "datasets",
    "lm-eval",
    "math-verify",
    "snakemake",
    "snakemake-executor-plugin-slurm",
)
# The node's own PyTorch build and CUDA libraries, whatever the requirement's version; vLLM is
# not used on such a node (no wheel of it is carried).
NEVER = re.compile(r"^(torch|triton|vllm|nvidia-.*)$")
# The folder travels with a working tree of at most 64 MiB (67.1 MB) onto the lent GPU machine;
# the rest is left to the repository. Decimal megabytes: 60 MB = 60,000,000 bytes (57.2 MiB).
LIMIT_BYTES = 60 * 10**6
# pip matches a manylinux tag's glibc version exactly: every one up to the node's. Python 3.12.3
# is Ubuntu 24.04's, whose glibc is 2.39 (inferred, not read on the node).
GLIBC_MINOR = 39
PLATFORMS = [f"manylinux_2_{n}_x86_64" for n in range(GLIBC_MINOR, 16, -1)] + [
    "manylinux2014_x86_64",  # pip adds manylinux2010 and manylinux1
    "manylinux_2_12_x86_64",
    "manylinux_2_5_x86_64",
]
# The node's versions that have no wheel for Python 3.11 (numpy 2.5 needs 3.12): the CPU stand-in
# takes the lock's. Another one makes pip stop with "No matching distribution found for
# NAME==VERSION": add NAME here.
NODE_NOT_ON_PYTHON_311 = {"numpy"}
# What the stand-in holds besides the node packages the folder needs: the node's PyTorch stack
# (the lock's torch as the local CPU build), the node packages the project imports itself
# (requirements.txt's), and pytest, which runs the check.
STAND_IN_EXTRA = ("torch", "transformers", "accelerate", "huggingface-hub", "pytest")


def node_packages(text: str) -> dict[str, str | None]:
    """site_torch_node.txt: each name with its version, None where the node's is not known."""
    out: dict[str, str | None] = {}
    for line in text.splitlines():
        line = line.split("#")[0].strip()
        if line:
            n, _, version = line.partition("==")
            out[name(n)] = version.strip() or None
    return out


def environment(python_version: str) -> dict[str, str]:
    """The marker environment of CPython ``python_version`` on x86-64 Linux."""
    return {
        "implementation_name": "cpython",
        "implementation_version": f"{python_version}.0",
        "os_name": "posix",
        "platform_machine": "x86_64",
        "platform_python_implementation": "CPython",
        "platform_release": "",
        "platform_system": "Linux",
        "platform_version": "",
        "python_full_version": f"{python_version}.0",
        "python_version": python_version,
        "sys_platform": "linux",
    }


def applies(req: Requirement, env: Mapping[str, str], extra: str) -> bool:
    return req.marker is None or req.marker.evaluate({**env, "extra": extra})


@dataclass
class Selection:
    carry: dict[str, str] = field(default_factory=dict)  # name -> the lock's version
    node: dict[str, set[str]] = field(default_factory=dict)  # node package -> extras asked
    never: set[str] = field(default_factory=set)
    required_by: dict[str, set[str]] = field(default_factory=dict)
    node_conflicts: list[str] = field(default_factory=list)


def select(
    roots: Iterable[str],
    lock: Mapping[str, str],
    node: Mapping[str, str | None],
    python_version: str,
    requires: Callable[[dict[str, str]], Mapping[str, list[str]]],
) -> Selection:
    """The closure of ``roots`` through Requires-Dist, breadth first. ``requires`` takes a batch
    {name: version} and gives each one's Requires-Dist lines (it downloads the wheels, one batch
    per level: the packages to carry, and node packages asked for with an extra)."""
    env = environment(python_version)
    sel = Selection()
    metadata: dict[str, list[Requirement]] = {}
    followed: dict[str, set[str]] = {}  # name -> the parts ("" base, or an extra) followed
    queue = [(Requirement(r), "(root)") for r in roots]
    while queue:
        asked: dict[str, set[str]] = {}
        for req, parent in queue:
            n = name(req.name)
            sel.required_by.setdefault(n, set()).add(parent)
            have = node.get(n)
            if n in node and have and not req.specifier.contains(have, prereleases=True):
                sel.node_conflicts.append(f"{parent} requires {req}; the node has {have}")
            if NEVER.match(n):
                sel.never.add(n)
                continue
            if n in node:
                sel.node.setdefault(n, set()).update(req.extras)
                parts = set(req.extras)  # the base requirements are the node's
            else:
                if n not in lock:
                    raise SystemExit(f"{n} ({parent} requires {req}) is not in the lock")
                if not req.specifier.contains(lock[n], prereleases=True):
                    raise SystemExit(f"{parent} requires {req}; the lock has {lock[n]}")
                sel.carry[n] = lock[n]
                parts = {"", *req.extras}
            new = parts - followed.setdefault(n, set())
            if new:
                asked.setdefault(n, set()).update(new)
        # a node package asked for with an extra is read at the lock's version (else the node's)
        batch = {n: lock.get(n) or node.get(n) for n in asked if n not in metadata}
        missing = [n for n, v in batch.items() if not v]
        if missing:
            raise SystemExit(f"no version known for {missing}, node packages asked with extras")
        for n, lines in requires(batch).items():
            metadata[n] = [Requirement(line) for line in lines]
        queue = []
        for n, parts in sorted(asked.items()):
            followed[n] |= parts
            for req in metadata[n]:
                # an extra's own requirements only, unless the base ones are followed too
                if any(applies(req, env, p) for p in parts) and (
                    "" in parts or not applies(req, env, "")
                ):
                    queue.append((req, n))
    return sel


def requires_dist(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as z:
        path = next(p for p in z.namelist() if re.match(r"[^/]+\.dist-info/METADATA$", p))
        meta = email.parser.Parser().parsestr(z.read(path).decode())
    return meta.get_all("Requires-Dist") or []


def wheel_key(path: Path) -> tuple[str, Version]:
    n, version, _, _ = parse_wheel_filename(path.name)
    return name(n), version


def pure(path: Path) -> bool:
    return all(t.abi == "none" and t.platform == "any" for t in parse_wheel_filename(path.name)[3])


class Downloader:
    """Each batch into OUT_DIR in one `pip download`; a package with no matching wheel is built
    from its sdist instead (pure Python only)."""

    def __init__(self, out: Path, python_version: str):
        self.out, self.python_version = out, python_version
        self.built: set[str] = set()
        self.files: dict[str, Path] = {}

    def pip(self, *args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "pip", *args, "--disable-pip-version-check", "--quiet"]
        return subprocess.run(cmd, capture_output=True, text=True)

    def __call__(self, batch: dict[str, str]) -> dict[str, list[str]]:
        specs = {n: f"{n}=={v}" for n, v in batch.items()}
        target = ["--python-version", self.python_version, "--implementation", "cp"]
        target += [a for p in PLATFORMS for a in ("--platform", p)]
        sdist: list[str] = []
        while specs:
            done = self.pip(
                "download",
                "--no-deps",
                "--only-binary=:all:",
                *target,
                "-d",
                str(self.out),
                *specs.values(),
            )
            if done.returncode == 0:
                break
            m = re.search(r"No matching distribution found for (\S+?)==", done.stderr)
            if not m or name(m[1]) not in specs:
                raise SystemExit(f"pip download failed:\n{done.stderr}")
            sdist.append(name(m[1]))
            del specs[name(m[1])]
        for n in sdist:
            self.build(n, batch[n])
        found = {wheel_key(p): p for p in self.out.glob("*.whl")}
        for n, v in batch.items():
            if (n, Version(v)) not in found:
                raise SystemExit(f"no wheel of {n}=={v} in {self.out}")
            self.files[n] = found[n, Version(v)]
        return {n: requires_dist(self.files[n]) for n in batch}

    def build(self, n: str, version: str) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            done = self.pip("wheel", "--no-deps", "-w", tmp, f"{n}=={version}")
            if done.returncode != 0:
                raise SystemExit(
                    f"{n}=={version} has no wheel for the node and did not build:\n{done.stderr}"
                )
            (wheel,) = Path(tmp).glob("*.whl")
            if not pure(wheel):
                raise SystemExit(
                    f"{n}=={version} has no wheel for CPython {self.python_version} on x86-64 "
                    f"manylinux, and its sdist builds {wheel.name}, not pure Python"
                )
            shutil.move(wheel, self.out / wheel.name)
        self.built.add(n)


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def manifest(
    wheels: list[dict],
    python_version: str,
    left_out: list[dict],
    conflicts: list[str],
    not_needed: list[str] = (),
) -> dict:
    return {
        "python_version": python_version,
        "implementation": "cp",
        "platforms": PLATFORMS,
        "roots": list(ROOTS),
        "versions_from": "envs/gpu-vllm.lock.txt",
        "install": "pip install --no-index --no-deps --target DIR *.whl; PYTHONPATH=DIR",
        "wheels": sorted(wheels, key=lambda w: w["name"]),
        "count": len(wheels),
        "total_bytes": sum(w["bytes"] for w in wheels),
        "limit_bytes": LIMIT_BYTES,
        "left_out": sorted(left_out, key=lambda w: w["name"]),
        "node_conflicts": conflicts,
        "not_needed": sorted(not_needed),  # the lock's packages that the roots do not need
    }


def check_size(record: dict) -> None:
    """Stop if the folder is over its limit, naming the excess and the biggest wheels."""
    excess = record["total_bytes"] - record["limit_bytes"]
    if excess > 0:
        biggest = sorted(record["wheels"], key=lambda w: -w["bytes"])[:5]
        raise SystemExit(
            f"the wheels come to {record['total_bytes'] / 1e6:.1f} MB, "
            f"{excess / 1e6:.1f} MB over the limit of {record['limit_bytes'] / 1e6:.0f} MB; "
            "biggest: " + ", ".join(f"{w['file']} ({w['bytes'] / 1e6:.1f} MB)" for w in biggest)
        )


def left_out(sel: Selection, lock: Mapping[str, str], node: Mapping[str, str | None]) -> list:
    out = []
    for n in sorted(sel.node):
        out.append(
            {
                "name": n,
                "version": node[n],
                "reason": "on the node (site_torch_node.txt)",
                "extras": sorted(sel.node[n]),
                "required_by": sorted(sel.required_by[n]),
            }
        )
    for n in sorted(sel.never):
        out.append(
            {
                "name": n,
                "version": lock.get(n),
                "reason": "the node's CUDA stack, or vLLM",
                "required_by": sorted(sel.required_by[n]),
            }
        )
    return out


def stand_in(
    sel: Selection, lock: Mapping[str, str], node: Mapping[str, str | None], python_version: str
) -> tuple[str, str]:
    """requirements.txt and constraints.txt of a CPU venv that stands for the node: the node's
    packages the folder needs, and STAND_IN_EXTRA and the node packages of requirements.txt, at
    the node's versions where known, else the lock's (else dev.txt's: pytest)."""
    dev = {name(m[1]): m[2] for m in re.finditer(r"^([\w.-]+)==(\S+)", _read("dev.txt"), re.M)}
    project = {name(m[1]) for m in re.finditer(r"^([\w.-]+)==", _read("requirements.txt"), re.M)}
    old = python_version == "3.11"

    def version(n: str) -> str | None:
        if n == "torch":
            return lock[n] + CPU_TORCH  # the local CPU build, never a CUDA one
        if node.get(n) and not (old and n in NODE_NOT_ON_PYTHON_311):
            return node[n]
        if n in lock and not (old and n in NOT_ON_PYTHON_311):
            return lock[n]
        return dev.get(n)

    wanted = set(sel.node) | set(STAND_IN_EXTRA) | (project & set(node))
    reqs = []
    for n in sorted(wanted):
        v = version(n)
        extras = f"[{','.join(sorted(sel.node.get(n, ())))}]" if sel.node.get(n) else ""
        reqs.append(f"{n}{extras}=={v}" if v else f"{n}{extras}")
    pinned = {n: version(n) for n in node if not NEVER.match(n)}
    cons = [f"{n}=={v}" for n, v in sorted(pinned.items()) if v]
    return "\n".join(reqs) + "\n", "\n".join(cons) + "\n"


def _read(file: str) -> str:
    return (HERE / file).read_text()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", type=Path)
    p.add_argument("--python-version", default="3.12")
    p.add_argument("--stand-in", type=Path)
    a = p.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    lock = locked(_read("gpu-vllm.lock.txt"))
    node = node_packages(_read("site_torch_node.txt"))
    get = Downloader(a.out, a.python_version)
    sel = select(ROOTS, lock, node, a.python_version, get)
    keep = {n: get.files[n] for n in sel.carry}
    for stale in set(a.out.glob("*.whl")) - set(keep.values()):
        stale.unlink()  # an earlier run's, or a node package's read for an extra
    wheels = [
        {
            "name": n,
            "version": sel.carry[n],
            "file": f.name,
            "sha256": sha256(f),
            "bytes": f.stat().st_size,
            "built_from_sdist": n in get.built,
            "required_by": sorted(sel.required_by[n]),
        }
        for n, f in keep.items()
    ]
    not_needed = [n for n in lock if n not in sel.required_by]
    record = manifest(
        wheels, a.python_version, left_out(sel, lock, node), sel.node_conflicts, not_needed
    )
    (a.out / "manifest.json").write_text(json.dumps(record, indent=1) + "\n")
    if a.stand_in:
        a.stand_in.mkdir(parents=True, exist_ok=True)
        reqs, cons = stand_in(sel, lock, node, a.python_version)
        (a.stand_in / "requirements.txt").write_text(reqs)
        (a.stand_in / "constraints.txt").write_text(cons)
    print(
        f"{record['count']} wheels, {record['total_bytes'] / 1e6:.1f} MB, in {a.out} "
        f"(CPython {a.python_version}; {len(get.built)} built from sdists: "
        f"{', '.join(sorted(get.built)) or 'none'})"
    )
    for c in sel.node_conflicts:
        print(f"node conflict: {c}", file=sys.stderr)
    check_size(record)


if __name__ == "__main__":
    main()
