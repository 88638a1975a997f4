"""Data-parallel scoring (``physprobe score --num-processes 2``, accelerate + gloo on CPU): the same run folder
as one process for every model family at the default batch size, and a rank killed mid-run resumes from its
own cache."""

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import psutil
import pyarrow.parquet as pq
import pytest

from physprobe.protocols.requests import Choice, Masked, MeanTokens
from physprobe.run.parallel import Ranks, chunks, owners, request_load
from tests import tiny_models


def test_chunks_are_balanced_over_ranks_and_caches_are_pooled():
    lengths = [17, 3, 9, 30, 2, 2, 11, 25, 8, 5]
    owner = owners(lengths, 3)
    loads = [sum(n for n, r in zip(lengths, owner) if r == rank) for rank in range(3)]
    # By hand, longest first to the lightest rank: 30->0, 25->1, 17->2, 11->2, 9->1, 8->2, 5->0, 3->1, 2->0, 2->2.
    assert loads == [37, 37, 38]
    assert [list(c) for c in chunks(7, 3)] == [[0, 1, 2], [3, 4, 5], [6]] and chunks(0, 3) == []

    class TwoRanks(Ranks):  # what accelerate's gather hands each rank: every rank's cached scores, in rank order
        def everyone(self, value):
            return [{"a": [1.0], "b": [2.0]}, {"b": [2.5], "c": [3.0]}]

    # Every request some rank's cache holds is known to all; where two hold it, the lowest rank's value.
    assert TwoRanks(1, 2).merged({}) == {"a": [1.0], "b": [2.0], "c": [3.0]}

    class Words:  # a tokenizer that counts words
        def __call__(self, texts, add_special_tokens=False):
            return {"input_ids": [t.split() for t in texts]}

    requests = [Choice("", ("a b c", "a b d e")), MeanTokens((("a b", " c"), ("a", " b"))), Masked("a [MASK]", ("x", "y"))]
    assert [request_load(r, Words()) for r in requests] == [7, 5, 2]  # the texts each makes the model read
    assert [request_load(r, None) for r in requests] == [12, 8, 8]  # a backend without a tokenizer: their characters


def _score(model, data, out, benchmark, limit, *extra):
    # One thread per process in both runs: accelerate gives each worker OMP_NUM_THREADS=1, and a CPU
    # kernel's float sums may split differently over another number of threads.
    env = dict(os.environ, OMP_NUM_THREADS="1")
    command = [sys.executable, "-m", "physprobe", "score", "--model", str(model), "--benchmark", benchmark, "--data", str(data),
               "--out", str(out), "--limit", str(limit), "--device", "cpu", "--bootstrap-iters", "0", *extra]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((out / "run.json").read_text())


def _score_here(model, data, out, benchmark, limit, *extra):
    """The single-process run, in this process (``physprobe.cli.main``: no process is under test) on one thread, as
    each rank of the launch computes (``_score``)."""
    import torch

    from physprobe.cli import main

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        assert main(["score", "--model", str(model), "--benchmark", benchmark, "--data", str(data), "--out", str(out),
                     "--limit", str(limit), "--device", "cpu", "--bootstrap-iters", "0", *extra]) == 0  # fmt: skip
    finally:
        torch.set_num_threads(threads)
    return json.loads((out / "run.json").read_text())


def _keys(cache) -> set[str]:
    db = sqlite3.connect(f"file:{cache}?mode=ro", uri=True)
    try:
        return {k for (k,) in db.execute("SELECT key FROM scores")}
    except sqlite3.OperationalError:  # created a moment ago, its table not yet
        return set()
    finally:
        db.close()


def _texts(build, benchmark):
    rows = pq.read_table(build / benchmark / "default" / "test-00000-of-00001.parquet").to_pylist()[::20]
    return [" ".join(str(v) for v in row.values()) for row in rows]


FAMILIES = [  # 600 PROST questions: chunks of 256, 256, 88; 300 Text2Afford rows of 15 pairs: 256, 44
    pytest.param("causal", "prost", "sentence-sum", 600, id="sentence-sum"),  # the quick tier's two processes
    pytest.param("masked", "prost", "released-mlm", 600, marks=pytest.mark.slow, id="released-mlm"),
    pytest.param("seq2seq", "prost", "released-t5", 600, marks=pytest.mark.slow, id="released-t5"),
    pytest.param("nli", "text2afford", "nli-zero-shot-multi-label", 300, marks=pytest.mark.slow, id="nli-zero-shot-multi-label"),
]


