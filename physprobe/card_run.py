"""The card run: ``physprobe score --benchmark all`` (or a comma-separated list) scores one model on several
benchmarks, each with its default protocol for the model's family, the model made and loaded once.

Each benchmark is a run of its own (``physprobe.runner``, given the card's ``Models``): its own folder under one
parent (``runs/<model>/<benchmark>``), its own record and resume cache, so a card killed mid-way and run again
re-scores nothing already answered. A benchmark that no default protocol of the model's family fits, or whose
protocol asks requests the backend cannot serve, is named in one line and skipped. Progress counts the whole card
(``progress.overall``: benchmark i of n, questions, time left). ``physprobe report runs/<model>`` renders the card.

>>> names("newton,prost"), names("all") == tuple(registry.names())
(('newton', 'prost'), True)
>>> default_parent("HuggingFaceTB/SmolLM2-135M", None).as_posix(), default_parent("models/smol", "Smol.Q4_1.gguf").as_posix()
('runs/SmolLM2-135M', 'runs/Smol.Q4_1')
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from physprobe import backends, plan as run_plan, progress, registry, runner, sampling
from physprobe.backends.base import Backend, Settings
from physprobe.errors import PhysprobeError, ProtocolError
from physprobe.plan import RunPlan
from physprobe.run_record import RunRecord

ALL = "all"


def is_card(benchmark: str) -> bool:
    """Whether ``--benchmark`` names several benchmarks (``all``, or a comma-separated list).

    >>> is_card("prost"), is_card("all"), is_card("prost,cccons")
    (False, True, True)
    """
    return benchmark == ALL or "," in benchmark


def names(benchmark: str) -> tuple[str, ...]:
    """The benchmarks ``--benchmark`` names: every registered one for ``all``, else each of a comma-separated list
    (each known, once)."""
    known = registry.names()
    if benchmark == ALL:
        return tuple(known)
    listed = [name.strip() for name in benchmark.split(",")]
    if not all(listed):
        raise ProtocolError(f"--benchmark {benchmark!r} has an empty entry; give names such as {','.join(known[:2])}, or all")
    for name in listed:
        if name not in known:
            raise ProtocolError(f"--benchmark names {name!r}, not a benchmark; known: {', '.join(known)} (or all)")
    repeated = sorted({name for name in listed if listed.count(name) > 1})
    if repeated:
        raise ProtocolError(f"--benchmark names {', '.join(repeated)} more than once; give each benchmark once")
    return tuple(listed)


def default_parent(model: str, gguf_file: str | None) -> Path:
    """The folder a card's runs go under without ``--out``: ``runs/`` and the GGUF file's or the model's name."""
    return Path("runs") / (Path(gguf_file).stem if gguf_file else Path(model.rstrip("/")).name)


@dataclass(frozen=True)
class CardPlan:
    """A card run resolved from its arguments: one ``RunPlan`` per benchmark, each into ``out/<benchmark>``."""

    out: Path
    plans: tuple[RunPlan, ...]


def make(model: str, benchmark: str, *, out: str | os.PathLike | None = None, configs=None, protocol: str | None = None,
         dataset_repo: str | None = None, processes: int = 1, gguf_file: str | None = None, **options) -> CardPlan:  # fmt: skip
    """Check a card run's arguments and resolve them into a ``CardPlan``; ``options``: those of ``plan.make``.

    ``--config``, ``--protocol`` and ``--dataset-repo`` name one benchmark's configs, protocols and dataset, and
    ``--num-processes`` launches one benchmark's run: each is refused here with the fix (score that benchmark on its
    own).
    """
    chosen = names(benchmark)
    for given, option, what in ((configs, "--config", "configs"), (protocol, "--protocol", "protocols"),
                                (dataset_repo, "--dataset-repo", "Hub dataset")):  # fmt: skip
        if given is not None:
            raise ProtocolError(f"{option} names one benchmark's {what}; score several benchmarks with their default "
                                f"protocols, or that benchmark on its own (--benchmark NAME {option} ...)")  # fmt: skip
    if processes > 1:
        raise PhysprobeError("--num-processes splits one benchmark's run over processes; score each benchmark on its own "
                             "with --num-processes, or the card in one process")  # fmt: skip
    parent = Path(out) if out is not None else default_parent(model, gguf_file)
    plans = tuple(run_plan.make(model, name, out=parent / name, gguf_file=gguf_file, **options) for name in chosen)
    return CardPlan(parent, plans)


class Models:
    """The backends a card run made, each once per ``Settings``: a benchmark asking the settings of an earlier one
    gets its backend back, with its weights loaded (``runner.Run``'s ``make_backend``)."""

    def __init__(self, backend: str):
        self.backend = backend
        self.made: list[Backend] = []  # settings hold dicts: found by equality, not by hash

    def __call__(self, settings: Settings) -> Backend:
        for model in self.made:
            if model.settings == settings:
                return model
        model = backends.create(self.backend, settings)
        self.made.append(model)
        return model


@dataclass(frozen=True)
class Survey:
    """What a card knows of a benchmark before scoring it: why it skips it (None: it scores it), and how many
    questions its run asks (its configs' rows under ``--limit``)."""

    skipped: str | None
    questions: int


def survey(plan: RunPlan, model: Backend) -> Survey:
    """Whether ``model`` can be scored on ``plan``'s benchmark with its default protocol (no weights loaded), and how
    many questions that is."""
    try:
        protocol = plan.protocol_for(model.family)
    except ProtocolError as error:
        return Survey(str(error), 0)
    source = plan.data.source(plan.benchmark)
    datasets = {config: source.load(config) for config in plan.configs_for(protocol)}
    config, rows = next(iter(datasets.items()))
    if len(rows):
        kind = type(protocol.build(rows[0], config))
        if not backends.serves(model.name, kind):
            return Survey(f"its protocol {protocol.name!r} asks {kind.__name__} requests, which --backend {model.name} "
                          "cannot serve", 0)  # fmt: skip
    return Survey(None, sum(len(sampling.spread(len(rows), plan.limit)) for rows in datasets.values()))


@dataclass(frozen=True)
class CardResult:
    """A card run's records by benchmark, and the benchmarks it skipped with why."""

    out: Path
    records: dict[str, RunRecord]
    skipped: dict[str, str]


def run(card: CardPlan) -> CardResult:
    """Score every benchmark of ``card`` that the model can take, one after the other, with one backend (the model
    loaded at the first question not cached); each benchmark's run folder is written as its run ends."""
    models = Models(card.plans[0].backend)
    model = models(card.plans[0].settings())
    surveys = {plan.benchmark: survey(plan, model) for plan in card.plans}
    skipped = {name: found.skipped for name, found in surveys.items() if found.skipped}
    for name, why in skipped.items():
        print(f"physprobe: skipped {name}: {why}", file=sys.stderr)
    todo = [plan for plan in card.plans if plan.benchmark not in skipped]
    if not todo:
        raise ProtocolError(f"none of {', '.join(surveys)} can be scored with a {model.family} model's default protocols; "
                            "see `physprobe protocols`")  # fmt: skip
    records = {}
    with progress.overall("card", sum(surveys[plan.benchmark].questions for plan in todo), "questions") as counter:
        done = 0
        for place, plan in enumerate(todo, 1):
            counter.set_description(f"benchmark {place} of {len(todo)} ({plan.benchmark})")
            records[plan.benchmark] = runner.run(plan, models)
            done += surveys[plan.benchmark].questions
            counter.update(max(0, done - counter.n))  # questions read from the cache, or left out by the protocol
    return CardResult(card.out, records, skipped)
