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


# The README's quick-start card as a fake clock plays it, as SmolLM2-135M and Gemma-3-270M ran it on the 2-core
# machine (2026-12-02, each config's seconds over its items, from its bar's opening to the next one's, and the share
# of its items' cost that answers ending before their budget spared): per benchmark, a request as long as its
# prompts are on average (characters; Text2Afford's 15 prompts of a row share their context), and per config its
# items, seconds an item and share spared. SmolLM2's CConS answers end at their first token (72% of their cost
# spared), its NEWTON answers after 13% to 62% of it; Gemma-3 writes until the budget on NEWTON; Text2Afford's
# generations run 300 to a config, in full batches.
REQUESTS = {"cccons": requests.Generate("c" * 80, (), max_new_tokens=20),
            "newton": requests.Generate("n" * 154, (), max_new_tokens=128, max_length=128),
            "prost": requests.Choice("p" * 150, ("a", "b", "c", "d")),
            "text2afford": requests.GenerateEach(tuple("t" * 200 + f"{i:02d}" * 12 for i in range(15)), max_new_tokens=20)}  # fmt: skip
QUICK_START = {
    "SmolLM2": {"cccons": [(20, 0.07, 0.72)] * 7 + [(20, 0.03, 0.79)],
                "newton": [(20, 0.69, 0.13), (20, 0.55, 0.59), (20, 0.80, 0.09), (20, 0.46, 0.62)],
                "prost": [(80, 0.06, 0.0)], "text2afford": [(300, 0.176, 0.0)]},
    "Gemma-3": {"cccons": [(20, 0.54, 0.19), (20, 0.50, 0.12), (20, 0.48, 0.20), (20, 0.37, 0.18), (20, 0.51, 0.05),
                           (20, 0.50, 0.18), (20, 0.32, 0.35), (20, 0.25, 0.29)],
                "newton": [(20, 1.18, 0.0), (20, 2.28, 0.0), (20, 2.40, 0.0), (20, 1.83, 0.0)],
                "prost": [(80, 0.139, 0.0)], "text2afford": [(300, 0.383, 0.0)]},
}  # fmt: skip
LOADING = 20.0  # seconds the model takes to load, at the first config not cached
CACHED = 4  # CConS's configs found in the cache


@pytest.mark.parametrize("model", list(QUICK_START))
def test_a_cards_time_left_stays_within_two_thirds_and_one_and_a_half_of_the_time_truly_left(model, monkeypatch):
    """Through ``score_card`` with a fake clock: each config a bar of the engine's items (half of CConS's configs
    cached, counted done at once), the model loading at the first config not cached, counts moving by half an item,
    each spared in its config's share; every time left the card tells once a tenth of its items are done is within
    0.67 and 1.5 times the time truly left, never below zero, and never up by half from one to the next (SmolLM2 1.04 to 1.49, Gemma-3 0.76 to 1.23). Paced by
    the budget's steps instead of the work truly done (nothing spared), SmolLM2's estimates fall to 0.33 of the
    truth."""
    now, told = [0.0], []
    monkeypatch.setattr(progress_lines, "time", SimpleNamespace(monotonic=lambda: now[0]))
    plan = QUICK_START[model]
    specs = [SimpleNamespace(benchmark=name) for name in plan]

    def work(spec):
        request, configs = REQUESTS[spec.benchmark], plan[spec.benchmark]
        items = sum(size for size, _, _ in configs)
        return items // request.work(), items, items * requests.cost_of([request]) / request.work()

    monkeypatch.setattr(card_run, "resolved", lambda card: (specs, {}))
    monkeypatch.setattr(card_run.runner, "work", work)
    loaded = []

    def run(spec, models):
        request, card = REQUESTS[spec.benchmark], progress._OVERALL[-1]
        weight = requests.cost_of([request]) / request.work()
        for place, (size, pace, spared) in enumerate(plan[spec.benchmark]):
            found = size if spec.benchmark == "cccons" and place < CACHED else 0
            with progress.bar(f"{spec.benchmark}/{place}", size, request.unit, found, weight) as bar:
                if found:
                    continue
                if not loaded:
                    with progress.bar("loading the model"):
                        now[0] += LOADING
                    loaded.append(True)
                for _ in range(size * 2):  # half an item a count, as a generating engine's shares move
                    now[0] += pace / 2
                    bar.update(0.5)
                    bar.spare(0.5 * spared)
                    told.append((now[0], card.tally.done / card.tally.total, card.tally.left()))
        return spec.benchmark

    monkeypatch.setattr(card_run.runner, "run", run)
    result = card_run.score_card(card_run.Card(Path("runs"), ()))
    assert result.records == {name: name for name in plan}
    end = now[0]
    checked = [(at, left, end - at) for at, share, left in told if share >= 0.1 and end > at]
    assert len(checked) > 0.8 * len(told)
    wrong = [(round(at, 1), round(left, 1), round(truly, 1)) for at, left, truly in checked
             if not 0.67 * truly <= left <= 1.5 * truly]  # fmt: skip
    assert not wrong, wrong
    assert all(left is None or left >= 0 for _, _, left in told)
    estimates = [left for _, _, left in told if left is not None]
    assert all(later <= 1.5 * earlier for earlier, later in zip(estimates, estimates[1:]))  # never up by half
