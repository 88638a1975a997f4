"""The server fault suite: ``--backend openai`` against the fake server (``tests/fake_openai.py``) in every failure
mode it has, a key that cannot be sent or is quoted back, other weights behind the same name, and kills of the
client and of the server at random points, each resumed and counted.

Each case asserts the exit status, one line naming the server, the request (benchmark, config, row) and what was
wrong, the attempts made (a transient fault retried, a malformed answer not), and that no secret is shown.
"""

from __future__ import annotations

import json
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from physprobe.cli import main

from .conftest import REPO
from .fake_openai import FakeServer, sent, spawn
from .run_folders import cached
from .test_fault_suite import one_error_line

KEY = "sk-topsecret-0123456789"
ECHO = ["--benchmark", "prost", "--protocol", "sentence-sum"]  # /v1/completions with echo and logprobs
RAW = ["--benchmark", "newton", "--config", "track1"]  # /v1/completions, generation
CHAT = [*RAW, "--apply-chat-template"]  # /v1/chat/completions


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch):
    """Retries without the backoff's seconds (the attempts are what is checked)."""
    monkeypatch.setattr("physprobe.backends.openai.client.backoff", lambda retries: (0.0,) * retries)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def score(server: FakeServer, out: Path, data: Path, *args: str, limit: int = 1, retries: int = 1, concurrent: int = 1) -> int:
    return main(["score", "--model", server.model, "--model-args", f"base_url={server.base_url},max_retries={retries},"
                 f"num_concurrent={concurrent}", "--data", str(data), "--limit", str(limit), "--bootstrap-iters", "0",
                 "--out", str(out), *args])  # fmt: skip


def answers(server: FakeServer) -> int:
    return sum(path != "/v1/models" for path in server.requests)


def predictions(out: Path) -> list[dict]:
    return pq.read_table(out / "predictions.parquet").to_pylist()


# --- every malformed answer: one line naming server, request and fault; retried only where transient --------------------

MALFORMED = [  # (fault, endpoint, what the line says, transient)
    ("not_json", ECHO, "a body that is not JSON", True),
    ("truncated", ECHO, "a body that is not JSON", True),
    ("not_utf8", ECHO, "a body that is not UTF-8", True),
    ("error_object", ECHO, "an error object in place of the answer: model overloaded", True),
    ("html_502", ECHO, "answered HTTP 502 (an HTML page: 502 Bad Gateway)", True),
    ("drop", ECHO, "dropped the connection", True),
    ("no_choices", ECHO, "no choices (choices: [])", False),
    ("choice_not_object", ECHO, 'choices[0] is "text", not an object', False),
    ("no_logprobs", ECHO, "logprobs without a list of tokens and a list of token_logprobs", False),
    ("string_logprobs", ECHO, 'token_logprobs[1] is "-', False),
    ("positive_logprobs", ECHO, "token_logprobs[1] is 48.2, above 0 (a log-probability is at most 0)", False),
    ("nan_logprobs", ECHO, "token_logprobs[1] is nan, not a finite number", False),
    ("count_mismatch", ECHO, "tokens but", False),
    ("offsets_decreasing", ECHO, "text_offset[1] is", False),
    ("generated_only", ECHO, "does not echo the prompt's tokens with their log-probabilities", False),
    ("text_not_string", RAW, "choices[0].text is 5, not text", False),
    ("no_choices", RAW, "no choices (choices: [])", False),
    ("not_json", CHAT, "a body that is not JSON", True),
    ("no_content", CHAT, "choices[0].message has no content", False),
]  # fmt: skip


@pytest.mark.parametrize("fault, endpoint, what, transient", MALFORMED, ids=[f"{f}-{e[1]}" for f, e, _, _ in MALFORMED])
def test_a_malformed_answer_is_one_line_naming_server_request_and_fault(
    fault, endpoint, what, transient, built_all, tmp_path, capsys
):
    with FakeServer(fault=fault, fault_after=1) as server:  # the fingerprint's probe is answered well
        assert score(server, tmp_path / "run", built_all, *endpoint) == 2
    err = capsys.readouterr().err
    row = "prost/default row 0" if endpoint is ECHO else "newton/track1 row 0"
    one_error_line(err, f"physprobe: error: {row}: {server.base_url}/", what)
    assert "Traceback" not in err and "--dtype" not in err and "<html" not in err
    assert answers(server) == 1 + (2 if transient else 1)  # the probe, then the first request: retried once where transient
    assert not (tmp_path / "run" / "metrics.json").exists()


