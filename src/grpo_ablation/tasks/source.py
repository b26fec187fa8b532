"""A task's source data set, read from its files so that their contents decide what is loaded.

``datasets.load_dataset(folder, name)`` caches a local folder under a key that depends neither on
the folder's full path nor on its files: a second copy with the same folder name and README is
served the first copy's rows (datasets 5.2.0), and so is an updated copy. Here no cache stands
between the files and the rows: a split's files are resolved as ``datasets`` resolves them (the
README's ``configs:`` front matter, else its default file patterns), each file is hashed and parsed
from the same bytes with pyarrow, and the hashes travel with the rows into the split manifest.

A hub data set is its repository's snapshot at the pinned revision in the Hugging Face hub cache
(``HF_HUB_CACHE``): the prefetch rule downloads it, every other job reads that exact snapshot
offline (a commit revision needs no ``refs/`` entry), and a revision missing from the cache stops
the job with its name.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from grpo_ablation.hub import hub_snapshot


@dataclass(frozen=True)
class SourceFile:
    """One data file of a split as it was read."""

    path: str  # relative to the data set's root folder
    sha256: str
    rows: int


@dataclass(frozen=True)
class Source:
    """Where a data set comes from: a local folder, or a hub id at a revision."""

    path: str
    name: str
    revision: str | None = None

    @property
    def is_local(self) -> bool:
        return Path(self.path).is_dir()

    def describe(self) -> str:
        where = self.path if self.is_local else f"{self.path} at revision {self.revision or 'main'}"
        return f"data set {where} (config {self.name!r})"

    def root(self, download: bool = False) -> Path:
        """The folder holding the data set's files: the local folder, or the hub snapshot."""
        if self.is_local:
            return Path(self.path)
        return hub_snapshot(self.path, self.revision, "dataset", download)

    def read(self, split: str) -> tuple[list[dict[str, Any]], list[SourceFile]]:
        """The rows of ``split`` in file order, and the files they were read from."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        root = self.root()
        rows: list[dict[str, Any]] = []
        files: list[SourceFile] = []
        for path in split_files(root, self.name, split):
            data = path.read_bytes()
            # One thread: arrow's thread pool is not worth it for a few MB, and its C++ threads
            # once aborted a short-lived job at exit ("terminate called without an active
            # exception") after its work was done.
            table = pq.read_table(pa.BufferReader(data), use_threads=False)
            rows += table.to_pylist()
            relative = os.path.relpath(path, root)
            files.append(SourceFile(relative, hashlib.sha256(data).hexdigest(), table.num_rows))
        return rows, files

    def files(self, splits: tuple[str, ...]) -> dict[str, list[dict[str, Any]]]:
        """Per split, the files' records (path, sha256, rows): what the prefetch rule records."""
        return {s: [asdict(f) for f in self.read(s)[1]] for s in splits}


def split_files(root: Path, name: str, split: str) -> list[Path]:
    """The parquet files of config ``name``'s ``split`` under ``root``, as ``datasets`` finds them."""
    from datasets.data_files import DataFilesDict, get_data_patterns, sanitize_patterns
    from datasets.utils.metadata import MetadataConfigs
    from huggingface_hub import DatasetCard

    readme = root / "README.md"
    card = DatasetCard.load(readme).data if readme.is_file() else None
    configs = MetadataConfigs.from_dataset_card_data(card) if card is not None else {}
    if configs:
        if name not in configs:
            raise ValueError(f"{root} declares the configs {sorted(configs)}, not {name!r}")
        config = configs[name]
        if "data_files" in config:
            patterns = sanitize_patterns(config["data_files"])
        else:  # a config that names a folder (data_dir): the file-name conventions inside it
            root = root / config.get("data_dir", "")
            patterns = {str(k): v for k, v in get_data_patterns(str(root)).items()}
    else:  # no README configs: the file-name conventions, under the config's folder if any
        base = root / name if (root / name).is_dir() else root
        patterns = {str(k): v for k, v in get_data_patterns(str(base)).items()}
        root = base
    if split not in patterns:
        raise ValueError(f"{root} has no {split!r} split for config {name!r} ({sorted(patterns)})")
    found = [Path(f) for f in DataFilesDict.from_patterns(patterns, base_path=str(root))[split]]
    if not found:
        raise FileNotFoundError(f"no data files for split {split!r} of config {name!r} in {root}")
    other = [f.name for f in found if f.suffix != ".parquet"]
    if other:
        raise ValueError(f"only parquet data files are read; {root} has {other} for {split!r}")
    return found
