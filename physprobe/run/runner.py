"""The scoring loop of ``physprobe score``: a ``RunSpec`` in, a ``RunRecord`` out.

Per config: the rows (``DataSource.rows``: ``--limit`` of them, a row of each of the paper's groups, the rest evenly spread;
``physprobe.data.sampling``), the protocol's requests, their results from the resume cache (``physprobe.run.result_cache``)
or from the backend, which loads its weights or opens its connection only when a request is not cached; then one
``Sample`` per row (``physprobe.run.samples``: the request, its typed result, the protocol's decision) and the config's
figures from the samples (``physprobe.run.config_figures``): the benchmark's metrics, a seeded bootstrap of every
overall figure and the baselines of the same rows. Data-parallel
ranks (``physprobe.run.parallel``) each score their share; rank 0 writes the run folder (``physprobe.record.run_record``),
with the texts each row made the model read, and says in one line each which configs' figures say little
(``baselines.flags``). A run that fails before any score reached its cache leaves no folder it created.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from physprobe import backends
from physprobe.backends.base import Backend, BackendError
from physprobe.data import registry
from physprobe.errors import RequestError, ServedModelChanged
from physprobe.protocols import inputs
from physprobe.protocols.decoding import sample_seed
from physprobe.protocols.requests import cost_of, decoded
from physprobe.protocols.results import Result
from physprobe.record import run_folder, run_record
from physprobe.record.run_record import Baselines, Bootstrap, ChatRecord, RunRecord, Timings
from physprobe.record.spec import RunSpec
from physprobe.run import baselines, config_figures, parallel
from physprobe.run.result_cache import Cache, key_base
from physprobe.run.samples import Sample
from physprobe.util import progress, provenance
from physprobe.util.folder_lock import FolderLock


@dataclass(frozen=True)
class ResultHandle:
    """What a backend's ``score`` reports to: ``update(n)`` advances the config's progress bar by ``n`` requests (or
    shares of them), counted there as the engine's items of work (``Request.work``: the call's items per request),
    ``spare(n)`` says that ``n`` requests' worth of what it counted was never spent (answers that ended before their
    token budget), ``answered(i, result)`` hands over request ``i``'s result as soon as it is ready, which is
    committed to the cache at once (a backend that finishes a call's results together returns them, and they are
    committed then)."""

    bar: object  # a progress counter (``progress.bar``)
    answered: Callable[[int, Result], None]
    items: float = 1.0  # items of work per request of the call

    def update(self, count: float) -> None:
        self.bar.update(count * self.items)

    def spare(self, count: float) -> None:
        """``count`` requests' worth of the work counted done was never spent (answers that ended before their
        budget): a card's time left paces only the work truly done."""
        self.bar.spare(count * self.items)


@dataclass(frozen=True)
class ScoredConfig:
    """One config scored: its samples, in row order, and its figures (rank 0 alone computes the bootstrap and the
    baselines), with how many requests were scored now rather than read from a cache (every rank's)."""

    samples: tuple[Sample, ...]
    figures: config_figures.Figures
    fresh: int
    seconds: float


def asked(spec: RunSpec, config: str, evaluation, protocol) -> tuple:
    """What ``spec``'s run asks of ``config``: the rows chosen (``DataSource.rows``), the places of those the protocol
    keeps (not its ``skip``), and their requests, in row order."""
    chosen = spec.data.rows(config, spec.limit, evaluation.groups)
    kept = [i for i, row in enumerate(chosen.rows) if not (protocol.skip and protocol.skip(row))]
    return chosen, kept, [protocol.build(chosen.rows[i], config) for i in kept]


def work(spec: RunSpec) -> tuple[int, int, float]:
    """What ``spec``'s run asks of the engine, cached or not: how many answers (one a question kept, and a sample),
    how many items (``Request.work``: generations, options, ...) and what they cost (``requests.cost_of``, each
    config's prompts sharing their prefixes)."""
    evaluation = registry.evaluation(spec.benchmark)
    protocol = evaluation.protocol(spec.protocol)
    configs = [asked(spec, config, evaluation, protocol)[2] for config in spec.configs]
    k = spec.samples
    return (k * sum(map(len, configs)), k * sum(r.work() for asks in configs for r in asks),
            k * sum(cost_of(asks) for asks in configs))  # fmt: skip


def backend_of(spec: RunSpec) -> Backend:
    """The backend ``spec`` names, made from its settings and what ``spec.make`` read of the model (no weights yet)."""
    return backends.create(spec.backend, spec.settings, spec.described)


