"""The scoring loop of ``physprobe score``: a ``RunPlan`` in, a ``RunRecord`` out.

Per config: the rows (``--limit`` of them: a row of each of the paper's groups, the rest evenly spread;
``physprobe.sampling``), the protocol's requests, their results from the resume cache (``physprobe.result_cache``)
or from the backend, which loads its weights or opens its connection only when a request is not cached; then the protocol's decisions and the benchmark's metrics, with a seeded
bootstrap of every overall figure and the baselines of the same rows (``physprobe.baselines``). Data-parallel
ranks (``physprobe.parallel``) each score their share; rank 0 writes the run folder (``physprobe.run_record``),
with the texts each row made the model read, and says in one line each which configs' figures say little
(``baselines.flags``). A run that fails before any score reached its cache leaves no folder it created.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from physprobe import backends, baselines, inputs, parallel, progress, protocols, provenance, registry, run_record, sampling
from physprobe.backends.base import Backend, BackendError, Settings
from physprobe.errors import FolderInUse, RequestError
from physprobe.paths import FolderLock
from physprobe.plan import RunPlan
from physprobe.redact import printable
from physprobe.result_cache import Cache
from physprobe.run_record import Baselines, Bootstrap, ChatRecord, DatasetRecord, Prediction, RunRecord, Timings


@dataclass(frozen=True)
class Progress:
    """What a backend's ``score`` reports to: ``update(n)`` advances the config's progress bar, ``answered(i, result)``
    hands over request ``i``'s result as soon as it is ready, which is committed to the cache at once (a backend that
    finishes a call's results together returns them, and they are committed then)."""

    bar: object  # a progress counter (``progress.bar``)
    answered: Callable[[int, list], None]

    def update(self, count: float) -> None:
        self.bar.update(count)


@dataclass
class Scored:
    """One config's scored rows: what the protocol decided and what the metrics made of it."""

    rows: list[dict]
    indices: list[int]  # each row's index in the config
    options: list[int]  # each row's number of answers to choose from
    predictions: list
    scores: list[list]
    generated: list
    metrics: dict
    uncertainty: dict | None  # the bootstrap of each overall figure (rank 0 only)
    baselines: Baselines | None  # (rank 0 only; None without rows)
    read: list[tuple[list[str], list[int] | None]]  # each row's texts as the model read them, and token counts (rank 0)
    fresh: int  # requests scored now, not read from a cache (all ranks)
    seconds: float


