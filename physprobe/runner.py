"""``physprobe score``: orchestration only: resolve the run, plan the model's backend, score the requests
with resume, compute the metrics, write the run folder.

A run folder holds ``predictions.parquet`` (config, row, scores, prediction, reference), ``metrics.json``
(the papers' breakdowns from the evaluate modules, and each config's chat setting), ``run.json`` (backend,
model and dataset revisions, protocol, chat setting, library versions, command line, timings, bootstrap
errors: see ``physprobe.provenance``) and ``cache.sqlite`` (``physprobe.result_cache``: every request's
result keyed by all that changes it, so an interrupted run restarts where it stopped). The model is
reached through a backend (``physprobe.backends``), which loads weights or opens a connection only when a
request is not cached.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from physprobe import backends, hub_data, inputs, model_options, parallel, protocols, provenance, registry, run_files
from physprobe.backends.base import BackendError, Chat, Settings
from physprobe.paths import FolderLock
from physprobe.requests import Generate
from physprobe.result_cache import Cache


def spread(n: int, limit: int | None) -> list[int]:
    """``limit`` row indices evenly spread over ``n`` rows (all rows without a limit).

    Benchmarks are ordered (PROST by text, NEWTON by scenario), so the first rows would be one template.

    >>> spread(10, 4), spread(3, 5)
    ([0, 2, 5, 7], [0, 1, 2])
    """
    if limit is None or limit >= n:
        return list(range(n))
    return [i * n // limit for i in range(limit)]


def resolve(benchmark: str, configs: list[str] | None, method: str | None, protocol: str | None):
    """Check a run's arguments before any data or model loads; return its evaluation, configs and named protocol.

    Configs must exist, hold questions (``Evaluation.scorable``) and come once; without any, the paper's.

    >>> name = registry.names()[0]
    >>> evaluation, configs, chosen = resolve(name, None, None, None)
    >>> configs == list(evaluation.configs), chosen
    (True, None)
    """
    evaluation = registry.evaluation(benchmark)
    if method is not None and method not in protocols.METHODS:
        raise protocols.ProtocolError(f"unknown method {method!r}; known: {', '.join(protocols.METHODS)}")
    known = registry.config_names(benchmark)
    scorable = [c for c in known if evaluation.scorable is None or c in evaluation.scorable]
    if configs is not None:
        if not configs or any(not c.strip() for c in configs):
            raise protocols.ProtocolError(f"--config has an empty entry ({','.join(configs)!r}); give comma-separated names "
                                          f"such as {','.join(evaluation.configs)}")  # fmt: skip
        repeated = sorted({c for c in configs if configs.count(c) > 1})
        if repeated:
            raise protocols.ProtocolError(f"--config names {', '.join(repeated)} more than once; give each config once")
        for config in configs:
            if config not in known:
                raise protocols.ProtocolError(f"{benchmark} has no config {config!r}; known: {', '.join(scorable)}")
            if config not in scorable:
                raise protocols.ProtocolError(f"{benchmark} config {config!r} holds no questions to score; "
                                              f"scorable: {', '.join(scorable)}")  # fmt: skip
    chosen = evaluation.protocol(protocol) if protocol else None
    if chosen is not None and method is not None and chosen.method != method:
        raise protocols.ProtocolError(f"protocol {chosen.name!r} uses method {chosen.method!r}, not --method {method}")
    if method is not None and not any(p.method == method for p in evaluation.protocols):
        methods = sorted({p.method for p in evaluation.protocols})
        raise protocols.ProtocolError(f"{benchmark} cannot be scored with method {method!r}; use one of {methods}")
    return evaluation, list(configs or evaluation.configs), chosen


def run(model_name: str, benchmark: str, out: Path, data_dir: Path | str | hub_data.DataSource | None = None,
        configs: list[str] | None = None, method: str | None = None, limit: int | None = None, device: str | None = None,
        gguf_file: str | None = None, truncate: bool = False, chunk: int = 256, *, model_args: dict | None = None,
        dtype: str | None = None, batch_size: int | None = None, bootstrap_iters: int = 200,
        dataset_repo: str | None = None, revision: str | None = None, command: list[str] | None = None,
        protocol: str | None = None, backend: str | None = None, chat: Chat | None = None) -> dict:  # fmt: skip
    """Score ``benchmark`` with a model and a protocol; write and return the metrics.

    Without ``protocol``, the benchmark's default for the model (its name, else its family, and ``method``).
    ``backend``: a name of ``physprobe.backends.REGISTRY`` (None: ``backends.resolve``'s choice);
    ``chat``: the chat-template setting (None: ``Chat()``, i.e. ``auto``).

    ``data_dir`` is a local build folder, a ``hub_data.DataSource``, or None for the Hub dataset
    ``dataset_repo`` (default ``physprobe/<benchmark>``) at ``revision``. Benchmark, configs, method, device and model options are all checked before weights load.

    ``chunk``: requests per engine call, per cache commit and per unit of data-parallel work
    (``physprobe.parallel``), the same in any number of processes. 256 balances ranks on real runs (PROST's
    18,736 questions: 74 chunks; a 2,000-row config: 8) while the engines still fill their batches within a
    chunk (measured on all of PROST with a benchmark-trained BPE tokenizer: ``sentence-sum`` makes 472
    prefix forward passes with 256, 416 with 512, 314 in one chunk; ``released-gpt`` 1,294 / 1,254 / 1,197).
    """
    started_at, started = time.time(), time.perf_counter()
    asked_configs = configs
    evaluation, configs, chosen = resolve(benchmark, configs, method, protocol)  # before any heavy import: a bad argument fails at once
    import pyarrow as pa
    from tqdm.auto import tqdm

    if limit is not None and limit < 1:
        raise protocols.ProtocolError(f"--limit must be at least 1, got {limit}")
    if data_dir is None:
        source = hub_data.hub(benchmark, dataset_repo, revision)
    elif isinstance(data_dir, hub_data.DataSource):
        source = data_dir
    else:
        source = hub_data.local(data_dir, benchmark)
    model_args = dict(model_args or {})
    backend = backends.resolve(backend, model_args)
    settings = Settings(model_name, model_args, method=method or (chosen.method if chosen else None), device=device, dtype=dtype,
                        batch_size=batch_size, gguf_file=gguf_file, truncate=truncate, chat=chat or Chat())  # fmt: skip
    model = backends.create(backend, settings)  # every model option checked; no weights loaded, no request sent
    chosen = chosen or evaluation.default(model.family, method, model_name)
    if model.family not in chosen.families:
        raise protocols.ProtocolError(f"protocol {chosen.name!r} is for {', '.join(chosen.families)} models, not {model.family}")
    method = chosen.method
    if asked_configs is None and chosen.configs:  # the rows the protocol's released script reads
        configs = list(chosen.configs)
    local = model_options.looks_local(model_name)
    run_files.open_folder(out, model_name, benchmark, local)  # new, or this model's run of this benchmark
    ranks = parallel.current()  # processes of `accelerate launch`: each scores its share (physprobe.parallel)
    with FolderLock(out, ranks.lock_name):  # a second run into ``out`` fails here, naming this one; released on every exit
        # Cache first: the backend scores (and loads its model) only when a request is not cached, so a fully
        # cached (resumed) run never loads the weights.
        cache = Cache(out / ranks.cache_name)
        metrics, records, scored_items, uncertainty, timings, outcomes = {}, [], 0, {}, {}, {}
        dataset_revisions, identity = {}, {}
        for config in configs:
            config_started = time.perf_counter()
            dataset = source.load(config)
            inputs.not_empty(len(dataset), config, source.path)
            dataset_revisions[config] = source.fingerprint(config)
            indices = spread(len(dataset), limit)
            rows = dataset.select(indices).to_list()
            scored = [i for i, row in enumerate(rows) if not (chosen.skip and chosen.skip(row))]
            excluded = len(rows) - len(scored)
            indices, rows = [indices[i] for i in scored], [rows[i] for i in scored]
            reqs = [chosen.build(row, config) for row in rows]
            if reqs:
                identity = served(model, chosen, type(reqs[0]))
            key_base = provenance.cache_key(**identity, physprobe=provenance.versions()["physprobe"], protocol=chosen.name,
                                            dataset=dataset_revisions[config])  # fmt: skip
            keys = [Cache.key(key_base, method, r) for r in reqs]
            # Chunks of the requests in row order, whatever the number of processes: a chunk's missing requests
            # are one engine call (its batches, hence its float sums, are the same in one process or many) and one
            # cache commit. A request any rank's cache holds is never rescored.
            cuts = parallel.chunks(len(reqs), chunk)
            known = ranks.merged(cache.get(keys))
            owner = ranks.owners(cuts, reqs, getattr(model, "tokenizer", None) if ranks.world > 1 else None)
            todo = [[i for i in cuts[c] if keys[i] not in known] for c in range(len(cuts)) if owner[c] == ranks.rank]
            todo = [part for part in todo if part]
            fresh: dict = {}
            with tqdm(total=sum(map(len, todo)), desc=f"{benchmark}/{config}", unit=" q", disable=None) as progress:
                for part in todo:
                    values = model.score([reqs[i] for i in part], progress)
                    inputs.finite_scores(values, config, [indices[i] for i in part])
                    scored_now = {keys[i]: v for i, v in zip(part, values)}
                    cache.put(scored_now)
                    fresh.update(scored_now)
            scored_items += ranks.total(sum(map(len, todo)))
            known.update(ranks.merged(fresh))
            results = [known[k] for k in keys]
            options = [len(r[1:] or q.choices) if isinstance(q, Generate) else len(r) for q, r in zip(reqs, results)]
            inputs.references(evaluation.reference, rows, options, config, indices)
            if ranks.world > 1 and ranks.main:  # a later single-process run into ``out`` resumes from every rank's scores
                cache.put(dict(zip(keys, results)))
            predictions = [chosen.predict(result, req) for result, req in zip(results, reqs)]
            generated = [(result[0] if method == "generate" else result) if chosen.generates else None for result in results]
            row_scores = [chosen.scores(result) for result in results]
            metrics[config] = evaluation.metrics(config, rows, predictions, row_scores, **chosen.metric_options)
            outcomes[config] = (rows, predictions, row_scores)
            if method == "generate":  # answers that named no option, counted wrong by the metric wiring
                metrics[config]["unparsed"] = predictions.count(protocols.UNPARSED)
            if excluded:
                metrics[config]["excluded"] = excluded
            if identity:
                metrics[config]["chat"] = identity["chat"]
            if bootstrap_iters and rows and ranks.main:
                def resampled(idx, rows=rows, predictions=predictions, row_scores=row_scores, config=config):
                    return evaluation.metrics(config, [rows[i] for i in idx], [predictions[i] for i in idx],
                                              [row_scores[i] for i in idx], **chosen.metric_options)  # fmt: skip

                uncertainty[config] = provenance.bootstrap(resampled, len(rows), bootstrap_iters)
            records += [
                {"config": config, "row": indices[i], "scores": [float("nan") if s is None else s for s in row_scores[i]],
                 "prediction": -1 if predictions[i] is None else predictions[i], "reference": evaluation.reference(rows[i]),
                 "generated": generated[i]}
                for i in range(len(rows))
            ]  # fmt: skip
            timings[config] = round(time.perf_counter() - config_started, 3)
        for figure, pooled in evaluation.pooled_metrics(outcomes, **chosen.metric_options).items():  # e.g. CConS's NoCon
            if method == "generate":
                pooled["unparsed"] = sum(metrics[member]["unparsed"] for member in evaluation.pooled[figure])
            metrics[figure] = pooled
        elapsed = time.perf_counter() - started
        if method == "generate" and ranks.main:
            warn_unparsed(metrics, configs, model_name, bool(identity and identity["chat"]["applied"]))
        if not ranks.main:  # rank 0 writes the run folder
            return metrics
        info = {"model": model_name, "benchmark": benchmark, "method": method, "configs": configs, "limit": limit,
                "backend": backend, **model.info(), "chat": identity.get("chat"), "questions_scored": scored_items,
                "seconds": round(elapsed, 2),
                "dataset": {"source": "hub" if source.on_hub else "local", "path": source.path, "revision": source.revision,
                            "fingerprints": dataset_revisions},
                "protocol": chosen.name, "protocol_source": chosen.source, "versions": provenance.versions(),
                "command": command, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started_at)),
                "timings": {"load_model_s": round(model.load_seconds, 3), "configs_s": timings, "total_s": round(elapsed, 3)},
                "bootstrap": {"iterations": bootstrap_iters, "seed": provenance.BOOTSTRAP_SEED, "figures": uncertainty},
                "headline": {config: evaluation.headline_of(values) for config, values in metrics.items()}}  # fmt: skip
        run_files.write(out, model_name, benchmark, local, pa.Table.from_pylist(records), metrics, info)  # all three in one swap
        return metrics


def served(model, protocol, request_type: type) -> dict:
    """The backend's identity for a protocol's requests; a one-line error when the backend cannot serve them."""
    if request_type not in model.serves:
        others = [name for name in backends.serving(request_type) if name != model.name]
        hint = f"; use --backend {' or '.join(others)}" if others else ""
        raise BackendError(f"protocol {protocol.name!r} asks {request_type.__name__} requests, which --backend {model.name} "
                           f"cannot serve{hint}")  # fmt: skip
    return model.identity(request_type)


def warn_unparsed(metrics: dict, configs: list[str], model_name: str, chat_applied: bool) -> None:
    """One line on stderr when more than half of a generation run's answers named no option, with the fix."""
    scored = [metrics[c] for c in configs if "unparsed" in metrics[c]]
    total, unparsed = sum(m["n"] for m in scored), sum(m["unparsed"] for m in scored)
    if not total or unparsed * 2 <= total:
        return
    fix = ("read the answers (`generated` in predictions.parquet) or score a log-likelihood protocol (`physprobe protocols`)"
           if chat_applied else "an instruct model answers in its chat format: score with --apply-chat-template, "
           "or a log-likelihood protocol (`physprobe protocols`)")  # fmt: skip
    print(f"physprobe: warning: {unparsed} of {total} answers of {model_name} named no option (unparsed); {fix}", file=sys.stderr)
