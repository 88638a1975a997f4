"""Data-parallel scoring (``physprobe score --num-processes 2``, accelerate + gloo on CPU): the same run folder
as one process, and a rank that lost its work resumes from its own cache."""

import json
import os
import sqlite3
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from physprobe.parallel import Ranks, owners
from tests import tiny_models


def test_shares_cover_every_request_once_and_balance_tokens():
    lengths = [17, 3, 9, 30, 2, 2, 11, 25, 8, 5]
    owner = owners(lengths, 3)
    loads = [sum(n for n, r in zip(lengths, owner) if r == rank) for rank in range(3)]
    # By hand, longest first to the lightest rank: 30->0, 25->1, 17->2, 11->2, 9->1, 8->2, 5->0, 3->1, 2->0, 2->2.
    assert loads == [37, 37, 38]

    class Words:  # a tokenizer that counts words
        def __call__(self, texts, add_special_tokens=False):
            return {"input_ids": [t.split() for t in texts]}

    requests = [("sequences", ["a b c", "a b d e"]), ("mean_ids", [[1, 2, 3], [1, 2]]), ("masked", ("a [MASK]", ["x", "y"]))]
    shares = [Ranks(rank, 2).share(requests, Words()) for rank in range(2)]
    assert sorted(shares[0] + shares[1]) == [0, 1, 2] and not set(shares[0]) & set(shares[1])
    assert shares == [[0], [1, 2]]  # 7 tokens to rank 0; 5 ids and then 4 tokens to the lighter rank 1


def _score(model, data, out, *extra):
    env = dict(os.environ, OMP_NUM_THREADS="1")  # one thread per process in both runs: the same float sums
    command = [sys.executable, "-m", "physprobe", "score", "--model", str(model), "--benchmark", "prost", "--data", str(data),
               "--out", str(out), "--limit", "24", "--device", "cpu", "--bootstrap-iters", "0", "--batch-size", "1", *extra]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((out / "run.json").read_text())


@pytest.mark.slow
@pytest.mark.parametrize(("make", "protocol"), [(tiny_models.causal_lm, "sentence-sum"), (tiny_models.masked_lm, "released-mlm")])
def test_two_processes_write_the_single_process_run_folder_and_a_rank_resumes(prost_build, tmp_path, make, protocol):
    rows = pq.read_table(prost_build / "default" / "test-00000-of-00001.parquet").to_pylist()[:300]
    model = make(tmp_path / "model", [f"{r['context']} {r['question']} {r['A']} {r['B']} {r['C']} {r['D']}" for r in rows])
    data = prost_build.parent
    single = _score(model, data, tmp_path / "single", "--protocol", protocol)
    parallel_run = tmp_path / "parallel"
    two = _score(model, data, parallel_run, "--protocol", protocol, "--num-processes", "2")
    assert (parallel_run / "predictions.parquet").read_bytes() == (tmp_path / "single" / "predictions.parquet").read_bytes()
    assert json.loads((parallel_run / "metrics.json").read_text()) == json.loads((tmp_path / "single" / "metrics.json").read_text())
    assert two["questions_scored"] == single["questions_scored"] == 24
    assert (parallel_run / "cache.rank1.sqlite").is_file()  # rank 1 kept its own resume cache

    # Rank 1 loses half its work (as if killed mid-run); the next run rescores only that, on rank 1.
    db = sqlite3.connect(parallel_run / "cache.rank1.sqlite")
    keys = [k for (k,) in db.execute("SELECT key FROM scores ORDER BY key")]
    assert 0 < len(keys) < 24
    lost = keys[: len(keys) // 2]
    db.executemany("DELETE FROM scores WHERE key = ?", [(k,) for k in lost])
    db.commit()
    db.close()
    for name in ("predictions.parquet", "metrics.json", "run.json"):
        (parallel_run / name).unlink()
    resumed = _score(model, data, parallel_run, "--protocol", protocol, "--num-processes", "2")
    assert resumed["questions_scored"] == len(lost)
    assert (parallel_run / "predictions.parquet").read_bytes() == (tmp_path / "single" / "predictions.parquet").read_bytes()
