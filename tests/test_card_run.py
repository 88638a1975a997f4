"""``physprobe score --benchmark all`` (``physprobe.run.card_run``): with a tiny model of each family, one call scores
every benchmark the family can take, loading the model once, each run folder equal to the single-benchmark run's;
the others are skipped in one line; a card killed with SIGKILL mid-way re-scores nothing it had answered; arguments
that name one benchmark's settings are refused in one line."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pyarrow.parquet as pq
import pytest

from physprobe.backends import hf
from physprobe.backends.hf import model as hf_model
from physprobe.cli import main
from physprobe.data import registry
from physprobe.errors import ProtocolError
from physprobe.protocols import requests
from physprobe.report import paper_tables
from physprobe.run import card_run
from physprobe.util import progress, progress_lines

from .conftest import REPO
from .run_folders import cached

LIMIT = 6


@pytest.fixture(scope="module")
def tiny(benchmark_texts, tiny_model):
    texts = benchmark_texts
    return {"causal": tiny_model("causal", texts, "gpt"), "mlm": tiny_model("masked", texts, "bert"),
            "seq2seq": tiny_model("seq2seq", texts, "t5"), "nli": tiny_model("nli", texts, "nli")}  # fmt: skip


def takes(benchmark: str, family: str) -> bool:
    """Whether a benchmark has a default protocol for the family (the declarations, not the card run, say so)."""
    try:
        registry.evaluation(benchmark).default(family)
    except ProtocolError:
        return False
    return True


def results(folder):
    """A run folder's predictions (as JSON text: NaN scores compare equal), metrics and run.json."""
    predictions = pq.read_table(folder / "predictions.parquet").to_pylist()
    return (json.dumps(predictions), len(predictions), json.loads((folder / "metrics.json").read_text()),
            json.loads((folder / "run.json").read_text()))  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("family", ["causal", "mlm", "seq2seq", "nli"])
def test_one_call_scores_every_benchmark_as_single_runs_do(tiny, built_all, tmp_path, family, monkeypatch, capsys):
    loads = []
    real_load = hf_model.load
    monkeypatch.setattr(hf_model, "load", lambda *args, **kwargs: loads.append(1) or real_load(*args, **kwargs))
    parent = tmp_path / "card"
    common = ["--model", str(tiny[family]), "--limit", str(LIMIT), "--data", str(built_all)]
    assert main(["score", *common, "--benchmark", "all", "--out", str(parent)]) == 0
    out, err = capsys.readouterr()
    assert len(loads) == 1  # one model load for the whole card
    scored = [b for b in registry.names() if takes(b, family)]
    assert sorted(p.name for p in parent.iterdir() if not p.name.startswith(".")) == sorted(scored)
    for benchmark in registry.names():
        assert (f"physprobe: skipped {benchmark}: " in err) == (benchmark not in scored)
    assert sum(line.startswith("physprobe: skipped") for line in err.splitlines()) == len(registry.names()) - len(scored)
    for benchmark in scored:  # the same rows, scores, decisions and figures as the benchmark scored alone
        single = tmp_path / f"single-{benchmark}"
        assert main(["score", *common, "--benchmark", benchmark, "--out", str(single)]) == 0
        (card_rows, _, card_metrics, card_info), (rows, count, metrics, info) = results(parent / benchmark), results(single)
        assert card_rows == rows and card_metrics == metrics and count > 0
        assert card_info["spec"]["protocol"] == info["spec"]["protocol"] == registry.evaluation(benchmark).default(family).name
        assert card_info["baselines"] == info["baselines"] and card_info["bootstrap"] == info["bootstrap"]
    first = json.loads((parent / scored[0] / "run.json").read_text())["timings"]["load_model_s"]
    later = [json.loads((parent / b / "run.json").read_text())["timings"]["load_model_s"] for b in scored[1:]]
    assert first > 0 and all(seconds == 0 for seconds in later)  # each run's load time is what it spent loading
    # the card as printed: a row per headline figure of each scored benchmark, the model's column filled
    assert out.count("-> ") == 1 and f"-> {parent}" in out
    for benchmark in scored:
        for row in paper_tables(benchmark).card:
            assert row.figure in out


