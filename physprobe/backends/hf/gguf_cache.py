"""GGUF models converted once: the config, tokenizer and de-quantised weights transformers makes of a GGUF file,
cached on disk and read back by later runs.

transformers parses a GGUF file's metadata anew for the config and again for the tokenizer, and de-quantises every
tensor on each ``from_pretrained`` (SmolLM2-135M: 20 s on a loaded 2-core machine; a 7B model: minutes and 28 GB of
float32). The hf backend converts a file once and keeps the result in the user's cache folder
(``$PHYSPROBE_CACHE``, else ``$XDG_CACHE_HOME/physprobe``, else ``~/.cache/physprobe``), keyed by the file's sha256::

    gguf/<sha256>/meta-transformers-<version>/        config.json and tokenizer files: the metadata, no tensor
    gguf/<sha256>/<dtype>-transformers-<version>/     config.json, model.safetensors: the weights in that dtype

(the transformers version is part of the key: another version may convert the file differently).

The metadata entry is made (or read) before any tensor is, so every check that needs the config or the tokenizer
(family, method, protocol, chat template) is made first. Each entry is written under a temporary name and renamed
into place when complete: a killed run leaves no partial entry, two runs converting at once keep one. An entry that
cannot be written (a full or read-only disk) is a warning, and the run goes on from the file.

>>> entry = Converted(Path("/cache/gguf/ab12"))
>>> entry.meta.name.startswith("meta-transformers-"), entry.weights("float32").name.startswith("float32-transformers-")
(True, True)
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

SOURCE_ARGS = ("gguf_file", "revision", "subfolder")  # where the GGUF file is: not passed when reading an entry


def cache_root() -> Path:
    """The folder physprobe caches converted models in.

    >>> import os; os.environ["PHYSPROBE_CACHE"] = "/tmp/pp"; cache_root().as_posix()
    '/tmp/pp'
    >>> del os.environ["PHYSPROBE_CACHE"]
    """
    if os.environ.get("PHYSPROBE_CACHE"):
        return Path(os.environ["PHYSPROBE_CACHE"]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser() / "physprobe"


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
    return Converted(cache_root() / "gguf" / digest)


def store(folder: Path, write: Callable[[Path], None]) -> bool:
    """Make the entry ``folder`` with ``write(staging)``, renamed into place once complete; False (and a warning on
    stderr) when it cannot be written. Another process's entry, made in the meantime, is kept.

    >>> import tempfile; root = Path(tempfile.mkdtemp())
    >>> store(root / "entry", lambda staging: (staging / "config.json").write_text("{}")), sorted(p.name for p in root.iterdir())
    (True, ['entry'])
    """
    staging = None
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
        staging.chmod(0o755)  # mkdtemp's 0700 would keep the entry from other users of a shared cache
        write(staging)
        try:
            staging.rename(folder)
        except OSError:
            if not folder.is_dir():
                raise
        return True
    except OSError as error:
        print(f"physprobe: warning: cannot cache the converted GGUF model in {folder} ({error.strerror or error}); "
              "the next run converts the file again", file=sys.stderr)  # fmt: skip
        return False
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)


def discard(folder: Path, reason: str) -> None:
    """Remove an entry that cannot be read (files deleted or damaged); the file is converted again."""
    print(f"physprobe: warning: the cached conversion {folder} cannot be read ({reason}); converting the GGUF file again",
          file=sys.stderr)  # fmt: skip
    shutil.rmtree(folder, ignore_errors=True)


def metadata(converted: Converted, name: str, kwargs: dict) -> tuple[object, object]:
    """The GGUF file's config and tokenizer: read back from its entry, or converted from the file's metadata (no
    tensor is read) and stored there for the next run."""
    import transformers

    if (converted.meta / "config.json").is_file():
        try:
            return transformers.AutoConfig.from_pretrained(converted.meta), transformers.AutoTokenizer.from_pretrained(converted.meta)
        except (OSError, ValueError) as error:
            discard(converted.meta, str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__)
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
