"""``physprobe cache``: what physprobe keeps in its cache folder (``physprobe.util.cache_folder``), with sizes, and
clearing it whole or one model's part.

physprobe cache list
physprobe cache clear --model ~/models/smollm2      (a GGUF file, a folder holding GGUF files, or a Hub id)
physprobe cache clear                               (every GGUF conversion and every file digest)

The cache holds two things: GGUF conversions (``gguf/<sha256>/``, one folder per GGUF file, named by the file's
sha256: the config, tokenizer and de-quantised weights transformers makes of it) and file digests
(``file_digests.json``: the sha256 of local models' files, so a second run reads no weights to name its model). Each
conversion is named after the file it was made from where physprobe can tell: a local file whose digest it keeps, or a
Hub file in the Hugging Face cache (whose blobs are named by their sha256). Clearing removes only these two: nothing
else in the folder, which may be one a user chose (``$PHYSPROBE_CACHE``). A cleared conversion is made again by the
next run that needs it.

>>> import os, tempfile; before = os.environ.get("PHYSPROBE_CACHE"); os.environ["PHYSPROBE_CACHE"] = tempfile.mkdtemp()
>>> print(listing().splitlines()[1])
  nothing cached
>>> _ = os.environ.pop("PHYSPROBE_CACHE") if before is None else os.environ.update(PHYSPROBE_CACHE=before)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from physprobe.errors import PhysprobeError
from physprobe.util import provenance
from physprobe.util.cache_folder import DIGESTS, GGUF, cache_root
from physprobe.util.paths import atomic_file
from physprobe.util.sizes import human_size


def add_arguments(command: argparse.ArgumentParser) -> None:
    """The options of ``physprobe cache list`` and ``physprobe cache clear [--model M]``."""
    actions = command.add_subparsers(dest="action", required=True, metavar="ACTION")
    actions.add_parser("list", help="what physprobe keeps (GGUF conversions, file digests), with sizes").set_defaults(run=_list)
    clear = actions.add_parser("clear", help="remove what physprobe keeps: all of it, or one model's (--model)")
    clear.add_argument("--model", help="a GGUF file, a folder holding GGUF files, or a Hub id: its conversions and digests")
    clear.set_defaults(run=_clear)


def disk_size(path: Path) -> int:
    """The bytes of a file, or of every file under a folder; links are counted as links, never followed."""
    if path.is_dir() and not path.is_symlink():
        return sum((Path(top) / name).lstat().st_size for top, _, files in os.walk(path) for name in files)
    try:
        return path.lstat().st_size
    except FileNotFoundError:
        return 0


@dataclass(frozen=True)
class Conversion:
    """The conversions of one GGUF file: ``gguf/<sha256>/`` with its entries (``meta-…``, ``float32-…``)."""

    folder: Path
    source: str  # the file it was made from, where physprobe can tell; else "source not known"

    @property
    def sha256(self) -> str:
        return self.folder.name


def _digests() -> dict:
    """The file digests physprobe keeps, by absolute path (empty where there are none or they cannot be read)."""
    try:
        known = json.loads(provenance.digest_cache().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return known if isinstance(known, dict) else {}


def _hub_files(sha256: str) -> list[str]:
    """The Hub models whose cached files include the blob ``sha256`` (the Hugging Face cache names blobs so)."""
    from huggingface_hub import constants

    return sorted(
        blob.parent.parent.name.removeprefix("models--").replace("--", "/")
        for blob in Path(constants.HF_HUB_CACHE).glob(f"models--*/blobs/{sha256}")
    )


def conversions() -> list[Conversion]:
    """Every GGUF file's conversions in the cache, named by the file they were made from where it is known."""
    folder = cache_root() / GGUF
    if not folder.is_dir() or folder.is_symlink():
        return []
    by_digest = {}
    for path, entry in _digests().items():
        if isinstance(entry, dict) and path.endswith(".gguf"):
            by_digest.setdefault(entry.get("sha256"), path)
    found = []
    for entry in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
        named = [by_digest[entry.name]] if entry.name in by_digest else _hub_files(entry.name)
        found.append(Conversion(entry, ", ".join(named) or "source not known"))
    return found