KILL_AT = """
import os, sys, time
from pathlib import Path
from physprobe.backends import hf

calls, real = [0], hf.HFBackend.score

def score(self, requests, progress=None):
    calls[0] += 1
    if calls[0] == int(os.environ["STALL_AT"]):  # stop here until the test kills this process (SIGKILL)
        Path(os.environ["STALLED"]).write_text("stalled")
        time.sleep(600)
    return real(self, requests, progress)

hf.HFBackend.score = score
from physprobe.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
@pytest.mark.processes
def test_a_card_killed_mid_way_rescores_nothing_it_answered(tiny, built_all, tmp_path):
    parent, script, stalled = tmp_path / "card", tmp_path / "kill.py", tmp_path / "stalled"
    script.write_text(textwrap.dedent(KILL_AT))
    args = ["score", "--model", str(tiny["causal"]), "--benchmark", "all", "--limit", str(LIMIT), "--data", str(built_all),
            "--out", str(parent)]  # fmt: skip
    first_configs = len(registry.evaluation(registry.names()[0]).configs)
    env = dict(
        os.environ, PYTHONPATH=str(REPO), STALL_AT=str(first_configs + 2), STALLED=str(stalled)
    )  # the second benchmark's 2nd call
    process = subprocess.Popen([sys.executable, str(script), *args], cwd=tmp_path, env=env, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    while not stalled.exists():
        assert process.poll() is None and time.monotonic() < deadline, process.stderr.read().decode()[-2000:]
        time.sleep(0.2)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    process.stderr.close()
    names = registry.names()
    before = {b: cached(parent / b) for b in names}
    assert (parent / names[0] / "run.json").is_file() and not (parent / names[1] / "run.json").exists()
    assert before[names[1]] > 0 and all(before[b] == 0 for b in names[2:])
    assert main(args) == 0  # run again, without the stall
    for benchmark in names:  # every answer cached before the kill is read back, none scored again
        _, count, _, info = results(parent / benchmark)
        assert info["scored_now"] == count - before[benchmark]


@pytest.mark.parametrize("extra, message", [
    (["--benchmark", "prost,prost"], "--benchmark names prost more than once"),
    (["--benchmark", "prost,,cccons"], "has an empty entry"),
    (["--benchmark", "prost,physics"], "--benchmark names 'physics', not a benchmark; known: "),
    (["--benchmark", "all", "--protocol", "released-gpt"], "--protocol names one benchmark's protocols"),
    (["--benchmark", "all", "--config", "default"], "--config names one benchmark's configs"),
    (["--benchmark", "all", "--dataset-repo", "me/prost"], "--dataset-repo names one benchmark's Hub dataset"),
    (["--benchmark", "all", "--num-processes", "2"], "--num-processes splits one benchmark's run"),
])  # fmt: skip
def test_arguments_of_one_benchmark_are_refused_in_one_line(tmp_path, capsys, extra, message):
    assert main(["score", "--model", str(tmp_path / "model"), "--out", str(tmp_path / "card"), *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and not (tmp_path / "card").exists()


def test_a_card_goes_under_runs_and_the_model_name_and_holds_one_run_per_benchmark(tmp_path):
    card = card_run.make("models/smol", "cccons,prost", gguf_file="SmolLM2.Q4_1.gguf", data=tmp_path, limit=5)
    assert card.out.as_posix() == "runs/SmolLM2.Q4_1"
    assert [(a.benchmark, a.out, a.limit) for a in card.options] == [
        ("cccons", "runs/SmolLM2.Q4_1/cccons", 5), ("prost", "runs/SmolLM2.Q4_1/prost", 5)]  # fmt: skip
    assert [a.benchmark for a in card_run.make("gpt2", "all", out=tmp_path).options] == registry.names()


def test_a_backend_made_for_one_benchmark_serves_the_next(tiny, built_all, monkeypatch):
    made = []
    real = hf.HFBackend.__init__
    monkeypatch.setattr(
        hf.HFBackend, "__init__", lambda self, settings, described=None: made.append(settings) or real(self, settings, described)
    )
    models = card_run.Models()
    specs, skipped = card_run.resolved(card_run.make(str(tiny["mlm"]), "all", out="unused", data=built_all))
    first, second = (models(spec) for spec in specs[:2])
    assert first is second and len(made) == 1 and list(skipped) == ["newton"]  # no mlm protocol


def test_a_benchmark_the_backend_cannot_serve_is_skipped_in_one_line(built_all, tmp_path, capsys):
    """Over a server (``--backend openai``), PROST's default protocol asks token sequences (``MeanTokens``), which a
    server cannot score: the card names it in one line and scores the rest, through one connection's settings."""
    from .fake_openai import FakeServer

    with FakeServer() as server:
        args = ["score", "--model", server.model, "--model-args", f"base_url={server.base_url}", "--benchmark", "prost,cccons",
                "--limit", "2", "--bootstrap-iters", "0", "--data", str(built_all), "--out", str(tmp_path / "card")]  # fmt: skip
        assert main(args) == 0
        asked = sum(path == "/v1/models" for path in server.requests)
    err = capsys.readouterr().err
    skips = [line for line in err.splitlines() if "skipped" in line]
    assert len(skips) == 1 and skips[0].startswith(
        "physprobe: skipped prost: protocol 'released-gpt' asks for mean log-probabilities of the options' tokens, which "
        "--backend openai cannot serve; use --backend hf"
    )
    assert sorted(p.name for p in (tmp_path / "card").iterdir() if not p.name.startswith(".")) == ["cccons"]
    assert asked == 1  # the server's model list read once, by the one backend the card made


