"""The rollout log: one gzip member per step, read back whole and in order, cut back on resume,
and the same bytes for the same rows (no timestamp in a member's header)."""

import gzip

from grpo_ablation.training.rollout_log import ROLLOUT_FIELDS, RolloutLog, read_rows


def rows_of(step: int, n: int = 3) -> list[dict]:
    return [
        {**dict.fromkeys(ROLLOUT_FIELDS), "step": step, "completion_index": i} for i in range(n)
    ]


def write(directory, steps) -> RolloutLog:
    log = RolloutLog(directory, rank=0)
    for step in steps:
        log.append(rows_of(step))
    return log


def test_steps_append_members_read_back_in_order(tmp_path):
    log = write(tmp_path, range(4))
    got = list(read_rows([log.path]))
    assert [(r["step"], r["completion_index"]) for r in got] == [
        (s, i) for s in range(4) for i in range(3)
    ]
    assert gzip.decompress(log.path.read_bytes()).count(b"\n") == 12


def test_the_same_rows_give_the_same_bytes_whenever_written(tmp_path):
    a, b = write(tmp_path / "a", range(3)), write(tmp_path / "b", range(3))
    assert a.path.read_bytes() == b.path.read_bytes()
    data = a.path.read_bytes()
    assert data[:2] == b"\x1f\x8b" and data[4:8] == b"\0\0\0\0", "a gzip header, mtime 0"


def test_resume_drops_the_rows_of_the_checkpoint_step_and_after(tmp_path):
    log = write(tmp_path, range(5))
    assert log.truncate_after(3) == 2 * 3
    assert sorted({r["step"] for r in read_rows([log.path])}) == [0, 1, 2]
    log.append(rows_of(3))
    assert [r["step"] for r in read_rows([log.path])][-3:] == [3, 3, 3]
    assert write(tmp_path / "same", range(3)).truncate_after(3) == 0
