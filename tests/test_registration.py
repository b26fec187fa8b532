"""A study registered before it runs, and a ledger that holds: every change the registration
must refuse, and each way the ledger can be tampered with, with what it catches and what it
cannot."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import pytest

from grpo_ablation.design import registration as reg
from grpo_ablation.design.ledger import Ledger, LedgerError
from grpo_ablation.design.registration import check_registered

ROOT = Path(__file__).resolve().parents[1]

DRAWS = [12, 13, 14, 15]


def study_config(tmp_path: Path) -> dict:
    """The default with a study of two looks (2, 4 draws) and a gatekeeper, recorded under
    ``tmp_path``."""
    from test_design import default_config

    config = default_config()
    config["study"] = {
        "draws": DRAWS,
        "looks": [2, 4],
        "spending": "obrien_fleming",
        "gatekeeper": "population_equals_sample",
        "record": str(tmp_path / "studies" / "x"),
    }
    config["base_policy"]["draws"] = DRAWS[:2]
    config["hypotheses"].pop("constant_push_shortens_incorrect")  # push: not in a study
    return config


def registered(tmp_path: Path) -> dict:
    config = study_config(tmp_path)
    reg.register(config, [])
    return config


def test_a_registration_records_the_design_and_opens_the_ledger(tmp_path):
    config = registered(tmp_path)
    path = reg.registration_file(config)
    record = json.loads(path.read_text())
    assert record["design_sha256"] == reg.sha256_text(reg.canonical(reg.without_draws(config)))
    assert record["looks"] == [2, 4] and record["gatekeeper"] == "population_equals_sample"
    assert record["initial_levels"]["population_equals_sample"] == 0.05
    assert set(record["hypotheses"]) == {h for h in config["hypotheses"]}
    h = record["hypotheses"]["constant_shortens_incorrect"]
    assert {"prediction", "scope", "source", "minimum_effect"} <= set(h)
    assert "on average over base-policy draws" in h["scope"]
    ledger = Ledger(path.parent / "ledger.jsonl")
    assert ledger.registration() == hashlib.sha256(path.read_bytes()).hexdigest()
    assert ledger.entries() == []
    check_registered(config)  # look 1 runs the registered config
    repriced = copy.deepcopy(config)
    # a price measured again, with where it was measured: not the design
    repriced["power"].update(minutes_per_unit=1.0, runs_per_unit=3, minutes_source="a pilot")
    check_registered(repriced)
    reg.register(config, [])  # registering the same design again: nothing changes


def test_a_study_is_registered_before_any_draw_trains_and_once(tmp_path):
    config = study_config(tmp_path)
    with pytest.raises(reg.RegistrationError, match="is not registered"):
        check_registered(config)
    trained = tmp_path / "draw=12"
    trained.mkdir()
    with pytest.raises(reg.RegistrationError, match="before any of its draws trains"):
        reg.register(config, [trained])
    reg.register(config, [])
    other = copy.deepcopy(config)
    other["training"]["learning_rate"] = 1e-3
    with pytest.raises(reg.RegistrationError, match="registers another design"):
        reg.register(other, [])


@pytest.mark.parametrize(
    "change, named",
    [
        # a hypothesis edited
        (
            lambda c: c["hypotheses"]["constant_shortens_incorrect"].update(minimum_effect=0.5),
            "hypotheses.constant_shortens_incorrect.minimum_effect",
        ),
        # a hypothesis added
        (
            lambda c: c["hypotheses"].update(
                extra={**c["hypotheses"]["constant_shortens_incorrect"]}
            ),
            "hypotheses.extra: not registered",
        ),
        # a hypothesis removed
        (
            lambda c: c["hypotheses"].pop("constant_shortens_incorrect"),
            "hypotheses.constant_shortens_incorrect: registered, now missing",
        ),
        # the maximum changed
        (lambda c: c["study"].update(looks=[2, 3]), "study.looks"),
        # the spending rule changed
        (lambda c: c["study"].update(spending="pocock"), "study.spending"),
        # the training protocol changed
        (lambda c: c["training"].update(max_steps=7), "training.max_steps"),
        # a planning SD changed after the fact
        (lambda c: c["power"]["sd"].update(greedy_final=0.5), "power.sd.greedy_final"),
    ],
)
def test_the_registration_refuses_every_change_with_its_key_named(tmp_path, change, named):
    config = registered(tmp_path)
    changed = copy.deepcopy(config)
    change(changed)
    with pytest.raises(reg.RegistrationError, match=named.replace(".", r"\.")):
        check_registered(changed)


def test_how_the_minutes_divide_is_a_price_no_part_of_the_registration(tmp_path):
    """power.minutes_split prices a unit, as minutes_per_unit does: a study registered before the
    default's power section carried one runs on with it, and with it measured again."""
    config = study_config(tmp_path)
    config["power"].pop("minutes_split", None)
    reg.register(config, [])
    for split in ({"draw": 616, "run": 384, "training": 282}, {"draw": 1, "run": 1, "training": 2}):
        check_registered(
            copy.deepcopy(config) | {"power": config["power"] | {"minutes_split": split}}
        )