def engine_version(model: Backend, kind: type) -> int:
    """The version of the engine ``model`` serves ``kind`` with (``Backend.ENGINE_VERSIONS``: the resume cache's key);
    one line naming the backend where it declares none."""
    version = getattr(model, "ENGINE_VERSIONS", {}).get(kind)
    if isinstance(version, bool) or not isinstance(version, int):
        raise BackendError(f"--backend {model.name} declares no version of its {kind.__name__} engine (ENGINE_VERSIONS[{kind.__name__}], "
                           f"got {version!r}): give each engine a whole number, bumped when its results change "
                           "(docs/adding_a_backend.md)")  # fmt: skip
    return version


class Scoring:
    """A spec being scored: its model (made once, not loaded), protocol, cache and ranks.
    ``make_backend(spec)`` makes the model (default: ``backend_of``); a caller scoring one model on several
    benchmarks (``physprobe.run.card_run``) passes one that hands back the backend it made before, loaded once."""

    def __init__(self, spec: RunSpec, ranks: parallel.Ranks, make_backend: Callable[[RunSpec], Backend] | None = None):
        self.spec, self.ranks = spec, ranks
        self.evaluation = registry.evaluation(spec.benchmark)
        self.protocol = self.evaluation.protocol(spec.protocol)
        self.model = (make_backend or backend_of)(spec)  # options checked; no weights, no request
        self.engine_version = engine_version(self.model, self.protocol.sends)
        self.loaded_before = self.model.load_seconds  # a model made before may have loaded in an earlier run
        self.identity: dict = {}
        self.revisions: dict[str, str] = {}
        self.said_drawn = False  # a resume at another batch size of a sampled run: said once (``drawn_at``)

    def score(self, config: str, cache: Cache) -> ScoredConfig:
        """Score ``config``: rows, requests, results (cached or fresh), samples, figures. With ``--samples`` K > 1,
        each row is asked K times (``decoded``), its samples kept together (``Sample.draws``) and the config's
        figures are the first sample's, with their spread over the K (``config_figures.over_samples``)."""
        started, protocol = time.perf_counter(), self.protocol
        chosen, kept, built = asked(self.spec, config, self.evaluation, protocol)
        indices, rows, self.revisions[config] = chosen.indices, chosen.rows, chosen.revision
        if built and not self.identity:
            self.identity = cache.settled(self.model.identity(protocol.sends))
        draws, fresh = [], 0
        for sample in range(self.spec.samples):
            requests = self.decoded(config, built, [indices[i] for i in kept], sample)
            # The texts each row made the model read and their token counts (rank 0 writes them): tokenized on a
            # thread of their own while the model scores (the tokenizer leaves the interpreter's lock while it encodes).
            with ThreadPoolExecutor(1) as pool:
                read = pool.submit(self.model.prompts, requests if self.ranks.main else [])
                results, now = self.results(config, requests, [indices[i] for i in kept], cache, self.shown(config, sample))
                draws.append(
                    self.samples(
                        config, indices, rows, dict(zip(kept, zip(requests, results, strict=True), strict=True)), read.result()
                    )
                )
            fresh += now
        samples = draws[0]
        figures = config_figures.figures(self.evaluation, protocol, config, samples, self.spec.bootstrap_iters,
                                         self.ranks.main and bool(built))  # fmt: skip
        if len(draws) > 1:
            samples = [dataclasses.replace(row[0], draws=row) for row in zip(*draws, strict=True)]
            each = [config_figures.metrics(self.evaluation, protocol, config, drawn) for drawn in draws]
            spread = config_figures.over_samples(each, draws)
            figures = dataclasses.replace(figures, metrics={**figures.metrics, "samples": spread})
        return ScoredConfig(tuple(samples), figures, fresh, round(time.perf_counter() - started, 3))

    def shown(self, config: str, sample: int) -> str:
        """The name of ``config``'s bar: a sampled run's names its sample (``newton/track1 sample 2 of 3``)."""
        name = f"{self.spec.benchmark}/{config}"
        return f"{name} sample {sample + 1} of {self.spec.samples}" if self.spec.samples > 1 else name

    def decoded(self, config: str, requests: list, indices: list[int], sample: int) -> list:
        """The requests of the ``sample``-th answer to each row (dataset index ``indices``) as the run decodes them:
        as built where greedy, else with the run's decoding and each sampled answer's own seed (``sample_seed``)."""
        decoding = self.spec.decoding
        if decoding is None:
            return requests
        return [decoded(request, decoding, sample_seed(self.spec.seed, self.spec.benchmark, config, index, sample, decoding))
                for request, index in zip(requests, indices, strict=True)]  # fmt: skip

    def samples(self, config: str, indices: list[int], rows: list[dict], answered: dict[int, tuple],
                prompts: list[tuple[list[str], list[int] | None]]) -> list[Sample]:  # fmt: skip
        """One sample per row, in row order: ``answered`` maps a row's place to its request and result, ``prompts``
        holds the backend's ``prompts`` of those requests in that order (none: rank 0 alone records them); the other
        rows are the ones the protocol leaves out. The gold answers are checked against the options first."""
        reference = self.evaluation.reference
        outcomes = {i: self.protocol.outcome(result, request) for i, (request, result) in answered.items()}
        inputs.references(reference, [rows[i] for i in outcomes], [o.options for o in outcomes.values()], config,
                          [indices[i] for i in outcomes])  # fmt: skip
        read = dict(zip(answered, prompts, strict=False))  # no prompts on a rank but 0 (none recorded there)
        samples = []
        for i, row in enumerate(rows):
            gold = tuple(reference(row))
            if i not in answered:
                samples.append(Sample.left_out(config, indices[i], row, gold))
                continue
            prompts, counts = read.get(i, ((), None))
            samples.append(Sample.scored(config, indices[i], row, gold, *answered[i], outcomes[i], prompts, counts))
        return samples

    def results(self, config: str, requests: list, indices: list[int], cache: Cache, shown: str) -> tuple[list[Result], int]:
        """Every request's result, and how many were scored now (all ranks); ``shown`` names the progress bar.

        Requests are cut in row order into chunks of ``spec.chunk``, whatever the number of processes: a chunk's
        missing requests are one engine call (its batches, hence its float sums, are the same in one process or
        many); each result is committed as the backend hands it over (``ResultHandle.answered``), the rest when the
        call returns. A request any rank's cache holds is never rescored.
        """
        parts = dict(self.identity, engine=self.engine_version, protocol=self.protocol.name,
                     protocol_version=self.protocol.version, dataset=self.revisions[config])  # fmt: skip
        keys = Cache.keys(requests, **parts, **self.drawn_at(config, cache, parts))
        cuts = parallel.chunks(len(requests), self.spec.chunk)
        known = self.ranks.merged(cache.get(keys, self.protocol.sends.result))
        owner = self.ranks.owners(cuts, requests, self.model.tokenizer if self.ranks.world > 1 else None)
        todo = [
            part
            for c in range(len(cuts))
            if owner[c] == self.ranks.rank and (part := [i for i in cuts[c] if keys[i] not in known])
        ]
        fresh: dict = {}
        work = [request.work() for request in requests]
        owned = [i for c in range(len(cuts)) if owner[c] == self.ranks.rank for i in cuts[c]]
        mine = sum(work[i] for i in owned)
        left = sum(work[i] for part in todo for i in part)  # the rest of this rank's work is in the cache: done
        weight = cost_of(requests) / sum(work) if requests else 1.0  # an item's cost, for a card's time left
        per = len(owned) / mine if mine else 1.0  # answers an item, for a card's count
        with progress.bar(shown, mine, self.protocol.sends.unit, done=mine - left, weight=weight, per=per) as bar:
            for part in todo:
                rows, items = [indices[i] for i in part], sum(work[i] for i in part) / len(part)
                fresh.update(self.call(config, [requests[i] for i in part], [keys[i] for i in part], rows, cache, bar, items))
        known.update(self.ranks.merged(fresh))
        results = [known[k] for k in keys]
        if self.ranks.world > 1 and self.ranks.main:  # a later single-process run into ``out`` resumes from every rank's scores
            cache.put(dict(zip(keys, results, strict=True)))
        return results, self.ranks.total(sum(map(len, todo)))

    def drawn_at(self, config: str, cache: Cache, parts: dict) -> dict:
        """What a sampled run adds to its requests' key (``parts``, the rest): its batch size (``--batch-size``; None:
        automatic), since a draw depends on the batch shape (logits that differ in their last bits between batch shapes
        can move a draw across a token boundary). A folder whose cache holds this run's draws at other batch sizes only
        is said in one line (once a run): none is reused, a new run."""
        if self.spec.decoding is None or not self.spec.decoding.samples:
            return {}
        size = self.spec.settings.batch_size
        earlier = cache.drawn_at(key_base(**parts), size)
        if earlier and size not in earlier and self.ranks.main and not self.said_drawn:
            self.said_drawn = True
            shown = ", ".join("auto" if b is None else str(b) for b in earlier)
            print(f"physprobe: warning: {self.spec.out} holds sampled answers of {self.spec.benchmark}/{config} drawn at "
                  f"--batch-size {shown}; a sampled answer depends on the batch size (docs/scoring.md), so none is reused "
                  f"at --batch-size {'auto' if size is None else size}: a new run", file=sys.stderr)  # fmt: skip
        return {"batch_size": size}

    def call(self, config: str, asked: list, keys: list[str], rows: list[int], cache: Cache, bar, items: float) -> dict:
        """One engine call on the requests ``asked`` (their cache ``keys``, their dataset ``rows``; ``items`` of work
        each): each result checked and committed as the backend hands it over, the rest when the call returns. Returns
        the call's results by key."""
        committed: set[str] = set()

        def answered(index: int, value: Result) -> None:
            self.check_answers(config, rows, {index: value})
            inputs.finite_scores([value], config, [rows[index]])
            cache.put({keys[index]: value})
            committed.add(keys[index])

        try:
            values = self.model.score(asked, ResultHandle(bar, answered, items))
        except RequestError as error:
            raise BackendError(f"{self.spec.benchmark}/{config} row {rows[error.index]}: {error}") from None
        except ServedModelChanged as error:  # the answers since its last matching probe may be the other model's
            cache.drop([keys[i] for i in error.unconfirmed])
            raise BackendError(f"{self.spec.benchmark}/{config}: {error}") from None
        self.check_answers(config, rows, values)
        inputs.finite_scores(values, config, rows)
        scored = dict(zip(keys, values, strict=True))
        cache.put({k: v for k, v in scored.items() if k not in committed})
        return scored

    def check_answers(self, config: str, rows: list[int], values) -> None:
        """One line naming the backend, the config and the row unless ``values`` (a list in order, or ``{place:
        result}`` handed over one by one) holds one result per request of a call on ``rows`` (dataset indices), each
        of the request type's result class (``Request.result``): a backend's answer is never counted short or read
        in another shape. The row named is the first left without its answer, or the one answered wrongly."""
        kind, where = self.protocol.sends, f"--backend {self.spec.backend} on {self.spec.benchmark}/{config}"
        fix = "a backend returns one result per request, in order (docs/adding_a_backend.md)"
        call = f"a call of {len(rows)} {kind.__name__} requests"
        if isinstance(values, dict):
            answered = values
        elif isinstance(values, (list, tuple)):
            if len(values) != len(rows):
                row = rows[min(len(values), len(rows) - 1)]
                raise BackendError(f"{where} row {row}: answered {len(values)} results to {call}; {fix}")
            answered = dict(enumerate(values))
        else:
            raise BackendError(f"{where} row {rows[0]}: answered {type(values).__name__} to {call}, not a list of results; {fix}")
        for place, value in answered.items():
            if isinstance(place, bool) or not isinstance(place, int) or not 0 <= place < len(rows):
                raise BackendError(f"{where} row {rows[0]}: handed over a result for request {place!r} of {call}; {fix}")
            if not isinstance(value, kind.result):
                raise BackendError(f"{where} row {rows[place]}: answered {type(value).__name__} to a {kind.__name__} request, "
                                   f"which is answered by {kind.result.__name__}; {fix}")  # fmt: skip

    def pooled_baselines(self, scored: dict[str, ScoredConfig], pooled: dict) -> dict[str, Baselines]:
        """The baselines of each pooled figure, over its configs' rows together (rank 0)."""
        found = {}
        for figure in pooled:
            members = [scored[member] for member in self.evaluation.pooled[figure]]
            if self.ranks.main and all(any(s.answered for s in m.samples) for m in members):
                samples = [s for m in members for s in m.samples]
                found[figure] = config_figures.config_baselines(self.evaluation, self.protocol, figure, samples)
        return found

    def record(self, scored: dict[str, ScoredConfig], metrics: dict, pooled: dict[str, Baselines], started_at: float,
               elapsed: float) -> RunRecord:  # fmt: skip
        """The run's record, as rank 0 writes it: the spec, and what the run found."""
        chat = self.identity.get("chat")
        return RunRecord(
            spec=self.spec, protocol_source=self.protocol.source,
            backend={"name": self.spec.backend, **dataclasses.asdict(self.model.info())}, chat=None if chat is None else ChatRecord(**chat),
            config_revisions=dict(self.revisions), scored_now=sum(s.fresh for s in scored.values()), versions=provenance.versions(backends.libraries()),
            started=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started_at)),
            timings=Timings(round(self.model.load_seconds - self.loaded_before, 3), {c: s.seconds for c, s in scored.items()}, round(elapsed, 3)),
            bootstrap=Bootstrap(self.spec.bootstrap_iters, provenance.BOOTSTRAP_SEED,
                                {c: s.figures.bootstrap for c, s in scored.items() if s.figures.bootstrap is not None}),
            headline={config: self.evaluation.headline_of(values) for config, values in metrics.items()}, metrics=metrics,
            figure_kinds=self.evaluation.figure_kinds(),
            baselines={**{c: s.figures.baselines for c, s in scored.items() if s.figures.baselines is not None}, **pooled},
        )  # fmt: skip


