"""Text2Afford builder: sentence-object pairs with 15 binary affordance labels.

By default the authors' released table, ``data/final_normal_dataset.tsv`` of
github.com/sayantan11995/Affordance at a pinned commit (2,368 pairs; downloaded and checked against its
sha256, or read from ``--source-dir DIR/text2afford/``), and beside it ``data/data_high_agreement.tsv``
(2,498 pairs, a label only where the annotators agreed strongly), whose rows from 1868 on are the
``high_agreement`` config. Where the mirror folder holds raw annotations instead
(``DIR/text2afford/annotations.tsv``: one row per sentence, object and annotator with a 0-3 rating per
class) they are aggregated as the paper describes (binarise, majority of three, agreement, Krippendorff's
alpha); ``high_agreement`` is the pinned table's either way.

>>> from physprobe.dataset_scripts.text2afford.text2afford import TEXT2AFFORD
>>> [config.name for config in TEXT2AFFORD.configs][:3]
['default', 'grasp', 'lift']
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

import datasets

from physprobe.data.builder import Benchmark, Card, Config, MadeRows, read_card_body
from physprobe.data.sources import Upstream, fetch, github_release
from physprobe.dataset_scripts.text2afford.configs import CONFIGS, RELEASED_GENERATIVE_FROM
from physprobe.errors import DataError
from physprobe.generators import text2afford as generator

RELEASE_FILE = "final_normal_dataset.tsv"
HIGH_AGREEMENT_FILE = "data_high_agreement.tsv"  # read by src/LLM/zero_shot_llama-3.py (its last filename, :57)
ANNOTATIONS_FILE = "annotations.tsv"
UPSTREAM = github_release(
    "text2afford",
    "sayantan11995/Affordance",
    "f8593ffc74c90af775d0282629405a3053f9f11f",
    "data",
    {
        RELEASE_FILE: "eaefa0353f145c9bddc59fcf441377eaac90c18f92f19bf8db0b1028f9c26c29",
        HIGH_AGREEMENT_FILE: "c9be1e77c555e07bd6b24bd3f1e86800228b805389897152ac20de1bb5fcac81",
    },
)
FROM_FILE = "_file"  # which upstream table a row comes from (not a column: the configs select on it)
# The high-agreement table alone: raw annotations replace the majority labels, not this table.
HIGH_AGREEMENT = Upstream(
    UPSTREAM.benchmark, UPSTREAM.repository, UPSTREAM.commit, tuple(f for f in UPSTREAM.files if f.path == HIGH_AGREEMENT_FILE)
)

FEATURES = datasets.Features(
    {
        "sentence": datasets.Value("string"),
        "object": datasets.Value("string"),
        "labels": datasets.List(datasets.Value("int8"), length=len(generator.CLASSES)),
        # 15 floats, or null where the source has no annotations (the released table). A variable-length list: a
        # null inside a fixed-size list is unreadable by pyarrow before 26 ("Expected all lists to be of size=15").
        "agreement": datasets.List(datasets.Value("float32")),
        "likert_agreement": datasets.List(datasets.Value("float32")),
    }
)
CLASS_FEATURES = datasets.Features(
    {
        "sentence": datasets.Value("string"),
        "object": datasets.Value("string"),
        "affordance": datasets.Value("string"),
        "label": datasets.ClassLabel(names=["cannot", "can"]),
        "agreement": datasets.Value("float32"),
        "likert_agreement": datasets.Value("float32"),
    }
)


def local_sources(mirror: Path | None) -> dict[str, Path]:
    """Raw annotations found in ``mirror/text2afford`` (they replace the pinned release's majority labels),
    with the pinned high-agreement table beside them; else nothing."""
    path = mirror / "text2afford" / ANNOTATIONS_FILE if mirror else None
    if path is None or not path.is_file():
        return {}
    return {"annotations": path, **fetch(HIGH_AGREEMENT, mirror)}


def _text(path: Path) -> str:
    """The file as UTF-8 text; a byte-order mark or undecodable bytes are errors naming file and line."""
    data = path.read_bytes()
    if data.startswith(b"\xef\xbb\xbf"):
        raise DataError(f"{path}: line 1 starts with a UTF-8 byte-order mark; save the file as UTF-8 without BOM")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise DataError(f"{path}: line {line} is not UTF-8 (byte {data[error.start]:#04x}); save the file as UTF-8") from None


def read_tsv(path: Path, required: list[str], quoted: bool = False) -> list[dict]:
    """Rows of a tab-separated UTF-8 file with a header; bad encoding, missing columns, ragged rows and a
    table with no rows are errors naming the file (and line). ``quoted``: fields may be quoted as pandas
    writes them (``"..."``, doubled quotes inside) and are read as ``pandas.read_csv`` reads them."""
    quoting = csv.QUOTE_MINIMAL if quoted else csv.QUOTE_NONE
    reader = csv.DictReader(io.StringIO(_text(path), newline=""), delimiter="\t", quoting=quoting)
    missing = [c for c in required if c not in (reader.fieldnames or [])]
    if missing:
        raise DataError(f"{path}: header lacks column(s) {', '.join(missing)}")
    rows = []
    for row in reader:
        if None in row or None in row.values():
            raise DataError(f"{path}: line {reader.line_num} does not have the header's {len(reader.fieldnames)} columns")
        rows.append(row)
    if not rows:
        raise DataError(f"{path}: the table has a header but no rows")
    return rows


def _alpha_text(value: float | None) -> str:
    return "undefined (a single annotator or one rating value throughout)" if value is None else f"{value:.3f}"


def make_rows(paths: Mapping[str, Path]) -> MadeRows:
    """Rows and card facts from the pinned release (and its high-agreement table) or, where the mirror holds
    them, raw annotations; each row marked with the table it comes from (``FROM_FILE``)."""
    high = paths[HIGH_AGREEMENT_FILE]
    high_agreement = generator.from_high_agreement(
        read_tsv(high, ["Sentence", "Object", *generator.CLASS_NAMES], quoted=True), str(high)
    )
    if "annotations" in paths:
        path = paths["annotations"]
        annotations = read_tsv(path, ["sentence", "object", "annotator", *generator.CLASS_NAMES])
        rows = generator.aggregate(annotations, str(path))
        binary = Counter(generator.agreement_category(a) for row in rows for a in row["agreement"])
        likert = Counter(generator.agreement_category(a) for row in rows for a in row["likert_agreement"])
        source = (
            f"**Built from raw annotations** (`{path.name}`: {len(annotations):,} ratings by "
            f"{len({a['annotator'] for a in annotations})} annotators), aggregated as the paper describes, "
            "not from the authors' released table."
        )
        agreement = (
            f"Krippendorff's alpha: {_alpha_text(generator.alpha(annotations, 'nominal'))} on the binarised votes "
            f"(nominal), {_alpha_text(generator.alpha(annotations, 'ordinal'))} on the 0-3 ratings (ordinal); "
            "the paper reports 0.68.\n\nTriples per agreement category (> 0.75 high, 0.4-0.75 medium, < 0.4 low): "
            f"binary-majority reading {dict(sorted(binary.items()))}; Likert reading {dict(sorted(likert.items()))}."
        )
    else:
        path = paths[RELEASE_FILE]
        rows = generator.from_release(read_tsv(path, ["Sentence", "Object", *generator.CLASS_NAMES]), str(path))
        source = (
            f"**Built from the authors' released table** (`data/{RELEASE_FILE}` of github.com/{UPSTREAM.repository} "
            f"at commit `{UPSTREAM.commit}`)."
        )
        agreement = (
            "The release holds majority labels only: per-annotator ratings, agreement and Krippendorff's alpha "
            "(0.68 in the paper) cannot be recomputed from it, so `agreement` and `likert_agreement` are null."
        )
    stats = generator.statistics(rows)
    fields = {"source": source, "agreement_summary": agreement,
              **{f"stat_{key}": _figure(value) for key, value in stats.items()}}  # fmt: skip
    marked = [{**row, FROM_FILE: "pairs"} for row in rows]
    marked += [{**row, FROM_FILE: HIGH_AGREEMENT_FILE} for row in high_agreement]
    return MadeRows(marked, fields)


def _pairs(rows: list[dict]) -> list[dict]:
    """The pairs of the release (or of the raw annotations), not of the high-agreement table."""
    return [row for row in rows if row[FROM_FILE] == "pairs"]


def _high_agreement(rows: list[dict]) -> list[dict]:
    """``zero_shot_llama-3.py``'s rows: those of ``data_high_agreement.tsv`` with index 1868 or more (:145)."""
    return [row for row in rows if row[FROM_FILE] == HIGH_AGREEMENT_FILE][RELEASED_GENERATIVE_FROM:]


def _figure(value) -> str:
    if isinstance(value, tuple):
        return f"{value[0]} ({value[1]:,} pairs)"
    if isinstance(value, float):
        return f"{value:,.1f}"
    if isinstance(value, dict):
        return ", ".join(f"{k} {v:,}" for k, v in value.items())
    return f"{value:,}"


def _class_config(index: int) -> Config:
    affordance = generator.CLASSES[index]
    return Config(
        affordance.config,
        CONFIGS[affordance.config],
        select=lambda rows: generator.per_class(_pairs(rows), index),
        features=CLASS_FEATURES,
    )


TEXT2AFFORD = Benchmark(
    name="text2afford",
    upstream=UPSTREAM,
    features=FEATURES,
    configs=(
        Config("default", CONFIGS["default"], select=_pairs),
        *(_class_config(i) for i in range(len(generator.CLASSES))),
        Config(
            "released_generative", CONFIGS["released_generative"], select=lambda rows: _pairs(rows)[RELEASED_GENERATIVE_FROM:]
        ),
        Config("high_agreement", CONFIGS["high_agreement"], select=_high_agreement),
    ),
    card=Card(
        pretty_name="Text2Afford: contextual object affordances from text",
        license="mit",
        task_categories=("text-classification",),
        task_ids=("multi-label-classification",),
        arxiv=("2402.12881",),
        tags=("affordance", "physical-reasoning", "probing", "commonsense"),
        body=read_card_body(__file__),
    ),
    make_rows=make_rows,
    local_sources=local_sources,
)