class Run:
    """One run of a plan: its model (made, not loaded), protocol, data source, cache and ranks. ``make_backend(settings)``
    makes the model (default: ``backends.create`` with the plan's backend); a caller scoring one model on several
    benchmarks (``physprobe.card_run``) passes one that hands back the backend it made before, loaded once."""

    def __init__(self, plan: RunPlan, ranks: parallel.Ranks, make_backend: Callable[[Settings], Backend] | None = None):
        self.plan, self.ranks = plan, ranks
        make = make_backend or functools.partial(backends.create, plan.backend)
        self.evaluation = registry.evaluation(plan.benchmark)
        self.source = plan.data.source(plan.benchmark)
        self.model = make(plan.settings())  # options checked; no weights, no request yet
        self.protocol = plan.protocol_for(self.model.family)
        if plan.settings(self.protocol) != self.model.settings:  # the protocol's released script read a chat template
            if not self.model.offers_chat_template():
                raise protocols.ProtocolError(
                    f"protocol {self.protocol.name!r} reads prompts through a chat template, as its released script did, and "
                    f"{plan.model} has none; score a chat model, or name another protocol (`physprobe protocols {plan.benchmark}`)")
            self.model = make(plan.settings(self.protocol))
        self.loaded_before = self.model.load_seconds  # a model made before may have loaded in an earlier run
        self.configs = plan.configs_for(self.protocol)
        self.identity: dict = {}
        self.fingerprints: dict[str, str] = {}

    def score(self, config: str, cache: Cache) -> Scored:
        """Score ``config``: rows, requests, results (cached or fresh), decisions, metrics."""
        started, protocol = time.perf_counter(), self.protocol
        dataset = self.source.load(config)
        inputs.not_empty(len(dataset), config, self.source.path)
        self.fingerprints[config] = self.source.fingerprint(config)
        indices = sampling.rows_to_score(dataset, config, self.plan.limit, self.evaluation.groups)
        rows = dataset.select(indices).to_list()
        kept = [i for i, row in enumerate(rows) if not (protocol.skip and protocol.skip(row))]
        excluded = len(rows) - len(kept)
        indices, rows = [indices[i] for i in kept], [rows[i] for i in kept]
        requests = [protocol.build(row, config) for row in rows]
        if requests and not self.identity:
            self.identity = cache.settled(served(self.model, protocol, type(requests[0]), lambda: self.servable(rows[0], config)))
        results, fresh = self.results(config, requests, indices, cache)
        options = [protocol.answers or (len(r[1:] or q.choices) if protocol.method == "generate" else len(r))
                   for q, r in zip(requests, results)]  # fmt: skip
        inputs.references(self.evaluation.reference, rows, options, config, indices)
        predictions = [protocol.predict(result, request) for result, request in zip(results, requests)]
        scores = [protocol.scores(result) for result in results]
        generated = [(result[0] if protocol.method == "generate" else result) if protocol.generates else None for result in results]
        metrics = self.evaluation.metrics(config, rows, predictions, scores, **protocol.metric_options)
        if protocol.method == "generate":  # answers that named no option, counted wrong by the metric wiring
            metrics["unparsed"] = predictions.count(protocols.UNPARSED)
        if protocol.fallback is not None:
            metrics["fallback"] = sum(protocol.fell_back(result, request) for result, request in zip(results, requests))
        if excluded:
            metrics["excluded"] = excluded
        main = self.ranks.main and bool(rows)
        uncertainty = self.bootstrap(config, rows, predictions, scores) if self.plan.bootstrap_iters and main else None
        found = baselines.compute(self.evaluation, config, rows, options, predictions, scores, **protocol.metric_options) if main else None
        read = self.model.read(requests) if self.ranks.main else []
        return Scored(rows, indices, options, predictions, scores, generated, metrics, uncertainty, found, read, fresh,
                      round(time.perf_counter() - started, 3))  # fmt: skip

    def servable(self, row: dict, config: str) -> list[str]:
        """The benchmark's protocols for the model's family whose requests (of ``row``) this backend serves."""
        return [p.name for p in self.evaluation.protocols
                if self.model.family in p.families and backends.serves(self.model.name, type(p.build(row, config)))]  # fmt: skip

    def results(self, config: str, requests: list, indices: list[int], cache: Cache) -> tuple[list[list], int]:
        """Every request's result, and how many were scored now (all ranks).

        Requests are cut in row order into chunks of ``plan.chunk``, whatever the number of processes: a chunk's
        missing requests are one engine call (its batches, hence its float sums, are the same in one process or
        many); each result is committed as the backend hands it over (``Progress.answered``), the rest when the call
        returns. A request any rank's cache holds is never rescored.
        """
        key_base = provenance.cache_key(**self.identity, physprobe=provenance.versions()["physprobe"], protocol=self.protocol.name,
                                        dataset=self.fingerprints[config])  # fmt: skip
        keys = [Cache.key(key_base, self.protocol.method, r) for r in requests]
        cuts = parallel.chunks(len(requests), self.plan.chunk)
        known = self.ranks.merged(cache.get(keys))
        owner = self.ranks.owners(cuts, requests, getattr(self.model, "tokenizer", None) if self.ranks.world > 1 else None)
        todo = [part for c in range(len(cuts)) if owner[c] == self.ranks.rank and (part := [i for i in cuts[c] if keys[i] not in known])]
        fresh: dict = {}
        with progress.bar(f"{self.plan.benchmark}/{config}", sum(map(len, todo)), "questions") as bar:
            for part in todo:
                committed: set[str] = set()

                def answered(index: int, value: list, part=part, committed=committed) -> None:
                    inputs.finite_scores([value], config, [indices[part[index]]])
                    cache.put({keys[part[index]]: value})
                    committed.add(keys[part[index]])

                try:
                    values = self.model.score([requests[i] for i in part], Progress(bar, answered))
                except RequestError as error:
                    raise BackendError(f"{self.plan.benchmark}/{config} row {indices[part[error.index]]}: {error}") from None
                inputs.finite_scores(values, config, [indices[i] for i in part])
                scored_now = {keys[i]: v for i, v in zip(part, values)}
                cache.put({k: v for k, v in scored_now.items() if k not in committed})
                fresh.update(scored_now)
        known.update(self.ranks.merged(fresh))
        results = [known[k] for k in keys]
        if self.ranks.world > 1 and self.ranks.main:  # a later single-process run into ``out`` resumes from every rank's scores
            cache.put(dict(zip(keys, results)))
        return results, self.ranks.total(sum(map(len, todo)))

    def bootstrap(self, config: str, rows: list[dict], predictions: list, scores: list) -> dict:
        """The seeded bootstrap of each overall figure of ``config``'s metrics."""

        def resampled(idx):
            return self.evaluation.metrics(config, [rows[i] for i in idx], [predictions[i] for i in idx], [scores[i] for i in idx],
                                           **self.protocol.metric_options)  # fmt: skip

        return provenance.bootstrap(resampled, len(rows), self.plan.bootstrap_iters)

    def pooled(self, scored: dict[str, Scored]) -> dict:
        """The benchmark's figures over several configs (e.g. CConS's NoCon), where all were scored."""
        outcomes = {config: (s.rows, s.predictions, s.scores) for config, s in scored.items()}
        pooled = self.evaluation.pooled_metrics(outcomes, **self.protocol.metric_options)
        for figure, values in pooled.items():
            for count in ("unparsed", "fallback"):
                members = [scored[member].metrics for member in self.evaluation.pooled[figure]]
                if all(count in m for m in members):
                    values[count] = sum(m[count] for m in members)
        return pooled

    def pooled_baselines(self, scored: dict[str, Scored], pooled: dict) -> dict[str, Baselines]:
        """The baselines of each pooled figure, over its configs' rows together (rank 0)."""
        found = {}
        for figure in pooled:
            members = [scored[member] for member in self.evaluation.pooled[figure]]
            if self.ranks.main and all(m.rows for m in members):
                rows, options, predictions, scores = ([x for m in members for x in getattr(m, part)]
                                                      for part in ("rows", "options", "predictions", "scores"))  # fmt: skip
                found[figure] = baselines.compute(self.evaluation, figure, rows, options, predictions, scores,
                                                  **self.protocol.metric_options)  # fmt: skip
        return found

    def record(self, scored: dict[str, Scored], metrics: dict, pooled: dict[str, Baselines], started_at: float,
               elapsed: float) -> RunRecord:  # fmt: skip
        """The run's record, as rank 0 writes it."""
        plan, source = self.plan, self.source
        chat = self.identity.get("chat")
        return RunRecord(
            model=plan.model, benchmark=plan.benchmark, method=self.protocol.method, protocol=self.protocol.name,
            protocol_source=self.protocol.source, configs=self.configs, limit=plan.limit,
            backend={"name": plan.backend, **dataclasses.asdict(self.model.info())}, chat=None if chat is None else ChatRecord(**chat),
            dataset=DatasetRecord("hub" if source.on_hub else "local", source.path, source.revision, dict(self.fingerprints)),
            questions_scored=sum(s.fresh for s in scored.values()), seconds=round(elapsed, 2), versions=provenance.versions(),
            command=plan.command, started=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started_at)),
            timings=Timings(round(self.model.load_seconds - self.loaded_before, 3), {c: s.seconds for c, s in scored.items()}, round(elapsed, 3)),
            bootstrap=Bootstrap(plan.bootstrap_iters, provenance.BOOTSTRAP_SEED,
                                {c: s.uncertainty for c, s in scored.items() if s.uncertainty is not None}),
            headline={config: self.evaluation.headline_of(values) for config, values in metrics.items()}, metrics=metrics,
            label=plan.label, baselines={**{c: s.baselines for c, s in scored.items() if s.baselines is not None}, **pooled},
        )  # fmt: skip

    def predictions(self, scored: dict[str, Scored]) -> list[Prediction]:
        """Every scored row of every config, as predictions.parquet holds them."""
        return [
            Prediction(config, s.indices[i], [float("nan") if v is None else v for v in s.scores[i]],
                       -1 if s.predictions[i] is None else s.predictions[i], self.evaluation.reference(s.rows[i]), s.generated[i],
                       *s.read[i])
            for config, s in scored.items() for i in range(len(s.rows))
        ]  # fmt: skip