# The README's quick-start card as a fake clock plays it, each item at the pace measured of it with SmolLM2-135M on
# the 2-core machine (2026-11-28, quiet: each benchmark's seconds over its items), its prompts as long as the
# benchmark's are on average (characters): (benchmark, its protocol's request, items of each config, seconds an item,
# configs found in the cache). Text2Afford is the slow last benchmark in questions (20 of 15 generations each);
# NEWTON's generations take 9.7 times CConS's.
QUICK_START = [("cccons", requests.Generate("c" * 80, (), max_new_tokens=20), [20] * 8, 0.075, 4),
               ("newton", requests.Generate("n" * 154, (), max_new_tokens=128), [20] * 4, 0.73, 0),
               ("prost", requests.Choice("p" * 150, ("ption",)), [80], 0.05, 0),
               ("text2afford", requests.GenerateEach(("t" * 224,), max_new_tokens=20), [300], 0.13, 0)]  # fmt: skip
LOADING = 20.0  # seconds the model takes to load, at the first config not cached


def test_a_cards_time_left_stays_within_half_of_the_time_truly_left(monkeypatch):
    """Through ``score_card`` with a fake clock: each config a bar of the engine's items (its cached configs counted
    done at once), the model loading at the first config not cached, each config's pace 15% off its benchmark's one
    way or the other, counts moving by half an item; every time left the card tells once a tenth of its items are
    done is within half of the time truly left (0.70 to 1.26 times it), never below zero, and never up by half
    from one to the next (at most 7%). With questions as the
    unit it is not, nor with a prompt counted as 25 steps whatever its length and the later benchmarks read at the
    pace of all the work so far (0.50 to 1.67 times it: NEWTON's long answers after short prompts set the pace of
    Text2Afford's short ones after long prompts)."""
    now, told = [0.0], []
    monkeypatch.setattr(progress_lines, "time", SimpleNamespace(monotonic=lambda: now[0]))
    specs = [SimpleNamespace(benchmark=name) for name, *_ in QUICK_START]
    plan = {name: (request, sizes, pace, cached) for name, request, sizes, pace, cached in QUICK_START}

    def work(spec):
        request, sizes, _, _ = plan[spec.benchmark]
        return sum(sizes) // request.work(), sum(sizes), sum(sizes) * request.cost() // request.work()

    monkeypatch.setattr(card_run, "resolved", lambda card: (specs, {}))
    monkeypatch.setattr(card_run.runner, "work", work)
    items = sum(sum(sizes) for _, _, sizes, _, _ in QUICK_START)
    loaded = []

    def run(spec, models):
        request, sizes, pace, cached = plan[spec.benchmark]
        card = progress._OVERALL[-1]
        for place, size in enumerate(sizes):
            found = size if place < cached else 0
            with progress.bar(f"{spec.benchmark}/{place}", size, request.unit, found, request.cost() / request.work()) as bar:
                if found:
                    continue
                if not loaded:
                    with progress.bar("loading the model"):
                        now[0] += LOADING
                    loaded.append(True)
                factor = (0.85, 1.0, 1.15)[place % 3]
                for _ in range(size * 2):  # half an item a count, as a generating engine's shares move
                    now[0] += pace * factor / 2
                    bar.update(0.5)
                    told.append((now[0], card.tally.done / card.tally.total, card.tally.left()))
        return spec.benchmark

    monkeypatch.setattr(card_run.runner, "run", run)
    result = card_run.score_card(card_run.Card(Path("runs"), ()))
    assert result.records == {name: name for name, *_ in QUICK_START} and items == 620
    end = now[0]
    checked = [(at, left, end - at) for at, share, left in told if share >= 0.1 and end > at]
    assert len(checked) > 0.8 * len(told)
    wrong = [
        (round(at, 1), round(left, 1), round(truly, 1)) for at, left, truly in checked if not 0.5 * truly <= left <= 1.5 * truly
    ]
    assert not wrong, wrong
    assert all(left is None or left >= 0 for _, _, left in told)
    estimates = [left for _, _, left in told if left is not None]
    assert all(later <= 1.5 * earlier for earlier, later in zip(estimates, estimates[1:]))  # never up by half