def listing() -> str:
    """``physprobe cache list``: the cache folder, each GGUF file's conversions with their sizes, the digests, the total."""
    root = cache_root()
    lines = [f"physprobe cache: {root}"]
    total = 0
    for conversion in conversions():
        size = disk_size(conversion.folder)
        total += size
        lines.append(f"  GGUF conversion {conversion.sha256[:12]}  {human_size(size):>9}  of {conversion.source}")
        for entry in sorted(conversion.folder.iterdir()):
            unfinished = "  (unfinished: being written, or left by a killed run)" if entry.name.startswith(".") else ""
            lines.append(f"      {entry.name:<40} {human_size(disk_size(entry)):>9}{unfinished}")
    digests = root / DIGESTS
    if digests.exists() or digests.is_symlink():
        size = disk_size(digests)
        total += size
        lines.append(f"  file digests ({DIGESTS})  {human_size(size):>9}  of {len(_digests())} files")
    lines.append(f"  total {human_size(total)}" if total else "  nothing cached")
    return "\n".join(lines)


def _list(args: argparse.Namespace) -> int:
    print(listing())
    return 0


def _remove(path: Path) -> None:
    """Remove a cache file or folder; a link is removed, never followed."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def _model_digests(model: str) -> tuple[set[str], Path | None]:
    """The sha256 of the GGUF files ``model`` names (a file, a folder's ``*.gguf`` files, or a Hub id's cached blobs),
    and the local path whose file digests go with it."""
    path = Path(model).expanduser()
    if path.is_file():
        return {provenance.file_digests([path])[0].hex()}, path.resolve()
    if path.is_dir():
        files = sorted(path.rglob("*.gguf"))
        return {digest.hex() for digest in provenance.file_digests(files)}, path.resolve()
    from huggingface_hub import constants

    blobs = Path(constants.HF_HUB_CACHE) / f"models--{model.replace('/', '--')}" / "blobs"
    return ({blob.name for blob in blobs.iterdir()} if blobs.is_dir() else set()), None


def clear_model(model: str) -> list[str]:
    """Remove ``model``'s GGUF conversions and its files' digests; what was removed, one line each."""
    if not model.strip():
        raise PhysprobeError("--model is empty; give a GGUF file, a folder holding GGUF files, or a Hub id")
    digests, local = _model_digests(model)
    removed = []
    for conversion in conversions():
        if conversion.sha256 in digests:
            size = disk_size(conversion.folder)
            _remove(conversion.folder)
            removed.append(f"removed GGUF conversion {conversion.sha256[:12]} ({human_size(size)}) of {conversion.source}")
    known = _digests()
    kept = {k: v for k, v in known.items() if local is None or not Path(k).is_relative_to(local)}
    if len(kept) < len(known):
        with atomic_file(provenance.digest_cache()) as temporary:
            temporary.write_text(json.dumps(kept))
        removed.append(f"removed the digests of {len(known) - len(kept)} files under {local}")
    if not removed:
        raise PhysprobeError(f"--model {model}: physprobe keeps nothing of it (physprobe cache list shows what it keeps)")
    return removed


def clear_all() -> list[str]:
    """Remove every GGUF conversion and the file digests (nothing else in the cache folder); one line saying what."""
    root = cache_root()
    parts = [root / GGUF, root / DIGESTS]
    size = sum(disk_size(part) for part in parts)
    for part in parts:
        _remove(part)
    return [f"removed {human_size(size)} from {root} (GGUF conversions and file digests)"]


def _clear(args: argparse.Namespace) -> int:
    print("\n".join(clear_model(args.model) if args.model is not None else clear_all()))
    return 0
