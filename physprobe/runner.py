"""``physprobe score``: load a model, score a benchmark's configs with resume, write predictions and metrics.

A run folder holds ``predictions.parquet`` (config, row, scores, prediction, reference), ``metrics.json``
(the papers' breakdowns from the evaluate modules), ``run.json`` (model, method, timing) and
``cache.sqlite``: every request's scores (or generated text) keyed by the model's fingerprint and the request's hash, so an
interrupted run (Ctrl-C, crash, out-of-memory) restarts where it stopped.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from physprobe import protocols, registry
from physprobe.errors import PhysprobeError

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
class Loaded:
    model: object
    tokenizer: object
    family: str
    fingerprint: str
    device: object


def load(model_name: str, method: str | None, device: str | None, gguf_file: str | None) -> Loaded:
    """Load model and tokenizer through ``from_pretrained`` (a GGUF file too) for the method's family."""
    import torch
    import transformers

    if method is not None and method not in protocols.METHODS:
        raise protocols.ProtocolError(f"unknown method {method!r}; known: {', '.join(protocols.METHODS)}")
    kwargs = {"gguf_file": gguf_file} if gguf_file else {}
    config = transformers.AutoConfig.from_pretrained(model_name, **kwargs)
    if method not in (None, *protocols.FAMILIES):  # yes_no, generate: the model's own family
        family = "seq2seq" if config.is_encoder_decoder else "causal"
    else:
        family = method or detect_method(config)
    chosen = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    dtype = torch.bfloat16 if chosen.type == "cuda" else torch.float32
    auto = getattr(transformers, FAMILY_CLASSES[family])
    try:
        model = auto.from_pretrained(model_name, dtype=dtype, attn_implementation="sdpa", **kwargs)
    except (ValueError, ImportError):  # architectures without SDPA fall back to their default attention
        model = auto.from_pretrained(model_name, dtype=dtype, **kwargs)
    except OSError as error:
        raise protocols.ProtocolError(f"cannot load {model_name!r} as {FAMILY_CLASSES[family]}: {error}") from None
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_name, **kwargs)
    if tokenizer.pad_token is None and tokenizer.eos_token is not None:
        tokenizer.pad_token = tokenizer.eos_token
    model.eval().to(chosen)
    digest = hashlib.sha256(json.dumps([model_name, gguf_file, config.to_dict()], sort_keys=True, default=str).encode())
    for path in sorted(Path(model_name).glob("*")) if Path(model_name).is_dir() else []:
        digest.update(f"{path.name}:{path.stat().st_size}:{path.stat().st_mtime_ns}".encode())
    return Loaded(model, tokenizer, family, digest.hexdigest()[:16], chosen)


class Cache:
    """Scores per request in SQLite, committed after every chunk, so a run resumes where it stopped."""

    def __init__(self, path: Path):
        self.db = sqlite3.connect(path)
        self.db.execute("CREATE TABLE IF NOT EXISTS scores (key TEXT PRIMARY KEY, value TEXT NOT NULL)")

    @staticmethod
    def key(fingerprint: str, method: str, req) -> str:
        return hashlib.sha256(json.dumps([fingerprint, method, req]).encode()).hexdigest()

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

    m, t, d = loaded.model, loaded.tokenizer, loaded.device
    kind = requests[0][0]
    payload = [r[1] for r in requests]
    if kind == "generate":
        from physprobe import generation

        texts = generation.generate(m, t, payload, d, seq2seq=loaded.family == "seq2seq", truncate=truncate, progress=progress)
        return [[text] for text in texts]
    if kind == "mean_ids":
        return scoring.mean_token_logprobs(m, t, payload, d, truncate=truncate, progress=progress)
    if kind == "sequences":
        return scoring.sequence_logprobs(m, t, payload, d, truncate=truncate, progress=progress)
    if kind == "masked":
        return scoring.masked_logprobs(m, t, [p[0] for p in payload], [p[1] for p in payload], d, truncate=truncate, progress=progress)
    if kind == "seq2seq":
        return scoring.seq2seq_logprobs(m, t, payload, d, truncate=truncate, progress=progress)
    if kind == "masked_pair":
        return scoring.masked_pair_logprobs(m, t, payload, d, progress=progress)
    flat = [item for p in payload for item in p]
    if kind.startswith("nli"):  # nli, nli_vs_contradiction, nli_single_label (softmax across a row's pairs)
        reading = {"nli": "three_way", "nli_vs_contradiction": "vs_contradiction", "nli_single_label": "logit"}[kind]
        values = scoring.entailment_probs(m, t, flat, d, reading=reading)
    else:
        values = scoring.yes_probs(m, t, flat, d, seq2seq=loaded.family == "seq2seq")
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
    """Check a run's arguments before any model loads; return its evaluation, configs and named protocol.

    >>> name = registry.names()[0]
    >>> evaluation, configs, chosen = resolve(name, None, None, None)
    >>> configs == list(evaluation.configs), chosen
    (True, None)
    """
    evaluation = registry.evaluation(benchmark)
    if method is not None and method not in protocols.METHODS:
        raise protocols.ProtocolError(f"unknown method {method!r}; known: {', '.join(protocols.METHODS)}")
    known = [config.name for config in registry.builder(benchmark).configs]
    for config in configs or ():
        if config not in known:
            raise protocols.ProtocolError(f"{benchmark} has no config {config!r}; known: {', '.join(known)}")
    chosen = evaluation.protocol(protocol) if protocol else None
    if chosen is not None and method is not None and chosen.method != method:
        raise protocols.ProtocolError(f"protocol {chosen.name!r} uses method {chosen.method!r}, not --method {method}")
    if method is not None and not any(p.method == method for p in evaluation.protocols):
        methods = sorted({p.method for p in evaluation.protocols})
        raise protocols.ProtocolError(f"{benchmark} cannot be scored with method {method!r}; use one of {methods}")
    return evaluation, list(configs or evaluation.configs), chosen


