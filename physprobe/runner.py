"""``physprobe score``: load a model, score a benchmark's configs with resume, write predictions and metrics.

A run folder holds ``predictions.parquet`` (config, row, scores, prediction, reference), ``metrics.json``
(the papers' breakdowns from the evaluate modules), ``run.json`` (model and dataset revisions, protocol,
library versions, command line, timings, bootstrap errors: see ``physprobe.provenance``) and ``cache.sqlite``:
every request's scores (or generated text) keyed by all that changes a score (model revision, dtype, device type, physprobe
version, protocol, dataset revision) and the request's hash, so an interrupted run (Ctrl-C, crash,
out-of-memory) restarts where it stopped, and a changed model or dataset is never served stale scores.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from physprobe import hub_data, model_options, parallel, protocols, provenance, registry
from physprobe.paths import FolderLock, atomic_file

FAMILY_CLASSES = {
    "causal": "AutoModelForCausalLM",
    "mlm": "AutoModelForMaskedLM",
    "seq2seq": "AutoModelForSeq2SeqLM",
    "nli": "AutoModelForSequenceClassification",
}


def detect_method(config) -> str:
    """The scoring family of a model, from its config: seq2seq, mlm, nli or causal."""
    architectures = " ".join(config.architectures or [])
    if config.is_encoder_decoder:
        return "seq2seq"
    if "MaskedLM" in architectures:
        return "mlm"
    if "SequenceClassification" in architectures:
        return "nli"
    if "CausalLM" in architectures or "LMHead" in architectures:
        return "causal"
    if not architectures:  # e.g. configs read from GGUF files name only their model type
        from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, MODEL_FOR_MASKED_LM_MAPPING_NAMES

        if config.model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
            return "causal"
        if config.model_type in MODEL_FOR_MASKED_LM_MAPPING_NAMES:
            return "mlm"
    raise protocols.ProtocolError(f"cannot tell the model family from architectures={config.architectures}; pass --method")


@dataclass
class ModelPlan:
    """What is known of a model before its weights load: checked options, config, family, revision."""

    name: str
    local: bool
    family: str
    revision: str  # Hub commit, or sha256 of the local folder's files
    device: object  # torch.device
    dtype: str
    kwargs: dict  # for from_pretrained (gguf_file, revision, trust_remote_code, ...)
    batch_size: int | None  # None: token budget, halved on out-of-memory


@dataclass
class Loaded:
    model: object
    tokenizer: object
    family: str
    device: object
    batching: dict = field(default_factory=dict)


def plan_model(model_name: str, method: str | None, device: str | None = None, gguf_file: str | None = None,
               model_args: dict | None = None, dtype: str | None = None, batch_size: int | None = None) -> ModelPlan:  # fmt: skip
    """Check every model option and read the model's config (no weights): a bad option fails here, in one line."""
    import transformers

    kwargs = dict(model_args or {})
    if gguf_file and kwargs.get("gguf_file", gguf_file) != gguf_file:
        raise model_options.ModelOptionError(f"--gguf-file {gguf_file} and --model-args gguf_file={kwargs['gguf_file']} disagree; give one")
    if gguf_file:
        kwargs["gguf_file"] = gguf_file
    chosen = model_options.check_device(device)
    dtype = model_options.resolve_dtype(dtype, kwargs, chosen.type)
    kwargs.pop("dtype", None)
    local = model_options.looks_local(model_name)
    if local:
        model_options.check_local_model(model_name, kwargs.get("gguf_file"))
    commit = None if local or _offline() else model_options.hub_commit(model_name, kwargs.get("revision"))
    config_kwargs = {k: kwargs[k] for k in ("gguf_file", "revision", "trust_remote_code", "subfolder") if k in kwargs}
    try:
        config = transformers.AutoConfig.from_pretrained(model_name, **config_kwargs)
    except ImportError as error:  # e.g. gguf files need the gguf package
        raise model_options.ModelOptionError(f"cannot read {model_name!r}: {error}".splitlines()[0] + " (pip install 'physprobe[score]')") from None
    except (OSError, ValueError) as error:
        from huggingface_hub import constants

        where = "its folder" if local else f"the Hub ({constants.ENDPOINT})"
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise model_options.ModelOptionError(f"cannot load model {model_name!r} from {where}: {reason}; check the name, "
                                             "or download the model and pass its folder") from None  # fmt: skip
    try:
        detected = detect_method(config)
    except protocols.ProtocolError:
        detected = None
    if method is not None and method not in protocols.FAMILIES:  # yes_no, generate: the model's own family
        family = "seq2seq" if config.is_encoder_decoder else "causal"
    else:
        family = method or detected
    if family is None:
        raise protocols.ProtocolError(f"cannot tell the family of {model_name!r} from architectures={config.architectures}; pass --method")
    if detected is not None and detected != family:
        kind = " ".join(config.architectures or [config.model_type])
        raise protocols.ProtocolError(f"{model_name} is a {detected} model ({kind}): it cannot score --method {method}; "
                              f"leave out --method or use --method {detected}")  # fmt: skip
    revision = commit or provenance.model_revision(model_name, local, kwargs.get("revision"), kwargs.get("gguf_file"), kwargs.get("subfolder"))
    return ModelPlan(model_name, local, family, revision, chosen, dtype, kwargs, batch_size)


