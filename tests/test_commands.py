"""Every command is declared once, as a module of grpo_ablation.commands, all in one pattern: the
CLI and the jobs the worker may run are built from the table of them (COMMANDS), the CLI is the one main, and every process is set up the same
way (grpo_ablation.process.bootstrap)."""

import importlib
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from grpo_ablation import cli, commands, worker
from grpo_ablation.commands import COMMANDS, served_jobs

ROOT = Path(__file__).resolve().parents[1]


def _options(parser):
    return sorted(o for a in parser._actions for o in a.option_strings)


def test_the_cli_is_the_table():
    sub = next(a for a in cli.parser()._actions if a.dest == "command")
    assert sorted(sub.choices) == sorted(COMMANDS)
    for name, command in COMMANDS.items():
        assert _options(sub.choices[name]) == _options(command.parser()), name
        assert callable(command.job) and callable(command.arguments)


def test_the_help_lists_the_commands_by_who_runs_them_and_has_a_version(capsys):
    """`grpo-ablation --help`: what a person runs, then what maintains the checkout (the schema's
    generated sections, the job worker), then the pipeline's jobs, each under its heading;
    `--version` prints the package's."""
    from importlib.metadata import version

    from grpo_ablation.commands import ROLES

    text = cli.parser().format_help()
    blocks = text.split("\n\n")
    listed = {}
    for role, heading in ROLES.items():
        block = next(b for b in blocks if b.startswith(f"{heading}:"))
        listed[role] = [line.split()[0] for line in block.splitlines()[1:] if line[2] != " "]
    assert {"plan", "study-register", "study-look", "study-verdicts"} <= set(listed["run"])
    assert listed["maintain"] == ["schema", "worker"]
    assert {"train", "eval-tasks", "push-report", "reading"} <= set(listed["pipeline"])
    assert sorted(n for names in listed.values() for n in names) == sorted(COMMANDS)
    assert {c.name for c in COMMANDS.values() if c.person} == {*listed["run"], *listed["maintain"]}
    assert text.index("What you run:") < text.index("To maintain") < text.index("pipeline's")
    assert "--out" in text  # the one output convention, said once
    with pytest.raises(SystemExit):
        cli.parser().parse_args(["--version"])
    assert capsys.readouterr().out.strip() == version("grpo-ablation")


def test_every_option_of_every_command_says_what_it_is():
    """`grpo-ablation <command> --help` describes each of its arguments, and a command's output
    is always given as --out (`calculations` once took a positional folder; push-report its
    --tables and --figure, reading its --view, eval-tasks its --tasks, which the rule still
    spells)."""
    actions = [(n, a) for n, c in COMMANDS.items() for a in c.parser()._actions]
    bare = [(n, a.option_strings or a.dest) for n, a in actions if a.dest != "help" and not a.help]
    assert bare == []
    assert [n for n, a in actions if a.dest == "out" and not a.option_strings] == []
    outs = {n: a.option_strings for n, a in actions if a.dest == "out"}
    assert {"push-report", "reading", "eval-tasks"} <= set(outs)
    assert all(strings[0] == "--out" for strings in outs.values())
    options = {(n, o) for n, a in actions for o in a.option_strings}
    assert not options & {("push-report", "--tables"), ("push-report", "--figure")}
    assert ("reading", "--view") not in options


def test_every_command_is_a_module_of_one_pattern():
    modules = sorted(p.stem for p in Path(commands.__file__).parent.glob("*.py"))
    assert [m.replace("_", "-") for m in modules if m != "__init__"] == list(COMMANDS)
    for name in COMMANDS:
        module = importlib.import_module(f"grpo_ablation.commands.{name.replace('-', '_')}")
        assert module.HELP and callable(module.run) and callable(module.add_arguments), name
    assert "calibrate" not in COMMANDS and "cost-probe" in COMMANDS  # named for what it measures


def test_the_worker_runs_exactly_the_served_commands(monkeypatch):
    monkeypatch.setenv(worker.MODE_ENV, "on")
    jobs = served_jobs()
    assert list(jobs) == [
        "diagnostics",
        "evaluate",
        "figures",
        "pooled",
        "pooled-figures",
        "push",
        "push-report",
        "reading",
        "tables",
        "token-weights",
        "train",
    ]
    for name, job in jobs.items():
        assert job.run is COMMANDS[name].job and worker.wanted(name)


def test_a_served_command_may_decline_the_worker():
    train, evaluate = COMMANDS["train"], COMMANDS["evaluate"]
    two = train.parser().parse_args(
        ["--base", "b", "--data", "d", "--out", "o", "--compute", '{"processes_per_train_job": 2}']
    )
    assert not train.may_serve(two)
    external = evaluate.parser().parse_args(
        [
            "--run",
            "r",
            "--tasks",
            "t",
            "--out",
            "o",
            "--evaluation",
            '{"external_benchmarks": ["gsm8k"]}',
        ]
    )
    assert not evaluate.may_serve(external)
    assert not COMMANDS["base-policy"].may_serve(None)


