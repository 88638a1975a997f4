"""Fault injection for ``physprobe score``: two runs into one folder, a corrupted resume cache, a corrupted
Parquet file in --data, a build missing a column, a replaced data file, over-long inputs limited by the model config, and
``--truncate`` keeping the [MASK]."""

import json
import shutil
import threading

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from transformers import AutoModelForMaskedLM, AutoTokenizer

from physprobe.backends.hf import HFBackend, batching, masked
from physprobe.cli import main
from physprobe.data.dataset_folder import data_file, read_built
from physprobe.errors import DataError, FolderInUse
from physprobe.util.folder_lock import FolderLock


@pytest.fixture(scope="module")
def data(prost_build):
    return prost_build.parent


@pytest.fixture(scope="module")
def corpus(prost_build):
    rows = read_built(prost_build, "default").select(range(0, 18736, 40))
    return [f"{r['context']} {r['question']} {r['A']} {r['B']} {r['C']} {r['D']}" for r in rows]


@pytest.fixture(scope="module")
def causal(corpus, tiny_model):
    return tiny_model("causal", corpus, "gpt")


@pytest.fixture(scope="module")
def mlm(corpus, tiny_model):
    return tiny_model("masked", corpus, "bert")


def score_args(model, data, out, *extra):
    return ["score", "--model", str(model), "--benchmark", "prost", "--config", "mass", "--limit", "6",
            "--data", str(data), "--out", str(out), *extra]  # fmt: skip


def test_a_second_run_into_the_same_folder_fails_at_once_naming_the_first(causal, data, tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    started, release = threading.Event(), threading.Event()
    real = HFBackend.score

    def slow(*args, **kwargs):
        started.set()
        release.wait(60)
        return real(*args, **kwargs)

    monkeypatch.setattr(HFBackend, "score", slow)
    first = threading.Thread(target=lambda: results.append(main(score_args(causal, data, out))))
    results = []
    first.start()
    assert started.wait(60)
    assert main(score_args(causal, data, out)) == 2  # fails while the first one holds the folder
    err = capsys.readouterr().err
    assert f"physprobe: error: {out} is in use by process " in err and "choose another --out" in err
    release.set()
    first.join(60)
    assert results == [0]
    assert json.loads((out / "metrics.json").read_text())["mass"]["n"] == 6
    assert len(pq.read_table(out / "predictions.parquet")) == 6
    assert sorted(p.name for p in out.iterdir()) == [
        ".physprobe-output.json",
        "cache.sqlite",
        "metrics.json",
        "predictions.parquet",
        "run.json",
        "run.lock",
        "spec.json",
    ]
    FolderLock(out).acquire().release()  # released when the run ended


def test_a_run_that_raises_releases_its_lock_for_a_retry_in_the_same_process(causal, data, tmp_path, monkeypatch):
    """As in a notebook: the run fails inside (the traceback, and with it the run's frame, is kept), then the same
    process scores into the same folder again."""
    out = tmp_path / "run"

    def broken(*args, **kwargs):
        raise RuntimeError("CUDA error: device-side assert triggered")

    monkeypatch.setattr(HFBackend, "score", broken)
    with pytest.raises(RuntimeError, match="device-side assert") as failure:
        main(score_args(causal, data, out))
    monkeypatch.undo()
    assert failure.traceback  # kept alive while the retry runs
    assert main(score_args(causal, data, out)) == 0
    assert json.loads((out / "metrics.json").read_text())["mass"]["n"] == 6


@pytest.mark.processes
def test_the_lock_dies_with_its_process(tmp_path):
    import subprocess
    import sys

    holder = subprocess.Popen([sys.executable, "-c", f"from physprobe.util.folder_lock import FolderLock; from pathlib import Path; "
                               f"l = FolderLock(Path({str(tmp_path)!r})).acquire(); print('held', flush=True); import time; time.sleep(60)"],
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert holder.stdout.readline() == "held\n"
    with pytest.raises(FolderInUse, match=f"in use by process {holder.pid} on "):
        FolderLock(tmp_path).acquire()
    holder.kill()
    holder.wait()
    FolderLock(tmp_path).acquire().release()


def test_a_corrupted_cache_is_set_aside_with_one_warning(causal, data, tmp_path, capsys):
    fresh = tmp_path / "fresh"
    assert main(score_args(causal, data, fresh)) == 0
    out = tmp_path / "run"
    shutil.copytree(fresh, out)  # this model's run folder, its cache then damaged
    (out / "cache.sqlite").write_bytes(b"this is not a database" * 100)
    capsys.readouterr()
    assert main(score_args(causal, data, out)) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and f"{out / 'cache.sqlite'} is unreadable" in warnings[0]
    aside = [p for p in out.iterdir() if p.name.startswith("cache.corrupt-")]
    assert len(aside) == 1 and aside[0].read_bytes() == b"this is not a database" * 100
    assert json.loads((out / "metrics.json").read_text()) == json.loads((fresh / "metrics.json").read_text())


def test_a_corrupted_parquet_file_in_data_is_named(causal, data, tmp_path, capsys):
    copy = tmp_path / "data"
    shutil.copytree(data / "prost", copy / "prost")
    broken = copy / "prost" / data_file("mass", "test")
    broken.write_bytes(broken.read_bytes()[:300])
    assert main(score_args(causal, copy, tmp_path / "run")) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("physprobe:")]
    assert len(errors) == 1 and errors[0].startswith(f"physprobe: error: {broken} is not a readable Parquet file")


def test_a_build_missing_a_column_this_version_reads_is_named_with_the_fix(causal, data, tmp_path, capsys):
    copy = tmp_path / "data"
    shutil.copytree(data / "prost", copy / "prost")
    stale = copy / "prost" / data_file("mass", "test")
    pq.write_table(pq.read_table(stale).drop_columns(["group"]), stale)  # as an older physprobe might have built it
    assert main(score_args(causal, copy, tmp_path / "run")) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("physprobe:")]
    assert errors == [f"physprobe: error: config 'mass' of {copy / 'prost'} lacks column(s) group that this physprobe reads "
                      f"(made by another version); rebuild it: physprobe build prost --out {copy}"]  # fmt: skip
    assert not (tmp_path / "run" / "predictions.parquet").exists()


