"""GGUF models converted once: the config, tokenizer and de-quantised weights transformers makes of a GGUF file,
cached on disk and read back by later runs.

transformers parses a GGUF file's metadata anew for the config and again for the tokenizer, and de-quantises every
tensor on each ``from_pretrained`` (SmolLM2-135M: 20 s on a loaded 2-core machine; a 7B model: minutes and 28 GB of
float32). The hf backend converts a file once and keeps the result in the user's cache folder
(``physprobe.util.cache_folder``: ``$PHYSPROBE_CACHE``, else ``~/.cache/physprobe``), keyed by the file's sha256::

    gguf/<sha256>/meta-transformers-<version>/        config.json and tokenizer files: the metadata, no tensor
    gguf/<sha256>/<dtype>-transformers-<version>/     config.json, model.safetensors: the weights in that dtype

(the transformers version is part of the key: another version may convert the file differently).

The metadata entry is made (or read) before any tensor is, so every check that needs the config or the tokenizer
(family, method, protocol, chat template) is made first. Each entry is written under a temporary name and renamed
into place when complete: a killed run leaves no partial entry, two runs converting at once keep one. An entry that
cannot be written (a full or read-only disk) is a warning, and the run goes on from the model in memory.

Each entry holds a manifest (``MANIFEST``): the GGUF file's sha256 and the entry's name it was made for, and the
sha256 of every file written. ``read`` checks it before anything is loaded from the entry (about 1 s per GB): an
entry with a file changed (a flipped bit in the weights), added or missing, or made for another file or kind (another
model's tokenizer copied in), or one that fails to load, is removed with one warning line and converted again.

>>> entry = Converted(Path("/cache/gguf/ab12"))
>>> entry.meta.name.startswith("meta-transformers-"), entry.weights("float32").name.startswith("float32-transformers-")
(True, True)
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from physprobe.util.cache_folder import GGUF, cache_root

SOURCE_ARGS = ("gguf_file", "revision", "subfolder")  # where the GGUF file is: not passed when reading an entry
MANIFEST = "physprobe-entry.json"  # in each entry: what it was made for and the sha256 of each file written
T = TypeVar("T")


@dataclass(frozen=True)
class Converted:
    """The cache entries of one GGUF file (``folder``: ``<cache>/gguf/<sha256>``)."""

    folder: Path

    @property
    def meta(self) -> Path:
        """Config and tokenizer as this transformers version converted them, saved with ``save_pretrained``."""
        return self._entry("meta")

    def weights(self, dtype: str) -> Path:
        """Config and de-quantised weights in ``dtype`` as this transformers version converted them."""
        return self._entry(dtype)

    def _entry(self, kind: str) -> Path:
        from importlib.metadata import version

        return self.folder / f"{kind}-transformers-{version('transformers')}"


def gguf_path(name: str, local: bool, kwargs: dict) -> Path:
    """The GGUF file a model's options name: in the local folder, or the Hub file (downloaded, or from the Hub cache)."""
    if local:
        return Path(name).expanduser() / kwargs.get("subfolder", "") / kwargs["gguf_file"]
    from huggingface_hub import hf_hub_download

    return Path(hf_hub_download(name, kwargs["gguf_file"], revision=kwargs.get("revision"), subfolder=kwargs.get("subfolder")))


def locate(name: str, local: bool, kwargs: dict) -> Converted:
    """The cache entries of the GGUF file the options name, by its sha256 (read whole: about 1 s per GB)."""
    with gguf_path(name, local, kwargs).open("rb") as handle:
        digest = hashlib.file_digest(handle, "sha256").hexdigest()
    return Converted(cache_root() / GGUF / digest)


def _digests(folder: Path) -> dict[str, str]:
    """The sha256 of every file under ``folder`` but the manifest, by relative path."""
    found = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file() or p.is_symlink()):
        name = path.relative_to(folder).as_posix()
        if path.is_symlink():
            found[name] = "a symlink"  # never followed, never a file written there
        elif name != MANIFEST:
            with path.open("rb") as handle:
                found[name] = hashlib.file_digest(handle, "sha256").hexdigest()
    return found


def _made_for(folder: Path) -> dict:
    """What an entry at ``folder`` is made for: the GGUF file's sha256 (its parent's name) and the entry's name."""
    return {"gguf_sha256": folder.parent.name, "entry": folder.name}


