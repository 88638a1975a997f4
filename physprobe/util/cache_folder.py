"""The folder physprobe keeps its caches in, one for every cache it has: ``$PHYSPROBE_CACHE``, else
``$XDG_CACHE_HOME/physprobe``, else ``~/.cache/physprobe``. It holds ``gguf/`` (GGUF models converted once,
``physprobe.backends.hf.gguf_cache``) and ``file_digests.json`` (the sha256 of local models' files,
``physprobe.util.provenance.file_digests``); ``physprobe cache`` lists and clears them.

>>> import os; before = os.environ.get("PHYSPROBE_CACHE"); os.environ["PHYSPROBE_CACHE"] = "/tmp/pp"
>>> cache_root().as_posix()
'/tmp/pp'
>>> _ = os.environ.pop("PHYSPROBE_CACHE") if before is None else os.environ.update(PHYSPROBE_CACHE=before)
"""

from __future__ import annotations

import os
from pathlib import Path

GGUF = "gguf"  # GGUF conversions: gguf/<sha256 of the file>/<kind>-transformers-<version>/
DIGESTS = "file_digests.json"  # file digests by path, size, inode and times


def cache_root() -> Path:
    """The folder physprobe caches converted models and file digests in."""
    if os.environ.get("PHYSPROBE_CACHE"):
        return Path(os.environ["PHYSPROBE_CACHE"]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser() / "physprobe"