def test_a_replaced_data_file_is_read_afresh_even_with_the_same_size_and_time(tmp_path):
    folder = tmp_path / "bench"
    path = folder / data_file("default", "test")
    path.parent.mkdir(parents=True)
    pq.write_table(pa.table({"x": [1, 2, 3]}), path)
    stat = path.stat()
    assert read_built(folder, "default")["x"] == [1, 2, 3]
    pq.write_table(pa.table({"x": [7, 8, 9]}), path)
    import os

    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_size == stat.st_size
    assert read_built(folder, "default")["x"] == [7, 8, 9]
    with pytest.raises(DataError, match="has no config 'other'.*known: default"):
        read_built(folder, "other")


def test_masked_lm_length_comes_from_the_model_config_and_truncation_keeps_the_mask(mlm):
    model = AutoModelForMaskedLM.from_pretrained(mlm).eval()
    tokenizer = AutoTokenizer.from_pretrained(mlm)
    assert tokenizer.model_max_length > 1e9  # the tokenizer states no limit; the config's 256 positions do
    assert batching.length_limit(model, tokenizer) == 256
    text = " ".join(["the"] * 200) + " [MASK] " + " ".join(["block"] * 200)
    with pytest.raises(masked.ScoringError, match="over the model's maximum of 256; pass --truncate to keep 256 tokens around"):
        masked.masked_logprobs(model, tokenizer, [text], [["heavy", "light"]], torch.device("cpu"))
    truncated = masked.masked_logprobs(model, tokenizer, [text], [["the", "block"]], torch.device("cpu"), truncate=True)
    # the mask sits at the end of 400 tokens; keeping the last 256 would still hold it, so put it first too
    first = "[MASK] " + " ".join(["the"] * 400)
    early = masked.masked_logprobs(model, tokenizer, [first], [["the", "block"]], torch.device("cpu"), truncate=True)
    assert all(v is not None for v in truncated[0] + early[0])
    ids = tokenizer(first.replace("[MASK]", tokenizer.mask_token))["input_ids"]
    window = masked._mask_window(
        ids, ids.index(tokenizer.mask_token_id), 256, True, set(tokenizer.all_special_ids) - {tokenizer.mask_token_id}, "x"
    )
    assert len(window) == 256 and tokenizer.mask_token_id in window
    assert window[0] == tokenizer.cls_token_id and window[-1] == tokenizer.sep_token_id