def _offline() -> bool:
    from huggingface_hub import constants

    return constants.HF_HUB_OFFLINE


def load_tokenizer(plan: ModelPlan):
    """The planned model's tokenizer (enough to build requests and look them up in the cache)."""
    import transformers

    tokenizer_kwargs = {k: plan.kwargs[k] for k in ("gguf_file", "revision", "trust_remote_code", "subfolder") if k in plan.kwargs}
    tokenizer = transformers.AutoTokenizer.from_pretrained(plan.name, **tokenizer_kwargs)
    if tokenizer.pad_token is None and tokenizer.eos_token is not None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load(plan: ModelPlan, tokenizer=None) -> Loaded:
    """Load model and tokenizer through ``from_pretrained`` (a GGUF file too) for the planned family.

    A one-line progress indicator shows while the weights load (a GGUF file can take minutes).
    """
    import torch
    import transformers
    from tqdm.auto import tqdm

    auto = getattr(transformers, FAMILY_CLASSES[plan.family])
    kwargs = dict(plan.kwargs, dtype=plan.dtype if plan.dtype == "auto" else getattr(torch, plan.dtype))
    with tqdm(total=1, desc=f"loading {plan.name} ({plan.family}, {plan.dtype})", bar_format="{desc}: {elapsed}",
              disable=None):  # fmt: skip
        try:
            if "attn_implementation" in kwargs:
                model = auto.from_pretrained(plan.name, **kwargs)
            else:
                try:
                    model = auto.from_pretrained(plan.name, attn_implementation="sdpa", **kwargs)
                except (ValueError, ImportError):  # architectures without SDPA fall back to their default attention
                    model = auto.from_pretrained(plan.name, **kwargs)
        except (OSError, ValueError, ImportError) as error:
            reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise protocols.ProtocolError(f"cannot load {plan.name!r} as {FAMILY_CLASSES[plan.family]}: {reason}") from None
    tokenizer = tokenizer if tokenizer is not None else load_tokenizer(plan)
    model.eval()
    device = plan.device
    if "device_map" in plan.kwargs:  # accelerate placed the weights (and hooks that move activations between them)
        device = input_device(model)
    else:
        model.to(device)
    batching = {} if plan.batch_size is None else {"max_batch": plan.batch_size, "batch_tokens": 1 << 62}
    return Loaded(model, tokenizer, plan.family, device, batching)


def input_device(model):
    """Where a model dispatched by accelerate (``device_map``) takes its inputs: accelerate's main device,
    the first device in ``hf_device_map`` that is neither ``cpu`` nor ``disk``; offloaded layers (to ``cpu``
    or ``disk``, whose parameters sit on the meta device) run there too, so caches stay with their layers."""
    import torch

    placed = [d for d in getattr(model, "hf_device_map", {}).values() if d not in ("cpu", "disk")]
    return torch.device(placed[0]) if placed else torch.device("cpu")


