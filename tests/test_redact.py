"""The scrubber (``physprobe.util.redact.scrub``) against the benchmarks' own text: every text field of every config
of every built benchmark comes through unchanged, and a secret planted in a random row, in any form a server quotes
it, is removed and nothing else changed (hypothesis)."""

from __future__ import annotations

import base64
import json
import string
from urllib.parse import quote

import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from physprobe.util.redact import HIDDEN, scrub


def strings(value) -> list[str]:
    """The texts in a row's value (a text, or a list of them)."""
    if isinstance(value, str):
        return [value]
    return [text for item in value for text in strings(item)] if isinstance(value, list) else []


@pytest.fixture(scope="module")
def rows(built_all) -> dict[str, list[list[str]]]:
    """Each config of each built benchmark (``benchmark/config``): its rows, each as its text fields' texts."""
    found = {}
    for folder in sorted(p for p in built_all.glob("*/*") if p.is_dir()):
        table = pq.read_table(sorted(folder.glob("*.parquet")))
        texts = [[t for column in table.column_names for t in strings(row[column])] for row in table.to_pylist()]
        found[f"{folder.parent.name}/{folder.name}"] = [row for row in texts if row]
    return found


def test_every_benchmark_text_comes_through_unchanged(rows):
    assert {benchmark.split("/")[0] for benchmark in rows} == {"cccons", "newton", "prost", "text2afford"}
    texts = {text for config in rows.values() for row in config for text in row}
    changed = [text for text in texts if scrub(text) != text]
    assert len(texts) > 100_000 and changed == []  # 4673c87 changed one: "Basic nurse 's equipment !" (Text2Afford)


ALPHABET = string.ascii_letters + string.digits
TOKEN = st.text(ALPHABET, min_size=24, max_size=48).filter(lambda t: any(c.isdigit() for c in t) and any(c.isalpha() for c in t))


@st.composite
def planted(draw) -> tuple[str, str, list[str]]:
    """A secret in one of the forms a text may carry it: (as it is written, as the scrubber must leave it, the
    secrets known exactly)."""
    kind = draw(st.sampled_from(["known", "known quoted", "header", "bearer", "basic", "hf", "sk", "url"]))
    token = draw(TOKEN)
    if kind == "known":  # a configured key or a URL's password, known exactly: any characters
        secret = draw(st.text(string.ascii_letters + string.digits + "-_.~!$%", min_size=12, max_size=40))
        return secret, HIDDEN, [secret]
    if kind == "known quoted":  # as a server quotes it back: repr, JSON, URL-encoded
        secret = draw(st.text(ALPHABET, min_size=12, max_size=40)) + draw(st.sampled_from(["\r", "\n", "'", '"', "/", " "]))
        form = draw(st.sampled_from([repr(secret)[1:-1], json.dumps(secret)[1:-1], quote(secret, safe="")]))
        return form, HIDDEN, [secret]
    if kind == "header":
        name, scheme = (
            draw(st.sampled_from(["Authorization", "authorization", "Proxy-Authorization", "X-Api-Key", "api-key"])),
            "",
        )
        if "uthorization" in name:
            scheme = draw(st.sampled_from(["Bearer ", "Basic ", "Token ", ""]))
        separator = draw(st.sampled_from([": ", "=", "': '", '": "']))
        return f"{name}{separator}{scheme}{token}", f"{name}{separator}{scheme}{HIDDEN}", []
    if kind == "bearer":
        scheme = draw(st.sampled_from(["Bearer", "bearer", "Token"]))
        return f"{scheme} {token}", f"{scheme} {HIDDEN}", []
    if kind == "basic":
        pair = f"{draw(st.text(ALPHABET, min_size=1, max_size=12))}:{draw(st.text(ALPHABET, min_size=1, max_size=24))}"
        return f"Basic {base64.b64encode(pair.encode()).decode()}", f"Basic {HIDDEN}", []
    if kind == "hf":
        return f"hf_{draw(st.text(ALPHABET, min_size=34, max_size=34))}", HIDDEN, []
    if kind == "sk":
        prefix = draw(st.sampled_from(["sk-", "sk-proj-", "sk-ant-api03-"]))
        return f"{prefix}{draw(st.text(ALPHABET + '-_', min_size=40, max_size=64))}", HIDDEN, []
    user, password = draw(st.text(ALPHABET, min_size=1, max_size=8)), draw(st.text(ALPHABET + "-._~", min_size=1, max_size=24))
    return f"http://{user}:{password}@127.0.0.1:8000/v1", f"http://{HIDDEN}@127.0.0.1:8000/v1", []


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(choice=st.data())
def test_a_secret_planted_in_a_random_row_is_removed_and_nothing_else_changed(choice, rows):
    config = choice.draw(st.sampled_from(sorted(rows)), label="config")
    row = choice.draw(st.sampled_from(rows[config]), label="row")
    text = choice.draw(st.sampled_from(row), label="field")
    secret, hidden, known = choice.draw(planted(), label="secret")
    words = text.split(" ")
    at = choice.draw(st.integers(0, len(words)), label="between words")
    around = (" ".join(words[:at]), " ".join(words[at:]))
    written = " ".join(part for part in (around[0], secret, around[1]) if part)
    assert scrub(written, known) == " ".join(part for part in (around[0], hidden, around[1]) if part)