def test_where_jobs_run_is_no_part_of_the_registration(tmp_path):
    """A registered study may move to a cluster: its config's slurm section and checkpoints_dir
    change no result, and configs without them register as they did before they existed."""
    config = registered(tmp_path)
    moved = copy.deepcopy(config)
    moved["slurm"] = {"account": "a", "gpu_partition": "g", "cpu_partition": "c"}
    moved["checkpoints_dir"] = "/scratch/$USER"
    check_registered(moved)


def test_a_later_look_may_only_withdraw_what_the_ledger_decided(tmp_path):
    """After look 1 decided the gatekeeper, look 2's config is the registered one with it
    withdrawn and the stages no open hypothesis needs left out (the override look 1 wrote);
    keeping a decided hypothesis, or withdrawing an open one, is refused."""
    from snakemake.utils import update_config

    config = registered(tmp_path)
    record = reg.read(config)
    ledger = Ledger(reg.study_folder(config) / "ledger.jsonl")
    decisions = {h: "continue" for h in record["hypotheses"]}
    decisions["population_equals_sample"] = "supported"
    ledger.append({"decisions": decisions}, 1)
    still = {h for h, v in decisions.items() if v == "continue"}
    look2 = copy.deepcopy(config)
    update_config(look2, reg.next_override(record, still, DRAWS))
    check_registered(look2)
    kept = copy.deepcopy(look2)
    kept["hypotheses"]["population_equals_sample"]["enabled"] = True
    with pytest.raises(reg.RegistrationError, match=r"population_equals_sample\.enabled"):
        check_registered(kept)
    dropped = copy.deepcopy(look2)
    dropped["hypotheses"]["constant_shortens_incorrect"]["enabled"] = False
    with pytest.raises(reg.RegistrationError, match=r"constant_shortens_incorrect\.enabled"):
        check_registered(dropped)
    early = copy.deepcopy(look2)  # look 2's override on look 1's draws: look 1 judged again
    early["base_policy"]["draws"] = DRAWS[:2]
    with pytest.raises(reg.RegistrationError, match=r"population_equals_sample\.enabled"):
        check_registered(early)


# -- the ledger's probes -------------------------------------------------------------------------
def two_looks(tmp_path: Path) -> Ledger:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.open("r" * 64)
    ledger.append({"decisions": {"h": "continue"}, "statistics": {"h": {"mean": 0.1}}}, 1)
    ledger.append({"decisions": {"h": "supported"}, "statistics": {"h": {"mean": 0.2}}}, 2)
    return ledger


def test_probe_the_last_line_edited_is_refused(tmp_path):
    ledger = two_looks(tmp_path)
    lines = ledger.path.read_text().splitlines()
    lines[-1] = lines[-1].replace('"supported"', '"refuted"')
    ledger.path.write_text("\n".join(lines) + "\n")
    with pytest.raises(LedgerError, match="not the one its head"):
        ledger.entries()


def test_probe_cut_back_and_judged_again_with_other_numbers_is_refused(tmp_path):
    ledger = two_looks(tmp_path)
    lines = ledger.path.read_text().splitlines()
    ledger.path.write_text("\n".join(lines[:-1]) + "\n")
    with pytest.raises(LedgerError, match="not the one its head"):
        ledger.append({"decisions": {"h": "refuted"}}, 2)


