"""What leaves the machine when runs are published: nothing secret, nothing local.

A ``Redaction`` holds what must not be published and what each is published as: the secrets (the server key in
``$OPENAI_API_KEY``, the Hub token, the credentials of every URL a run's record holds) become ``***``; a local
model's path becomes the model's published name (``published_model``: its folder name and content digest, or the
id given with ``--model-id``); a local build's path and any other absolute path in the command line become their
last component; the home folder becomes ``~``. ``run_json`` and ``predictions`` apply it to every text of a run's
files, and ``check_leaks`` reads every file about to be published (the Parquet files' texts included) and refuses,
in one line naming the file, any that still holds one of them.

>>> redaction = Redaction(("sk-0123456789",), {"/home/me/models/tiny": "tiny@sha256:ab12"})
>>> redaction.text("--model /home/me/models/tiny said: Bearer sk-0123456789")
'--model tiny@sha256:ab12 said: Bearer ***'
"""

from __future__ import annotations

import copy
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path

from physprobe.errors import PublishError
from physprobe.paths import MARKER
from physprobe.publish.verify import RunFiles
from physprobe.redact import escaped, scrub, url_secrets


@dataclass(frozen=True)
class Redaction:
    """The secrets never published, and local texts (paths) each with what is published instead."""

    secrets: tuple[str, ...]
    local: dict[str, str]

    def text(self, value: str) -> str:
        """``value`` as it is published: each local text replaced (longest first), every secret scrubbed."""
        for local in sorted(self.local, key=len, reverse=True):
            value = value.replace(local, self.local[local])
        return scrub(value, self.secrets)

    def forbidden(self) -> dict[str, str]:
        """Each text no published file may hold, with what it is in words (a secret is never shown)."""
        found = {secret: "a secret (an API key, token or credential)" for secret in self.secrets}
        found.update({local: f"the local path {escaped(local)}" for local in self.local if local.startswith(("/", "~"))})
        return found


def environment_secrets() -> list[str]:
    """The secrets this machine holds that a run may have met: the server key and the Hub token."""
    from huggingface_hub import get_token

    from physprobe.backends.openai import API_KEY_VARIABLE

    return [s for s in (os.environ.get(API_KEY_VARIABLE), os.environ.get("HF_TOKEN"), get_token()) if s]


def local_model(files: RunFiles) -> str | None:
    """The absolute path of the run's model where it is a local folder (or a served id that is a path), else None."""
    model = str(files.owner.of.get("model", ""))
    return model if os.path.isabs(model) else None


def published_model(files: RunFiles, model_id: str | None) -> str | None:
    """What a run's local model is published as: ``model_id`` where given, else its folder name and the digest of its
    content the run recorded (``backend.model_revision``); None for a model that is not local (a Hub id, a served id).

    >>> from physprobe.paths import Owner
    >>> files = RunFiles(Path("run"), Owner("run", {"model": "/home/me/tiny", "benchmark": "prost"}),
    ...                  {"run.json": b'{"backend": {"model_revision": "sha256:0123456789abcdef0123"}}'})
    >>> published_model(files, None), published_model(files, "me/tiny-gpt")
    ('tiny@sha256:0123456789ab', 'me/tiny-gpt')
    """
    path = local_model(files)
    if path is None:
        return None
    if model_id:
        return model_id
    revision = str(files.json("run.json").get("backend", {}).get("model_revision") or "")
    name = Path(path).name
    return f"{name}@sha256:{revision.split(':', 1)[1][:12]}" if revision.startswith("sha256:") else name


def redaction_for(files: RunFiles, published: str | None, secrets: list[str]) -> Redaction:
    """The ``Redaction`` of one run: ``secrets`` and the credentials its record's URLs carry; its local model (as
    the owner names it and as the command gave it) as ``published``; its run folder and local build by their folder
    names; the home folder as ``~``."""
    info = files.json("run.json")
    found = list(secrets)
    for text in [str(info.get("backend", {}).get("base_url") or ""), *map(str, info.get("command") or [])]:
        for word in text.replace("=", " ").split():
            found += url_secrets(word)
    local = {os.path.abspath(files.folder): files.folder.name}
    if published is not None:
        local[local_model(files)] = published
        local[str(info.get("model"))] = published
    dataset = info.get("dataset") or {}
    if dataset.get("source") == "local" and dataset.get("path"):
        local[str(dataset["path"])] = Path(str(dataset["path"])).name
    home = str(Path.home())
    if len(home) > 1:
        local[home + os.sep] = "~" + os.sep
    return Redaction(tuple(dict.fromkeys(found)), local)


def _command_word(word: str, redaction: Redaction) -> str:
    """One word of the recorded command line as published: an absolute path (alone or as ``--option=PATH``) by its
    last component, unless the redaction names what it is published as."""
    option, equals, value = word.partition("=") if word.startswith("--") else ("", "", word)
    if value in redaction.local:
        value = redaction.local[value]
    elif os.path.isabs(value) or value.startswith("~"):
        value = Path(value).name
    return redaction.text(f"{option}{equals}{value}")


def _texts(value, change):
    """``value`` (JSON-like) with ``change`` applied to every text in it."""
    if isinstance(value, str):
        return change(value)
    if isinstance(value, list):
        return [_texts(v, change) for v in value]
    if isinstance(value, dict):
        return {k: _texts(v, change) for k, v in value.items()}
    return value


def run_json(files: RunFiles, redaction: Redaction, published: str | None) -> bytes:
    """run.json as published: the model by its published name, a local build by its folder name, the command line's
    paths by their last component, every text redacted; the bytes physprobe wrote where nothing changes."""
    info = files.json("run.json")
    out = copy.deepcopy(info)
    if published is not None:
        out["model"] = published
    if (out.get("dataset") or {}).get("source") == "local":
        out["dataset"]["path"] = Path(str(out["dataset"]["path"])).name
    out["command"] = [_command_word(str(word), redaction) for word in out.get("command") or []]
    out = _texts(out, redaction.text)
    return files.contents["run.json"] if out == info else json.dumps(out, indent=2, sort_keys=True).encode()


def predictions(files: RunFiles, redaction: Redaction) -> bytes:
    """predictions.parquet as published: every text (generated answers, prompts) redacted, the same schema; the bytes
    physprobe wrote where nothing changes."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = files.predictions()
    rows = table.to_pylist()
    published = _texts(rows, redaction.text)
    if published == rows:
        return files.contents["predictions.parquet"]
    sink = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(published, schema=table.schema), sink)
    return sink.getvalue()


def check_leaks(folder: Path, forbidden: dict[str, str]) -> None:
    """``PublishError`` naming the first file under ``folder`` (its marker aside) whose bytes, or whose Parquet texts,
    hold a ``forbidden`` text: the check of everything about to be published, after every redaction."""
    import pyarrow.parquet as pq

    for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.name != MARKER):
        raw = path.read_bytes()
        texts = [raw.decode("utf-8", "replace")]
        if path.suffix == ".parquet":
            texts.append(json.dumps(pq.read_table(path).to_pylist(), ensure_ascii=False, default=str))
        for text, what in forbidden.items():
            if text and (text.encode() in raw or any(text in t for t in texts)):
                raise PublishError(f"{escaped(str(path))} would publish {what}; nothing was published: score the run again, "
                                   "or report this as a physprobe bug")  # fmt: skip
