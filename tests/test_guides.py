"""The guides walked through: ``docs/adding_a_benchmark.md``'s blocks written as files into temporary copies of
the package folders (``dataset_scripts/``, ``generators/``), its one registration line applied, the toy
benchmark built, scored with a tiny model and reported; then ``docs/adding_a_protocol.md``'s edits applied to
its ``evaluation.py`` and the new protocol scored; then ``docs/adding_a_backend.md``'s module and registry line,
its backend (llama.cpp in this process, on SmolLM2's GGUF file) scoring two benchmarks end to end."""

import doctest
import importlib
import json
import re
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import physprobe.backends
import physprobe.dataset_scripts
import physprobe.generators
from physprobe.cli import main
from physprobe.data import registry

from . import tiny_models

DOCS = Path(__file__).resolve().parents[1] / "docs"
FENCE = re.compile(r"^```(\w+) ([^\n]+)\n(.*?)^```$", re.M | re.S)
TOY = "heavier"


def blocks(guide: str) -> dict[str, str]:
    """A guide's fenced blocks that name a file (or an edit) after their language: name -> text."""
    return {name.strip(): text for _, name, text in FENCE.findall((DOCS / guide).read_text(encoding="utf-8"))}


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The benchmark guide applied: its files in temporary package folders, its registration line in force.
    Returns the folders (package root, mirror)."""
    files = blocks("adding_a_benchmark.md")
    registration = files.pop("dataset_scripts/__init__.py")
    mirror = tmp_path / "upstream"
    for name, text in files.items():
        path = (mirror if name.startswith(f"{TOY}/") else tmp_path / "src") / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    # New files only in the benchmark's own folders; the registration is one line adding the name.
    assert {name.split("/")[0] for name in files} == {"dataset_scripts", "generators", TOY}
    assert all(n.startswith((f"dataset_scripts/{TOY}/", f"generators/{TOY}.py", f"{TOY}/")) for n in files)
    assert len(registration.strip().splitlines()) == 1
    names = {}
    exec(registration, names)  # the guide's line, e.g. NAMES = (..., "heavier")
    assert names["NAMES"] == (*physprobe.dataset_scripts.NAMES, TOY)
    # The temporary folders join the installed packages' folders, as the new files would in the checkout.
    monkeypatch.setattr(
        physprobe.dataset_scripts, "__path__", [*physprobe.dataset_scripts.__path__, str(tmp_path / "src" / "dataset_scripts")]
    )
    monkeypatch.setattr(physprobe.generators, "__path__", [*physprobe.generators.__path__, str(tmp_path / "src" / "generators")])
    monkeypatch.setattr(physprobe.dataset_scripts, "NAMES", names["NAMES"])
    cached = vars(physprobe.dataset_scripts).pop("BENCHMARKS", None)  # the builders, imported again with the toy's
    yield tmp_path / "src", mirror
    vars(physprobe.dataset_scripts).pop("BENCHMARKS", None)
    if cached is not None:
        physprobe.dataset_scripts.BENCHMARKS = cached
    for module in [m for m in sys.modules if m.endswith((f".{TOY}", f".{TOY}.{TOY}", f".{TOY}.configs", f".{TOY}.evaluation"))]:
        del sys.modules[module]


def _rows(build: Path) -> list[dict]:
    return pq.read_table(build / TOY / "default" / "test-00000-of-00001.parquet").to_pylist()


def test_a_fifth_benchmark_is_its_own_files_and_one_line(toy, tmp_path):
    src, mirror = toy
    assert TOY in registry.names() and registry.config_names(TOY) == ["default"]
    for module in (
        f"physprobe.generators.{TOY}",
        f"physprobe.dataset_scripts.{TOY}.{TOY}",
        f"physprobe.dataset_scripts.{TOY}.evaluation",
    ):
        assert doctest.testmod(importlib.import_module(module)).failed == 0, module
    build = tmp_path / "build"
    assert main(["build", TOY, "--out", str(build), "--source-dir", str(mirror)]) == 0
    rows = _rows(build)
    # The guide's CSV, worked by hand: obj2, obj1, obj2, obj1, obj2, obj1 heavier.
    assert [(r["obj1"], r["label"]) for r in rows] == [("a feather", 1), ("an anvil", 0), ("a coin", 1), ("a piano", 0),
                                                      ("a paperclip", 1), ("a fridge", 0)]  # fmt: skip
    assert "| `default` | 6 |" in (build / TOY / "README.md").read_text()

    texts = [f"{r['obj1']} is heavier than {r['obj2']}. Question: Which is heavier, {r['obj1']} or {r['obj2']}?" for r in rows]
    model = tiny_models.causal_lm(tmp_path / "gpt", texts * 20)
    run = tmp_path / "run"
    assert main(["score", "--model", str(model), "--benchmark", TOY, "--data", str(build), "--out", str(run)]) == 0
    info = json.loads((run / "run.json").read_text())
    metrics = json.loads((run / "metrics.json").read_text())
    predictions = pq.read_table(run / "predictions.parquet").to_pylist()
    assert info["spec"]["protocol"] == "statement-loglik" and metrics["default"]["n"] == 6
    # The decision and the accuracy, recomputed from the per-statement scores the run wrote.
    chosen = [max(range(2), key=lambda i: p["scores"][i]) for p in predictions]
    assert chosen == [p["prediction"] for p in predictions]
    accuracy = sum(c == r["label"] for c, r in zip(chosen, rows)) / 6
    assert metrics["default"]["accuracy"] == pytest.approx(accuracy)
    assert info["headline"]["default"] == ["accuracy", metrics["default"]["accuracy"]]

    report = tmp_path / "report"
    assert main(["report", str(run), "--out", str(report)]) == 0
    text = (report / "report.md").read_text()
    assert "## Heavier" in text and f"{100 * accuracy:.1f} (" in text and "n=6" in text
    card = text.split("\n## Card")[1].split("\n## ")[0]  # the report opens with the card's row the guide declares
    # the value and its n, then the footnote mark of what the run can detect
    assert f"| accuracy (%), physprobe's Accuracy on the pairs | {100 * accuracy:.1f} n=6¹ |" in card


def test_a_protocol_is_two_edits_to_its_evaluation(toy, tmp_path, capsys):
    src, mirror = toy
    edits = blocks("adding_a_protocol.md")
    path = src / "dataset_scripts" / TOY / "evaluation.py"
    text = path.read_text()
    (old_import,) = [line for line in text.splitlines() if line.startswith("from physprobe.protocols import")]
    text = text.replace(old_import, edits["evaluation.py: the import"].strip())
    text = text.replace("\nEVALUATION = Evaluation(", edits["evaluation.py: above EVALUATION"] + "\n\nEVALUATION = Evaluation(")
    text = text.replace("    protocols=(\n", "    protocols=(\n" + edits["evaluation.py: in protocols"])
    path.write_text(text)
    evaluation = registry.evaluation(TOY)
    assert [p.name for p in evaluation.protocols] == ["question-generate", "statement-loglik"]
    assert doctest.testmod(importlib.import_module(f"physprobe.dataset_scripts.{TOY}.evaluation")).failed == 0
    assert main(["protocols", TOY]) == 0 and "question-generate" in capsys.readouterr().out

    build = tmp_path / "build"
    assert main(["build", TOY, "--out", str(build), "--source-dir", str(mirror)]) == 0
    model = tiny_models.causal_lm(tmp_path / "gpt", [f"Which is heavier, {r['obj1']} or {r['obj2']}?" for r in _rows(build)] * 20)
    run = tmp_path / "run"
    assert main(["score", "--model", str(model), "--benchmark", TOY, "--protocol", "question-generate", "--data", str(build),
                 "--out", str(run)]) == 0  # fmt: skip
    metrics = json.loads((run / "metrics.json").read_text())["default"]
    predictions = pq.read_table(run / "predictions.parquet").to_pylist()
    assert json.loads((run / "run.json").read_text())["spec"]["method"] == "generate" and metrics["n"] == 6
    # An answer decided names the chosen object; one that names neither is unparsed, never an option.
    for p, r in zip(predictions, _rows(build)):
        assert p["status"] == "unparsed" or (r["obj1"], r["obj2"])[p["prediction"]].lower() in p["generated"].lower(), p
    assert (
        metrics["unparsed"]
        == sum(p["prediction"] == -2 for p in predictions)
        == sum(p["status"] == "unparsed" for p in predictions)
    )


@pytest.mark.slow
def test_a_backend_is_one_module_and_one_registry_line(built_all, tmp_path, monkeypatch, capsys):
    from physprobe.protocols.requests import Choice

    from .llama_server import GGUF, gguf_folder

    files = blocks("adding_a_backend.md")
    line = files.pop("REGISTRY")
    assert list(files) == ["physprobe/backends/llamacpp.py"] and len(line.strip().splitlines()) == 1
    folder = tmp_path / "backends"
    folder.mkdir()
    (folder / "llamacpp.py").write_text(files["physprobe/backends/llamacpp.py"], encoding="utf-8")
    monkeypatch.setattr(physprobe.backends, "__path__", [*physprobe.backends.__path__, str(folder)])
    monkeypatch.delitem(sys.modules, "physprobe.backends.llamacpp", raising=False)
    ((name, registered),) = eval("{" + line + "}", {"Registered": physprobe.backends.Registered}).items()  # the guide's line
    monkeypatch.setitem(physprobe.backends.REGISTRY, name, registered)
    assert physprobe.backends.serving(Choice) == ["hf", "openai", "llamacpp"] and "physprobe.backends.llamacpp" not in sys.modules
    # The seam's own checks hold for it: the registry's strings are its engines' types.
    assert {kind.__name__ for kind in physprobe.backends.backend_class(name).ENGINES} == set(registered.serves)

    model = str(gguf_folder() / GGUF)
    common = ["--backend", "llamacpp", "--model", model, "--data", str(built_all), "--bootstrap-iters", "0", "--limit", "3"]
    run = tmp_path / "prost"
    args = ["score", *common, "--benchmark", "prost", "--protocol", "sentence-sum", "--config", "mass", "--out", str(run)]
    assert main(args) == 0
    info = json.loads((run / "run.json").read_text())
    predictions = pq.read_table(run / "predictions.parquet").to_pylist()
    assert info["backend"]["name"] == "llamacpp" and info["spec"]["sends"] == "Choice" and info["scored_now"] == 3
    assert info["versions"]["llama-cpp-python"]  # the registry line's library, recorded
    # Each option a log-probability, the decision the highest: what the protocol reads from any backend.
    assert all(
        len(p["scores"]) == 4 and max(p["scores"]) < 0 and p["prediction"] == p["scores"].index(max(p["scores"]))
        for p in predictions
    )
    assert main(args) == 0 and json.loads((run / "run.json").read_text())["scored_now"] == 0  # resumed from the cache

    generated = tmp_path / "cccons"
    assert main(["score", *common, "--benchmark", "cccons", "--config", "ordinary", "--out", str(generated)]) == 0
    answers = pq.read_table(generated / "predictions.parquet").to_pylist()
    assert all(
        isinstance(a["generated"], str) and 0 <= a["generated_tokens"] <= 20 for a in answers
    )  # question-generate's budget
    capsys.readouterr()
    assert main(["score", *common, "--benchmark", "prost", "--out", str(tmp_path / "refused")]) == 2
    assert capsys.readouterr().err == ("physprobe: error: protocol 'released-gpt' asks for mean log-probabilities of the options' "
                                       "tokens, which --backend llamacpp cannot serve; use --backend hf, or --protocol "
                                       "sentence-sum\n")  # fmt: skip
    assert main(["report", str(run), str(generated), "--out", str(tmp_path / "report")]) == 0