def test_progress_moves_with_each_answer_and_a_request_is_handed_over_once_all_its_answers_are_in():
    # Two YES/NO requests of 3 prompts: 6 echoed texts each (" YES" and " NO" per prompt), so each answer is a sixth
    # of its request; a request is committed (answered) once its sixth answer is in, after its six shares.
    from physprobe.backends.base import Settings
    from physprobe.backends.openai.backend import OpenAIBackend
    from physprobe.protocols.requests import YesNo

    events = []
    progress = type("Progress", (), {"update": lambda self, n: events.append(("update", n)),
                                     "answered": lambda self, i, result: events.append(("answered", i))})()  # fmt: skip
    with FakeServer() as server:
        backend = OpenAIBackend(Settings(server.model, {"base_url": server.base_url}))
        results = backend.score([YesNo(("A box.", "A cup.", "A key.")), YesNo(("A hat.", "A pen.", "A map."))], progress)
    assert len(results) == 2
    updates = [n for kind, n in events if kind == "update"]
    assert len(updates) == 12 and all(n == pytest.approx(1 / 6) for n in updates) and sum(updates) == pytest.approx(2)
    assert [e for e in events if e[0] == "answered"] == [("answered", 0), ("answered", 1)]
    assert events.index(("answered", 0)) == 6 and events[-1] == ("answered", 1)  # num_concurrent=1: in order


@pytest.mark.parametrize("endpoint", [ECHO, CHAT], ids=["echo", "chat"])
def test_a_flaky_server_gives_the_healthy_servers_predictions(endpoint, built_all, tmp_path):
    with FakeServer() as healthy:
        assert score(healthy, tmp_path / "healthy", built_all, *endpoint, limit=3) == 0
    with FakeServer(fault="flaky") as flaky:  # every other request a 503 or a 429
        assert score(flaky, tmp_path / "flaky", built_all, *endpoint, limit=3, retries=3, concurrent=4) == 0
    assert predictions(tmp_path / "flaky") == predictions(tmp_path / "healthy")
    assert len(flaky.requests) > len(healthy.requests)


def test_a_server_too_slow_for_the_timeout_is_one_line_naming_it(built_all, tmp_path, capsys):
    with FakeServer(fault="slow", fault_after=1) as server:
        assert main(["score", "--model", server.model, "--model-args", f"base_url={server.base_url},timeout=0.2,max_retries=1",
                     "--data", str(built_all), *RAW, "--limit", "1", "--out", str(tmp_path / "run")]) == 2  # fmt: skip
    one_error_line(capsys.readouterr().err, f"newton/track1 row 0: {server.base_url}/completions gave no complete answer within "
                   "0.2 s, after 2 attempts; the server is busy or stuck: raise --model-args timeout=... (seconds per request) or "
                   "lower num_concurrent")  # fmt: skip


@pytest.mark.parametrize("fault", ["drip_body", "drip_headers", "endless_chunked"])
def test_a_slow_loris_server_ends_within_the_timeout_per_attempt(fault, built_all, tmp_path, capsys):
    """A server that sends its body a byte at a time, its headers a line at a time, or a chunked body without end (a
    piece every 0.2 s, which no per-read timeout trips) is given ``timeout`` seconds per request in all."""
    timeout, retries = 1.0, 1
    with FakeServer(fault=fault, fault_after=1) as server:  # the fingerprint's probe is answered at once
        started = time.monotonic()
        status = main(["score", "--model", server.model, "--model-args", f"base_url={server.base_url},timeout={timeout},"
                       f"max_retries={retries}", "--data", str(built_all), *RAW, "--limit", "1", "--out", str(tmp_path / "run")])  # fmt: skip
        elapsed = time.monotonic() - started
    assert status == 2 and elapsed < timeout * (retries + 1) + 5, elapsed
    one_error_line(capsys.readouterr().err, f"newton/track1 row 0: {server.base_url}/completions gave no complete answer within 1 s, "
                   "after 2 attempts", "raise --model-args timeout=")  # fmt: skip
    assert answers(server) == 1 + 2


