"""The README as a newcomer reads it: short, its two commands first (the second the one CI runs),
every link and every shipped config in it."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_the_readme_is_read_in_ten_minutes():
    assert len(README.splitlines()) <= 200


def test_its_first_commands_set_up_and_run_then_test_and_ci_runs_the_second():
    block = re.search(r"```bash\n(.*?)```", README, re.S).group(1)
    commands = [line.split("#")[0].strip() for line in block.splitlines()]
    assert commands[:2] == ["make run", "make test"]
    ci = [line.strip() for line in (ROOT / ".ci/run").read_text().splitlines()]
    assert "make test" in ci


def test_every_link_of_the_readme_leads_to_a_file_of_the_clone():
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    local = [link for link in links if "://" not in link]
    assert local and not [link for link in local if not (ROOT / link).exists()]


def test_every_shipped_config_is_named_in_the_readme():
    configs = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "config").glob("*.yaml"))
    assert not [c for c in configs if f"`{c}`" not in README]
