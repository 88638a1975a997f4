"""CConS builder: the eight released CSVs, one config each, every row once and in upstream order.

>>> from physprobe.dataset_scripts.cccons.cccons import CCCONS
>>> [config.name for config in CCCONS.configs]
['ordinary', 'ccommon', 'ordinary_easy', 'ordinary_hard', 'ccommon_easy', 'ccommon_hard', 'ordinary_nocontext', 'ccommon_nocontext']
"""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

import datasets

from physprobe.data.builder import Benchmark, Card, Config, MadeRows, keep, read_card_body
from physprobe.data.sources import github_release
from physprobe.dataset_scripts.cccons.configs import CONFIGS
from physprobe.errors import DataError
from physprobe.generators import cccons as generator

UPSTREAM = github_release(
    "cccons",
    "cfkazu/Counter-Commonsense-Context",
    "5d6356d2e6b0f8b9664d8d2f064b10afb57d29cb",
    "dataset",
    {
        "normal_auto_new.csv": "524f91422d76b544303adf779db812f98e391a9b8a8a19f07394085d9f054423",
        "adversarial_auto_new.csv": "ac1c437e776f9d1c79924cd2f9ca70911644d2b8695955e679d487d69d286806",
        "normal_auto_easy_new.csv": "6c0075ec0c57373ad355bbbeb4ff97374c7ee90b2a81605043ce071279f3fa31",
        "normal_auto_difficult_new.csv": "a15c7eed86a90600dd7c097f803830d9c47b830b10e70f32a324d4f28ebc3819",
        "adversarial_auto_easy_new.csv": "4941fc8bf84ef22b0eb89abef092a48d30379dca9622182b2040397df8ba57ec",
        "adversarial_auto_difficult_new.csv": "7f5495bab9f0d06f5c023b119e4268a3aec8606db986f516cfb7eb23b536e6e2",
        "normal_auto_nocontext_new.csv": "5e8fa9d12be212e49c9744a2b120f9140559da17f7812405ee401e3234382e1d",
        "adversarial_auto_nocontext_new.csv": "daee8fb93e4d04d900faa5db2706ef735a84eb960d055b84d754d0e0ceee5b2d",
    },
)

# config -> (file, subset, difficulty of every row or None)
FILES = {
    "ordinary": ("normal_auto_new.csv", "ordinary", None),
    "ccommon": ("adversarial_auto_new.csv", "ccommon", None),
    "ordinary_easy": ("normal_auto_easy_new.csv", "ordinary", "easy"),
    "ordinary_hard": ("normal_auto_difficult_new.csv", "ordinary", "hard"),
    "ccommon_easy": ("adversarial_auto_easy_new.csv", "ccommon", "easy"),
    "ccommon_hard": ("adversarial_auto_difficult_new.csv", "ccommon", "hard"),
    "ordinary_nocontext": ("normal_auto_nocontext_new.csv", "ordinary", None),
    "ccommon_nocontext": ("adversarial_auto_nocontext_new.csv", "ccommon", None),
}
FEATURES = datasets.Features(
    {
        "context": datasets.Value("string"),
        "obj1": datasets.Value("string"),
        "obj2": datasets.Value("string"),
        "label": datasets.ClassLabel(names=list(generator.LABELS)),
        "subset": datasets.Value("string"),
        "difficulty": datasets.Value("string"),
        "template_id": datasets.Value("string"),
        "mlm_input": datasets.Value("string"),
        "generative_input": datasets.Value("string"),
    }
)
GENERATED_FEATURES = datasets.Features({**FEATURES, "generated": datasets.Value("bool")})


def read_csv(path: Path) -> list[dict]:
    """Rows of an upstream CSV (no header: context, obj1, obj2, label), errors naming file and line."""
    rows = []
    with open(path, newline="", encoding="utf-8") as handle:
        for line, fields in enumerate(csv.reader(handle), start=1):
            if len(fields) != 4:
                raise DataError(f"{path}: line {line} has {len(fields)} columns, expected 4 (context, obj1, obj2, label)")
            context, obj1, obj2, label = fields
            if label not in ("0", "1"):
                raise DataError(f"{path}: line {line}: label must be 0 or 1, got {label!r}")
            rows.append({"context": context, "obj1": obj1, "obj2": obj2, "label": int(label), "line": line})
    return rows


def released(paths: Mapping[str, Path]) -> dict[str, list[dict]]:
    """Every config's rows with ``subset`` and ``difficulty``; main-file rows get the difficulty of the
    split file that holds the same row (None when neither does)."""
    by_config = {}
    for config, (file, subset, difficulty) in FILES.items():
        by_config[config] = [row | {"subset": subset, "difficulty": difficulty} for row in read_csv(paths[file])]
    for subset in ("ordinary", "ccommon"):
        split_of = {}
        for difficulty in ("easy", "hard"):
            for row in by_config[f"{subset}_{difficulty}"]:
                split_of[(row["context"], row["obj1"], row["obj2"], row["label"])] = difficulty
        for row in by_config[subset]:
            row["difficulty"] = split_of.get((row["context"], row["obj1"], row["obj2"], row["label"]))
    return by_config


