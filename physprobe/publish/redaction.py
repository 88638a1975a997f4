"""What leaves the machine when runs are published: nothing secret, nothing local, the run's texts as scored.

A ``Redaction`` holds what must not be published and what each is published as: the secrets (the server key in
``$OPENAI_API_KEY``, the Hub token; a URL's credentials never reach a run's files: ``run_record.write`` hides them)
become ``***``; a local model's path becomes the model's published name (``published_model``: its folder name and
content digest, or the id given with ``--model-id``); the run folder and a local build become ``<out>`` and
``<data>``; any other absolute path in the command line becomes its last component; the home folder becomes ``~``.
Only these, known exactly, are changed (``Redaction.known``): a model's answer, a label, a system instruction and the
benchmark's text are published byte for byte, whatever their shape. ``spec_json``, ``run_json`` and ``predictions``
apply it to every text of the run; a text still shaped like a credential (``redact.scrub``) that is no secret known
here is published as it is, and each file holding one is named in one warning line (``warn_credential_shaped``).
The recorded command's path-valued options (``PATH_OPTIONS``) are published as placeholders, its ``--model`` as the
published name. ``check_unaltered`` reads the published predictions back against the run's. ``check_leaks`` reads
every name and file about to be published (the Parquet files' texts included) and refuses, in one line naming the
file, any that still holds a secret or a local path, however spelled.

>>> redaction = Redaction(("sk-0123456789",), {"/home/me/models/tiny": "tiny@sha256:ab12"})
>>> redaction.known("--model /home/me/models/tiny said: Bearer sk-0123456789 to api-key=k-1")
'--model tiny@sha256:ab12 said: Bearer *** to api-key=k-1'
>>> command(["physprobe", "score", "--model", "tiny", "--out", "alicesecret", "--data=/home/me/build"], redaction, "tiny@x")
['physprobe', 'score', '--model', 'tiny@x', '--out', '<out>', '--data=<data>']
"""

from __future__ import annotations

import copy
import io
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from physprobe.errors import PublishError
from physprobe.publish.verify import RunFiles
from physprobe.record.run_record import PREDICTIONS, RUN_JSON, SPEC_JSON
from physprobe.util.paths import MARKER
from physprobe.util.redact import each_text, escaped, known_secrets, scrub


@dataclass(frozen=True)
class Redaction:
    """The secrets never published, and local texts (paths) each with what is published instead."""

    secrets: tuple[str, ...]
    local: dict[str, str]

    def known(self, value: str) -> str:
        """``value`` with each local text replaced (longest first), every form of each secret and any URL's
        credentials hidden: what is known exactly, and nothing else changed."""
        for local in sorted(self.local, key=len, reverse=True):
            value = value.replace(local, self.local[local])
        return known_secrets(value, self.secrets)

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


PATH_OPTIONS = {"--out": "<out>", "--data": "<data>", "--source-dir": "<source-dir>"}  # published as placeholders


def redaction_for(files: RunFiles, published: str | None, secrets: list[str]) -> Redaction:
    """The ``Redaction`` of one run: ``secrets``; its local model (as the owner names it, and as the spec gave it
    where that is a path) as ``published``; its run folder as ``<out>``, an absolute local build as ``<data>``; the
    home folder as ``~``."""
    spec = files.spec
    local = {os.path.abspath(files.folder): PATH_OPTIONS["--out"]}
    if published is not None:
        local[local_model(files)] = published
        if os.path.isabs(str(spec.get("model"))):
            local[str(spec.get("model"))] = published
    data = spec.get("data") if isinstance(spec.get("data"), dict) else {}
    if data.get("revision") is None and os.path.isabs(str(data.get("path") or "")):
        local[str(data["path"])] = PATH_OPTIONS["--data"]
    home = str(Path.home())
    if len(home) > 1:
        local[home + os.sep] = "~" + os.sep
    return Redaction(tuple(dict.fromkeys(secrets)), local)


def _placeholder(option: str, published: str | None) -> str | None:
    """What the value of ``option`` (as given: argparse takes a unique prefix, ``--ou``) is published as: a path
    option's placeholder, a local ``--model``'s published name; None for any other option."""
    if option == "--model":
        return published
    named = [name for name in PATH_OPTIONS if len(option) > 2 and name.startswith(option)]
    return PATH_OPTIONS[named[0]] if named else None


def _command_word(word: str, redaction: Redaction) -> str:
    """A word of the recorded command line that is no path option's value, as published: an absolute path (alone or
    as ``--option=PATH``) by its last component, unless the redaction names what it is published as."""
    option, equals, value = word.partition("=") if word.startswith("--") else ("", "", word)
    if value in redaction.local:
        value = redaction.local[value]
    elif os.path.isabs(value) or value.startswith("~"):
        value = Path(value).name
    return redaction.known(f"{option}{equals}{value}")