def test_probe_an_earlier_line_rewritten_with_its_chain_recomputed_is_refused(tmp_path):
    ledger = two_looks(tmp_path)
    lines = ledger.path.read_text().splitlines()
    look1 = json.loads(lines[1])
    look1["statistics"]["h"]["mean"] = 0.9
    lines[1] = json.dumps(look1, sort_keys=True, separators=(",", ":"))
    look2 = json.loads(lines[2])
    look2["previous"] = hashlib.sha256(lines[1].encode()).hexdigest()
    lines[2] = json.dumps(look2, sort_keys=True, separators=(",", ":"))
    ledger.path.write_text("\n".join(lines) + "\n")
    with pytest.raises(LedgerError, match="not the one its head"):
        ledger.entries()
    # without the chain recomputed, the chain itself refuses it
    lines[2] = json.dumps({**look2, "previous": "x"}, sort_keys=True, separators=(",", ":"))
    ledger.path.write_text("\n".join(lines) + "\n")
    with pytest.raises(LedgerError, match="chained to the line before"):
        ledger.entries()


def test_probe_a_missing_head_is_refused(tmp_path):
    ledger = two_looks(tmp_path)
    ledger.head.unlink()
    with pytest.raises(LedgerError, match="no head"):
        ledger.entries()


def test_what_the_ledger_cannot_hold_against_both_files_rewritten_together(tmp_path):
    """Documented, not refused: a ledger and head rewritten together (the chain and the head
    recomputed) read as a ledger. Only the study's commits show it."""
    ledger = two_looks(tmp_path)
    lines = ledger.path.read_text().splitlines()
    look2 = json.loads(lines[2])
    look2["decisions"] = {"h": "refuted"}
    lines[2] = json.dumps(look2, sort_keys=True, separators=(",", ":"))
    ledger.path.write_text("\n".join(lines) + "\n")
    ledger.head.write_text(f"2 {hashlib.sha256(lines[2].encode()).hexdigest()}\n")
    assert ledger.entries()[-1]["decisions"] == {"h": "refuted"}


def test_a_push_hypothesis_is_refused_in_a_study(tmp_path):
    from test_design import default_config

    from grpo_ablation.design.axes import DesignError
    from grpo_ablation.design.checks import check_design

    config = default_config()
    config["study"] = {"draws": [12, 13], "looks": [2]}
    config["base_policy"]["draws"] = [12, 13]
    with pytest.raises(DesignError, match="push's replicates, but a study's looks count"):
        check_design(config)


def test_the_look_job_checks_its_design_against_the_registration(tmp_path):
    """The look job sees design.json's sections only: the look's design, written and read back
    as the DAG does, matches; an edited hypothesis in it is named."""
    from grpo_ablation.design.ablation import Design

    config = registered(tmp_path)
    record = reg.read(config)
    design = Design.of(config)
    design.write(tmp_path / "design.json")
    sections = Design.load(tmp_path / "design.json").sections
    open_ = set(record["hypotheses"])
    assert reg.design_differences(record, 0, open_, sections) == []
    edited = copy.deepcopy(config)
    edited["hypotheses"]["constant_shortens_incorrect"]["minimum_effect"] = 0.5
    wrong = reg.design_differences(record, 0, open_, Design.of(edited).sections)
    assert wrong and "minimum_effect" in wrong[0]


def test_a_look_after_the_gatekeeper_is_decided_plans_without_its_sd():
    """config/study.yaml's look 2 withdraws its decided positive control, which declares a planning
    SD of its own (power.sd.lr0_lowers_greedy): the SD leaves with it, and the design plans (a
    look-2 draw was refused before any job with "power.sd names ['lr0_lowers_greedy']"). An SD
    naming nothing at all is still refused."""
    from grpo_ablation.design.ablation import Design
    from grpo_ablation.design.axes import DesignError
    from grpo_ablation.design.hypotheses import Plan

    registered = json.loads((ROOT / "studies/study/registration.json").read_text())
    gatekeeper = registered["gatekeeper"]
    assert gatekeeper in registered["config"]["power"]["sd"]
    still = set(registered["hypotheses"]) - {gatekeeper}
    config = reg.expected_config(registered, 1, still)
    design = Design.of(config)
    assert gatekeeper not in design.sections["power"]["sd"]
    assert Plan.of(design).units == registered["looks"][-1]
    config["power"]["sd"]["lr0_lowers_greedyy"] = config["power"]["sd"][gatekeeper]
    with pytest.raises(DesignError, match="lr0_lowers_greedyy"):
        Plan.of(Design.of(config))
