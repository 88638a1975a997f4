"""``physprobe cache list`` and ``physprobe cache clear``: a cache laid out by hand as the hf backend and the digest
cache lay it out (``gguf/<sha256>/<entry>/``, ``file_digests.json``), sizes counted here from the bytes written."""

import hashlib
import json

import pytest
from huggingface_hub import constants

from physprobe.cli import main
from physprobe.util import provenance


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A cache holding one local GGUF file's conversions (1,500 + 2,500 bytes, an unfinished staging folder of 500)
    and one Hub model's (3,000 bytes), with the local model's file digests."""
    root = tmp_path / "cache"
    monkeypatch.setenv("PHYSPROBE_CACHE", str(root))
    hub = tmp_path / "hf-hub"
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(hub))
    model = tmp_path / "models" / "smol"
    model.mkdir(parents=True)
    (model / "smol.Q4.gguf").write_bytes(b"GGUF local" * 100)
    local_sha = hashlib.sha256(b"GGUF local" * 100).hexdigest()
    provenance.folder_hash(model)  # as a run names a local model: the file's digest is kept
    hub_sha = hashlib.sha256(b"GGUF hub").hexdigest()
    (hub / "models--org--tiny" / "blobs").mkdir(parents=True)
    (hub / "models--org--tiny" / "blobs" / hub_sha).write_bytes(b"GGUF hub")
    for sha, entries in {local_sha: {"meta-transformers-5": 1500, "float32-transformers-5": 2500,
                                     ".float32-transformers-5-x1y2": 500},
                         hub_sha: {"meta-transformers-5": 3000}}.items():  # fmt: skip
        for name, size in entries.items():
            (root / "gguf" / sha / name).mkdir(parents=True)
            (root / "gguf" / sha / name / "config.json").write_bytes(b"x" * size)
    (root / "notes.txt").write_text("the user's own file in a folder they chose")
    return {"root": root, "model": model, "local": local_sha, "hub": hub_sha}


def test_list_shows_each_conversion_with_its_source_and_size(cache, capsys):
    assert main(["cache", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    digests = (cache["root"] / "file_digests.json").stat().st_size
    assert lines[0] == f"physprobe cache: {cache['root']}"
    local = [["GGUF", "conversion", cache["local"][:12], "4.5", "kB", "of", str(cache["model"] / "smol.Q4.gguf")],
             [".float32-transformers-5-x1y2", "500", "B", "(unfinished:"], ["float32-transformers-5", "2.5", "kB"],
             ["meta-transformers-5", "1.5", "kB"]]  # fmt: skip
    hub = [["GGUF", "conversion", cache["hub"][:12], "3.0", "kB", "of", "org/tiny"], ["meta-transformers-5", "3.0", "kB"]]
    shown = [line.split()[: len(want)] for line, want in zip(lines[1:7], sum(sorted([local, hub], key=lambda b: b[0][2]), []))]
    assert shown == sum(sorted([local, hub], key=lambda block: block[0][2]), [])  # by sha256
    assert lines[7].split() == ["file", "digests", "(file_digests.json)", f"{digests}", "B", "of", "1", "files"]
    assert lines[8].split() == ["total", f"{(7500 + digests) / 1000:.1f}", "kB"]


def test_clear_by_model_removes_its_conversions_and_digests_only(cache, capsys):
    assert main(["cache", "clear", "--model", str(cache["model"])]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"removed GGUF conversion {cache['local'][:12]} (4.5 kB) of {cache['model'] / 'smol.Q4.gguf'}",
        f"removed the digests of 1 files under {cache['model']}",
    ]
    assert sorted(p.name for p in (cache["root"] / "gguf").iterdir()) == [cache["hub"]]
    assert json.loads((cache["root"] / "file_digests.json").read_text()) == {}
    assert main(["cache", "clear", "--model", "org/tiny"]) == 0
    assert capsys.readouterr().out == f"removed GGUF conversion {cache['hub'][:12]} (3.0 kB) of org/tiny\n"
    assert list((cache["root"] / "gguf").iterdir()) == []
    assert (cache["root"] / "notes.txt").is_file()


def test_clearing_a_model_with_nothing_cached_is_one_line(cache, capsys):
    assert main(["cache", "clear", "--model", "nobody/nothing"]) == 2
    assert capsys.readouterr().err == (
        "physprobe: error: --model nobody/nothing: physprobe keeps nothing of it (physprobe cache list shows what it keeps)\n"
    )
    assert main(["cache", "clear", "--model", ""]) == 2  # never the current folder's GGUF files
    assert capsys.readouterr().err.startswith("physprobe: error: --model is empty; give a GGUF file")
    assert len(list((cache["root"] / "gguf").iterdir())) == 2


def test_clear_removes_what_physprobe_keeps_and_nothing_else(cache, tmp_path, capsys):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "keep.bin").write_bytes(b"not physprobe's")
    (cache["root"] / "gguf" / cache["hub"] / "link").symlink_to(outside)  # a link in the cache is removed, never followed
    size = 7500 + (cache["root"] / "file_digests.json").stat().st_size  # the link's target not counted
    assert main(["cache", "clear"]) == 0
    assert capsys.readouterr().out.startswith(
        f"removed {size / 1000:.1f} kB from {cache['root']} (GGUF conversions and file digests)"
    )
    assert sorted(p.name for p in cache["root"].iterdir()) == ["notes.txt"]
    assert (outside / "keep.bin").read_bytes() == b"not physprobe's"
    assert main(["cache", "list"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == "  nothing cached"
