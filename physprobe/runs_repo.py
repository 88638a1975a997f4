"""A Hub dataset repository of score runs: each run's record and predictions, with the report as its card.

``write(folders, out, name)`` reads each folder as ``physprobe report`` does (``report.collect``: one that is
not a finished run is skipped with one line, a second copy of a run is kept once), names the runs as the report
names them, and writes the folder ``out/name``::

    README.md                       the card: one dataset config per run (its predictions), a table of the runs,
                                    then the report (the papers' tables with the runs inside, its notes)
    figures/*.png                   the report's figures
    runs/<config>/spec.json         each run's spec and record, as ``physprobe score`` wrote them
    runs/<config>/run.json
    runs/<config>/metrics.json
    runs/<config>/predictions.parquet   one row per scored question (the Hub's dataset viewer shows it)

Downloaded, every ``runs/<config>`` folder is a run folder again (``physprobe report runs/*`` reads it).
``upload.py --runs`` writes the folder and publishes it beside the benchmarks, as lm-eval's
``--hf_hub_log_args`` publishes results and samples.

>>> config_name("SmolLM2-135M · released-gpt", "prost", set())
'prost-SmolLM2-135M-released-gpt'
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
from pathlib import Path

from huggingface_hub import DatasetCard, DatasetCardData

from physprobe.paths import Owner, check_target, staged
from physprobe.report.blocks import Heading, Paragraph, TableBlock
from physprobe.report.document import headlines
from physprobe.report.output import collect, render
from physprobe.report.writers import to_markdown
from physprobe.run_record import METRICS_JSON, PREDICTIONS, RUN_JSON, SPEC_JSON

NAME_LENGTH = 80  # characters of a config name


def owner(name: str) -> Owner:
    """Who a runs repository folder belongs to: the repository of that name."""
    return Owner("runs", {"repo": name})


def config_name(run_id: str, benchmark: str, taken: set[str]) -> str:
    """A run's dataset config name: its benchmark and report name in letters, digits, ``-`` and ``_``, apart from
    the names ``taken`` (a number added where two runs would share one)."""
    base = re.sub(r"[^A-Za-z0-9_]+", "-", f"{benchmark}-{run_id}").strip("-")[:NAME_LENGTH].rstrip("-")
    name, count = base, 1
    while name in taken:
        count += 1
        name = f"{base}-{count}"
    return name


def write(folders: list[Path], out: Path, name: str) -> Path:
    """Write the runs repository ``out/name`` of the finished runs among ``folders``; its path."""
    target = Path(out) / name
    check_target(target, owner(name))
    runs, skipped = collect([Path(f) for f in folders])
    with staged(target, owner(name)) as staging, tempfile.TemporaryDirectory() as scratch:
        configs: dict[str, object] = {}
        for run in runs:
            config = config_name(run.id, run.record.benchmark, set(configs))
            configs[config] = run
            folder = staging / "runs" / config
            folder.mkdir(parents=True)
            for file in (SPEC_JSON, RUN_JSON, METRICS_JSON, PREDICTIONS):
                shutil.copyfile(run.folder / file, folder / file)
        report = render([run.folder for run in runs], Path(scratch) / "report")
        shutil.copytree(report / "figures", staging / "figures")
        card(name, configs, (report / "report.md").read_text(encoding="utf-8")).save(staging / "README.md")
    for _, why in skipped:
        print(f"physprobe: skipped: {why}", file=sys.stderr)
    return target


def card(name: str, configs: dict, report: str) -> DatasetCard:
    """The repository's card: one config per run (its predictions), the runs in a table, then ``report``."""
    data = DatasetCardData(pretty_name=f"physprobe runs: {name}", tags=["physprobe", "evaluation"])
    data.configs = [{"config_name": config, "data_files": [{"split": "test", "path": f"runs/{config}/{PREDICTIONS}"}]}
                    for config in configs]  # fmt: skip
    rows = [[f"`{config}`", run.id, run.record.model, run.record.benchmark, run.record.protocol,
             headlines(run.record.benchmark, run.metrics)] for config, run in configs.items()]  # fmt: skip
    table = TableBlock(["config", "run", "model", "benchmark", "protocol", "headline"], rows, ["run"] * len(rows))
    intro = Paragraph("Score runs of physprobe, one dataset config per run: its predictions (one row per scored question, "
                      "with the texts the model read). Each `runs/<config>` folder holds the run's `run.json` and "
                      "`metrics.json` beside them; downloaded, `physprobe report runs/*` reads them.")  # fmt: skip
    body = to_markdown([Heading(1, f"physprobe runs: {name}"), intro, table]) + "\n\n" + _demoted(report)
    return DatasetCard(f"---\n{data.to_yaml()}\n---\n\n{body}")


def _demoted(markdown: str) -> str:
    """The report's Markdown with every heading one level down (the card has its own title).

    >>> _demoted("# physprobe report\\n\\n## PROST\\ntext #1")
    '## physprobe report\\n\\n### PROST\\ntext #1'
    """
    return re.sub(r"^(#+) ", r"#\1 ", markdown, flags=re.M)