def command(words: list[str], redaction: Redaction, published: str | None) -> list[str]:
    """The recorded command line as published: each path option's value (``--out PATH``, ``--data=PATH``) as its
    placeholder (``PATH_OPTIONS``), a local ``--model`` as ``published``, every other word by ``_command_word``."""
    shown = []
    for previous, word in zip(["", *words], words, strict=False):
        option, equals, value = word.partition("=") if word.startswith("--") else ("", "", word)
        placeholder = _placeholder(option, published) if equals else None
        if not option and previous.startswith("--") and "=" not in previous:
            placeholder = _placeholder(previous, published)
        shown.append(f"{option}{equals}{placeholder}" if placeholder is not None else _command_word(word, redaction))
    return shown


def _spec(spec: dict, redaction: Redaction, published: str | None) -> dict:
    """A run's spec as published: the model by its published name, a local build and the run folder as ``<data>``
    and ``<out>``, a GGUF file by its last component, the command line's paths too (``command``), every text's
    known secrets and local paths hidden."""
    out = copy.deepcopy(spec)
    settings = out.get("settings") if isinstance(out.get("settings"), dict) else {}
    if published is not None:
        out["model"] = settings["model"] = published
    data = out.get("data") if isinstance(out.get("data"), dict) else {}
    if data.get("revision") is None and data.get("path"):
        data["path"] = PATH_OPTIONS["--data"]
    if out.get("out"):
        out["out"] = PATH_OPTIONS["--out"]
    if settings.get("gguf_file"):
        settings["gguf_file"] = _command_word(str(settings["gguf_file"]), redaction)
    out["command"] = command([str(word) for word in out.get("command") or []], redaction, published)
    return each_text(out, redaction.known)


def shaped_like_credentials(value, place: str = "") -> list[str]:
    """The places in ``value`` (JSON-like) of the texts shaped like a credential (``redact.scrub`` would change them):
    dotted keys and list indexes.

    >>> shaped_like_credentials({"label": "api_key=banana split", "command": ["score", "--label", "authorization: a"]})
    ['label', 'command[2]']
    """
    if isinstance(value, str):
        return [place] if scrub(value) != value else []
    if isinstance(value, dict):
        return [p for key, v in value.items() for p in shaped_like_credentials(v, f"{place}.{key}".lstrip("."))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in shaped_like_credentials(v, f"{place}[{i}]")]
    return []


def warn_credential_shaped(path: Path, places: list[str]) -> None:
    """One warning line naming ``path`` and the first of ``places`` where a text shaped like a credential that is no
    secret known here is published as it is (nothing of it altered), if any."""
    if places:
        count = f"{len(places)} text{'s' if len(places) > 1 else ''}"
        print(f"physprobe: warning: {escaped(str(path))}: {count} shaped like a credential (an Authorization header's value, "
              f"a key) but no secret known here, published as written (first: {escaped(places[0])}); if one is a key, "
              "publish again with it in $OPENAI_API_KEY or HF_TOKEN so it is hidden", file=sys.stderr)  # fmt: skip


def _as_written(files: RunFiles, name: str, published: dict) -> bytes:
    """``published`` as physprobe writes a record's JSON; the bytes of ``name`` it wrote where nothing changed (a
    text shaped like a credential warned of: ``warn_credential_shaped``)."""
    warn_credential_shaped(files.folder / name, shaped_like_credentials(published))
    return files.contents[name] if published == files.json(name) else json.dumps(published, indent=2, sort_keys=True).encode()


def spec_json(files: RunFiles, redaction: Redaction, published: str | None) -> bytes:
    """spec.json as published (``_spec``)."""
    return _as_written(files, SPEC_JSON, _spec(files.json(SPEC_JSON), redaction, published))


def run_json(files: RunFiles, redaction: Redaction, published: str | None) -> bytes:
    """run.json as published: its spec as spec.json's (``_spec``), every other text's known secrets and local paths
    hidden."""
    info = files.json(RUN_JSON)
    out = each_text({k: v for k, v in info.items() if k != "spec"}, redaction.known)
    return _as_written(files, RUN_JSON, {**out, "spec": _spec(files.spec, redaction, published)})


def predictions(files: RunFiles, redaction: Redaction) -> bytes:
    """predictions.parquet as published: the benchmark's texts and the model's exactly as scored, only the secrets and
    local paths known exactly hidden (``Redaction.known``), the same schema; the bytes physprobe wrote where nothing
    changes. A text still shaped like a credential (``redact.scrub``) is published as it is, the file and its first
    row named in one warning line (``warn_credential_shaped``): a model's answer and the benchmark's text are never
    altered for their shape."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = files.predictions()
    rows = table.to_pylist()
    published = each_text(rows, redaction.known)
    places = [f"row {row.get('row')} of config {row.get('config')} ({column})"
              for row in published for column, value in row.items() if shaped_like_credentials(value)]  # fmt: skip
    warn_credential_shaped(files.folder / PREDICTIONS, places)
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