def test_the_cli_is_the_one_main():
    package = ROOT / "src" / "grpo_ablation"
    mains = sorted(
        str(p.relative_to(package))
        for p in package.rglob("*.py")
        if 'if __name__ == "__main__"' in p.read_text()
    )
    assert mains == ["cli.py"]
    done = subprocess.run(
        [sys.executable, "-m", "grpo_ablation.cli", "train", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    for option in _options(COMMANDS["train"].parser()):
        assert option in done.stdout


PROBE = (
    "import os, sys; from grpo_ablation.process import bootstrap; bootstrap(offline={offline}); "
    "print(os.environ.get('HF_HUB_OFFLINE'), os.environ.get('ATEN_CPU_CAPABILITY'), "
    "'torch' in sys.modules)"
)


@pytest.mark.parametrize("offline", [True, False])
def test_bootstrap_sets_offline_and_the_pins_before_torch(offline):
    env = {
        k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "ATEN_CPU_CAPABILITY")
    }
    env["GRPO_CPU_NUMERICS"] = "pinned"
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(offline=offline)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout.split()
    has_avx2 = "avx2" in Path("/proc/cpuinfo").read_text()
    assert out == ["1" if offline else "None", "avx2" if has_avx2 else "None", "False"]


# The bytes glibc has in mmapped blocks (mallinfo2's hblkhd) before and after an 8 MiB malloc.
MMAPPED_PROBE = """
import ctypes, sys
from grpo_ablation.process import keep_freed_memory
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]
libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Info
libc.malloc.restype = ctypes.c_void_p
kept = keep_freed_memory() if sys.argv[1] == "kept" else None
before = libc.mallinfo2().hblkhd
block = libc.malloc(8 << 20)
print(kept, libc.mallinfo2().hblkhd - before)
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc settings")
def test_jobs_keep_freed_memory_in_their_heap():
    """bootstrap's ``keep_freed_memory``: an activation-sized block comes from the heap, not from
    pages mapped for it alone (which glibc does by default: the control)."""

    def mmapped(mode: str) -> list[str]:
        return subprocess.run(
            [sys.executable, "-c", MMAPPED_PROBE, mode], capture_output=True, text=True, check=True
        ).stdout.split()

    kept, mapped = mmapped("default")
    assert kept == "None" and int(mapped) >= 8 << 20
    assert mmapped("kept") == ["True", "0"]


@pytest.mark.slow
def test_no_job_command_line_carries_config_as_json(tmp_path):
    """Every job reads its config sections by file (the design's, task, compute, evaluation,
    base_policy, push, prefetch, each run's options): inline, the design's were `make run`'s
    longest line (8 kB for the default, 19 kB with the study) and each run's options 1.4 kB."""
    done = subprocess.run(
        [
            str(Path(sys.executable).with_name("snakemake")),
            "-n",
            "-p",
            "--cores",
            "2",
            "--configfile",
            "config/config.yaml",
            "--config",
            f"results_dir={tmp_path}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={
            **os.environ,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        },
    )
    assert done.returncode == 0, done.stderr[-3000:]
    commands = [line for line in done.stdout.splitlines() if "grpo.py " in line]
    assert any(" design --config " in c for c in commands)
    for kind in (" train ", " push ", " evaluate ", " base-policy ", " eval-tasks ", " splits "):
        assert any(kind in c for c in commands), kind
    assert not [c[:160] for c in commands if "{" in c]


def test_a_json_option_takes_the_json_or_a_file_and_names_a_bad_one(tmp_path, capsys):
    evaluate = COMMANDS["evaluate"].parser()
    section = tmp_path / "evaluation.json"
    section.write_text('{"external_benchmarks": ["gsm8k"]}')
    argv = ["--run", "r", "--tasks", "t", "--out", "o", "--evaluation"]
    inline = evaluate.parse_args([*argv, '{"external_benchmarks": ["gsm8k"]}'])
    assert evaluate.parse_args([*argv, str(section)]).evaluation == inline.evaluation
    with pytest.raises(SystemExit):
        evaluate.parse_args([*argv, str(tmp_path / "missing.json")])
    assert "neither JSON nor a JSON file" in capsys.readouterr().err


def test_a_reader_that_stops_early_ends_a_command_quietly(tmp_path):
    """`grpo-ablation plan ... | head -3`, as a person reads a long output: no traceback when the
    reader has gone before the command prints (a BrokenPipeError before; here the reader reads
    nothing, so it has always gone)."""
    mine = tmp_path / "mine.yaml"
    mine.write_text(
        "experiment: mine\nseeds: [0, 1, 2]\nstages:\n  aggregation:\n"
        "    vary: {aggregation: [sequence_mean, constant]}\n    reference: sequence_mean\n"
    )
    done = subprocess.run(
        f"{sys.executable} -m grpo_ablation.cli plan --configfile {mine} | true",
        shell=True,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, done.stderr
