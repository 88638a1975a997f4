"""The GGUF conversion cache under faults (``physprobe.backends.hf.gguf_cache``): an entry is used only as it was
written, for the file it was made for; a bad, foreign or unloadable entry is removed with one warning line and made
again; a full disk while writing one is a warning and the run goes on from the model in memory.

The fast cases run the cache's real consumers (``model.load``, ``gguf_cache.metadata``) over a tiny random model
folder standing in for the GGUF file (the conversion reads it through the same ``from_pretrained``); the slow end of
``tests/test_gguf_cache.py`` runs SmolLM2's GGUF file through them."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import struct

import pytest
import torch
import transformers

from physprobe.backends.hf import gguf_cache
from physprobe.backends.hf import model as hf_model

TEXTS = ["A leaf, a coin, an egg and an apple fall.", "Which is heavier, a key or a box? Answer: (a)"]


@pytest.fixture(scope="module")
def tiny(tiny_model):
    return tiny_model("causal", TEXTS * 20, "gpt"), tiny_model("causal", ["other words"] * 40, "other", seed=1)


def planned(tiny_folder, cache):
    """The tiny model's facts with a GGUF file's cache entries under ``cache`` (as a GGUF model's facts have them)."""
    plan = hf_model.describe_model(str(tiny_folder), "cpu", None, dtype="float32")
    return dataclasses.replace(plan, converted=gguf_cache.Converted(cache / "gguf" / ("ab" * 32)))


def logits(loaded) -> torch.Tensor:
    ids = torch.tensor([loaded.tokenizer(TEXTS[1])["input_ids"]])
    with torch.inference_mode():
        return loaded.model(ids).logits


def warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if "warning" in line]


def test_flipped_mantissas_in_the_cached_weights_are_found_removed_and_converted_again(tiny, tmp_path, capsys):
    plan = planned(tiny[0], tmp_path)
    reference = logits(hf_model.load(plan))  # converted, and stored
    weights = plan.converted.weights("float32") / "model.safetensors"
    data = bytearray(weights.read_bytes())
    header = 8 + struct.unpack("<Q", data[:8])[0]
    for at in range(header, len(data), 4096):  # the low byte of a float32 here and there: its mantissa
        data[at] ^= 0x01
    weights.write_bytes(bytes(data))
    capsys.readouterr()
    again = hf_model.load(plan)
    (line,) = warnings(capsys.readouterr().err)
    assert f"the cached conversion {weights.parent} cannot be used (model.safetensors is not the file written there" in line
    assert torch.equal(logits(again), reference)  # converted again, not read flipped
    assert gguf_cache.fault(weights.parent) is None  # and stored again, whole


@pytest.mark.parametrize("how", ["tokenizer file", "whole entry"])
def test_another_models_tokenizer_in_the_cached_metadata_is_removed_and_converted_again(how, tiny, tmp_path, capsys):
    mine, other = tiny
    converted = planned(mine, tmp_path).converted
    config, tokenizer = gguf_cache.metadata(converted, str(mine), {})
    foreign = gguf_cache.Converted(tmp_path / "gguf" / ("cd" * 32))
    gguf_cache.metadata(foreign, str(other), {})  # another GGUF file's entry, manifest and all
    if how == "tokenizer file":
        shutil.copy(foreign.meta / "tokenizer.json", converted.meta / "tokenizer.json")
        reason = "tokenizer.json is not the file written there"
    else:
        shutil.rmtree(converted.meta)
        shutil.copytree(foreign.meta, converted.meta)
        reason = f"it was made for {converted.meta.name} of GGUF file cdcdcdcdcdcd, not for this one"
    capsys.readouterr()
    _, read = gguf_cache.metadata(converted, str(mine), {})
    (line,) = warnings(capsys.readouterr().err)
    assert reason in line and "removed, converting the GGUF file again" in line
    assert [read(t)["input_ids"] for t in TEXTS] == [tokenizer(t)["input_ids"] for t in TEXTS]
    assert gguf_cache.fault(converted.meta) is None


def test_an_entry_that_fails_to_load_is_removed_so_the_next_run_works(tiny, tmp_path, capsys):
    converted = planned(tiny[0], tmp_path).converted
    _, tokenizer = gguf_cache.metadata(converted, str(tiny[0]), {})
    broken = converted.meta / "tokenizer.json"
    broken.write_text(json.dumps({"version": "1.0", "model": {"type": "NoSuchModel"}}))  # tokenizers raises its own Exception
    manifest = json.loads((converted.meta / gguf_cache.MANIFEST).read_text())
    manifest["files"]["tokenizer.json"] = hashlib.sha256(broken.read_bytes()).hexdigest()  # as if written so
    (converted.meta / gguf_cache.MANIFEST).write_text(json.dumps(manifest))
    for _ in range(2):  # this run and the next both read the file's own metadata
        capsys.readouterr()
        _, read = gguf_cache.metadata(converted, str(tiny[0]), {})
        assert [read(t)["input_ids"] for t in TEXTS] == [tokenizer(t)["input_ids"] for t in TEXTS]
    assert gguf_cache.fault(converted.meta) is None and not warnings(capsys.readouterr().err)  # the second: from the cache


def test_a_full_disk_while_writing_the_weights_is_a_warning_and_the_run_goes_on(tiny, tmp_path, monkeypatch, capsys):
    from safetensors import SafetensorError

    plan = planned(tiny[0], tmp_path)
    reference = logits(hf_model.load(dataclasses.replace(plan, converted=None)))

    def full(*args, **kwargs):  # what safetensors raises when the disk fills under it
        raise SafetensorError(
            'Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "No space left on device" })'
        )

    monkeypatch.setattr(transformers.modeling_utils, "safe_save_file", full)
    capsys.readouterr()
    loaded = hf_model.load(plan)
    (line,) = warnings(capsys.readouterr().err)
    assert "cannot cache the converted GGUF model in" in line and "No space left on device" in line and "the run goes on" in line
    assert torch.equal(logits(loaded), reference)
    assert not plan.converted.weights("float32").exists() and not list((tmp_path / "gguf").rglob(".*"))  # nothing half-written
