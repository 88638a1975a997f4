"""Write a benchmark as a Hub-ready folder: one Parquet file per config and split, plus a dataset card.

Layout of ``OUT/<benchmark>/``::

    README.md                               card: YAML front matter (configs, dataset_info, ...) + body
    <config>/<split>-00000-of-00001.parquet

``datasets.load_dataset("OUT/<benchmark>", CONFIG, split="test")`` reads it, and so does the
Hub once the folder is uploaded. The folder is written under a temporary name beside the target
and swapped in atomically at the end (the target is always the complete old or the complete new
version), so a failed or killed build leaves nothing behind; two builds give byte-identical files.
"""

from __future__ import annotations

import itertools
import os
import string
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.parquet as pq
from datasets.info import DatasetInfosDict
from datasets.utils.metadata import MetadataConfigs
from huggingface_hub import DatasetCard, DatasetCardData

from physprobe.data.builder import Benchmark, MadeRows
from physprobe.errors import DataError
from physprobe.util import progress
from physprobe.util.paths import Owner, check_folder_name, staged


@dataclass(frozen=True)
class BuildResult:
    """Where a benchmark was written and how many rows each config has."""

    benchmark: str
    path: Path
    rows: dict[str, int]


def data_file(config: str, split: str) -> str:
    """Path of a config's Parquet file inside the benchmark folder."""
    return f"{config}/{split}-00000-of-00001.parquet"


def size_category(n: int) -> str:
    """The Hub's ``size_categories`` bucket for ``n`` rows.

    >>> size_category(16), size_category(18736), size_category(160000)
    ('n<1K', '10K<n<100K', '100K<n<1M')
    """
    for limit, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if n < limit:
            return label
    return "n>1M"


def owner(name: str, stream: bool = False):
    """Who owns ``OUT/<name>``: a build of benchmark ``name`` (``write``), or a challenge set (``stream``).

    >>> owner("prost").describe()
    'a build of benchmark prost'
    """
    return Owner("challenge", {"name": name}) if stream else Owner("build", {"benchmark": name})


def _staged(out_dir: Path, name: str, stream: bool = False):
    """A fresh folder beside ``out_dir/name`` that replaces it whole on success (``paths.staged``)."""
    check_folder_name(name, "output name")
    return staged(Path(out_dir) / name, owner(name, stream))


def build(benchmark: Benchmark, out_dir: str | os.PathLike, source_dir: str | os.PathLike | None = None) -> BuildResult:
    """Fetch the upstream files, make the rows and write ``out_dir/<benchmark.name>``."""
    return write(benchmark, benchmark.make_rows(benchmark.sources(source_dir)), out_dir)


def write(benchmark: Benchmark, made: MadeRows, out_dir: str | os.PathLike) -> BuildResult:
    """Write the rows made for ``benchmark`` as a Hub-ready folder under ``out_dir``."""
    out_dir = Path(out_dir)
    with _staged(out_dir, benchmark.name) as staging, \
            progress.bar(f"writing {benchmark.name}", len(benchmark.configs), "configs") as counter:  # fmt: skip
        counts, infos = {}, {}
        for config in benchmark.configs:
            features = config.features or benchmark.features
            rows = made.rows if config.select is None else config.select(made.rows)
            subset = _table(features, rows, f"{benchmark.name}/{config.name}")
            path = staging / data_file(config.name, benchmark.split)
            path.parent.mkdir(parents=True)
            # Fixed writer settings and no timestamps: same rows, same bytes.
            pq.write_table(subset, path, compression="zstd", write_statistics=True)
            counts[config.name] = subset.num_rows
            infos[config.name] = datasets.DatasetInfo(
                description=config.description,
                features=features,
                splits=datasets.SplitDict(
                    {benchmark.split: datasets.SplitInfo(benchmark.split, num_bytes=subset.nbytes, num_examples=subset.num_rows)}
                ),
                download_size=path.stat().st_size,
                dataset_size=subset.nbytes,
            )
            counter.update()
        _card(benchmark, counts, infos, made.card_fields).save(staging / "README.md")
    return BuildResult(benchmark.name, out_dir / benchmark.name, counts)


