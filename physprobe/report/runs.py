"""Run folders written by ``physprobe score``, as the report reads them (through ``physprobe.record.run_record``), and
the names the report gives them: a run's ``--label``, else its model's name, with what tells it apart from the
report's other runs of that name on the same benchmark.

>>> name(["gpt2", "gpt2", "t5-small"], [["sentence-sum", "raw prompts"], ["released-gpt", "raw prompts"], ["x", "y"]])
['gpt2 (sentence-sum)', 'gpt2 (released-gpt)', 't5-small']
>>> name(["gpt2", "gpt2"], [["a"], ["a"]])
['gpt2 #1', 'gpt2 #2']
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path

from physprobe.data import registry
from physprobe.errors import ReportError, RunRecordError
from physprobe.protocols import ProtocolError
from physprobe.record import run_record
from physprobe.record.run_record import RunRecord
from physprobe.record.spec import short_name
from physprobe.report.tables import paper_tables
from physprobe.util.paths import vouched


@dataclass
class Run:
    """A run in the report: its folder, its record, and its name (``id``), unique among the report's runs of its
    benchmark (``name_runs``); ``parent``: its card run's folder (``run_folders``), if any; ``differences``: where the
    report compares it with its benchmark's reference run, per metrics.json key the reference's name and the
    ``compare.Difference`` (``differences.sections``)."""

    folder: Path
    record: RunRecord
    id: str = field(init=False)
    parent: Path | None = None
    differences: dict = field(default_factory=dict)

    def __post_init__(self):
        self.id = model_name(self.record)

    @property
    def content_key(self) -> str:
        """A hash of which model was measured, what and on what, not of how run.json lays it out or how long it took:
        the same run scored twice has the same key."""
        record = self.record
        chat = None if record.chat is None else dataclasses.asdict(record.chat)
        measured = [
            record.model,
            record.backend.get("gguf_file"),
            record.benchmark,
            record.method,
            record.protocol,
            list(record.configs),
            record.limit,
            chat,
        ]
        canonical = json.dumps([measured, record.dataset.revisions, record.metrics], sort_keys=True, default=str).encode()
        return hashlib.sha256(canonical).hexdigest()

    @property
    def method(self) -> str:
        return self.record.method

    @property
    def metrics(self) -> dict:
        return self.record.metrics


def model_name(record: RunRecord) -> str:
    """A run's name before it is told apart: its ``--label``, else its GGUF file's or its model's name."""
    return short_name(record.model, record.backend.get("gguf_file"), record.label)


def traits(record: RunRecord) -> list[str]:
    """What may tell two runs of one model apart, in words, in the order a name gives them."""
    chat = record.chat
    return [
        record.protocol,
        "chat template" + (f" {chat.template}" if chat.template else "") if chat is not None and chat.applied else "raw prompts",
        "system instruction" if chat is not None and chat.system_instruction else "no system instruction",
        f"limit {record.limit}" if record.limit else "all rows",
        ", ".join(record.configs),
        f"backend {record.backend_name}",
        f"data {record.dataset.revision or record.dataset.path}",
        record.model,
    ]


def name(bases: list[str], traits_of: list[list[str]]) -> list[str]:
    """Unique names: each base, and where several runs share it, the traits (``traits``) on which they differ;
    runs alike in all of those get their place among them (#1, #2, ...)."""
    names = list(bases)
    for base in set(bases):
        group = [i for i, b in enumerate(bases) if b == base]
        if len(group) < 2:
            continue
        differing = [k for k in range(len(traits_of[group[0]])) if len({traits_of[i][k] for i in group}) > 1]
        for i in group:
            told = ", ".join(traits_of[i][k] for k in differing)
            names[i] = f"{base} ({told})" if told else base
    for taken in set(names):
        same = [i for i, n in enumerate(names) if n == taken]
        if len(same) > 1:
            for place, i in enumerate(same, 1):
                names[i] = f"{taken} #{place}"
    return names


