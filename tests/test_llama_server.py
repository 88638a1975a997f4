"""The llama.cpp server fixture's start-up probe (``tests/llama_server.check_answers``), against the fake server: one
that answers a one-word prompt and dies on a longer one (as llama.cpp's AMX kernels do) fails in one line naming the
cause; one that answers both passes."""

import signal

import pytest

from tests import fake_openai
from tests.llama_server import PROBES, check_answers

pytestmark = pytest.mark.processes


def test_a_server_that_dies_past_one_token_fails_in_one_line(tmp_path):
    process, base_url = fake_openai.spawn(tmp_path / "requests.log", fault="segfault_past_one_word")
    try:
        with pytest.raises(RuntimeError) as raised:
            check_answers(base_url, fake_openai.MODEL, {}, process, timeout=30)
    finally:
        process.kill()
        process.wait()
    message = str(raised.value)
    assert "\n" not in message
    assert f"it answered {PROBES[0]!r} but exited with status {-signal.SIGSEGV}" in message, message
    assert "AMX" in message and "docs/servers.md" in message and base_url in message
    assert fake_openai.sent(tmp_path / "requests.log", "/v1/completions") == 2  # the one-word probe, then the fatal one


def test_a_server_that_answers_every_probe_passes():
    with fake_openai.FakeServer() as server:
        check_answers(server.base_url, fake_openai.MODEL, {})
        assert [body["prompt"] for body in server.bodies] == list(PROBES)


def test_a_server_that_refuses_the_probe_says_its_status():
    with fake_openai.FakeServer(fault="unauthorized") as server:
        with pytest.raises(RuntimeError, match=r"it answered HTTP 401 on 'Hello'"):
            check_answers(server.base_url, fake_openai.MODEL, {})