@pytest.mark.parametrize(
    "fault, what", [("flood", "a body of more than 64 MiB"), ("nested", "a body nested too deeply to be an answer")]
)
def test_a_body_too_big_or_too_deep_is_one_line(fault, what, built_all, tmp_path, capsys):
    with FakeServer(fault=fault, fault_after=1) as server:
        assert score(server, tmp_path / "run", built_all, *RAW) == 2
    err = capsys.readouterr().err
    one_error_line(err, f"newton/track1 row 0: {server.base_url}/completions gave an answer physprobe cannot use: {what}")
    assert "Traceback" not in err and answers(server) == 1 + 1  # not worth another attempt


def test_a_model_list_that_is_not_one_is_one_line(built_all, tmp_path, capsys):
    with FakeServer(models_fault="models_not_a_list") as server:
        assert score(server, tmp_path / "run", built_all, *RAW) == 2
    one_error_line(capsys.readouterr().err, f"{server.base_url}/models gave an answer physprobe cannot use: no list of models")


def test_a_model_the_server_does_not_list_is_one_line_with_its_id_escaped(built_all, tmp_path, capsys):
    with FakeServer(model="other\u202emodel") as server:
        assert main(["score", "--model", "fake-model", "--model-args", f"base_url={server.base_url}", "--data", str(built_all),
                     *RAW, "--limit", "1", "--out", str(tmp_path / "run")]) == 2  # fmt: skip
    err = capsys.readouterr().err
    one_error_line(err, "does not serve model 'fake-model'; it serves: other\\u202emodel (pass one of them as --model)")
    assert "\u202e" not in err


