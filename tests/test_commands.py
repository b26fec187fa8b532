"""Every command is declared once (grpo_ablation.commands): the CLI, the job worker and the module
mains are built from the table, and every entry point sets the process up the same way."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from grpo_ablation import commands, worker
from grpo_ablation.commands import COMMANDS, SERVED

ROOT = Path(__file__).resolve().parents[1]


def _options(parser):
    return sorted(o for a in parser._actions for o in a.option_strings)


def test_the_cli_is_the_table():
    sub = next(a for a in commands.parser()._actions if a.dest == "command")
    assert list(sub.choices) == list(COMMANDS)
    for name, command in COMMANDS.items():
        assert _options(sub.choices[name]) == _options(command.parser()), name
        command_job = command.job.partition(":")
        assert callable(getattr(__import__(command_job[0], fromlist=["x"]), command_job[2]))


def test_the_worker_serves_exactly_the_served_commands(monkeypatch):
    monkeypatch.setenv(worker.MODE_ENV, "on")
    assert SERVED == ("train", "evaluate", "diagnostics")
    assert [name for name in COMMANDS if worker.wanted(name)] == list(SERVED)


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
    assert not COMMANDS["tables"].may_serve(None)


def test_the_training_modules_main_is_the_train_command():
    done = subprocess.run(
        [sys.executable, "-m", "grpo_ablation.training.train", "--help"],
        capture_output=True,
        text=True,
        check=True,
    )
    for option in _options(COMMANDS["train"].parser()):
        assert option in done.stdout


PROBE = (
    "import os, sys; from grpo_ablation import commands; commands.bootstrap(offline={offline}); "
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