def run(plan: RunPlan, make_backend: Callable[[Settings], Backend] | None = None) -> RunRecord:
    """Score ``plan``: every config, with resume; rank 0 writes the run folder. Returns the run's record.

    A bad model option, an unreachable dataset or a protocol the model's family cannot take fails before any
    weight loads; a fully cached (resumed) run never loads the weights. ``make_backend``: see ``Run``.
    """
    started_at, started = time.time(), time.perf_counter()
    ranks = parallel.current()  # processes of `accelerate launch`: each scores its share (physprobe.parallel)
    this = Run(plan, ranks, make_backend)
    created = run_record.new_folders(plan.out)
    run_record.open_folder(plan.out, plan.owner)  # new, or this model's run of this benchmark
    try:
        with FolderLock(plan.out, run_record.lock_name(ranks.rank)):  # a second run into ``out`` fails here, naming this one
            return _scored_run(this, plan, ranks, started_at, started)
    except FolderInUse:  # another process's folder, whatever it holds
        raise
    except BaseException:
        if ranks.world == 1:  # refused before any score was cached: nothing it created is left (else: resume)
            run_record.discard_unscored(created)
        raise


def _scored_run(this: Run, plan: RunPlan, ranks: parallel.Ranks, started_at: float, started: float) -> RunRecord:
    """Every config of ``plan`` scored into the run folder, which the caller holds locked."""
    cache = Cache(run_record.cache_file(plan.out, ranks.rank))
    scored = {config: this.score(config, cache) for config in this.configs}
    metrics = {config: s.metrics for config, s in scored.items()}
    pooled = this.pooled(scored)
    metrics.update(pooled)
    if this.protocol.method == "generate" and ranks.main:
        chat_applied = bool(this.identity and this.identity["chat"]["applied"])
        warn_unparsed(metrics, this.configs, plan.model, chat_applied or not this.model.offers_chat_template())
    record = this.record(scored, metrics, this.pooled_baselines(scored, pooled), started_at, time.perf_counter() - started)
    if ranks.main:
        run_record.write(plan.out, plan.owner, record, this.predictions(scored))  # all three files in one swap
        for flag in baselines.flags(record):
            print(f"physprobe: warning: {plan.label or plan.model}: {flag.text}", file=sys.stderr)
    return record


