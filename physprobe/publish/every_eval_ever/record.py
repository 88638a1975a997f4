"""A run's aggregate Every Eval Ever record: who ran which model how, on which rows, and its figures
(``physprobe.publish.every_eval_ever.figures``).

Every text comes from the run's published spec.json and run.json (``physprobe.publish.redaction``: no secret, no local
path; a local model by its published name). What the record says and where:

- ``model_info``: the run's name, the model's id (``ORG/NAME`` as given, or its published name), the backend's
  engine and the model's revision, GGUF file and family;
- ``eval_library``: physprobe and its version, the other libraries' versions run.json records;
- ``generation_config`` of every result: the protocol, its source in the released code, the decoding, seed and
  samples, the chat setting, the limit and the recorded command;
- ``source_data`` of every result: the Hub dataset and its commit, or the local build by its folder name and the
  config's content hash.

>>> model_path_parts("HuggingFaceTB/SmolLM2-135M-Instruct"), model_path_parts("tiny@sha256:0123456789ab")
(('HuggingFaceTB', 'SmolLM2-135M-Instruct'), ('unknown', 'tiny_sha256_0123456789ab'))
"""

from __future__ import annotations

import calendar
import re
import time

from physprobe.data import registry
from physprobe.record.run_record import RunRecord

SCHEMA_VERSION = "0.3.0"  # the Every Eval Ever schema version the records are written for
UNKNOWN = "unknown"


def component(text: str) -> str:
    """One folder name of the datastore's layout: letters, digits, ``.``, ``_`` and ``-``, each other run as ``_``.

    >>> component("GPT-2 XL"), component("../x")
    ('GPT-2_XL', '.._x')
    """
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or UNKNOWN


def model_path_parts(model_id: str) -> tuple[str, str]:
    """The developer and model folders of a model id: ``ORG/NAME``'s two parts, a flat id's developer ``unknown``."""
    developer, _, name = model_id.rpartition("/")
    return component(developer.split("/")[-1]) if developer else UNKNOWN, component(name)


def epoch(iso: str, seconds: float = 0.0) -> str:
    """An ISO time (run.json's ``started``) plus ``seconds`` as Unix epoch seconds, the schema's ``retrieved_timestamp``.

    >>> epoch("2026-01-02T03:04:05Z", 10.6)
    '1767323055'
    """
    return str(int(calendar.timegm(time.strptime(iso, "%Y-%m-%dT%H:%M:%SZ")) + seconds))


def model_info(record: RunRecord, info: dict, model_id: str, name: str, local: bool) -> dict:
    """The run's ``model_info``; ``info``: its published run.json, ``local``: whether the model is a local folder (its
    weights may be nobody's but the user's), else a Hub id (open weights, where the in-process backend loaded them)."""
    backend = info.get("backend") or {}
    hub_model = record.backend_name == "hf" and not local
    details = {"deployment_type": "self_deployed" if record.backend_name == "hf" else UNKNOWN,
               "model_availability": "open_weights" if hub_model else UNKNOWN,
               "family": record.spec.family, "backend": record.backend_name}  # fmt: skip
    for key in ("model_revision", "gguf_file", "dtype", "device"):
        if backend.get(key):
            details[key] = str(backend[key])
    developer, _ = model_path_parts(model_id)
    out = {"name": name, "id": model_id, "developer": developer, "additional_details": details}
    engine = {"hf": "transformers"}.get(record.backend_name)
    if engine is not None:
        out["inference_engine"] = {"name": engine, "version": str(record.versions.get(engine) or UNKNOWN)}
    else:
        out["inference_engine"] = {"name": f"an OpenAI-compatible server (physprobe backend {record.backend_name})"}
    return out


def eval_library(record: RunRecord) -> dict:
    """physprobe and its version; the other libraries run.json records, with theirs."""
    others = {name: str(version) for name, version in sorted(record.versions.items()) if name != "physprobe" and version}
    return {"name": "physprobe", "version": str(record.versions.get("physprobe") or UNKNOWN), "additional_details": others}


def generation_config(record: RunRecord, spec: dict) -> dict:
    """How the run asked and read: its generation arguments (a generating protocol's budget and sampling settings, the
    command) and, in the details, the protocol, its released source, the decoding, seed, chat setting and limit."""
    protocol = registry.evaluation(record.benchmark).protocol(record.protocol)
    args: dict = {}
    decoding = record.spec.decoding
    if protocol.generates:
        args["max_tokens"] = (
            decoding.max_new_tokens if decoding and decoding.max_new_tokens else None
        ) or protocol.max_new_tokens
        if decoding is not None and decoding.kind == "sampling":
            args |= {"temperature": decoding.temperature, "top_p": decoding.top_p, "top_k": decoding.top_k}
    if spec.get("command"):
        args["execution_command"] = " ".join(map(str, spec["command"]))
    details = {"protocol": record.protocol, "protocol_source": record.protocol_source, "protocol_summary": protocol.summary,
               "method": record.method, "request": record.spec.sends, "configs": ",".join(record.configs),
               "decoding": "greedy" if decoding is None else decoding.describe(),
               "chat_template": "off" if record.chat is None or not record.chat.applied else (record.chat.template or "default")}  # fmt: skip
    if decoding is not None and decoding.source:
        details["decoding_source"] = decoding.source
    if record.spec.seed is not None:
        details |= {"seed": str(record.spec.seed), "samples": str(record.spec.samples)}
    if record.chat is not None and record.chat.template_sha256:
        details["chat_template_sha256"] = record.chat.template_sha256
    if record.chat is not None and record.chat.system_instruction:
        details["system_instruction"] = (spec.get("settings") or {}).get("chat", {}).get("system_instruction") or ""
    details["limit"] = str(record.limit) if record.limit else "all rows"
    return {"generation_args": args, "additional_details": details} if args else {"additional_details": details}


def source_data(record: RunRecord, spec: dict):
    """``config -> source_data``: the Hub dataset at its commit, or the local build (by its folder name, the published
    spec's) with each config's content hash; a pooled figure (NEWTON's ``track2``) names the configs it pools."""
    evaluation = registry.evaluation(record.benchmark)
    data = spec.get("data") or {}

    def of(config: str) -> dict:
        members = evaluation.pooled.get(config, (config,))
        revisions = {m: record.config_revisions.get(m, UNKNOWN) for m in members}
        details = {"config": config, "revision": ",".join(f"{m}={r}" for m, r in revisions.items()) if len(members) > 1
                   else revisions[config]}  # fmt: skip
        if len(members) > 1:
            details["pools"] = ",".join(members)
        if record.dataset.source == "hub":
            return {"dataset_name": f"{record.benchmark}/{config}", "source_type": "hf_dataset", "hf_repo": str(data.get("path")),
                    "hf_split": "test", "additional_details": details | {"commit": str(record.dataset.revision)}}  # fmt: skip
        return {"dataset_name": f"{record.benchmark}/{config}", "source_type": "other",
                "additional_details": details | {"local_build": str(data.get("path"))}}  # fmt: skip

    return of


def source_metadata(organization: str) -> dict:
    """Where the record comes from: a physprobe run (per-question outputs, so an ``evaluation_run``) by ``organization``."""
    return {"source_name": "physprobe score", "source_type": "evaluation_run", "source_organization_name": organization,
            "evaluator_relationship": "third_party"}  # fmt: skip
