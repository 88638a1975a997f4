"""Text2Afford builder: sentence-object pairs with 15 binary affordance labels, from one of three sources.

In order of preference, in the mirror folder's ``text2afford/`` (``--source-dir``):

- ``text2afford.tsv``: the authors' released table (Sentence, Object, one 0/1 column per class);
- ``annotations.tsv``: raw annotations, one row per sentence, object and annotator with a 0-3 rating
  per class, aggregated as the paper describes (binarise, majority of three, agreement, alpha);
- otherwise the ten rows the paper prints (Figure 10), embedded here as ``paper_sample.tsv``, so that
  the build works offline. The card says prominently which source built the folder.

>>> from physprobe.dataset_scripts.text2afford.text2afford import TEXT2AFFORD
>>> [config.name for config in TEXT2AFFORD.configs][:3]
['default', 'grasp', 'lift']
"""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

import datasets

from physprobe.builder import Benchmark, Card, Config, Generated, read_card_body
from physprobe.errors import DataError
from physprobe.generators import text2afford as generator

PAPER_SAMPLE = Path(__file__).with_name("paper_sample.tsv")
RELEASE_FILE = "text2afford.tsv"
ANNOTATIONS_FILE = "annotations.tsv"

FEATURES = datasets.Features(
    {
        "sentence": datasets.Value("string"),
        "object": datasets.Value("string"),
        "labels": datasets.List(datasets.Value("int8"), length=len(generator.CLASSES)),
        "agreement": datasets.List(datasets.Value("float32"), length=len(generator.CLASSES)),
        "likert_agreement": datasets.List(datasets.Value("float32"), length=len(generator.CLASSES)),
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
    """The released table, else raw annotations, found in ``mirror/text2afford``; else the paper sample."""
    folder = mirror / "text2afford" if mirror else None
    for key, name in (("release", RELEASE_FILE), ("annotations", ANNOTATIONS_FILE)):
        if folder and (folder / name).is_file():
            return {key: folder / name}
    return {"paper_sample": PAPER_SAMPLE}


def read_tsv(path: Path, required: list[str]) -> list[dict]:
    """Rows of a tab-separated file with a header; missing columns or ragged rows name the line."""
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        missing = [c for c in required if c not in (reader.fieldnames or [])]
        if missing:
            raise DataError(f"{path}: header lacks column(s) {', '.join(missing)}")
        rows = []
        for row in reader:
            if None in row or None in row.values():
                raise DataError(f"{path}: line {reader.line_num} has {len(reader.fieldnames)} columns expected")
            rows.append(row)
    return rows


def _class_counts(rows: list[dict]) -> str:
    counts = [sum(row["labels"][i] for row in rows) for i in range(len(generator.CLASSES))]
    return ", ".join(f"{c.name} {n}" for c, n in zip(generator.CLASSES, counts))


def generate(paths: Mapping[str, Path]) -> Generated:
    """Rows and card facts from whichever source ``local_sources`` found."""
    ((kind, path),) = paths.items()
    if kind == "annotations":
        annotations = read_tsv(path, ["sentence", "object", "annotator", *generator.CLASS_NAMES])
        rows = generator.aggregate(annotations, str(path))
        binary = Counter(generator.agreement_category(a) for row in rows for a in row["agreement"])
        likert = Counter(generator.agreement_category(a) for row in rows for a in row["likert_agreement"])
        source = (
            f"**Built from raw annotations** (`{path.name}`: {len(annotations):,} ratings by "
            f"{len({a['annotator'] for a in annotations})} annotators), aggregated as the paper describes."
        )
        agreement = (
            f"Krippendorff's alpha: {generator.alpha(annotations, 'nominal'):.3f} on the binarised votes (nominal), "
            f"{generator.alpha(annotations, 'ordinal'):.3f} on the 0-3 ratings (ordinal); the paper reports 0.68.\n\n"
            "Triples per agreement category (> 0.75 high, 0.4-0.75 medium, < 0.4 low): "
            f"binary-majority reading {dict(sorted(binary.items()))}; Likert reading {dict(sorted(likert.items()))}."
        )
    else:
        rows = generator.from_release(read_tsv(path, ["Sentence", "Object", *generator.CLASS_NAMES]), str(path))
        if kind == "release":
            source = f"**Built from the authors' released table** (`{path.name}`)."
        else:
            source = (
                "**Built from the paper sample only: the ten sentence-object pairs printed in the paper's Figure 10, "
                "not the 2,368-pair release.** Rebuild with `physprobe build text2afford --source-dir DIR` where "
                "`DIR/text2afford/text2afford.tsv` is the released table."
            )
        agreement = "Agreement is not known for this source (the table holds majority labels only)."
    fields = {"source": source, "agreement_summary": agreement, "class_counts": _class_counts(rows)}
    return Generated(rows, fields)


def _class_config(index: int) -> Config:
    affordance = generator.CLASSES[index]
    return Config(
        affordance.config,
        f"can a human {affordance.phrase} the object? one row per pair",
        select=lambda rows: generator.per_class(rows, index),
        features=CLASS_FEATURES,
    )


TEXT2AFFORD = Benchmark(
    name="text2afford",
    upstream=None,
    features=FEATURES,
    configs=(
        Config("default", "one row per sentence-object pair with all 15 labels"),
        *(_class_config(i) for i in range(len(generator.CLASSES))),
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
    generate=generate,
    local_sources=local_sources,
)