def store(folder: Path, write: Callable[[Path], None]) -> bool:
    """Make the entry ``folder`` with ``write(staging)`` and its manifest, renamed into place once complete; False (and
    a warning on stderr) when it cannot be written: a full or read-only disk, whether ``OSError`` or a writer's own
    error wrapping one (safetensors' ``SafetensorError``). Another process's entry, made in the meantime, is kept.

    >>> import tempfile; root = Path(tempfile.mkdtemp())
    >>> store(root / "entry", lambda staging: (staging / "config.json").write_text("{}")), sorted(p.name for p in (root / "entry").iterdir())
    (True, ['config.json', 'physprobe-entry.json'])
    """
    staging = None
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
        staging.chmod(0o755)  # mkdtemp's 0700 would keep the entry from other users of a shared cache
        write(staging)
        (staging / MANIFEST).write_text(json.dumps({**_made_for(folder), "files": _digests(staging)}, indent=1, sort_keys=True))
        try:
            staging.rename(folder)
        except OSError:
            if not folder.is_dir():
                raise
        return True
    except Exception as error:  # noqa: BLE001 - any failure to write a cache entry leaves the run to go on without it
        reason = getattr(error, "strerror", None) or " ".join(str(error).split())[:200] or type(error).__name__
        print(f"physprobe: warning: cannot cache the converted GGUF model in {folder} ({reason}); "
              "the run goes on, and the next run converts the file again", file=sys.stderr)  # fmt: skip
        return False
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)


def fault(folder: Path) -> str | None:
    """What is wrong with the entry at ``folder`` against its manifest, or None where every file is as it was written.

    >>> import tempfile; entry = Path(tempfile.mkdtemp()) / "ab12" / "meta-transformers-5"
    >>> _ = store(entry, lambda staging: (staging / "tokenizer.json").write_text("{}"))
    >>> fault(entry)
    >>> _ = (entry / "tokenizer.json").write_text('{"model": "another"}')
    >>> fault(entry)
    'tokenizer.json is not the file written there (its sha256 differs)'
    """
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        files = dict(manifest["files"])
        made_for = {key: manifest[key] for key in _made_for(folder)}
    except (OSError, ValueError, KeyError, TypeError):
        return f"no readable {MANIFEST}"
    if made_for != _made_for(folder):
        return f"it was made for {made_for['entry']} of GGUF file {str(made_for['gguf_sha256'])[:12]}, not for this one"
    found = _digests(folder)
    for name in sorted(set(files) | set(found)):
        if name not in found:
            return f"{name} is missing"
        if name not in files:
            return f"{name} was not written there"
        if found[name] != files[name]:
            return f"{name} is not the file written there (its sha256 differs)"
    return None


def read(folder: Path, load: Callable[[Path], T]) -> T | None:
    """``load(folder)`` of a verified entry; None where there is no entry, or where it is bad (``fault``) or fails to
    load (an error of any kind), which is removed with one warning line (``discard``), so the caller converts again."""
    if not folder.is_dir():
        return None
    reason = fault(folder)
    if reason is None:
        try:
            return load(folder)
        except Exception as error:  # noqa: BLE001 - any damage to the entry: convert the file again
            reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    discard(folder, reason)
    return None


def discard(folder: Path, reason: str) -> None:
    """Remove an entry that cannot be used (damaged, changed, another file's); the file is converted again."""
    print(f"physprobe: warning: the cached conversion {folder} cannot be used ({reason}); removed, converting the GGUF "
          "file again", file=sys.stderr)  # fmt: skip
    shutil.rmtree(folder, ignore_errors=True)


def metadata(converted: Converted, name: str, kwargs: dict) -> tuple[object, object]:
    """The GGUF file's config and tokenizer: read back from its entry, or converted from the file's metadata (no
    tensor is read) and stored there for the next run."""
    import transformers

    found = read(converted.meta, lambda entry: (transformers.AutoConfig.from_pretrained(entry),
                                                transformers.AutoTokenizer.from_pretrained(entry)))  # fmt: skip
    if found is not None:
        return found
    source = {k: kwargs[k] for k in (*SOURCE_ARGS, "trust_remote_code") if k in kwargs}
    config = transformers.AutoConfig.from_pretrained(name, **source)
    tokenizer = transformers.AutoTokenizer.from_pretrained(name, **source)
    store(converted.meta, lambda staging: (config.save_pretrained(staging), tokenizer.save_pretrained(staging)))
    return config, tokenizer


def dequantised(model) -> bool:
    """Whether every weight of a model loaded from a GGUF file is a plain float tensor (not one kept in GGUF blocks,
    which transformers does where a GGUF kernel serves the device): only those are worth caching."""
    return all(tensor.is_floating_point() for tensor in model.state_dict().values())


def save_weights(model, folder: Path) -> None:
    """``model.save_pretrained(folder)`` for a model transformers de-quantised from a GGUF file. transformers 5.2x
    loads GGUF files through a quantizer that refuses to save ("not serializable") even when it de-quantised every
    weight: it is set aside for the save, and the config saved without its ``quantization_config``, so that the
    entry reads back as the plain model it is."""
    quantizer = getattr(model, "hf_quantizer", None)
    settings = model.config.__dict__.pop("quantization_config", None)
    model.hf_quantizer = None
    try:
        model.save_pretrained(folder)
    finally:
        model.hf_quantizer = quantizer
        if settings is not None:
            model.config.quantization_config = settings