def name_runs(runs: list[Run]) -> None:
    """Name the report's runs (``Run.id``), apart within each benchmark (its tables and figures)."""
    for benchmark in {r.record.benchmark for r in runs}:
        group = [r for r in runs if r.record.benchmark == benchmark]
        for run, found in zip(group, name([model_name(r.record) for r in group], [traits(r.record) for r in group]), strict=True):
            run.id = found


def run_folders(folders: list[Path]) -> list[tuple[Path, Path | None]]:
    """The run folders among ``folders`` and in them: a run folder as it is, any other folder as the run folders in
    it and in its folders (``runs/<model>`` of ``physprobe score --benchmark all``, or ``runs/``), in the benchmarks'
    order; each with its card run's folder, the folder holding it where it is named after its benchmark
    (``runs/<model>/<benchmark>``), else None. A folder holding none is kept, to be refused as no run."""
    order = {name: i for i, name in enumerate(registry.names())}
    found = []
    for folder in map(Path, folders):
        inside = [p for child in _folders(folder) for p in ([child] if run_record.is_run_folder(child) else _folders(child))
                  if run_record.is_run_folder(p)]  # fmt: skip
        inside.sort(key=lambda p: (p.parent, order.get(p.name, len(order)), p.name))
        found += [(p, p.parent if p.name in order else None) for p in inside or [folder]]
    return found


def _folders(folder: Path) -> list[Path]:
    """The folders in ``folder`` (no links), by name; none when it is no folder or a run folder."""
    if not folder.is_dir() or folder.is_symlink() or run_record.is_run_folder(folder):
        return []
    return sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink())


def load_run(folder: Path) -> Run:
    """A run folder written by ``physprobe score`` (``run_record.load``), named by ``model_name``."""
    return Run(folder, run_record.load(folder))


def check_as_written(folder: Path) -> None:
    """A one-line ``RunRecordError`` naming the file (and row) where a finished run folder no longer holds what
    ``physprobe score`` wrote: a file whose sha256 is not the one its marker records (``run_record.read_vouched``, as
    ``physprobe publish`` checks it), a predictions column or row out of shape or edited (``run_record.predictions``:
    each row against its ``row_sha256``). A folder whose marker records no files (a downloaded runs repository's
    ``runs/<config>``) has its rows checked only."""
    if vouched(folder)[1]:
        run_record.read_vouched(folder)
    if (folder / run_record.PREDICTIONS).exists():
        run_record.predictions(folder)


def run_protocol(run: Run):
    """The ``Protocol`` a run's record names, or None (no longer declared)."""
    try:
        return registry.evaluation(run.record.benchmark).protocol(run.record.protocol)
    except ProtocolError:
        return None


def collect(runs: list[Path]) -> tuple[list[Run], list[tuple[Path, str]]]:
    """The finished runs among the folders ``runs`` (a card run's parent: its run folders, ``run_folders``), named as
    a report names them (``name_runs``), and the folders skipped, each with why: not a finished run, a benchmark
    without paper tables, a second copy of a run. None finished is a one-line ``ReportError``; a finished run whose
    files are not as physprobe score wrote them is refused in one line (``check_as_written``)."""
    if not runs:
        raise ReportError("give at least one run folder written by `physprobe score`")
    loaded, skipped, seen = [], [], {}
    for folder, parent in run_folders(runs):
        try:
            run = load_run(Path(folder))
            run.parent = parent
            paper_tables(run.record.benchmark)  # an unknown benchmark is skipped before anything is written
        except (RunRecordError, ReportError) as error:
            skipped.append((Path(folder), str(error)))
            continue
        check_as_written(run.folder)
        if run.content_key in seen:
            skipped.append((run.folder, f"{run.folder} is the same run as {seen[run.content_key]} (the same figures of the same "
                                        "protocol on the same rows); reported once"))  # fmt: skip
            continue
        seen[run.content_key] = run.folder
        loaded.append(run)
    if not loaded:
        given = "the folder given is not" if len(runs) == 1 else f"none of the {len(runs)} folders given is"
        raise ReportError(f"{given} a finished physprobe run ({skipped[0][1]}{'; ...' if len(skipped) > 1 else ''})")
    name_runs(loaded)
    return loaded, skipped