# --- secrets --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "key", [f"{KEY}\r", "sk-top\nsecret", "sk-topsécret", "sk top secret"], ids=["cr", "newline", "non-ascii", "space"]
)
def test_a_key_no_header_can_carry_is_refused_by_its_variable_before_any_request(key, built_all, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", key)
    with FakeServer() as server:
        assert score(server, tmp_path / "run", built_all, *RAW) == 2
    err = capsys.readouterr().err
    one_error_line(err, "$OPENAI_API_KEY holds a character no HTTP header carries", "export the key again without it")
    assert not server.requests and "top" not in err and "secret" not in err


@pytest.mark.parametrize("fault, status", [("quotes_headers_400", 400), ("quotes_headers_403", 403)])
def test_a_server_quoting_the_key_back_never_gets_it_shown(fault, status, built_all, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with FakeServer(fault=fault, fault_after=1) as server:
        assert score(server, tmp_path / "run", built_all, *RAW) == 2
    err = capsys.readouterr().err
    one_error_line(err, f"newton/track1 row 0: {server.base_url}/completions", f"HTTP {status}", "'Authorization': 'Bearer ***'")
    assert KEY not in err and "topsecret" not in err


def test_a_refused_key_is_one_line_and_a_good_one_never_reaches_a_file(built_all, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with FakeServer(fault="unauthorized", fault_after=1) as server:
        assert score(server, tmp_path / "refused", built_all, *RAW) == 2
    one_error_line(capsys.readouterr().err, f"{server.base_url} refused the API key (HTTP 401; $OPENAI_API_KEY is set)")
    with FakeServer() as server:
        assert score(server, tmp_path / "run", built_all, *ECHO) == 0
    assert not [p for p in (tmp_path / "run").rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]


def files_holding(folder: Path, *texts: str) -> list[str]:
    """The files under ``folder`` whose bytes, or whose Parquet or SQLite texts, hold any of ``texts``."""
    import sqlite3

    found = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        raw = path.read_bytes()
        readable = [raw.decode("utf-8", "replace")]
        if path.suffix == ".parquet":
            readable.append(json.dumps(pq.read_table(path).to_pylist(), ensure_ascii=False))
        if path.suffix == ".sqlite":
            with sqlite3.connect(path) as db:
                tables = [t for (t,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
                readable += [json.dumps(db.execute(f"SELECT * FROM {t}").fetchall()) for t in tables]
        if any(text.encode() in raw or any(text in r for r in readable) for text in texts):
            found.append(path.relative_to(folder).as_posix())
    return found


@pytest.mark.parametrize("endpoint", [RAW, CHAT], ids=["completions", "chat"])
def test_an_answer_quoting_the_key_is_scrubbed_before_it_is_cached_or_written(endpoint, built_all, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    out = tmp_path / "run"
    with FakeServer(fault="quotes_headers_200") as server:  # every answer quotes the headers (the probes too: the same)
        assert score(server, out, built_all, *endpoint, limit=3) == 0
    generated = [p["generated"] for p in predictions(out)]
    assert all("request headers" in text and "Bearer ***" in text for text in generated), generated
    assert files_holding(out, KEY, "topsecret") == [] and KEY not in capsys.readouterr().err


def test_credentials_in_base_url_reach_no_file_and_no_line(built_all, tmp_path, capsys):
    out, password = tmp_path / "run", "pa55-w0rd-0123456789"
    with FakeServer(fault="quotes_headers_200", fault_after=1) as server:
        url = server.base_url.replace("http://", f"http://me:{password}@")
        assert main(["score", "--model", server.model, "--model-args", f"base_url={url}", "--data", str(built_all), *RAW,
                     "--limit", "2", "--bootstrap-iters", "0", "--out", str(out)]) == 0  # fmt: skip
        info = json.loads((out / "run.json").read_text())
        assert info["backend"]["base_url"] == server.base_url.replace("http://", "http://***@")
        assert f"base_url={server.base_url.replace('http://', 'http://***@')}" in info["spec"]["command"]
        assert files_holding(out, password, f"me:{password}") == []
        assert main(["score", "--model", "nosuch", "--model-args", f"base_url={url}", "--data", str(built_all), *RAW,
                     "--limit", "2", "--out", str(tmp_path / "other")]) == 2  # fmt: skip
    err = capsys.readouterr().err
    one_error_line(err, "does not serve model 'nosuch'", "http://***@127.0.0.1")
    assert password not in err


def test_log_probabilities_whose_sum_is_not_finite_are_one_line_naming_the_server(built_all, tmp_path, capsys):
    with FakeServer(fault="huge_negative_logprobs", fault_after=1) as server:  # each -1e308: finite, their sum -inf
        assert score(server, tmp_path / "run", built_all, *ECHO) == 2
    err = capsys.readouterr().err
    one_error_line(err, f"prost/default row 0: {server.base_url}/completions gave log-probabilities whose sum is -inf",
                   "check the model it serves")  # fmt: skip
    assert "--dtype" not in err  # an option the server backend refuses is no advice


def test_a_chat_template_on_a_log_likelihood_protocol_is_refused_before_any_request(built_all, tmp_path, capsys):
    with FakeServer() as server:
        assert score(server, tmp_path / "run", built_all, *ECHO, "--apply-chat-template") == 2
    one_error_line(capsys.readouterr().err, "--apply-chat-template with a log-likelihood protocol needs --backend hf")
    assert server.requests == [] and not (tmp_path / "run").exists()


def test_model_list_metadata_that_changes_per_request_does_not_rescore_a_resume(built_all, tmp_path):
    out = tmp_path / "run"
    with FakeServer(models_fault="models_meta_per_request") as server:
        assert score(server, out, built_all, *ECHO, limit=2) == 0
        server.requests.clear()
        assert score(server, out, built_all, *ECHO, limit=2) == 0
    assert server.requests == ["/v1/models", "/v1/completions"]  # the model list and the probe: every answer cached


# --- the fingerprint: other weights behind the same name -----------------------------------------------------------------


def test_other_weights_behind_the_same_name_are_rescored_and_jitter_is_not(built_all, tmp_path):
    out = tmp_path / "run"
    with FakeServer(seed=0) as first:
        assert score(first, out, built_all, *ECHO, limit=3) == 0
    before = predictions(out)
    with FakeServer(seed=1, port=first.port) as other:  # the same URL and model id, another model's weights
        assert score(other, out, built_all, *ECHO, limit=3) == 0
    assert answers(other) == 1 + 12 + 1  # the probe, every sentence again, the probe after the last
    assert [p["scores"] for p in predictions(out)] != [p["scores"] for p in before]
    with FakeServer(seed=0, port=first.port, noise=0.01) as again:  # the first weights, their last digits jittering
        assert score(again, out, built_all, *ECHO, limit=3) == 0
    assert answers(again) == 1 and predictions(out) == before  # the probe alone: every answer from the cache


def test_weights_changed_during_a_run_stop_it_keeping_the_answers_of_the_first(built_all, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("physprobe.backends.openai.backend.PROBE_EVERY", 4)
    reference, out = tmp_path / "reference", tmp_path / "run"
    with FakeServer(seed=0) as first:  # the first weights, the whole way: what each answer should be
        assert score(first, reference, built_all, *ECHO, limit=4) == 0
    with FakeServer(seed=0, port=first.port, switch_after=10) as server:  # the probe, 9 answers, then other weights
        assert score(server, out, built_all, *ECHO, limit=4) == 2
        one_error_line(capsys.readouterr().err, f"prost/default: {server.base_url} began serving other weights as 'fake-model' "
                       "during the run", "answers since the last probe that matched were dropped")  # fmt: skip
        with sqlite3.connect(out / "cache.sqlite") as db, sqlite3.connect(reference / "cache.sqlite") as ref:
            kept, expected = (dict(d.execute("SELECT key, value FROM scores").fetchall()) for d in (db, ref))
        assert kept and all(expected[key] == value for key, value in kept.items())  # the first weights' answers only
        assert len(kept) < len(expected)
        assert score(server, out, built_all, *ECHO, limit=4) == 0  # the other weights from the start: all rescored
    with FakeServer(seed=1) as second:
        assert score(second, tmp_path / "second", built_all, *ECHO, limit=4) == 0
    assert [p["scores"] for p in predictions(out)] == [p["scores"] for p in predictions(tmp_path / "second")]


# --- a system instruction and a model id of any text: score writes, report reads ----------------------------------------


def test_an_instruction_with_control_characters_and_a_bidi_model_id_score_and_report(built_all, tmp_path, capsys):
    runs = []
    with FakeServer(model="fake\u202emodel") as server:
        for name, instruction in (("plain", "Answer briefly."), ("odd", "Answer:\n\tbriefly\x07 \u202e(a)")):
            runs.append(tmp_path / name)
            assert main(["score", "--model", server.model, "--model-args", f"base_url={server.base_url}", "--data", str(built_all),
                         *RAW, "--limit", "2", "--bootstrap-iters", "0", "--system-instruction", instruction,
                         "--out", str(runs[-1])]) == 0  # fmt: skip
    assert json.loads((runs[1] / "run.json").read_text())["chat"]["system_instruction"] == "Answer:\n\tbriefly\x07 \u202e(a)"
    assert "\u202e" not in capsys.readouterr().err
    assert main(["report", *map(str, runs), "--out", str(tmp_path / "report")]) == 0, capsys.readouterr().err
    report = (tmp_path / "report" / "report.md").read_text()
    assert "u202emodel" in report and "\u202e" not in report  # the id escaped, never reordering the table


# --- kills at random points: what was answered is never asked again ------------------------------------------------------


def client(base_url: str, out: Path, data: Path, limit: int, retries: int, concurrent: int) -> subprocess.Popen:
    command = [sys.executable, "-m", "physprobe", "score", "--model", "fake-model", "--model-args",
               f"base_url={base_url},max_retries={retries},num_concurrent={concurrent}", "--data", str(data), *RAW,
               "--limit", str(limit), "--bootstrap-iters", "0", "--out", str(out)]  # fmt: skip
    return subprocess.Popen(command, stderr=subprocess.PIPE, text=True, cwd=REPO)


def wait_until(condition, process: subprocess.Popen, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert process.poll() is None, process.stderr.read()
        assert time.monotonic() < deadline, "the client did not get there"
        time.sleep(0.002)


LIMIT, CONCURRENT = 60, 4


@pytest.fixture(scope="module")
def reference(built_all, tmp_path_factory):
    out = tmp_path_factory.mktemp("reference") / "run"
    with FakeServer() as server:
        assert main(["score", "--model", server.model, "--model-args", f"base_url={server.base_url}", "--data", str(built_all),
                     *RAW, "--limit", str(LIMIT), "--bootstrap-iters", "0", "--out", str(out)]) == 0  # fmt: skip
    return predictions(out)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.processes
def test_a_client_killed_at_a_random_point_resumes_sending_only_what_is_missing(seed, reference, built_all, tmp_path):
    kill_at = random.Random(seed).randrange(2, LIMIT)  # answers the server has been asked for (the probe first)
    out = tmp_path / "run"
    with FakeServer(delay=0.02) as server:
        scoring = client(server.base_url, out, built_all, LIMIT, 0, CONCURRENT)
        wait_until(lambda: server.answered >= kill_at, scoring)
        scoring.send_signal(signal.SIGKILL)
        scoring.wait()
        asked, kept = server.answered - 1, cached(out)
        assert asked - CONCURRENT <= kept <= asked  # at most the requests under way at the kill are lost
        server.requests.clear()
        assert main(["score", "--model", server.model, "--model-args", f"base_url={server.base_url}", "--data", str(built_all),
                     *RAW, "--limit", str(LIMIT), "--bootstrap-iters", "0", "--out", str(out)]) == 0  # fmt: skip
    assert answers(server) == 1 + LIMIT - kept + 1  # the probe, exactly what the cache lacked, the probe after the last
    assert predictions(out) == reference


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.processes
def test_a_server_killed_at_a_random_point_loses_no_answer_it_gave(seed, reference, built_all, tmp_path):
    kill_at = random.Random(seed).randrange(2, LIMIT)
    out, log = tmp_path / "run", tmp_path / "requests.log"
    server, base_url = spawn(log, delay=0.02)
    try:
        scoring = client(base_url, out, built_all, LIMIT, 0, CONCURRENT)
        wait_until(lambda: sent(log, "/v1/completions") >= kill_at, scoring)
        server.send_signal(signal.SIGKILL)
        server.wait()
        _, err = scoring.communicate(timeout=120)
        assert scoring.returncode == 2, err
        one_error_line(err, "newton/track1 row ", base_url)
        asked, kept = sent(log, "/v1/completions") - 1, cached(out)
        assert asked - CONCURRENT <= kept <= asked
        port = int(base_url.rsplit(":", 1)[1].split("/")[0])
        server, _ = spawn(log, port=port)  # the same URL, the same weights
        before = sent(log)
        assert main(["score", "--model", "fake-model", "--model-args", f"base_url={base_url}", "--data", str(built_all), *RAW,
                     "--limit", str(LIMIT), "--bootstrap-iters", "0", "--out", str(out)]) == 0  # fmt: skip
    finally:
        server.kill()
        server.wait()
    assert sent(log) - before == 2 + LIMIT - kept + 1  # the model list and the probe, what the cache lacked, the last probe
    assert predictions(out) == reference


# --- data-parallel: refused before any launch ----------------------------------------------------------------------------


def test_several_processes_with_a_server_are_refused_before_any_launch(built_all, tmp_path, capsys):
    with FakeServer() as server:
        assert score(server, tmp_path / "run", built_all, *RAW, "--num-processes", "2") == 2
    one_error_line(capsys.readouterr().err, "--num-processes 2 splits a model's work", "--model-args num_concurrent=2 (or more)")
    assert not server.requests and not (tmp_path / "run").exists()
