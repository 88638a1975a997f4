"""The card run: ``physprobe score --benchmark all`` (or a comma-separated list) scores one model on several
benchmarks, each with its default protocol for the model's family, the model made and loaded once.

The options are checked for every benchmark first (``ScoreOptions.for_benchmark``), the model described once (no weights), and
each benchmark's run resolved from that description (``spec.resolve``). Each benchmark is a run of its own
(``physprobe.run.runner``, given the card's ``Models``): its own folder under one parent (``runs/<model>/<benchmark>``),
its own spec, record and resume cache, so a card killed mid-way and run again re-scores nothing already answered. A
benchmark that no default protocol of the model's family fits, or whose protocol asks requests the backend cannot
serve, is named in one line and skipped. Progress counts the whole card in the engine's items of work (generations,
scored options: ``runner.work``), those cached as done (``progress.overall``: benchmark i of n, items, time left). ``physprobe report runs/<model>`` renders the card.

>>> names("newton,prost"), names("all") == tuple(registry.names())
(('newton', 'prost'), True)
>>> default_parent("HuggingFaceTB/SmolLM2-135M", None).as_posix(), default_parent("models/smol", "Smol.Q4_1.gguf").as_posix()
('runs/SmolLM2-135M', 'runs/Smol.Q4_1')
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from physprobe import backends
from physprobe.backends.base import Backend
from physprobe.data import registry
from physprobe.errors import BackendError, PhysprobeError, ProtocolError
from physprobe.record import spec as run_spec
from physprobe.record.options import CARD, ScoreOptions, names_a_card
from physprobe.record.run_record import RunRecord
from physprobe.record.spec import RunSpec
from physprobe.run import runner
from physprobe.util import progress


def is_card(benchmark: str) -> bool:
    """Whether ``--benchmark`` names several benchmarks (``all``, or a comma-separated list).

    >>> is_card("prost"), is_card("all"), is_card("prost,cccons")
    (False, True, True)
    """
    return names_a_card(benchmark)


def names(benchmark: str) -> tuple[str, ...]:
    """The benchmarks ``--benchmark`` names: every registered one for ``all``, else each of a comma-separated list
    (each known, once)."""
    known = registry.names()
    if benchmark == CARD:
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
    return Path("runs") / run_spec.short_name(model, gguf_file)


@dataclass(frozen=True)
class Card:
    """A card run's options, checked (no data read, no model described): one ``ScoreOptions`` per benchmark, each
    into ``out/<benchmark>``."""

    out: Path
    options: tuple[ScoreOptions, ...]


def make(model: str, benchmark: str, **options) -> Card:
    """A card run of a Python call's options (those of ``spec.make``): ``of(ScoreOptions)``."""
    return of(run_spec.check(model, benchmark, **options))


def of(options: ScoreOptions) -> Card:
    """Check a card run's ``options`` for each benchmark it names.

    ``--config``, ``--protocol`` and ``--dataset-repo`` name one benchmark's configs, protocols and dataset, and
    ``--num-processes`` launches one benchmark's run: each is refused here with the fix (score that benchmark on its
    own).
    """
    chosen = names(options.benchmark)
    for given, option, what in ((options.configs, "--config", "configs"), (options.protocol, "--protocol", "protocols"),
                                (options.dataset_repo, "--dataset-repo", "Hub dataset")):  # fmt: skip
        if given is not None:
            raise ProtocolError(f"{option} names one benchmark's {what}; score several benchmarks with their default "
                                f"protocols, or that benchmark on its own (--benchmark NAME {option} ...)")  # fmt: skip
    if options.decoding != "greedy" or options.samples != 1:
        raise ProtocolError("--decoding released and --samples apply to one benchmark's generating protocol; score that "
                            "benchmark on its own (--benchmark NAME --decoding released ...)")  # fmt: skip
    if options.processes > 1:
        raise PhysprobeError("--num-processes splits one benchmark's run over processes; score each benchmark on its own "
                             "with --num-processes, or the card in one process")  # fmt: skip
    parent = Path(options.out) if options.out is not None else default_parent(options.model, options.gguf_file)
    return Card(parent, tuple(options.for_benchmark(name, parent / name) for name in chosen))


def resolved(card: Card) -> tuple[list[RunSpec], dict[str, str]]:
    """Each benchmark's run, resolved from one description of the model (``Backend.describe``, once for the card),
    and the benchmarks it cannot score, each with why (no default protocol fits the model, the backend cannot serve
    the protocol's requests)."""
    first = card.options[0]
    described = backends.describe(first.backend, first.settings())
    specs, skipped = [], {}
    for options in card.options:
        try:
            specs.append(run_spec.resolve(options, described, options.source()))
        except (ProtocolError, BackendError) as error:
            skipped[options.benchmark] = str(error)
    return specs, skipped


class Models:
    """The backends a card run made, each once per ``Settings``: a benchmark whose spec asks the settings of an
    earlier one gets its backend back, with its weights loaded (``runner.run``'s ``make_backend``)."""

    def __init__(self):
        self.made: list[Backend] = []  # settings hold dicts: found by equality, not by hash

    def __call__(self, spec: RunSpec) -> Backend:
        for model in self.made:
            if model.settings == spec.settings:
                return model
        model = runner.backend_of(spec)
        self.made.append(model)
        return model


@dataclass(frozen=True)
class CardResult:
    """A card run's records by benchmark, and the benchmarks it skipped with why."""

    out: Path
    records: dict[str, RunRecord]
    skipped: dict[str, str]


def score_card(card: Card) -> CardResult:
    """Score every benchmark of ``card`` that the model can take, one after the other, with one backend per
    settings (the model loaded at the first question not cached); each benchmark's run folder is written as its run
    ends."""
    specs, skipped = resolved(card)
    for name, why in skipped.items():
        print(f"physprobe: skipped {name}: {why}", file=sys.stderr)
    if not specs:
        raise ProtocolError(f"none of {', '.join(skipped)} can be scored with this model and backend ({next(iter(skipped.values()))}); "
                            "see `physprobe protocols`")  # fmt: skip
    models, asked = Models(), {spec.benchmark: runner.work(spec) for spec in specs}
    records = {}
    answers, cost = sum(w[0] for w in asked.values()), sum(w[2] for w in asked.values())
    with progress.overall("card", answers, cost, parts=len(specs)) as counter:
        for place, spec in enumerate(specs, 1):
            counter.set_description(f"benchmark {place} of {len(specs)} ({spec.benchmark})")
            counter.tally.part(asked[spec.benchmark][2])  # read at its own pace once a tenth of it is done
            records[spec.benchmark] = runner.run(spec, models)
    return CardResult(card.out, records, skipped)
