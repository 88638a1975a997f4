"""PROST builder: the 18,736 questions of the published ``corypaik/prost`` from the upstream YAML templates.

Configs: ``default`` (every question) and one per concept, named by the ``group`` column.

>>> from physprobe.dataset_scripts.prost.prost import PROST
>>> [config.name for config in PROST.configs][:4]
['default', 'directions', 'mass', 'height']
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import datasets
import yaml

from physprobe.data.builder import Benchmark, Card, Config, MadeRows, keep, read_card_body
from physprobe.data.sources import github_release
from physprobe.dataset_scripts.prost.configs import CONFIGS
from physprobe.errors import DataError, PhysprobeError
from physprobe.generators import prost as generator

TEMPLATE_FILES = (
    "bouncing.yml", "breaking.yml", "circumference.yml", "directions.yml", "grasping.yml",
    "height.yml", "mass.yml", "rolling.yml", "sliding.yml", "stacking.yml",
)  # fmt: skip
LEXICON_FILE = "globals/lexicons.yml"

UPSTREAM = github_release(
    "prost",
    "nala-cub/prost",
    "32af8d87be2c5a9bb9b02e82582eb0d5a955bf18",
    "data/prost",
    {
        "bouncing.yml": "85ef0256362cdbb9321b1a43ec8df28f2994d05e4808e357132741c9983f74d7",
        "breaking.yml": "2b46107a0dc74cca2f7aa6fab3ef97a31fb761e7500836bbc5354e0921e0ea11",
        "circumference.yml": "baef732b3aadb58770013e76ba0211f8fec39a42b5e31404806fcd381e1c947e",
        "directions.yml": "8b458c45a2306ea626c569cb04d4dd36309c76e7c33ed49fec117ca19e3822ed",
        "grasping.yml": "524d60e7cc395e912e10943822ba4bb4bc5bcc5c73bc947e36d6df4900f5f29e",
        "height.yml": "202b30e57ed21a140b8682e697b8400a3d037722260e1842030274696ba6df8c",
        "mass.yml": "e8625f6fbe5ce32bcf2062ecbb1597283308cb6ef1c1ed0b6e7258b9c1c6f1dd",
        "rolling.yml": "003c37f5771af988c5e4b5c85627d4fd612044524c3f1f41bd914f6355cf198e",
        "sliding.yml": "9dff71028a0db58e895c2a190b01c3012b0f16397f6632c2b8942acab4a5c8ee",
        "stacking.yml": "8fd4439f5238bcf4864b06a54ebd7e45fd390d3fcf7234b5ea310751a7f0b4a4",
        LEXICON_FILE: "df508518b28a9a639565f442e9d234b997f277f2c57938363b3de7cc1369d054",
    },
)

# Column names and types of the published dataset ``corypaik/prost``.
FEATURES = datasets.Features(
    {
        "A": datasets.Value("string"),
        "B": datasets.Value("string"),
        "C": datasets.Value("string"),
        "D": datasets.Value("string"),
        "context": datasets.Value("string"),
        "question": datasets.Value("string"),
        "ex_question": datasets.Value("string"),
        "group": datasets.Value("string"),
        "label": datasets.ClassLabel(names=list(generator.OPTIONS)),
        "name": datasets.Value("string"),
        "example_idx": datasets.Value("int32"),
    }
)


def _concept(concept: str):
    return keep(lambda row: row["group"] == concept)


def load_yaml(path: Path) -> object:
    """Parse one upstream YAML file; a syntax error names the file."""
    try:
        return yaml.load(path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as error:
        raise DataError(f"{path}: malformed YAML: {error}") from None


def read_templates(paths: Mapping[str, Path]) -> tuple[list[dict], dict[str, list[str]]]:
    """The templates of every YAML file and the global lexicons, validated, errors naming the file."""
    lexicons = load_yaml(paths[LEXICON_FILE])
    if not isinstance(lexicons, dict) or not all(
        isinstance(values, list) and all(isinstance(v, str) for v in values) for values in lexicons.values()
    ):
        raise DataError(f"{paths[LEXICON_FILE]}: lexicons must map names to lists of strings")
    templates = []
    for name in TEMPLATE_FILES:
        loaded = load_yaml(paths[name])
        if not isinstance(loaded, dict) or not isinstance(loaded.get("configs"), list):
            raise DataError(f"{paths[name]}: expected a top-level 'configs' list of templates")
        for index, template in enumerate(loaded["configs"]):
            generator.validate_template(template, f"{paths[name]}: configs[{index}]")
            templates.append((paths[name], template))
    return templates, lexicons


def make_rows(paths: Mapping[str, Path]) -> MadeRows:
    """All PROST rows, in upstream order, from the upstream files."""
    templates, lexicons = read_templates(paths)
    rows = []
    for path, template in templates:
        try:
            rows += generator.questions(template, lexicons)
        except PhysprobeError as error:
            raise type(error)(f"{path}: {error}") from None
    return MadeRows(generator.order(rows))


PROST = Benchmark(
    name="prost",
    upstream=UPSTREAM,
    features=FEATURES,
    configs=tuple(
        Config(name, description, None if name == "default" else _concept(name)) for name, description in CONFIGS.items()
    ),
    card=Card(
        pretty_name="PROST: Physical Reasoning about Objects through Space and Time",
        license="apache-2.0",
        task_categories=("question-answering", "multiple-choice"),
        task_ids=("multiple-choice-qa", "open-domain-qa"),
        arxiv=("2106.03634",),
        tags=("physical-reasoning", "probing", "zero-shot", "cloze", "checklist"),
        body=read_card_body(__file__),
    ),
    make_rows=make_rows,
)
