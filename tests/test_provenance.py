"""A local model's content hash: the same value as hashing every file's bytes, each file read once across runs (its
digest cached by path, size, inode and times in the user's cache folder), a changed file always read again."""

import hashlib
import os
from pathlib import Path

import pytest

from physprobe.util import provenance


def _by_hand(folder: Path) -> str:
    """sha256 over (relative name, NUL, sha256 of the bytes) of every file, in name order."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return "sha256:" + digest.hexdigest()


@pytest.fixture
def model_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("PHYSPROBE_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "model"
    (folder / "sub").mkdir(parents=True)
    (folder / "config.json").write_text('{"n_layer": 2}')
    (folder / "model.safetensors").write_bytes(os.urandom(1 << 20))
    (folder / "sub" / "tokenizer.json").write_text("{}")
    return folder


def _reads(monkeypatch) -> list[str]:
    """The files whose bytes ``provenance`` hashes from now on."""
    read = []
    original = hashlib.file_digest

    def counted(handle, name):
        read.append(Path(handle.name).name)
        return original(handle, name)

    monkeypatch.setattr(provenance.hashlib, "file_digest", counted)
    return read


def test_a_second_hash_reads_no_file_and_a_changed_file_is_read_again(model_folder, monkeypatch):
    read = _reads(monkeypatch)
    first = provenance.folder_hash(model_folder)
    assert first == _by_hand(model_folder) and sorted(read) == ["config.json", "model.safetensors", "tokenizer.json"]
    read.clear()
    assert provenance.folder_hash(model_folder) == first and read == []
    # The same size and modification time, other bytes: the change time moved, so the file is read again.
    weights = model_folder / "model.safetensors"
    stat = weights.stat()
    with weights.open("r+b") as handle:
        handle.write(b"\xff" * 16)
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert weights.stat().st_size == stat.st_size and weights.stat().st_mtime_ns == stat.st_mtime_ns
    changed = provenance.folder_hash(model_folder)
    assert changed != first and changed == _by_hand(model_folder) and read == ["model.safetensors"]


def test_an_unwritable_cache_only_costs_time(model_folder, monkeypatch, tmp_path):
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache folder would be")
    monkeypatch.setenv("PHYSPROBE_CACHE", str(blocked))
    read = _reads(monkeypatch)
    assert provenance.folder_hash(model_folder) == _by_hand(model_folder)
    assert provenance.folder_hash(model_folder) == _by_hand(model_folder) and len(read) == 6  # every file, twice


def test_a_corrupt_cache_is_read_as_empty(model_folder, monkeypatch):
    provenance.digest_cache().parent.mkdir(parents=True)
    provenance.digest_cache().write_text("{not json")
    assert provenance.folder_hash(model_folder) == _by_hand(model_folder)
    read = _reads(monkeypatch)
    assert provenance.folder_hash(model_folder) == _by_hand(model_folder) and read == []
