"""The runner holds every backend to its seam: one result per request, in order, of the request type's result class.
A backend that answers too few, too many or the wrong kind (a third-party one, docs/adding_a_backend.md) stops the
run in one line naming the backend, the config and the row, and nothing it said is cached."""

import json

import pyarrow.parquet as pq
import pytest

from physprobe import backends
from physprobe.backends.hf import HFBackend
from physprobe.cli import main
from physprobe.protocols.results import Answer

TEXTS = ["The ball rolls off the table.", "A heavy brick is on the shelf.", "Which object is the heaviest?"] * 20


class LyingBackend(HFBackend):
    """The hf backend's true answers, then a lie told by ``LIE`` (set by each test)."""

    name = "liar"
    LIE = "none"

    def score(self, requests: list, handle=None) -> list:
        results = super().score(requests, None)
        lie = type(self).LIE
        if lie == "too few":
            return results[:-1]
        if lie == "too many":
            return [*results, results[0]]
        if lie == "another kind":
            return [Answer("A", 1), *results[1:]]
        if lie == "no list":
            return None
        if lie == "a stray hand-over":
            handle.answered(len(requests), results[0])
        return results


@pytest.fixture(scope="module")
def model(tiny_model):
    return tiny_model("causal", TEXTS)


@pytest.fixture
def liar(monkeypatch):
    registered = backends.REGISTRY["hf"]
    monkeypatch.setitem(backends.REGISTRY, "liar", registered._replace(target=f"{__name__}:LyingBackend", data_parallel=False))
    return LyingBackend


def _args(model, prost_build, out) -> list[str]:
    return ["score", "--model", str(model), "--benchmark", "prost", "--config", "mass", "--limit", "5", "--bootstrap-iters",
            "0", "--data", str(prost_build.parent), "--backend", "liar", "--out", str(out)]  # fmt: skip


@pytest.mark.parametrize("lie, message", [
    ("too few", "answered 4 results to a call of 5 MeanTokens requests; a backend returns one result per request, in order"),
    ("too many", "answered 6 results to a call of 5 MeanTokens requests; a backend returns one result per request"),
    ("another kind", "answered Answer to a MeanTokens request, which is answered by Scores; a backend returns one result"),
    ("no list", "answered NoneType to a call of 5 MeanTokens requests, not a list of results; a backend returns one"),
    ("a stray hand-over", "handed over a result for request 5 of a call of 5 MeanTokens requests; a backend returns one"),
])  # fmt: skip
def test_a_lying_backend_is_one_line_naming_it_the_config_and_the_row(model, prost_build, tmp_path, capsys, liar, monkeypatch,
                                                                      lie, message):  # fmt: skip
    truthful = tmp_path / "truthful"
    assert main(_args(model, prost_build, truthful)) == 0  # the liar's true answers: the rows the call asks about
    rows = pq.read_table(truthful / "predictions.parquet").column("row").to_pylist()
    assert len(rows) == 5
    capsys.readouterr()
    monkeypatch.setattr(liar, "LIE", lie)
    assert main(_args(model, prost_build, tmp_path / "lied")) == 2
    (err,) = [line for line in capsys.readouterr().err.splitlines() if line.startswith("physprobe:")]  # (and weights' bars)
    blamed = rows[4] if lie in ("too few", "too many") else rows[0]  # the first left unanswered, the last, or the first
    assert err.startswith(f"physprobe: error: --backend liar on prost/mass row {blamed}: ") and err.endswith(
        "(docs/adding_a_backend.md)"
    ), err
    assert message in err
    assert not (tmp_path / "lied").exists()  # nothing was cached: the folder the run created is gone


def test_the_truth_is_scored_as_the_hf_backend_scores_it(model, prost_build, tmp_path, liar):
    assert main(_args(model, prost_build, tmp_path / "liar")) == 0
    hf = _args(model, prost_build, tmp_path / "hf")
    hf[hf.index("liar")] = "hf"
    assert main(hf) == 0
    read = [json.loads((tmp_path / name / "metrics.json").read_text()) for name in ("liar", "hf")]
    assert read[0] == read[1]
