"""What leaves the machine when runs are published: nothing secret, nothing local, the run's texts as scored.

A ``Redaction`` holds what must not be published and what each is published as: the secrets (the server key in
``$OPENAI_API_KEY``, the Hub token; a URL's credentials never reach a run's files: ``run_record.write`` scrubs them)
become ``***``; a local model's path becomes the model's published name (``published_model``: its folder name and
content digest, or the id given with ``--model-id``); a local build's path, the run folder's and any other absolute
path in the command line become their last component; the home folder becomes ``~``. ``spec_json`` and ``run_json``
apply it to every text of the record, then scrub what is shaped like a credential (``Redaction.text``);
``predictions`` hides only what it knows exactly (``Redaction.known``: benchmark text is never taken for a secret),
refuses a text still shaped like one, and ``check_unaltered`` reads the published predictions back against the
run's. ``check_leaks`` reads every name and file about to be published (the Parquet files' texts included) and
refuses, in one line naming the file, any that still holds a secret or a local path, however spelled.

>>> redaction = Redaction(("sk-0123456789",), {"/home/me/models/tiny": "tiny@sha256:ab12"})
>>> redaction.text("--model /home/me/models/tiny said: Bearer sk-0123456789 to api-key=k-1")
'--model tiny@sha256:ab12 said: Bearer *** to api-key=***'
>>> redaction.known("Basic nurse 's equipment ! Bearer sk-0123456789 to api-key=k-1")
"Basic nurse 's equipment ! Bearer *** to api-key=k-1"
"""

from __future__ import annotations

import copy
import io
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from physprobe.errors import PublishError
from physprobe.publish.verify import RunFiles
from physprobe.record.run_record import PREDICTIONS, RUN_JSON, SPEC_JSON
from physprobe.util.paths import MARKER
from physprobe.util.redact import each_text, escaped, known, scrub


@dataclass(frozen=True)
class Redaction:
    """The secrets never published, and local texts (paths) each with what is published instead."""

    secrets: tuple[str, ...]
    local: dict[str, str]

    def known(self, value: str) -> str:
        """``value`` with each local text replaced (longest first) and every form of each secret hidden: what is known
        exactly, and nothing else changed."""
        for local in sorted(self.local, key=len, reverse=True):
            value = value.replace(local, self.local[local])
        return known(value, self.secrets)

    def text(self, value: str) -> str:
        """``value`` as a record's text is published: ``known``, then whatever is shaped like a credential scrubbed."""
        return scrub(self.known(value))

    def forbidden(self) -> dict[str, str]:
        """Each text no published name or file may hold (``check_leaks``: a path however spelled), with what it is in
        words (a secret is never shown): the secrets and the local paths."""
        found = {secret: "a secret (an API key, token or credential)" for secret in self.secrets}
        found.update({local: f"the local path {escaped(local)}" for local in self.local if local.startswith(("/", "~"))})
        return found


def skeleton(text: str) -> str:
    """``text`` case-folded, each run of characters other than letters and digits as one ``-``, with ``-`` around: a
    path however a name made of it is spelled (``/``, ``-``, ``_``, spaces, capitals), as ``check_leaks`` compares it.

    >>> skeleton("/home/Me/alice-secret project/ckpt") in skeleton("prost-ckpt-home-me-alice_secret-project-CKPT-2")
    True
    """
    return "-" + "-".join(re.findall(r"[^\W_]+", text.casefold())) + "-"


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
    """predictions.parquet as published: the benchmark's texts and the model's exactly as scored, only the secrets and
    local paths known exactly hidden (``Redaction.known``), the same schema; the bytes physprobe wrote where nothing
    changes. A text still shaped like a credential (``redact.scrub``) is refused in one line naming its row, not
    altered: benchmark text is never taken for a secret, and no unknown key is published."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = files.predictions()
    rows = table.to_pylist()
    published = each_text(rows, redaction.known)
    for row in published:
        for column, value in row.items():
            if each_text(value, scrub) != value:
                raise PublishError(f"{escaped(str(files.folder / PREDICTIONS))}: row {row.get('row')} of config "
                                   f"{escaped(str(row.get('config')))} ({column}) holds a text shaped like a credential (an "
                                   "Authorization header's value, a key) that is no secret known here; nothing was published: "
                                   "if it is a key, set it in $OPENAI_API_KEY or HF_TOKEN while publishing so it is hidden, "
                                   "else report this as a physprobe bug")  # fmt: skip
    if published == rows:
        return files.contents[PREDICTIONS]
    sink = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(published, schema=table.schema), sink)
    return sink.getvalue()


def check_unaltered(files: RunFiles, path: Path, redaction: Redaction) -> None:
    """``PublishError`` naming the first row and column where the predictions about to be published (``path``, read
    back) differ from the run's anywhere but at a secret or local path known exactly, or hold another schema."""
    import pyarrow.parquet as pq

    table, local = pq.read_table(path), files.predictions()
    rows, expected = table.to_pylist(), each_text(local.to_pylist(), redaction.known)
    why = "another schema" if table.schema != local.schema else f"{len(rows)} rows for {len(expected)}"
    if table.schema == local.schema and len(rows) == len(expected):
        changed = next(((i, k) for i, (a, b) in enumerate(zip(rows, expected, strict=True)) for k in b if a[k] != b[k]), None)
        if changed is None:
            return
        why = f"row {expected[changed[0]].get('row')} of config {escaped(str(expected[changed[0]].get('config')))} ({changed[1]}) altered"
    raise PublishError(f"{escaped(str(path))} is not the run's {PREDICTIONS} ({escaped(str(files.folder / PREDICTIONS))}) with only its "
                       f"known secrets and local paths hidden: {why}; nothing was published: report this as a physprobe bug")  # fmt: skip


def check_leaks(folder: Path, forbidden: dict[str, str]) -> None:
    """``PublishError`` naming the first file under ``folder`` (its marker aside) whose name (its path in the folder),
    bytes or Parquet texts hold a ``forbidden`` text, case-folded; a path (``/...``, ``~...``) also URL-encoded, and,
    where it has three components or more, spelled any other way (``skeleton``: ``home-me-models-tiny``,
    ``HOME_ME_MODELS_TINY``): the check of everything about to be published, after every redaction."""
    import pyarrow.parquet as pq

    paths = [text for text in forbidden if text.startswith(("/", "~"))]
    exact = {form.casefold(): forbidden[text] for text in forbidden if text for form in (text, quote(text), quote(text, safe=""))}
    spelled = {skeleton(text): forbidden[text] for text in paths if skeleton(text).count("-") > 3}
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.name != MARKER):
        texts = [path.relative_to(folder).as_posix(), path.read_bytes().decode("utf-8", "replace")]
        if path.suffix == ".parquet":
            texts.append(json.dumps(pq.read_table(path).to_pylist(), ensure_ascii=False, default=str))
        folded, skeletons = [text.casefold() for text in texts], [skeleton(text) for text in texts]
        found = [what for text, what in exact.items() if any(text in f for f in folded)]
        found += [what for text, what in spelled.items() if any(text in s for s in skeletons)]
        if found:
            raise PublishError(f"{escaped(str(path))} would publish {found[0]}; nothing was published: score the run again, "
                               "or report this as a physprobe bug")  # fmt: skip
