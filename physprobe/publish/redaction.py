"""What leaves the machine when runs are published: nothing secret, nothing local.

A ``Redaction`` holds what must not be published and what each is published as: the secrets (the server key in
``$OPENAI_API_KEY``, the Hub token; a URL's credentials never reach a run's files: ``run_record.write`` scrubs them)
become ``***``; a local model's path becomes the model's published name (``published_model``: its folder name and
content digest, or the id given with ``--model-id``); a local build's path, the run folder's and any other absolute
path in the command line become their last component; the home folder becomes ``~``. ``spec_json``, ``run_json``
and ``predictions`` apply it to every text of a run's files, and ``check_leaks`` reads every file about to be published (the Parquet files' texts included) and refuses,
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
from physprobe.publish.verify import RunFiles
from physprobe.record.run_record import RUN_JSON, SPEC_JSON
from physprobe.util.paths import MARKER
from physprobe.util.redact import each_text, escaped, scrub


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

    from physprobe.backends.openai.client import API_KEY_VARIABLE

    return [s for s in (os.environ.get(API_KEY_VARIABLE), os.environ.get("HF_TOKEN"), get_token()) if s]


def local_model(files: RunFiles) -> str | None:
    """The absolute path of the run's model where it is a local folder (or a served id that is a path), else None."""
    model = str(files.owner.of.get("model", ""))
    return model if os.path.isabs(model) else None


def published_model(files: RunFiles, model_id: str | None) -> str | None:
    """What a run's local model is published as: ``model_id`` where given, else its folder name and the digest of its
    content the run recorded (``backend.model_revision``); None for a model that is not local (a Hub id, a served id).

    >>> from physprobe.util.paths import Owner
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
    revision = str(files.json(RUN_JSON).get("backend", {}).get("model_revision") or "")
    name = Path(path).name
    return f"{name}@sha256:{revision.split(':', 1)[1][:12]}" if revision.startswith("sha256:") else name


def redaction_for(files: RunFiles, published: str | None, secrets: list[str]) -> Redaction:
    """The ``Redaction`` of one run: ``secrets``; its local model (as the owner names it and as the spec gave it) as
    ``published``; its run folder and its local build by their folder names; the home folder as ``~``."""
    spec = files.spec
    local = {os.path.abspath(files.folder): files.folder.name}
    if published is not None:
        local[local_model(files)] = published
        local[str(spec.get("model"))] = published
    data = spec.get("data") if isinstance(spec.get("data"), dict) else {}
    if data.get("revision") is None and data.get("path"):
        local[str(data["path"])] = Path(str(data["path"])).name
    home = str(Path.home())
    if len(home) > 1:
        local[home + os.sep] = "~" + os.sep
    return Redaction(tuple(dict.fromkeys(secrets)), local)


def _command_word(word: str, redaction: Redaction) -> str:
    """One word of the recorded command line as published: an absolute path (alone or as ``--option=PATH``) by its
    last component, unless the redaction names what it is published as."""
    option, equals, value = word.partition("=") if word.startswith("--") else ("", "", word)
    if value in redaction.local:
        value = redaction.local[value]
    elif os.path.isabs(value) or value.startswith("~"):
        value = Path(value).name
    return redaction.text(f"{option}{equals}{value}")


def _spec(spec: dict, redaction: Redaction, published: str | None) -> dict:
    """A run's spec as published: the model by its published name, a local build, the run folder and a GGUF file by
    their last component, the command line's paths too, every text redacted."""
    out = copy.deepcopy(spec)
    settings = out.get("settings") if isinstance(out.get("settings"), dict) else {}
    if published is not None:
        out["model"] = settings["model"] = published
    data = out.get("data") if isinstance(out.get("data"), dict) else {}
    if data.get("revision") is None and data.get("path"):
        data["path"] = Path(str(data["path"])).name
    for holder, key in ((out, "out"), (settings, "gguf_file")):
        if holder.get(key):
            holder[key] = _command_word(str(holder[key]), redaction)
    out["command"] = [_command_word(str(word), redaction) for word in out.get("command") or []]
    return each_text(out, redaction.text)


def _as_written(files: RunFiles, name: str, published: dict) -> bytes:
    """``published`` as physprobe writes a record's JSON; the bytes of ``name`` it wrote where nothing changed."""
    return files.contents[name] if published == files.json(name) else json.dumps(published, indent=2, sort_keys=True).encode()


def spec_json(files: RunFiles, redaction: Redaction, published: str | None) -> bytes:
    """spec.json as published (``_spec``)."""
    return _as_written(files, SPEC_JSON, _spec(files.json(SPEC_JSON), redaction, published))


def run_json(files: RunFiles, redaction: Redaction, published: str | None) -> bytes:
    """run.json as published: its spec as spec.json's (``_spec``), every other text redacted."""
    info = files.json(RUN_JSON)
    out = each_text({k: v for k, v in info.items() if k != "spec"}, redaction.text)
    return _as_written(files, RUN_JSON, {**out, "spec": _spec(files.spec, redaction, published)})


def predictions(files: RunFiles, redaction: Redaction) -> bytes:
    """predictions.parquet as published: every text (generated answers, prompts) redacted, the same schema; the bytes
    physprobe wrote where nothing changes."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = files.predictions()
    rows = table.to_pylist()
    published = each_text(rows, redaction.text)
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