def run(spec: RunSpec, make_backend: Callable[[RunSpec], Backend] | None = None) -> RunRecord:
    """Score ``spec``: every config, with resume; rank 0 writes the run folder. Returns the run's record.

    The backend is made once, from ``spec.settings`` and what ``spec.make`` read of the model in this process
    (``RunSpec.described``; a data-parallel rank, handed the spec as JSON, reads it again). A run in
    one process claims its folder (``run_folder.claimed``: nothing it created is left when it fails before any score
    was cached); a data-parallel rank scores into the folder its launcher claimed. A fully cached (resumed) run never
    loads the weights. ``make_backend``: see ``Scoring``.
    """
    started_at, started = time.time(), time.perf_counter()
    ranks = parallel.current()  # processes of `accelerate launch`: each scores its share (physprobe.run.parallel)
    this = Scoring(spec, ranks, make_backend)
    if ranks.world > 1:
        return _scored_run(this, spec, ranks, started_at, started)
    with run_folder.claimed(spec.out, spec.owner):  # new, or this model's run of this benchmark
        return _scored_run(this, spec, ranks, started_at, started)


def _scored_run(this: Scoring, spec: RunSpec, ranks: parallel.Ranks, started_at: float, started: float) -> RunRecord:
    """Every config of ``spec`` scored into the run folder, held locked meanwhile (a second run into it fails, naming
    this one): by ``run_folder.claimed`` in one process or in the launcher of data-parallel ranks, each rank but 0
    holding its own cache's lock too; rank 0 writes the results."""
    with FolderLock(spec.folder, run_folder.lock_name(ranks.rank)) if not ranks.main else contextlib.nullcontext():
        cache = Cache(run_folder.cache_file(spec.folder, ranks.rank))
        scored = {config: this.score(config, cache) for config in spec.configs}
        metrics = {config: s.figures.metrics for config, s in scored.items()}
        pooled = config_figures.pooled(this.evaluation, this.protocol, {c: list(s.samples) for c, s in scored.items()}, metrics)
        metrics.update(pooled)
        if this.protocol.answer == "text" and ranks.main:
            chat_applied = bool(this.identity and this.identity["chat"]["applied"])
            warn_unparsed(metrics, spec.configs, spec.name, chat_applied or not this.model.offers_chat_template())
        record = this.record(scored, metrics, this.pooled_baselines(scored, pooled), started_at, time.perf_counter() - started)
        if ranks.main:
            samples = [sample for s in scored.values() for sample in s.samples]
            run_record.write(spec.folder, spec.owner, record, samples)  # all four files in one swap
    if ranks.main:
        for flag in baselines.flags(record):
            print(f"physprobe: warning: {spec.name}: {flag.text}", file=sys.stderr)
    return record


def warn_unparsed(metrics: dict, configs: tuple[str, ...], run_name: str, template_tried: bool) -> None:
    """One line on stderr when more than half of a generation run's answers named no option, with the fix:
    ``--apply-chat-template`` where the model has a template not yet applied (``template_tried`` False)."""
    scored = [metrics[c] for c in configs if "unparsed" in metrics[c]]
    total, unparsed = sum(m["n"] for m in scored), sum(m["unparsed"] for m in scored)
    if not total or unparsed * 2 <= total:
        return
    fix = ("read the answers (`generated` in predictions.parquet) or score a log-likelihood protocol (`physprobe protocols`)"
           if template_tried else "an instruct model answers in its chat format: score with --apply-chat-template, "
           "or a log-likelihood protocol (`physprobe protocols`)")  # fmt: skip
    print(
        f"physprobe: warning: {unparsed} of {total} answers of {run_name} named no option (unparsed); {fix}",
        file=sys.stderr,
    )