def induction(paths: Mapping[str, Path]) -> generator.Induction:
    """Templates induced from every released row with context (errors name the file and line)."""
    rows = []
    for config, config_rows in released(paths).items():
        if "nocontext" in config:
            continue
        for row in config_rows:
            try:
                generator.induce(row["context"], row["obj1"], row["obj2"], row["label"])
            except DataError as error:
                raise DataError(f"{paths[FILES[config][0]]}: line {row['line']}: {error}") from None
            rows.append(row)
    return generator.induce_templates(rows)


def make_rows(paths: Mapping[str, Path]) -> MadeRows:
    """All eight configs' rows (tagged with their config) and the induction figures for the card."""
    by_config = released(paths)
    induced = induction(paths)
    rows = []
    for config, config_rows in by_config.items():
        for row in config_rows:
            template_id = induced.template_id(row["context"], row["obj1"], row["obj2"], row["label"]) if row["context"] else None
            fields = (row["context"], row["obj1"], row["obj2"], row["label"], row["subset"], row["difficulty"], template_id)
            rows.append(generator.row(*fields) | {"config": config})
    return MadeRows(rows, card_fields(by_config, induced))


def card_fields(by_config: Mapping[str, list[dict]], induced: generator.Induction) -> dict[str, str]:
    """Figures of the release and of the induction, for the card."""
    main = by_config["ordinary"] + by_config["ccommon"]
    order = generator.partial_order(main)
    rows_per_template = Counter(induced.template_id(r["context"], r["obj1"], r["obj2"], r["label"]) for r in main)
    nouns = {
        noun for t in induced.templates.values() for slot, values in t.lexicons.items() if slot != "agent" for noun in values
    }
    agents = {noun for t in induced.templates.values() for noun in t.lexicons.get("agent", ())}
    uncovered = {s: sum(r["difficulty"] is None for r in by_config[s]) for s in ("ordinary", "ccommon")}
    return {
        "n_main": f"{len(main):,}",
        "n_templates": str(len(induced.templates)),
        "n_templates_main": str(len(rows_per_template)),
        "template_sizes": ", ".join(
            f"{count} templates with {size} rows" for size, count in sorted(Counter(rows_per_template.values()).items())
        ),
        "n_nouns": str(len(nouns)),
        "agents": ", ".join(sorted(agents)),
        "article_exceptions": ", ".join(f'"{a} {n}"' for n, a in induced.articles.items()) or "none",
        "order_facts": f"{order.facts:,}",
        "order_size": f"{order.size:,}",
        "order_contradictions": str(len(order.contradictions())),
        "uncovered": f"{uncovered['ordinary']} Ordinary and {uncovered['ccommon']} CCommon",
    }


def _config(name: str) -> Config:
    return Config(name, CONFIGS[name], keep(lambda row: row["config"] == name))


CCCONS = Benchmark(
    name="cccons",
    upstream=UPSTREAM,
    features=FEATURES,
    configs=tuple(_config(name) for name in CONFIGS),
    card=Card(
        pretty_name="CConS: Counter-commonsense Contextual Size comparison",
        license="mit",
        task_categories=("text-classification", "fill-mask"),
        arxiv=("2306.02258",),
        tags=("physical-reasoning", "commonsense", "size-comparison", "probing", "counterfactual"),
        body=read_card_body(__file__),
    ),
    make_rows=make_rows,
)


GENERATED = Benchmark(
    name="cccons_generated",
    upstream=UPSTREAM,
    features=GENERATED_FEATURES,
    configs=(Config("default", "new rows from the induced CConS templates"),),
    card=Card(
        pretty_name="CConS, new examples from the induced templates",
        license="mit",
        task_categories=("text-classification", "fill-mask"),
        body=(
            "# CConS: new examples from the induced templates\n\n"
            "$n rows generated by `physprobe generate cccons --n $n --seed $seed`: the released CConS templates "
            "(induced from the release) filled with noun pairs the release does not have, labelled by each "
            "template's size relation, Ordinary or CCommon by the commonsense order the release implies. "
            "Columns as in `physprobe/cccons`, plus `generated` (always true).\n\n$configs_table\n"
        ),
    ),
    make_rows=lambda paths: MadeRows([]),
)


def generate_new(paths: Mapping[str, Path], n: int, seed: int) -> MadeRows:
    """``n`` new rows (see ``generator.new_examples``) with the card fields of ``GENERATED``."""
    by_config = released(paths)
    order = generator.partial_order(by_config["ordinary"] + by_config["ccommon"])
    rows = generator.new_examples(induction(paths), order, n, seed)
    return MadeRows(rows, {"n": str(n), "seed": str(seed)})
