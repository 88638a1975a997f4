"""A Hub dataset repository of score runs: each run's record and predictions, with the report as its card.

``write(folders, out, name)`` takes the run folders given, and the run folders inside any other folder given (a
parent such as ``runs/<model>/`` holding one run folder per benchmark), reads each as ``physprobe report`` does
(``report.collect``: one that is not a finished run is skipped with one line, a second copy of a run is kept once),
names the runs as the report names them, and writes the folder ``out/name``::

    README.md                       the card: one dataset config per run (its predictions), a table of the runs,
                                    then the report (the papers' tables with the runs inside, its notes)
    figures/*.png                   the report's figures
    runs/<config>/spec.json         each run's spec and record, as ``physprobe score`` wrote them (redacted)
    runs/<config>/run.json
    runs/<config>/metrics.json
    runs/<config>/predictions.parquet   one row per scored question (the Hub's dataset viewer shows it)
    schema/run.schema.json          the JSON Schema of run.json and of metrics.json (``run_record.json_schemas``)
    schema/metrics.schema.json

What is published is an allow-list, verified (``physprobe.publish.verify``): those four files of each run, never
through a link, each as the run folder's marker recorded it, the record agreeing with its predictions; anything else
is refused in one line naming the file, and nothing is written. Every text in them and in the card is redacted
(``physprobe.publish.redaction``): no key, token or credential, no local path (a local model is published as its
folder name and content digest, or as ``model_id``), and the folder is read back for them before it is kept.

Downloaded, every ``runs/<config>`` folder is a run folder again (``physprobe report runs/*`` reads it).
``physprobe publish --runs`` (``upload.py --runs``) writes the folder and publishes it beside the benchmarks, as
lm-eval's ``--hf_hub_log_args`` publishes results and samples.

>>> config_name("SmolLM2-135M · released-gpt", "prost")
'prost-SmolLM2-135M-released-gpt'
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from pathlib import Path

from huggingface_hub import DatasetCard, DatasetCardData

from physprobe.errors import PublishError
from physprobe.publish import redaction
from physprobe.publish.verify import check_record, read_verified
from physprobe.record.run_record import METRICS_JSON, PREDICTIONS, RUN_JSON, SCHEMA_FOLDER, SCHEMAS, SPEC_JSON
from physprobe.report import runs as report_runs
from physprobe.report.blocks import Heading, Paragraph, TableBlock
from physprobe.report.document import headlines
from physprobe.report.output import collect, render
from physprobe.report.runs import Run, load_run, name_runs
from physprobe.report.writers import to_markdown
from physprobe.util.paths import Owner, check_target, staged, written
from physprobe.util.redact import escaped

NAME_LENGTH = 80  # characters of a config name


def owner(name: str) -> Owner:
    """Who a runs repository folder belongs to: the repository of that name."""
    return Owner("runs", {"repo": name})


def config_name(run_id: str, benchmark: str) -> str:
    """A published run's dataset config name: its benchmark and report name in letters, digits, ``-`` and ``_``."""
    return re.sub(r"[^A-Za-z0-9_]+", "-", f"{benchmark}-{run_id}").strip("-")[:NAME_LENGTH].rstrip("-")


def config_names(published: list[Run], identities: list[str]) -> list[str]:
    """The config names of the ``published`` runs (named as the report names them, from what is published: a label,
    a model's published name, never a local path): ``config_name``, and where two would still be one (told apart
    only by characters a name drops, or cut to ``NAME_LENGTH``), each with the first 8 characters of its run's
    ``identities`` (a hash).

    >>> from types import SimpleNamespace as Record
    >>> runs = [Record(id=name, record=Record(benchmark="prost")) for name in ("ckpt (a b)", "ckpt (a/b)", "gpt2")]
    >>> config_names(runs, ["0123456789ab", "fedcba987654", "5555aaaa5555"])
    ['prost-ckpt-a-b-01234567', 'prost-ckpt-a-b-fedcba98', 'prost-gpt2']
    """
    names = [config_name(run.id, run.record.benchmark) for run in published]
    shared = {name for name in names if names.count(name) > 1}
    return [
        f"{name[: NAME_LENGTH - 9]}-{identity[:8]}" if name in shared else name
        for name, identity in zip(names, identities, strict=True)
    ]


def run_folders(folders: list[Path]) -> list[Path]:
    """The run folders among ``folders``, as ``physprobe report`` finds them (``report.runs.run_folders``): each run
    folder given, and for any other folder the run folders in it (``runs/<model>/<benchmark>``, ``runs/``); a folder
    holding none is kept as it is (the report's skip line says why it is no run).

    >>> import tempfile
    >>> from physprobe.record import run_folder
    >>> parent = Path(tempfile.mkdtemp()) / "gpt2"
    >>> for benchmark in ("prost", "newton"):
    ...     _ = run_folder.open_folder(parent / benchmark, run_folder.owner("gpt2", benchmark, local=False))
    >>> [p.name for p in run_folders([parent])]
    ['newton', 'prost']
    """
    return [folder for folder, _ in report_runs.run_folders(folders)]