@pytest.mark.parametrize(("kind", "benchmark", "protocol", "limit"), FAMILIES)
@pytest.mark.processes
def test_two_processes_write_the_single_process_run_folder(built_all, tiny_model, tmp_path, kind, benchmark, protocol, limit):
    model = tiny_model(kind, _texts(built_all, benchmark), "model")
    single = _score_here(model, built_all, tmp_path / "single", benchmark, limit, "--protocol", protocol)
    two = _score(model, built_all, tmp_path / "parallel", benchmark, limit, "--protocol", protocol, "--num-processes", "2")
    assert (tmp_path / "parallel" / "predictions.parquet").read_bytes() == (
        tmp_path / "single" / "predictions.parquet"
    ).read_bytes()
    assert json.loads((tmp_path / "parallel" / "metrics.json").read_text()) == json.loads(
        (tmp_path / "single" / "metrics.json").read_text()
    )
    statuses = pq.read_table(tmp_path / "single" / "predictions.parquet", columns=["status"]).column("status").to_pylist()
    assert two["scored_now"] == single["scored_now"] == sum(status != "excluded" for status in statuses)
    # Both ranks worked, each keeping its own resume cache; rank 0 stores every chunk.
    rank0, rank1 = _keys(tmp_path / "parallel" / "cache.sqlite"), _keys(tmp_path / "parallel" / "cache.rank1.sqlite")
    assert rank1 and rank1 < rank0 and len(rank0) == len(_keys(tmp_path / "single" / "cache.sqlite"))


def _launch(model, data, out):
    command = [sys.executable, "-m", "physprobe", "score", "--model", str(model), "--benchmark", "prost", "--data", str(data),
               "--out", str(out), "--limit", "1024", "--device", "cpu", "--bootstrap-iters", "0", "--protocol", "sentence-sum"]  # fmt: skip
    return command, dict(os.environ, OMP_NUM_THREADS="1")


def _rank_process(launcher: psutil.Process, rank: int) -> psutil.Process | None:
    for child in launcher.children(recursive=True):
        try:
            if child.environ().get("RANK") == str(rank) and "physprobe.run.launched" in child.cmdline():
                return child
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return None


