"""Where ``physprobe score`` reads a benchmark: the published Hub dataset (default) or a local build folder.

``hub("prost", revision=...)`` resolves the revision to a commit once, so every config is read at that
commit and ``run.json`` records it; ``local("build", "prost")`` reads ``physprobe build``'s output and
hashes each config's files (``revision_of``). Either way a source that cannot be read is one ``DataSourceError`` line
that says how to get the data.

>>> local("no-such-folder", "prost")
Traceback (most recent call last):
...
physprobe.errors.DataSourceError: no-such-folder/prost is not a built benchmark; run `physprobe build prost --out no-such-folder... first, or leave out --data to read physprobe/prost from the Hub
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from physprobe.data import sampling
from physprobe.data.sources import build_hint
from physprobe.errors import DataError, DataSourceError

ORG = "physprobe"


@dataclass(frozen=True)
class ConfigRows:
    """The rows of one config that a run scores: their indices in the config's test split, the rows, and the
    revision they were read at (``DataSource.revision_of``)."""

    indices: list[int]
    rows: list[dict]
    revision: str


@dataclass(frozen=True)
class DataSource:
    """A benchmark's data: a Hub dataset repo at a commit (``revision``), or a local folder (``revision`` None)."""

    benchmark: str
    path: str  # "org/name" on the Hub, or the local folder holding README.md and <config>/
    revision: str | None  # the resolved commit of a Hub repo
    config_names: tuple[str, ...]

    @property
    def on_hub(self) -> bool:
        return self.revision is not None

    def load(self, config: str):
        """The ``test`` split of ``config`` as a ``datasets.Dataset``."""
        import datasets

        if config not in self.config_names:
            raise DataSourceError(f"{self.path} has no config {config!r}; it has {', '.join(self.config_names)}")
        if not self.on_hub:  # straight from the Parquet file on disk, never a cached copy of an older one
            from physprobe.data.dataset_folder import read_built

            dataset = read_built(self.path, config)
        else:
            try:
                dataset = datasets.load_dataset(self.path, config, split="test", revision=self.revision)
            except Exception as error:  # noqa: BLE001 - network and file errors of every library below datasets
                raise DataSourceError(
                    f"cannot read config {config!r} of {self.where()}: {type(error).__name__}: {error}"
                ) from None
        self._check_columns(config, dataset.column_names)
        return dataset

    def rows(self, config: str, limit: int | None, groups: Callable[[dict, str], Sequence[str]] | None) -> ConfigRows:
        """The rows of ``config`` a run scores (``sampling.rows_to_score``: ``limit`` of them covering the benchmark's
        ``groups``, or all); a config without rows is a ``DataError``, as no figure is reported over nothing. Chosen
        once per source (a card counts its work from them before it scores them)."""
        chosen = self.__dict__.setdefault("_chosen", {})  # frozen: the memo is the object's own, not a field
        if (config, limit, groups) not in chosen:
            chosen[config, limit, groups] = self._rows(config, limit, groups)
        return chosen[config, limit, groups]

    def _rows(self, config: str, limit: int | None, groups: Callable[[dict, str], Sequence[str]] | None) -> ConfigRows:
        dataset = self.load(config)
        if len(dataset) == 0:
            raise DataError(
                f"config {config} of {self.path} has no rows; rebuild it (physprobe build) or leave it out of --config"
            )
        revision = self.revision_of(config)
        indices = sampling.rows_to_score(dataset, config, limit, groups)
        return ConfigRows(indices, dataset.select(indices).to_list(), revision)

    def _check_columns(self, config: str, columns: list[str]) -> None:
        """Fail, naming the fix, when ``config`` lacks a column this physprobe's builder declares (data built
        or published by another version)."""
        from physprobe.data import registry

        builder = registry.builder(self.benchmark)
        missing = [name for name in (builder.config(config).features or builder.features) if name not in columns]
        if missing:
            fix = (f"rebuild it: physprobe build {self.benchmark} --out {Path(self.path).parent}" if not self.on_hub
                   else "pass the --revision this physprobe version was published with, or build it locally (--data)")  # fmt: skip
            raise DataSourceError(f"config {config!r} of {self.where()} lacks column(s) {', '.join(missing)} that this "
                                  f"physprobe reads (made by another version); {fix}")  # fmt: skip

    def revision_of(self, config: str) -> str:
        """The revision of ``config``'s rows: the Hub commit, or a hash of the local config folder's files."""
        if self.on_hub:
            return self.revision
        from physprobe.util.provenance import folder_hash

        return folder_hash(Path(self.path) / config)

    def where(self) -> str:
        return f"{self.path}@{self.revision[:12]}" if self.on_hub else self.path


def local(data_dir: str | os.PathLike, benchmark: str) -> DataSource:
    """A benchmark built by ``physprobe build`` under ``data_dir``."""
    from datasets import get_dataset_config_names

    folder = Path(data_dir) / benchmark
    if any(c in str(folder) for c in "\n\r[]*?"):  # datasets reads a card's data files as glob patterns, by line
        raise DataSourceError(f"--data {str(data_dir)!r}: the datasets library cannot read a build under a path holding a "
                              "line break or a glob character ([, ], *, ?); move the build to a plain path")  # fmt: skip
    if not (folder / "README.md").is_file():
        raise DataSourceError(f"{folder} is not a built benchmark; run {build_hint(benchmark, data_dir)} first, "
                              f"or leave out --data to read {ORG}/{benchmark} from the Hub")  # fmt: skip
    try:
        names = get_dataset_config_names(str(folder))
    except ImportError:  # a missing package is the cli's "pip install" line, not a damaged card
        raise
    except Exception as error:  # noqa: BLE001 - a damaged card: YAML, metadata or data-file errors of any kind
        reason = " ".join(str(error).split())[:200] or type(error).__name__
        raise DataSourceError(f"{folder / 'README.md'}: the card's configs cannot be read ({reason}); "
                              f"rebuild it with `physprobe build {benchmark} --out {data_dir}`") from None  # fmt: skip
    return DataSource(benchmark, str(folder), None, tuple(names))


def hub(benchmark: str, repo_id: str | None = None, revision: str | None = None) -> DataSource:
    """``repo_id`` (default ``physprobe/<benchmark>``) at ``revision`` (default: the main branch), resolved to a commit."""
    from datasets import get_dataset_config_names
    from huggingface_hub import HfApi
    from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

    repo_id = repo_id or f"{ORG}/{benchmark}"
    if repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise DataSourceError(f"--dataset-repo {repo_id!r} is not ORG/NAME")
    local_way = f"build it locally with {build_hint(benchmark, 'data')} and pass --data data"
    try:
        commit = HfApi().dataset_info(repo_id, revision=revision or "main").sha
        names = get_dataset_config_names(repo_id, revision=commit)
    except RevisionNotFoundError:
        raise DataSourceError(
            f"dataset {repo_id} on the Hub has no revision {revision!r}; leave out --revision for the latest"
        ) from None
    except RepositoryNotFoundError:
        raise DataSourceError(
            f"there is no dataset {repo_id} on the Hub (or it is private); check --dataset-repo, or {local_way}"
        ) from None
    except Exception as error:  # noqa: BLE001 - connection refused, DNS, timeouts, offline mode: the Hub is out of reach
        from huggingface_hub import constants

        raise DataSourceError(f"cannot reach the Hugging Face Hub ({constants.ENDPOINT}) for dataset {repo_id} "
                              f"({type(error).__name__}); {local_way}") from None  # fmt: skip
    return DataSource(benchmark, repo_id, commit, tuple(names))
