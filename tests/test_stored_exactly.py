"""What a model or a user wrote is stored and published exactly: only a secret physprobe knows (the server key it was
given, a token in its environment, a URL's credentials) is hidden, and no part of a local path is published. Texts
shaped like a credential that are no known secret ("Authorization: granted.", "api_key=banana") come through byte for
byte, each place named in one warning line when publishing; the published command holds placeholders for its paths.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from physprobe.cli import main
from physprobe.data.dataset_folder import data_file

from . import fake_openai
from .fake_openai import FakeServer
from .test_publish_faults import texts_of
from .test_upload import upload

KEY = "sk-known-0123456789abcdef"
ANSWERS = [
    "Authorization: granted. The answer is (a).",
    "The api_key=banana answer is (a).",
    "Bearer 2024abcdefghijklmnop is (a).",
]
RAW = ["--benchmark", "newton", "--config", "track1"]  # /v1/completions, generation
CHAT = [*RAW, "--apply-chat-template"]  # /v1/chat/completions


@pytest.fixture(autouse=True)
def quick(monkeypatch):
    monkeypatch.setattr("physprobe.backends.openai.client.backoff", lambda retries: (0.0,) * retries)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr("huggingface_hub.get_token", lambda: None)


def answering(text: str):
    """A fault of the fake server: every generated answer is ``text`` (then the key quoted back, once in a while)."""

    def fault(path, answer, headers):
        choice = answer["choices"][0]
        if "message" in choice:
            choice["message"]["content"] = text
        elif not choice.get("logprobs"):
            choice["text"] = text
        return fake_openai._json(200, answer)

    return fault


def score(server: FakeServer, out, data, *args: str, limit: int = 2) -> int:
    return main(["score", "--model", server.model, "--model-args", f"base_url={server.base_url},max_retries=1",
                 "--data", str(data), "--limit", str(limit), "--bootstrap-iters", "0", "--out", str(out), *args])  # fmt: skip


def published_run(tmp_path: Path, run: Path) -> Path:
    """``run`` published (a dry run) into ``tmp_path/hub``: its folder in the runs repository."""
    assert upload.main(["--runs", str(run), "--runs-repo", "r", "--out", str(tmp_path / "hub")]) == 0
    (config,) = (tmp_path / "hub" / "runs" / "r" / "runs").iterdir()
    return config


@pytest.mark.parametrize("endpoint", [RAW, CHAT], ids=["completions", "chat"])
@pytest.mark.parametrize("text", ANSWERS, ids=["authorization", "api-key", "bearer"])
def test_an_answer_shaped_like_a_credential_is_stored_and_published_byte_for_byte(
    text, endpoint, built_all, tmp_path, monkeypatch, capsys
):
    monkeypatch.setitem(fake_openai.FAULTS, "answering", answering(text))
    with FakeServer(fault="answering") as server:
        assert score(server, tmp_path / "run", built_all, *endpoint) == 0
    stored = pq.read_table(tmp_path / "run" / "predictions.parquet").to_pylist()
    assert [row["generated"] for row in stored] == [text, text]  # as the model answered, not "Authorization: ***"
    capsys.readouterr()
    config = published_run(tmp_path, tmp_path / "run")
    assert (config / "predictions.parquet").read_bytes() == (tmp_path / "run" / "predictions.parquet").read_bytes()
    warnings = [line for line in capsys.readouterr().err.splitlines() if "shaped like a credential" in line]
    assert len(warnings) == 1 and warnings[0].startswith("physprobe: warning: "), warnings
    assert (
        f"{tmp_path / 'run' / 'predictions.parquet'}: 2 texts" in warnings[0]
        and "row 0 of config track1 (generated)" in warnings[0]
    )


def test_an_answer_quoting_the_known_key_still_has_it_hidden(built_all, tmp_path, monkeypatch):
    monkeypatch.setitem(fake_openai.FAULTS, "answering", answering(f"Authorization: granted with Bearer {KEY} (a)"))
    with FakeServer(fault="answering") as server:
        assert score(server, tmp_path / "run", built_all, *RAW, limit=1) == 0
    (row,) = pq.read_table(tmp_path / "run" / "predictions.parquet").to_pylist()
    assert row["generated"] == "Authorization: granted with Bearer *** (a)"  # the key known exactly; nothing else


def test_a_label_and_a_system_instruction_are_published_exactly(built_all, tmp_path, capsys):
    label, instruction = "api_key=banana split", "authorization: you may answer. Token 2024abcdefghijklmnop"
    with FakeServer() as server:
        assert score(server, tmp_path / "run", built_all, *RAW, "--label", label, "--system-instruction", instruction) == 0
    spec = json.loads((tmp_path / "run" / "spec.json").read_text())
    assert spec["label"] == label and label in spec["command"] and instruction in spec["command"]
    config = published_run(tmp_path, tmp_path / "run")  # was refused: "holds a text shaped like a credential"
    warned = [line for line in capsys.readouterr().err.splitlines() if "shaped like a credential" in line]
    assert [line.split(": ")[2].rsplit("/", 1)[1] for line in warned] == ["spec.json", "run.json", "predictions.parquet"]
    assert "(first: command[" in warned[0] and "(first: row 0 of config track1 (prompts))" in warned[2]
    published = json.loads((config / "spec.json").read_text())
    assert published["label"] == label and label in published["command"] and instruction in published["command"]
    assert json.loads((config / "run.json").read_text())["spec"] == published
    prompts = [p for row in pq.read_table(config / "predictions.parquet").to_pylist() for p in row["prompts"]]
    assert prompts and all(instruction in p for p in prompts), prompts
    assert (config / "predictions.parquet").read_bytes() == (tmp_path / "run" / "predictions.parquet").read_bytes()


# --- the published command: no part of a local path ------------------------------------------------------------------------


def test_the_published_command_names_no_local_folder(built_all, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    os.symlink(built_all, tmp_path / "bobsdata")  # --data by a relative name
    with FakeServer() as server:
        assert score(server, "alicesecret", "bobsdata", *RAW, "--label", "mine") == 0
        assert main(["score", "--model", server.model, "--model-args", f"base_url={server.base_url}", "--data=bobsdata",
                     *RAW, "--limit", "1", "--bootstrap-iters", "0", "--out=alicesecret/../carolsecret"]) == 0  # fmt: skip
    config = published_run(tmp_path, Path("alicesecret"))
    spec = json.loads((config / "spec.json").read_text())
    words = spec["command"]
    assert words[words.index("--out") + 1] == "<out>" and words[words.index("--data") + 1] == "<data>"
    assert spec["out"] == "<out>" and json.loads((config / "run.json").read_text())["spec"] == spec
    repo = tmp_path / "hub" / "runs" / "r"
    assert upload.main(["--runs", "carolsecret", "--runs-repo", "r2", "--out", str(tmp_path / "hub")]) == 0
    (other,) = (tmp_path / "hub" / "runs" / "r2" / "runs").iterdir()
    assert "--out=<out>" in json.loads((other / "spec.json").read_text())["command"]
    assert "--data=<data>" in json.loads((other / "spec.json").read_text())["command"]
    assert main(["export", "every-eval-ever", "alicesecret", "--out", str(tmp_path / "eee")]) == 0
    published = texts_of(repo) + texts_of(tmp_path / "hub" / "runs" / "r2") + texts_of(tmp_path / "eee")
    assert "<out>" in texts_of(tmp_path / "eee")
    for local in ("alicesecret", "bobsdata", "carolsecret", str(tmp_path)):
        assert local not in published, local


def test_a_local_model_given_relative_is_published_by_its_published_name(built_all, tiny_model, tmp_path, monkeypatch):
    rows = pq.read_table(built_all / "prost" / data_file("mass", "test")).to_pylist()[::60]
    model = tiny_model("causal", [f"{r['context']} {r['question']} {r['A']} {r['B']}" for r in rows], "gpt")
    monkeypatch.chdir(model.parent)
    assert main(["score", "--model", model.name, "--benchmark", "prost", "--config", "mass", "--limit", "2",
                 "--data", str(built_all), "--bootstrap-iters", "0", "--out", str(tmp_path / "run")]) == 0  # fmt: skip
    config = published_run(tmp_path, tmp_path / "run")
    spec = json.loads((config / "spec.json").read_text())
    words = spec["command"]
    assert words[words.index("--model") + 1] == spec["model"] and spec["model"].startswith(f"{model.name}@sha256:")
    assert words[words.index("--data") + 1] == "<data>" and words[words.index("--out") + 1] == "<out>"