@pytest.mark.slow
@pytest.mark.processes
def test_a_rank_killed_mid_run_resumes_from_its_own_cache(prost_build, tmp_path):
    # A GPT-2 large enough that a chunk of 256 questions takes a few seconds: the kill lands mid-run.
    model = tiny_models.causal_lm(tmp_path / "model", _texts(prost_build.parent, "prost"), layers=4, width=256)
    data = prost_build.parent
    _score_here(model, data, tmp_path / "single", "prost", 1024, "--protocol", "sentence-sum")  # _launch's run, here

    out = tmp_path / "parallel"
    command, env = _launch(model, data, out)
    launcher = psutil.Popen([*command, "--num-processes", "2"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    killed = None
    try:
        deadline = time.monotonic() + 300
        while killed is None and launcher.poll() is None and time.monotonic() < deadline:
            cache = out / "cache.rank1.sqlite"
            if cache.is_file() and _keys(cache):  # rank 1 committed its first chunk (commits are whole chunks)
                killed = _rank_process(launcher, 1)
                if killed is not None:
                    killed.send_signal(signal.SIGKILL)
            time.sleep(0.05)
        stderr = launcher.communicate(timeout=120)[1].decode()
    finally:  # a failed check leaves no process of this run behind
        for process in [*launcher.children(recursive=True), launcher] if launcher.poll() is None else []:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
    assert killed is not None, stderr[-3000:]
    assert launcher.returncode == 2  # the launch fails with its rank, in one line ...
    assert "Traceback" not in stderr and "ChildFailedError" not in stderr, stderr[-3000:]
    assert [line for line in stderr.splitlines() if "error" in line.lower()] == ["physprobe: error: process 1 of 2 was killed by signal 9 (Killed); score again with the same --out: "
                     "the run resumes from what the processes' caches hold"], stderr[-3000:]  # fmt: skip
    assert not (out / "predictions.parquet").exists() and not (out / "metrics.json").exists()  # ... and writes nothing
    cached = _keys(out / "cache.sqlite") | _keys(out / "cache.rank1.sqlite")
    assert 256 <= len(cached) < 1024 and len(_keys(out / "cache.rank1.sqlite")) % 256 == 0

    resumed = subprocess.run([*command, "--num-processes", "2"], capture_output=True, text=True, env=env)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    info = json.loads((out / "run.json").read_text())
    assert info["scored_now"] == 1024 - len(cached)  # the chunks in either rank's cache are not rescored
    # Rank 1's lost chunks were never committed (a commit is a whole chunk): rescored whole, as in one process,
    # they give the same bytes.
    assert (out / "predictions.parquet").read_bytes() == (tmp_path / "single" / "predictions.parquet").read_bytes()

    # Two processes into the single-process run's folder: rank 0's cache holds rank 1's chunks too.
    command, env = _launch(model, data, tmp_path / "single")
    again = subprocess.run([*command, "--num-processes", "2"], capture_output=True, text=True, env=env)
    assert again.returncode == 0, again.stderr[-3000:]
    info = json.loads((tmp_path / "single" / "run.json").read_text())
    assert info["scored_now"] == 0 and info["backend"]["model_loaded"] is False
    assert (tmp_path / "single" / "predictions.parquet").read_bytes() == (out / "predictions.parquet").read_bytes()


def _holder(out) -> str:
    """The process named in the one line a writer gets from the run folder ``out`` while another holds it."""
    from physprobe.errors import FolderInUse
    from physprobe.util.folder_lock import FolderLock

    try:
        FolderLock(out).acquire().release()
    except FolderInUse as error:
        return str(error).split(" is in use by process ")[1].split()[0]
    return "nobody"


def test_a_run_folder_is_held_from_its_claim_to_its_last_write(tmp_path, monkeypatch):
    """``claimed`` holds the run folder's lock from the moment it makes the folder to the end of its block, the
    launcher's included, across the launch of its ranks: another run meanwhile is refused, and a claim that is refused
    removes nothing (the folder is the holder's)."""
    from types import SimpleNamespace

    from physprobe.errors import FolderInUse, PhysprobeError
    from physprobe.record import run_folder
    from physprobe.run import parallel

    out, owner = tmp_path / "new" / "run", run_folder.owner("gpt2", "prost", local=False)
    with run_folder.claimed(out, owner):
        assert _holder(out) == str(os.getpid())  # a single process's run: held from the first write
        with pytest.raises(FolderInUse, match=rf"^{out} is in use by process {os.getpid()} "):
            with run_folder.claimed(out, owner):  # a second run into the folder, refused ...
                raise AssertionError("a second run proceeded")
        assert out.is_dir()  # ... leaves it be
    assert _holder(out) == "nobody"

    seen = []

    def ranks(spec):  # the launch: while its ranks score, the folder is its launcher's
        seen.append(_holder(spec.folder))
        return 1  # the ranks failed before any score reached a cache

    monkeypatch.setattr(parallel, "launch", ranks)
    spec = SimpleNamespace(out=tmp_path / "other" / "run", owner=owner, folder=tmp_path / "other" / "run", processes=2)
    with pytest.raises(PhysprobeError, match=r"^score failed in its 2 processes"):
        parallel.score_in_processes(spec)
    assert seen == [str(os.getpid())] and not (tmp_path / "other").exists()  # its own folder, unscored: removed


@pytest.mark.slow
@pytest.mark.processes
def test_a_run_started_into_a_launchs_new_folder_is_refused_and_the_folder_survives(prost_build, tiny_model, tmp_path, capsys):
    """A ``--num-processes 2`` run and a single run into one new ``--out``: while the launch's ranks start and score,
    its launcher holds the folder, so the single run is refused in one line naming it and the launch writes its run."""
    from physprobe.cli import main

    model = tiny_model("causal", _texts(prost_build.parent, "prost"), "gpt")
    out = tmp_path / "new" / "run"
    command, env = _launch(model, prost_build.parent, out)
    command[command.index("--limit") + 1] = "16"
    launcher = psutil.Popen([*command, "--num-processes", "2"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while launcher.poll() is None and time.monotonic() < deadline:  # the launcher's claim: the folder made and locked
            with contextlib.suppress(OSError):
                if (out / "run.lock").read_text().split(" ")[0] == str(launcher.pid):
                    break
            time.sleep(0.05)
        assert launcher.poll() is None, launcher.communicate()[1].decode()[-3000:]
        single = ["score", "--model", str(model), "--benchmark", "prost", "--data", str(prost_build.parent), "--out", str(out),
                  "--limit", "16", "--device", "cpu", "--bootstrap-iters", "0", "--protocol", "sentence-sum"]  # fmt: skip
        capsys.readouterr()
        assert main(single) == 2  # the ranks are starting (or scoring): the folder is still the launcher's
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"physprobe: error: {out} is in use by process {launcher.pid} on ") and "\n" not in err, err
        stderr = launcher.communicate(timeout=300)[1].decode()
    finally:
        for process in [*launcher.children(recursive=True), launcher] if launcher.poll() is None else []:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
    assert launcher.returncode == 0, stderr[-3000:]
    assert json.loads((out / "run.json").read_text())["scored_now"] == 16