def write(folders: list[Path], out: Path, name: str, model_id: str | None = None) -> Path:
    """Write the runs repository ``out/name`` of the finished runs among ``folders`` (``run_folders``); its path.
    ``model_id``: what a local model is published as (else its folder name and content digest)."""
    target = Path(out) / name
    check_target(target, owner(name))
    candidates = run_folders([Path(f) for f in folders])
    verified = {
        folder: read_verified(folder) for folder in candidates if os.path.lexists(folder / RUN_JSON) or folder.is_symlink()
    }
    runs, skipped = collect(candidates)
    for run in runs:
        check_record(verified[run.folder])
    local = sorted({redaction.local_model(verified[run.folder]) for run in runs} - {None})
    if model_id and len(local) > 1:
        raise PublishError(f"--model-id {escaped(model_id)!r} names one model, but the runs are of {len(local)} local models "
                           f"({', '.join(sorted(escaped(Path(m).name) for m in local))}); publish each model's runs on their own")  # fmt: skip
    secrets = redaction.environment_secrets()
    with staged(target, owner(name)) as staging, tempfile.TemporaryDirectory() as scratch:
        unnamed, forbidden = staging / "runs", {}
        for index, run in enumerate(runs):  # written under their place first, named once all are published
            files = verified[run.folder]
            published = redaction.published_model(files, model_id)
            redacted = redaction.redaction_for(files, published, secrets)
            forbidden.update(redacted.forbidden())
            folder = unnamed / f".{index}"
            folder.mkdir(parents=True)
            written(folder / SPEC_JSON, redaction.spec_json(files, redacted, published))
            written(folder / RUN_JSON, redaction.run_json(files, redacted, published))
            written(folder / METRICS_JSON, files.contents[METRICS_JSON])
            written(folder / PREDICTIONS, redaction.predictions(files, redacted))
            redaction.check_unaltered(files, folder / PREDICTIONS, redacted)
        published_runs = [load_run(unnamed / f".{index}") for index in range(len(runs))]  # the card reads what is published
        name_runs(published_runs)
        configs = config_names(published_runs, [run.content_key for run in runs])
        for index, config in enumerate(configs):
            (unnamed / f".{index}").rename(unnamed / config)
        with contextlib.chdir(staging):  # the report names each run by its folder in the repository: runs/<config>
            report = _card_report(configs, Path(scratch) / "report", staging)
        (staging / "figures").mkdir()
        for figure in sorted((report / "figures").iterdir()):
            written(staging / "figures" / figure.name, figure.read_bytes())
        (staging / "schema").mkdir()  # run.json's and metrics.json's JSON Schema, for other tools reading the runs
        for schema in SCHEMAS.values():
            written(staging / "schema" / schema, (SCHEMA_FOLDER / schema).read_bytes())
        card(name, dict(zip(configs, published_runs, strict=True)), (report / "report.md").read_text(encoding="utf-8")).save(
            staging / "README.md"
        )
        redaction.check_leaks(staging, forbidden)
    for _, why in skipped:
        print(f"physprobe: skipped: {escaped(why)}", file=sys.stderr)
    return target


def _card_report(configs: list[str], drawn: Path, staging: Path) -> Path:
    """The report of the runs ``runs/<config>``, drawn in the temporary folder ``drawn`` for the card; an ``OSError``
    there (a full disk) names the file of the repository it becomes (``figures/<name>``, else the card, README.md),
    never the temporary folder."""
    try:
        return render([Path("runs") / config for config in configs], drawn)
    except OSError as error:
        named = Path(error.filename) if error.filename else None
        if named is None or not named.is_relative_to(drawn):
            raise
        inside = named.relative_to(drawn)
        becomes = staging / inside if inside.parts[:1] == ("figures",) else staging / "README.md"
        raise OSError(error.errno, error.strerror or str(error), str(becomes)) from None


def card(name: str, configs: dict, report: str) -> DatasetCard:
    """The repository's card: one config per run (its predictions), the runs in a table, then ``report``."""
    data = DatasetCardData(pretty_name=f"physprobe runs: {name}", tags=["physprobe", "evaluation"])
    data.configs = [{"config_name": config, "data_files": [{"split": "test", "path": f"runs/{config}/{PREDICTIONS}"}]}
                    for config in configs]  # fmt: skip
    rows = [[f"`{config}`", run.id, run.record.model, run.record.benchmark, run.record.protocol,
             headlines(run.record.benchmark, run.metrics)] for config, run in configs.items()]  # fmt: skip
    table = TableBlock(["config", "run", "model", "benchmark", "protocol", "headline"], rows, ["run"] * len(rows))
    intro = Paragraph("Score runs of physprobe, one dataset config per run: its predictions (one row per scored question, "
                      "with the texts the model read). Each `runs/<config>` folder holds the run's `spec.json`, `run.json` and "
                      "`metrics.json` beside them; downloaded, `physprobe report runs/*` reads them.")  # fmt: skip
    body = to_markdown([Heading(1, f"physprobe runs: {name}"), intro, table]) + "\n\n" + _demoted(report)
    return DatasetCard(f"---\n{data.to_yaml()}\n---\n\n{body}")


def _demoted(markdown: str) -> str:
    """The report's Markdown with every heading one level down (the card has its own title).

    >>> _demoted("# physprobe report\\n\\n## PROST\\ntext #1")
    '## physprobe report\\n\\n### PROST\\ntext #1'
    """
    return re.sub(r"^(#+) ", r"#\1 ", markdown, flags=re.M)