def stream(
    name: str, features: datasets.Features, rows: Iterable[dict], out_dir: str | os.PathLike, card: str,
    batch_size: int = 10_000,
) -> BuildResult:  # fmt: skip
    """Write rows from an iterator as a one-config folder, in batches, with flat memory.

    ``card`` is the Markdown body of the README (the front matter is added here).
    """
    out_dir = Path(out_dir)
    with _staged(out_dir, name, stream=True) as staging:
        path = staging / data_file("default", "test")
        path.parent.mkdir(parents=True)
        count = 0
        rows = iter(rows)
        with pq.ParquetWriter(path, features.arrow_schema, compression="zstd") as writer, \
                progress.bar(f"writing {name}", None, "rows") as counter:  # fmt: skip
            while batch := list(itertools.islice(rows, batch_size)):
                writer.write_table(_table(features, batch, name))
                count += len(batch)
                counter.update(len(batch))
        data = DatasetCardData(pretty_name=name, size_categories=[size_category(count)])
        MetadataConfigs(
            {"default": {"data_files": [{"split": "test", "path": data_file("default", "test")}]}}
        ).to_dataset_card_data(data)
        info = datasets.DatasetInfo(
            features=features, splits=datasets.SplitDict({"test": datasets.SplitInfo("test", num_examples=count)})
        )
        DatasetInfosDict({"default": info}).to_dataset_card_data(data)
        DatasetCard(f"---\n{data.to_yaml()}\n---\n\n{card}").save(staging / "README.md")
    return BuildResult(name, out_dir / name, {"default": count})


def read_built(folder: str | os.PathLike, config: str, split: str = "test") -> datasets.Dataset:
    """One config of a folder written by ``write``/``stream``, read straight from its Parquet file.

    No datasets cache is involved, so the rows are always those of the file on disk now (a cache keyed
    on paths and times could serve a replaced file's old rows). Errors name the file and the fix.
    """
    path = Path(folder) / data_file(config, split)
    if not path.is_file():
        known = sorted(p.parent.name for p in Path(folder).glob(data_file("*", split)))
        raise DataError(f"{folder} has no config {config!r} (no {path.name} in {path.parent}); known: {', '.join(known)}")
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as error:
        raise DataError(f"{path} is not a readable Parquet file ({error}); rebuild it with `physprobe build`") from None
    return datasets.Dataset(table)


def _table(features: datasets.Features, rows: list[dict], where: str) -> pa.Table:
    # Rows arrive already encoded (ClassLabel as int); pyarrow checks every value against the schema.
    table = pa.Table.from_pylist(rows, schema=features.arrow_schema)
    readable_everywhere(table, where)
    return table


def readable_everywhere(table: pa.Table, where: str) -> None:
    """Refuse a table that some supported pyarrow could not read back: a null fixed-size list (pyarrow
    before 26 reads any such file as "Expected all lists to be of size=N", whichever version wrote it).

    >>> fixed = pa.list_(pa.float32(), 2)
    >>> readable_everywhere(pa.table({"a": pa.array([[1.0, 2.0]], fixed)}), "demo/default")
    >>> readable_everywhere(pa.table({"a": pa.array([None], fixed)}), "demo/default")
    Traceback (most recent call last):
    physprobe.errors.DataError: demo/default: column 'a' is a fixed-size list holding 1 null, which pyarrow before 26 ...
    """
    for name, column in zip(table.column_names, table.columns, strict=True):
        if pa.types.is_fixed_size_list(column.type) and column.null_count:
            raise DataError(f"{where}: column {name!r} is a fixed-size list holding {column.null_count} null, which pyarrow "
                            "before 26 cannot read back; declare it datasets.List(...) without length (a null then reads "
                            "as missing everywhere)")  # fmt: skip


def _configs_table(benchmark: Benchmark, counts: dict[str, int]) -> str:
    lines = ["| config | rows | description |", "|---|---:|---|"]
    lines += [f"| `{c.name}` | {counts[c.name]:,} | {c.description} |" for c in benchmark.configs]
    return "\n".join(lines)


def _card(
    benchmark: Benchmark, counts: dict[str, int], infos: dict[str, datasets.DatasetInfo], fields: dict[str, str]
) -> DatasetCard:
    card = benchmark.card
    data = DatasetCardData(
        pretty_name=card.pretty_name,
        license=card.license,
        language=list(card.language),
        task_categories=list(card.task_categories),
        task_ids=list(card.task_ids) or None,
        size_categories=[size_category(max(counts.values()))],
        source_datasets=list(card.source_datasets),
        paperswithcode_id=card.paperswithcode_id,
        tags=[*card.tags, *(f"arxiv:{paper}" for paper in card.arxiv)] or None,
    )
    MetadataConfigs(
        {
            config.name: {
                "data_files": [{"split": benchmark.split, "path": data_file(config.name, benchmark.split)}],
                **({"default": True} if index == 0 else {}),
            }
            for index, config in enumerate(benchmark.configs)
        }
    ).to_dataset_card_data(data)
    DatasetInfosDict(infos).to_dataset_card_data(data)
    body = string.Template(card.body).substitute(fields, configs_table=_configs_table(benchmark, counts))
    return DatasetCard(f"---\n{data.to_yaml()}\n---\n\n{body}")