def served(model, protocol, request_type: type, servable=list) -> dict:
    """The backend's identity for a protocol's requests; a one-line error when the backend cannot serve them, naming
    the backends that can and the protocols (``servable()``) this backend can serve instead."""
    if not backends.serves(model.name, request_type):
        others = [name for name in backends.serving(request_type) if name != model.name]
        alternatives = servable()
        fixes = [f"--backend {' or '.join(others)}"] if others else []
        if alternatives:
            fixes.append(f"--protocol {alternatives[0]}" + (f" (or {', '.join(alternatives[1:])})" if alternatives[1:] else ""))
        hint = f"; use {', or '.join(fixes)}" if fixes else ""
        raise BackendError(f"protocol {protocol.name!r} asks {request_type.__name__} requests, which --backend {model.name} "
                           f"cannot serve{hint}")  # fmt: skip
    return model.identity(request_type)


def warn_unparsed(metrics: dict, configs: tuple[str, ...], model_name: str, template_tried: bool) -> None:
    """One line on stderr when more than half of a generation run's answers named no option, with the fix:
    ``--apply-chat-template`` where the model has a template not yet applied (``template_tried`` False)."""
    scored = [metrics[c] for c in configs if "unparsed" in metrics[c]]
    total, unparsed = sum(m["n"] for m in scored), sum(m["unparsed"] for m in scored)
    if not total or unparsed * 2 <= total:
        return
    fix = ("read the answers (`generated` in predictions.parquet) or score a log-likelihood protocol (`physprobe protocols`)"
           if template_tried else "an instruct model answers in its chat format: score with --apply-chat-template, "
           "or a log-likelihood protocol (`physprobe protocols`)")  # fmt: skip
    print(f"physprobe: warning: {unparsed} of {total} answers of {printable(model_name)} named no option (unparsed); {fix}", file=sys.stderr)
