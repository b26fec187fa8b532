"""A task's source data are the files' contents: a local folder is read from its files (no cache
keyed by its name), a hub data set from the exact snapshot of its pinned revision, offline; the
manifest records the source files' hashes, a change since the prefetch rule read them stops the
splits job, and a split larger than the data is refused with the numbers."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from conftest import cache_revision_only

from grpo_ablation.tasks.math import MathTask, write_splits
from grpo_ablation.tasks.source import Source
from grpo_ablation.tasks.word_problem_generator import write_word_problems

REVISION = "cc7b047b6e5bb11b4f1af84efc572db110a51b3c"


def test_the_test_session_has_its_own_hugging_face_cache():
    import datasets
    from huggingface_hub import constants

    home = Path(os.environ["HF_HOME"])
    assert home.parent == Path(tempfile.gettempdir()) and home.name.startswith("grpo-tests-hf-")
    for cache in (datasets.config.HF_DATASETS_CACHE, constants.HF_HUB_CACHE):
        assert Path(cache).is_relative_to(home), cache


@pytest.mark.parametrize("order", ["small_first", "large_first"])
def test_folders_alike_in_name_and_readme_load_their_own_rows(tmp_path, order):
    small = write_word_problems(tmp_path / "a" / "gsm8k", 100, 24, 0)
    large = write_word_problems(tmp_path / "b" / "gsm8k", 100, 200, 0)
    assert (small / "README.md").read_bytes() == (large / "README.md").read_bytes()
    folders = [small, large] if order == "small_first" else [large, small]
    tests = {folder: Source(str(folder), "main").read("test") for folder in folders}
    assert [len(tests[f][0]) for f in (small, large)] == [24, 200]
    assert tests[small][1][0].sha256 != tests[large][1][0].sha256
    for folder in folders:
        task = MathTask(dataset_path=str(folder), n_validation=10)
        manifest = write_splits(task, tmp_path / "splits" / folder.parent.name)
        assert manifest["splits"]["test"]["count"] == len(tests[folder][0])
        digest = hashlib.sha256((folder / "main" / "test-00000-of-00001.parquet").read_bytes())
        rows = len(tests[folder][0])
        assert manifest["source"]["files"]["test"] == [
            {"path": "main/test-00000-of-00001.parquet", "sha256": digest.hexdigest(), "rows": rows}
        ]


def test_a_hub_data_set_is_read_offline_from_its_pinned_snapshot(tmp_path, monkeypatch):
    from huggingface_hub import constants

    cache = tmp_path / "hub"
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    pinned = write_word_problems(tmp_path / "pinned", 100, 30, 0)
    newer = write_word_problems(tmp_path / "newer", 100, 40, 1)
    cache_revision_only(cache, "openai/gsm8k", REVISION, pinned, "dataset")
    cache_revision_only(
        cache, "openai/gsm8k", "f" * 40, newer, "dataset"
    )  # another, more recent revision
    assert not (cache / "datasets--openai--gsm8k" / "refs").exists()

    task = MathTask(revision=REVISION, n_validation=10)
    rows, files = task.data_source().read("test")
    assert len(rows) == 30 and files[0].path == "main/test-00000-of-00001.parquet"
    assert rows == Source(str(pinned), "main").read("test")[0]
    fetched = task.prefetch()  # offline: the cache already holds it, nothing is downloaded
    assert fetched["revision"] == REVISION and fetched["root"].endswith(REVISION)
    manifest = write_splits(task, tmp_path / "splits", fetched=fetched)
    assert manifest["splits"]["test"]["count"] == 30
    assert manifest["source"]["files"] == fetched["files"]

    missing = "0" * 40
    with pytest.raises(FileNotFoundError, match=f"openai/gsm8k at revision {missing}"):
        MathTask(revision=missing).data_source().read("test")


def test_files_changed_since_the_prefetch_stop_the_splits_job(tmp_path):
    data = write_word_problems(tmp_path / "gsm8k", 100, 24, 0)
    task = MathTask(dataset_path=str(data), n_validation=10)
    fetched = task.prefetch()
    before = fetched["files"]["test"][0]["sha256"]
    shutil.rmtree(data)
    write_word_problems(data, 100, 24, 1)  # same name, same sizes, other rows
    after = hashlib.sha256((data / "main" / "test-00000-of-00001.parquet").read_bytes())
    with pytest.raises(ValueError, match="changed since the prefetch") as err:
        write_splits(task, tmp_path / "splits", fetched=fetched)
    assert before in str(err.value) and after.hexdigest() in str(err.value)
    assert not (tmp_path / "splits").exists(), "nothing is written"
    assert write_splits(task, tmp_path / "splits", fetched=task.prefetch())["splits"]


@pytest.fixture(scope="module")
def small_source(tmp_path_factory) -> Path:
    """A GSM8K-layout folder with 50 train and 24 test rows."""
    return write_word_problems(tmp_path_factory.mktemp("sizes") / "gsm8k", 50, 24, 0)


@pytest.mark.parametrize(
    ("sizes", "split", "asked", "available"),
    [
        ({"n_validation": 10, "n_test": 25}, "test", 25, 24),
        ({"n_validation": 51}, "validation", 51, 50),
        ({"n_validation": 10, "n_train": 41}, "train", 41, 40),
    ],
)
def test_a_split_larger_than_the_data_is_refused(
    small_source, tmp_path, sizes, split, asked, available
):
    task = MathTask(dataset_path=str(small_source), **sizes)
    with pytest.raises(ValueError) as err:
        write_splits(task, tmp_path / "splits")
    message = str(err.value)
    assert f"split {split!r}: {asked} rows asked for (task.n_{split})" in message
    assert f"has {available}" in message and str(small_source) in message
    assert not (tmp_path / "splits").exists(), "nothing is written"


def test_validation_that_leaves_no_training_rows_is_refused(small_source, tmp_path):
    with pytest.raises(ValueError, match="n_validation=50 leaves no training rows"):
        write_splits(MathTask(dataset_path=str(small_source), n_validation=50), tmp_path)


def test_splits_of_exactly_the_available_size_are_written(small_source, tmp_path):
    task = MathTask(dataset_path=str(small_source), n_validation=10, n_train=40, n_test=24)
    manifest = write_splits(task, tmp_path)
    assert {s: (v["count"], v["requested"]) for s, v in manifest["splits"].items()} == {
        "train": (40, 40),
        "validation": (10, 10),
        "test": (24, 24),
    }
    every = write_splits(
        MathTask(dataset_path=str(small_source), n_validation=10), tmp_path / "all"
    )
    assert {s: (v["count"], v["requested"]) for s, v in every["splits"].items()} == {
        "train": (40, None),
        "validation": (10, 10),
        "test": (24, None),
    }
    written = json.loads((tmp_path / "manifest.json").read_text())
    assert written["task_config"]["n_test"] == written["splits"]["test"]["count"]