class Cache:
    """Scores per request in SQLite, committed after every chunk, so a run resumes where it stopped."""

    def __init__(self, path: Path):
        try:
            self.db = self._open(path)
        except sqlite3.DatabaseError as error:  # not a database, or damaged: set it aside and start afresh
            aside = path.with_name(f"{path.stem}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}{path.suffix}")
            os.replace(path, aside)
            print(f"physprobe: warning: {path} is unreadable ({error}); moved to {aside.name}, scoring afresh", file=sys.stderr)
            self.db = self._open(path)

    @staticmethod
    def _open(path: Path) -> sqlite3.Connection:
        db = sqlite3.connect(path)
        try:
            if db.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                raise sqlite3.DatabaseError("integrity check failed")
            db.execute("CREATE TABLE IF NOT EXISTS scores (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            db.execute("SELECT key, value FROM scores LIMIT 1").fetchall()
        except sqlite3.DatabaseError:
            db.close()
            raise
        return db

    @staticmethod
    def key(base: str, method: str, req) -> str:
        """The cache key of one request, under ``base`` (``provenance.cache_key``: all that changes a score)."""
        return hashlib.sha256(json.dumps([base, method, req]).encode()).hexdigest()

    def get(self, keys: list[str]) -> dict[str, list]:
        found = {}
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            query = f"SELECT key, value FROM scores WHERE key IN ({','.join('?' * len(chunk))})"
            found.update({k: json.loads(v) for k, v in self.db.execute(query, chunk)})
        return found

    def put(self, items: dict[str, list]) -> None:
        self.db.executemany("INSERT OR REPLACE INTO scores VALUES (?, ?)", [(k, json.dumps(v)) for k, v in items.items()])
        self.db.commit()


def score_requests(loaded: Loaded, method: str, requests: list, truncate: bool, progress) -> list[list]:
    """Scores (or ``[generated text]``) of requests of one kind (see ``physprobe.protocols``)."""
    from physprobe import scoring

    m, t, d, b = loaded.model, loaded.tokenizer, loaded.device, loaded.batching
    kind = requests[0][0]
    payload = [r[1] for r in requests]
    if kind in ("generate", "yes_generate"):
        from physprobe import generation

        seq2seq = loaded.family == "seq2seq"
        if kind == "generate":
            texts = generation.generate(m, t, payload, d, seq2seq=seq2seq, truncate=truncate, progress=progress, **b)
            return [[text] for text in texts]
        texts = generation.generate(m, t, [p for prompts in payload for p in prompts], d, seq2seq=seq2seq, truncate=truncate, **b)
        if progress is not None:
            progress.update(len(payload))
        starts = [0]
        for prompts in payload:
            starts.append(starts[-1] + len(prompts))
        return [texts[a:z] for a, z in zip(starts, starts[1:])]
    if kind == "mean_ids":
        return scoring.mean_token_logprobs(m, t, payload, d, truncate=truncate, progress=progress, **b)
    if kind == "sequences":
        return scoring.sequence_logprobs(m, t, payload, d, truncate=truncate, progress=progress, **b)
    if kind == "masked":
        return scoring.masked_logprobs(m, t, [p[0] for p in payload], [p[1] for p in payload], d, truncate=truncate, progress=progress, **b)
    if kind == "seq2seq":
        return scoring.seq2seq_logprobs(m, t, payload, d, truncate=truncate, progress=progress, **b)
    if kind.startswith("masked_pair"):  # masked_pair (as released), masked_pair_segments (token type ids given)
        return scoring.masked_pair_logprobs(m, t, payload, d, progress=progress, segments=kind == "masked_pair_segments", **b)
    flat = [item for p in payload for item in p]
    if kind.startswith("nli"):  # nli, nli_vs_contradiction, nli_single_label (softmax across a row's pairs)
        reading = {"nli": "three_way", "nli_vs_contradiction": "vs_contradiction", "nli_single_label": "logit"}[kind]
        values = scoring.entailment_probs(m, t, flat, d, reading=reading, **b)
    else:
        values = scoring.yes_probs(m, t, flat, d, seq2seq=loaded.family == "seq2seq", **b)
    if progress is not None:
        progress.update(len(payload))
    width = len(payload[0])
    rows = [values[i : i + width] for i in range(0, len(values), width)]
    if kind == "nli_single_label":
        import torch

        rows = [torch.softmax(torch.tensor(row), dim=0).tolist() for row in rows]
    return rows


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
        protocol: str | None = None) -> dict:  # fmt: skip
    """Score ``benchmark`` with a model and a protocol; write and return the metrics.

    Without ``protocol``, the benchmark's default for the model (its name, else its family, and ``method``).

    ``data_dir`` is a local build folder, a ``hub_data.DataSource``, or None for the Hub dataset
    ``dataset_repo`` (default ``physprobe/<benchmark>``) at ``revision``. Benchmark, configs, method, device and model options are all checked before weights load.

    ``chunk``: requests per engine call, per cache commit and per unit of data-parallel work
    (``physprobe.parallel``), the same in any number of processes. 256 balances ranks on real runs (PROST's
    18,736 questions: 74 chunks; a 2,000-row config: 8) while the engines still fill their batches within a
    chunk (measured on all of PROST with a benchmark-trained BPE tokenizer: ``sentence-sum`` makes 472
    prefix forward passes with 256, 416 with 512, 314 in one chunk; ``released-gpt`` 1,294 / 1,254 / 1,197).
    """
    started_at, started = time.time(), time.perf_counter()
    evaluation, configs, chosen = resolve(benchmark, configs, method, protocol)  # before any heavy import: a bad argument fails at once
    import pyarrow as pa
    import pyarrow.parquet as pq
    from tqdm.auto import tqdm

    if limit is not None and limit < 1:
        raise protocols.ProtocolError(f"--limit must be at least 1, got {limit}")
    if data_dir is None:
        source = hub_data.hub(benchmark, dataset_repo, revision)
    elif isinstance(data_dir, hub_data.DataSource):
        source = data_dir
    else:
        source = hub_data.local(data_dir, benchmark)
    plan = plan_model(model_name, method or (chosen.method if chosen else None), device, gguf_file, model_args, dtype, batch_size)
    chosen = chosen or evaluation.default(plan.family, method, model_name)
    if plan.family not in chosen.families:
        raise protocols.ProtocolError(f"protocol {chosen.name!r} is for {', '.join(chosen.families)} models, not {plan.family}")
    method = chosen.method
    out.mkdir(parents=True, exist_ok=True)
    ranks = parallel.current()  # processes of `accelerate launch`: each scores its share (physprobe.parallel)
    lock = FolderLock(out, ranks.lock_name).acquire()  # a second run into ``out`` fails here, naming this one
    # Cache first: the tokenizer builds the requests; the model loads only when one is not cached, so a
    # fully cached (resumed) run never loads the weights.
    tokenizer = load_tokenizer(plan)
    loaded, load_seconds = None, 0.0
    cache = Cache(out / ranks.cache_name)
    metrics, records, scored_items, uncertainty, timings, outcomes = {}, [], 0, {}, {}, {}
    dataset_revisions = {}
    for config in configs:
        config_started = time.perf_counter()
        dataset = source.load(config)
        dataset_revisions[config] = source.fingerprint(config)
        key_base = provenance.cache_key(model=plan.revision, gguf_file=plan.kwargs.get("gguf_file"), dtype=plan.dtype,
                                        device=plan.device.type, physprobe=provenance.versions()["physprobe"],
                                        protocol=chosen.name, dataset=dataset_revisions[config])  # fmt: skip
        indices = spread(len(dataset), limit)
        rows = dataset.select(indices).to_list()
        scored = [i for i, row in enumerate(rows) if not (chosen.skip and chosen.skip(row))]
        excluded = len(rows) - len(scored)
        indices, rows = [indices[i] for i in scored], [rows[i] for i in scored]
        reqs = [chosen.build(row, config, tokenizer) for row in rows]
        keys = [Cache.key(key_base, method, r) for r in reqs]
        # Chunks of the requests in row order, whatever the number of processes: a chunk's missing requests
        # are one engine call (its batches, hence its float sums, are the same in one process or many) and one
        # cache commit. A request any rank's cache holds is never rescored.
        cuts = parallel.chunks(len(reqs), chunk)
        known = ranks.merged(cache.get(keys))
        owner = ranks.owners(cuts, reqs, tokenizer)
        todo = [[i for i in cuts[c] if keys[i] not in known] for c in range(len(cuts)) if owner[c] == ranks.rank]
        todo = [part for part in todo if part]
        if todo and loaded is None:
            load_started = time.perf_counter()
            loaded = load(plan, tokenizer)
            load_seconds = time.perf_counter() - load_started
        fresh: dict = {}
        with tqdm(total=sum(map(len, todo)), desc=f"{benchmark}/{config}", unit=" q", disable=None) as progress:
            for part in todo:
                values = score_requests(loaded, method, [reqs[i] for i in part], truncate, progress)
                scored_now = {keys[i]: v for i, v in zip(part, values)}
                cache.put(scored_now)
                fresh.update(scored_now)
        scored_items += ranks.total(sum(map(len, todo)))
        known.update(ranks.merged(fresh))
        results = [known[k] for k in keys]
        if ranks.world > 1 and ranks.main:  # a later single-process run into ``out`` resumes from every rank's scores
            cache.put(dict(zip(keys, results)))
        predictions = [chosen.predict(result, req[1]) for result, req in zip(results, reqs)]
        generated = [(result[0] if method == "generate" else result) if chosen.generates else None for result in results]
        row_scores = [chosen.scores(result) for result in results]
        metrics[config] = evaluation.metrics(config, rows, predictions, row_scores, **chosen.metric_options)
        outcomes[config] = (rows, predictions, row_scores)
        if method == "generate":  # answers that named no option, counted wrong by the metric wiring
            metrics[config]["unparsed"] = predictions.count(protocols.UNPARSED)
        if excluded:
            metrics[config]["excluded"] = excluded
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
    for name, pooled in evaluation.pooled_metrics(outcomes, **chosen.metric_options).items():  # e.g. CConS's NoCon
        if method == "generate":
            pooled["unparsed"] = sum(metrics[member]["unparsed"] for member in evaluation.pooled[name])
        metrics[name] = pooled
    elapsed = time.perf_counter() - started
    if not ranks.main:  # rank 0 writes the run folder
        lock.release()
        return metrics
    with atomic_file(out / "predictions.parquet") as temporary:
        pq.write_table(pa.Table.from_pylist(records), temporary)
    info = {"model": model_name, "gguf_file": plan.kwargs.get("gguf_file"), "benchmark": benchmark, "method": method,
            "family": plan.family, "configs": configs, "limit": limit,
            "device": str(loaded.device if loaded else plan.device), "model_loaded": loaded is not None,
            "questions_scored": scored_items, "seconds": round(elapsed, 2),
            "model_revision": plan.revision, "model_args": {k: v for k, v in plan.kwargs.items() if k != "quantization_config"},
            "dtype": plan.dtype, "batch_size": plan.batch_size or "auto",
            "dataset": {"source": "hub" if source.on_hub else "local", "path": source.path, "revision": source.revision,
                        "fingerprints": dataset_revisions},
            "protocol": chosen.name, "protocol_source": chosen.source, "versions": provenance.versions(),
            "command": command, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started_at)),
            "timings": {"load_model_s": round(load_seconds, 3), "configs_s": timings, "total_s": round(elapsed, 3)},
            "bootstrap": {"iterations": bootstrap_iters, "seed": provenance.BOOTSTRAP_SEED, "headline": uncertainty}}  # fmt: skip
    _write_json(out / "metrics.json", metrics)
    _write_json(out / "run.json", info)
    lock.release()
    return metrics


def _write_json(path: Path, data) -> None:
    with atomic_file(path) as temporary:
        temporary.write_text(json.dumps(data, indent=2, sort_keys=True, default=str))