def run(model_name: str, benchmark: str, out: Path, data_dir: Path, configs: list[str] | None = None,
        method: str | None = None, limit: int | None = None, device: str | None = None,
        gguf_file: str | None = None, truncate: bool = False, chunk: int = 512, protocol: str | None = None) -> dict:  # fmt: skip
    """Score ``benchmark`` (built under ``data_dir``) with a model and a protocol; write and return the metrics.

    Without ``protocol``, the benchmark's default for the model (its name, else its family, and ``method``).
    """
    import datasets
    import pyarrow as pa
    import pyarrow.parquet as pq
    from tqdm.auto import tqdm

    evaluation, configs, chosen = resolve(benchmark, configs, method, protocol)
    folder = data_dir / benchmark
    if not (folder / "README.md").is_file():
        raise PhysprobeError(f"{folder} is not a built benchmark; run `physprobe build {benchmark} --out {data_dir}` first")
    loaded = load(model_name, method or (chosen.method if chosen else None), device, gguf_file)
    chosen = chosen or evaluation.default(loaded.family, method, model_name)
    if loaded.family not in chosen.families:
        raise protocols.ProtocolError(f"protocol {chosen.name!r} is for {', '.join(chosen.families)} models, not {loaded.family}")
    method = chosen.method
    out.mkdir(parents=True, exist_ok=True)
    cache = Cache(out / "cache.sqlite")
    metrics, records, started, scored_items, outcomes = {}, [], time.perf_counter(), 0, {}
    for config in configs:
        try:
            dataset = datasets.load_dataset(str(folder), config, split="test")
        except ValueError as error:
            raise protocols.ProtocolError(f"{benchmark} has no config {config!r}: {error}") from None
        indices = spread(len(dataset), limit)
        rows = dataset.select(indices).to_list()
        scored = [i for i, row in enumerate(rows) if not (chosen.skip and chosen.skip(row))]
        excluded = len(rows) - len(scored)
        indices, rows = [indices[i] for i in scored], [rows[i] for i in scored]
        reqs = [chosen.build(row, config, loaded.tokenizer) for row in rows]
        keys = [Cache.key(loaded.fingerprint, method, r) for r in reqs]
        scores = cache.get(keys)
        missing = [i for i, k in enumerate(keys) if k not in scores]
        with tqdm(total=len(missing), desc=f"{benchmark}/{config}", unit=" q", disable=None) as progress:
            for start in range(0, len(missing), chunk):
                part = missing[start : start + chunk]
                values = score_requests(loaded, method, [reqs[i] for i in part], truncate, progress)
                fresh = {keys[i]: v for i, v in zip(part, values)}
                cache.put(fresh)
                scores.update(fresh)
        scored_items += len(missing)
        results = [scores[k] for k in keys]
        predictions = [chosen.predict(result, req[1]) for result, req in zip(results, reqs)]
        generated = [result[0] for result in results] if method == "generate" else [None] * len(rows)
        row_scores = [[] for _ in rows] if method == "generate" else results
        metrics[config] = evaluation.metrics(config, rows, predictions, row_scores)
        outcomes[config] = (rows, predictions, row_scores)
        if method == "generate":  # every undecided row is an answer that named no option
            metrics[config]["unparsed"] = sum(p is None for p in predictions)
        if excluded:
            metrics[config]["excluded"] = excluded
        records += [
            {"config": config, "row": indices[i], "scores": [float("nan") if s is None else s for s in row_scores[i]],
             "prediction": -1 if predictions[i] is None else predictions[i], "reference": evaluation.reference(rows[i]),
             "generated": generated[i]}
            for i in range(len(rows))
        ]  # fmt: skip
    for name, pooled in evaluation.pooled_metrics(outcomes).items():  # figures over several configs, e.g. CConS's NoCon
        if method == "generate":
            pooled["unparsed"] = pooled["undecided"]
        metrics[name] = pooled
    elapsed = time.perf_counter() - started
    pq.write_table(pa.Table.from_pylist(records), out / "predictions.parquet")
    info = {"model": model_name, "gguf_file": gguf_file, "benchmark": benchmark, "method": method,
            "protocol": chosen.name, "protocol_source": chosen.source,
            "family": loaded.family, "configs": configs, "limit": limit, "device": str(loaded.device),
            "questions_scored": scored_items, "seconds": round(elapsed, 2)}  # fmt: skip
    _write_json(out / "metrics.json", metrics)
    _write_json(out / "run.json", info)
    return metrics


def _write_json(path: Path, data) -> None:
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(data, indent=2, sort_keys=True, default=str))
    os.replace(temporary, path)
