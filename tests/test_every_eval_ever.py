"""``physprobe export every-eval-ever``: real runs of tiny models (a card run of every benchmark the causal family
takes, Text2Afford with an NLI model, a NEWTON run sampled twice per question) and the papers' tables, exported and
read back.

Every record and every instance line validates against Every Eval Ever's own schemas (mirrored in
``../shared/data/upstream/every_eval_ever``, draft-07, ``jsonschema``); read back, each record's figures are
metrics.json's, at the keys and with the n ``paper_tables.yaml`` declares (read here with PyYAML, not through
physprobe), each line is its predictions.parquet row (scores, prediction, generated text, prompts), and the papers'
records hold every printed row's cells as the YAML files print them. The same runs export to the same bytes, and
nothing local leaves the machine."""

import hashlib
import json
import math
import re
import shutil
from pathlib import Path

import jsonschema
import pyarrow.parquet as pq
import pytest
import yaml

from physprobe.cli import main

from .conftest import REPO, UPSTREAM

SCHEMAS = UPSTREAM / "every_eval_ever"
LIMIT = 8
Z95 = 1.959963984540054


@pytest.fixture(scope="module")
def validators():
    def make(name):
        schema = json.loads((SCHEMAS / name).read_text())
        jsonschema.Draft7Validator.check_schema(schema)
        return jsonschema.Draft7Validator(schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)

    return make("eval.schema.json"), make("instance_level_eval.schema.json")


@pytest.fixture(scope="module")
def runs(built_all, benchmark_texts, tiny_model, tmp_path_factory):
    """A causal card run (every benchmark the family takes), a Text2Afford NLI run and a NEWTON run sampled twice."""
    root = tmp_path_factory.mktemp("eee_runs")
    # a causal model whose name NEWTON's released scripts decode by sampling (their falcon class, top_k=10)
    causal, nli = tiny_model("causal", benchmark_texts, name="tiny-falcon"), tiny_model("nli", benchmark_texts, name="nli")
    common = ["--limit", str(LIMIT), "--data", str(built_all)]
    assert main(["score", "--model", str(causal), "--benchmark", "all", "--out", str(root / "card"), *common]) == 0
    assert main(["score", "--model", str(nli), "--benchmark", "text2afford", "--out", str(root / "nli-t2a"), *common]) == 0
    assert main(["score", "--model", str(causal), "--benchmark", "newton", "--config", "track1", "--decoding", "released",
                 "--samples", "2", "--seed", "3", "--out", str(root / "sampled"), *common]) == 0  # fmt: skip
    return root, [root / "card", root / "nli-t2a", root / "sampled"]


@pytest.fixture(scope="module")
def exported(runs, tmp_path_factory):
    root, folders = runs
    out = tmp_path_factory.mktemp("eee") / "data"
    assert main(["export", "every-eval-ever", *map(str, folders), "--out", str(out), "--organization", "physprobe tests"]) == 0
    return out


def records(out: Path) -> list[tuple[Path, dict]]:
    return [(path, json.loads(path.read_text())) for path in sorted(out.rglob("*.json")) if not path.name.startswith(".")]


def samples_of(out: Path, record: dict) -> tuple[Path, list[dict]]:
    path = out / record["detailed_evaluation_results"]["file_path"].removeprefix("data/")
    return path, [json.loads(line) for line in path.read_text().splitlines()]


def run_folder(runs, record: dict) -> Path:
    """The run folder a record was exported from: its benchmark's, matched by the sampled decoding or the NLI family."""
    root, _ = runs
    benchmark, details = record["evaluation_id"].split("/")[0], record["evaluation_results"][0]["generation_config"]
    if "seed" in details["additional_details"]:
        return root / "sampled"
    return root / "nli-t2a" if record["model_info"]["additional_details"]["family"] == "nli" else root / "card" / benchmark


def declared_keys(benchmark: str) -> dict[str, str | None]:
    """Every metrics.json key the benchmark's paper_tables.yaml declares, with its n key (the first declaration)."""
    raw = yaml.safe_load((REPO / "dataset_scripts" / benchmark / "paper_tables.yaml").read_text())
    found = {}
    for table in raw["tables"]:
        for column in table["columns"]:
            keys = column.get("key") if isinstance(column.get("key"), list) else [column.get("key")]
            ns = column.get("n") if isinstance(column.get("n"), list) else [column.get("n")] * len(keys)
            for key, n in zip(keys, ns):
                if key is not None:
                    found.setdefault(key, n)
    return found


def lookup(data: dict, key: str):
    for part in key.split("."):
        if not isinstance(data, dict) or part not in data:
            return None
        data = data[part]
    return data


@pytest.mark.slow
@pytest.mark.xdist_group("every_eval_ever_runs")
@pytest.mark.timeout(1200)  # the module's runs are made in the first test's setup
def test_every_record_and_line_validates(exported, validators):
    aggregate, instance = validators
    found = records(exported)
    assert {path.parts[-4] for path, _ in found} == {"prost", "cccons", "newton", "text2afford"}
    for path, record in found:
        aggregate.validate(record)
        assert record["source_metadata"]["source_organization_name"] == "physprobe tests"
        samples, lines = samples_of(exported, record)
        assert samples.parent == path.parent and samples.name == path.stem + "_samples.jsonl"
        details, where = record["detailed_evaluation_results"], path.relative_to(exported).parts
        assert len(where) == 4 and where[0] == record["evaluation_id"].split("/")[0]
        assert details["file_path"] == f"data/{'/'.join(where[:3])}/{path.stem}_samples.jsonl"
        assert record["model_info"]["id"].startswith(where[2].split("_sha256")[0])
        assert details["checksum"] == hashlib.sha256(samples.read_bytes()).hexdigest()
        assert details["total_rows"] == len(lines) > 0
        for line in lines:
            instance.validate(line)
            assert line["evaluation_id"] == record["evaluation_id"] and line["model_id"] == record["model_info"]["id"]
            if "evaluation_result_id" in line:
                assert line["evaluation_result_id"] in {r["evaluation_result_id"] for r in record["evaluation_results"]}


@pytest.mark.slow
@pytest.mark.xdist_group("every_eval_ever_runs")
@pytest.mark.timeout(1200)  # the module's runs are made in the first test's setup
def test_figures_read_back_as_metrics_json(exported, runs):
    for _, record in records(exported):
        folder = run_folder(runs, record)
        metrics, info = json.loads((folder / "metrics.json").read_text()), json.loads((folder / "run.json").read_text())
        benchmark = info["spec"]["benchmark"]
        declared = declared_keys(benchmark)
        held = {key for key in declared if isinstance(lookup(metrics, key), (int, float))}
        results = {r["evaluation_result_id"]: r for r in record["evaluation_results"]}
        assert set(results) == held, benchmark
        assert (
            record["eval_library"]["name"] == "physprobe" and record["eval_library"]["version"] == info["versions"]["physprobe"]
        )
        for key, result in results.items():
            details, uncertainty = result["score_details"]["details"], result["score_details"]["uncertainty"]
            assert result["score_details"]["score"] == lookup(metrics, key)
            n = lookup(metrics, declared[key]) if declared[key] else None
            if n:
                assert details["n"] == str(n) and uncertainty["num_samples"] == n
            if n and "samples_mean" not in details:  # the report's Wilson interval, worked here from its formula
                p = min(max(lookup(metrics, key), 0.0), 1.0)
                centre, half = (
                    (p + Z95**2 / (2 * n)) / (1 + Z95**2 / n),
                    Z95 / (1 + Z95**2 / n) * math.sqrt(p * (1 - p) / n + Z95**2 / (4 * n * n)),
                )
                interval = uncertainty["confidence_interval"]
                assert interval["lower"] == pytest.approx(max(0.0, min(centre - half, p)))
                assert interval["upper"] == pytest.approx(min(1.0, max(centre + half, p)))
            config, _, figure = key.partition(".")
            spread = info["bootstrap"]["figures"].get(config, {}).get(figure)
            assert (spread is None) == ("standard_error" not in uncertainty)
            if spread is not None:
                assert uncertainty["standard_error"]["value"] == spread["stderr"]
                assert uncertainty["num_bootstrap_samples"] == info["bootstrap"]["iterations"]
            generation = result["generation_config"]["additional_details"]
            assert generation["protocol"] == info["spec"]["protocol"] and generation["protocol_source"] == info["protocol_source"]
            data, revisions = result["source_data"]["additional_details"], info["config_revisions"]
            if config in revisions:
                assert data["revision"] == revisions[config]
            else:  # a pooled figure (CConS nocontext, NEWTON track2): each pooled config's revision
                assert data["revision"] == ",".join(f"{m}={revisions[m]}" for m in data["pools"].split(","))
        cards = [r for r in results.values() if "card_figure" in r["metric_config"]["additional_details"]]
        assert cards, benchmark  # the card's headline figures are among them


@pytest.mark.slow
@pytest.mark.xdist_group("every_eval_ever_runs")
@pytest.mark.timeout(1200)  # the module's runs are made in the first test's setup
def test_lines_read_back_as_predictions(exported, runs):
    for _, record in records(exported):
        folder = run_folder(runs, record)
        rows = pq.read_table(folder / "predictions.parquet").to_pylist()
        _, lines = samples_of(exported, record)
        by_row = {}
        for line in lines:
            by_row.setdefault((line["metadata"]["config"], int(line["metadata"]["row"])), []).append(line)
        scored = [r for r in rows if r["status"] != "excluded"]
        assert len(by_row) <= len(scored) and len(by_row) >= 1
        generates = "max_tokens" in record["evaluation_results"][0]["generation_config"].get("generation_args", {})
        for row in scored:
            found = by_row.get((row["config"], row["row"]))
            if found is None:  # a question no figure scores (Text2Afford: nothing to rank)
                labels = json.loads(row["row_json"])["labels"]
                assert not (1 in labels and 0 in labels)
                continue
            first = found[0]
            assert first["input"]["raw"] == row["row_json"]
            assert json.loads(first["metadata"]["reference"]) == row["reference"]
            assert int(first["metadata"]["prediction"]) == row["prediction"] and first["metadata"]["status"] == row["status"]
            prompts = row["prompts"]
            assert first["input"]["formatted"] == (
                prompts[0] if len(prompts) == 1 else json.dumps(prompts, ensure_ascii=False, separators=(",", ":"))
            )
            if generates:
                draws = row.get("draws_generated") or [row["generated"]]
                assert [line["output"]["raw"] for line in found] == [[d] if isinstance(d, str) else d for d in draws]
                assert [int(line["metadata"]["prediction"]) for line in found] == (
                    row.get("draws_prediction") or [row["prediction"]]
                )
            else:
                values = [float(text) for text in first["output"]["raw"]]
                assert len(values) == len(row["scores"])
                assert all((math.isnan(a) and math.isnan(b)) or a == b for a, b in zip(values, row["scores"]))
            if row["status"] == "decided" and "labels" not in json.loads(row["row_json"]):
                assert first["evaluation"]["is_correct"] == (row["prediction"] in row["reference"])
            if "labels" not in json.loads(row["row_json"]) and row["status"] != "decided":
                assert first["evaluation"]["score"] == 0.0


@pytest.mark.slow
@pytest.mark.xdist_group("every_eval_ever_runs")
@pytest.mark.timeout(1200)  # the module's runs are made in the first test's setup
def test_same_runs_same_bytes(exported, runs, tmp_path):
    _, folders = runs
    again = tmp_path / "again"
    assert main(["export", "every-eval-ever", *map(str, folders), "--out", str(again), "--organization", "physprobe tests"]) == 0
    files = sorted(p.relative_to(exported) for p in exported.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(again) for p in again.rglob("*") if p.is_file())
    assert all((exported / f).read_bytes() == (again / f).read_bytes() for f in files)


@pytest.mark.slow
@pytest.mark.xdist_group("every_eval_ever_runs")
@pytest.mark.timeout(1200)  # the module's runs are made in the first test's setup
def test_nothing_local_and_model_id(exported, runs, tmp_path):
    root, folders = runs
    models = {json.loads((folder / "spec.json").read_text())["model"] for folder in (root / "card" / "prost", *folders[1:])}
    local = [str(root), str(Path.home()) + "/", *models, *{str(Path(m).parent) for m in models}]
    assert len(models) == 2 and all(Path(m).is_absolute() for m in models)
    for path in exported.rglob("*"):
        if path.is_file():
            assert not [text for text in local if text in path.read_text()], path
    ids = {record["model_info"]["id"] for _, record in records(exported)}
    assert all(re.fullmatch(r"(tiny-falcon|nli)@sha256:[0-9a-f]{12}", i) for i in ids), ids
    named = tmp_path / "named"
    assert main(["export", "every-eval-ever", str(root / "card"), "--model-id", "me/tiny-gpt", "--out", str(named)]) == 0
    assert {p.relative_to(named).parts[1:3] for p in named.rglob("*.json") if not p.name.startswith(".")} == {("me", "tiny-gpt")}


@pytest.mark.slow
@pytest.mark.xdist_group("every_eval_ever_runs")
@pytest.mark.timeout(1200)  # the module's runs are made in the first test's setup
def test_refusals(runs, tmp_path, capsys):
    root, _ = runs
    assert main(["export", "every-eval-ever", "--out", str(tmp_path / "x")]) == 2
    assert "give run folders (RUNS), --papers, or both" in capsys.readouterr().err
    assert main(["export", "every-eval-ever", str(root / "card"), str(root / "nli-t2a"), "--model-id", "me/one",
                 "--out", str(tmp_path / "y")]) == 2  # fmt: skip
    assert "names one model" in capsys.readouterr().err and not (tmp_path / "y").exists()
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    assert main(["export", "every-eval-ever", "--papers", "--out", str(foreign)]) == 2
    assert "exists and is not a physprobe output (it holds notes.txt)" in capsys.readouterr().err
    assert (foreign / "notes.txt").read_text() == "mine" and len(list(foreign.iterdir())) == 1
    copy = tmp_path / "tampered"
    shutil.copytree(root / "card" / "prost", copy, symlinks=True)
    (copy / "metrics.json").write_text((copy / "metrics.json").read_text().replace('"n"', '"n" ', 1))
    assert main(["export", "every-eval-ever", str(copy), "--out", str(tmp_path / "z")]) == 2
    err = capsys.readouterr().err
    assert "metrics.json changed since physprobe score wrote it" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "z").exists()


def test_papers_round_trip_to_the_printed_cells(tmp_path, validators, monkeypatch, capsys):
    aggregate, _ = validators
    out = tmp_path / "papers"
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "yesterday")
    assert main(["export", "every-eval-ever", "--papers", "--out", str(out)]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "physprobe: error: SOURCE_DATE_EPOCH='yesterday' is not a Unix time in whole seconds; set it to one, or unset it"
    ]
    assert not out.exists()
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1767225600")
    assert main(["export", "every-eval-ever", "--papers", "--out", str(out)]) == 0
    found = records(out)
    expected = {}
    for folder in sorted((REPO / "dataset_scripts").iterdir()):
        if (folder / "paper_tables.yaml").is_file():
            raw = yaml.safe_load((folder / "paper_tables.yaml").read_text())
            for table in raw["tables"]:
                names = [str(c["name"]) for c in table["columns"]]
                for index, row in enumerate(table.get("rows") or []):
                    expected[(folder.name, table["id"], index)] = (row["model"], dict(zip(names, row["cells"])), table["columns"])
    assert len(found) == len(expected) > 100
    for path, record in found:
        aggregate.validate(record)
        details = record["source_metadata"]["additional_details"]
        assert record["source_metadata"]["source_type"] == "documentation" and record["retrieved_timestamp"] == "1767225600"
        model, cells, columns = expected[(path.parts[-4], details["table_id"], int(details["row_index"]))]
        assert record["model_info"]["name"] == model and json.loads(details["printed_cells"]) == cells
        numbers = {}
        for column in columns:
            parts = column.get("parts", ["value"])
            pieces = (cells[str(column["name"])] or "").split(" / ")
            for part, piece in zip(parts, pieces + [""] * (len(parts) - len(pieces))):
                match = re.match(r"\s*(-?\d+(?:\.\d+)?)", piece)
                if match:
                    numbers[(str(column["name"]), part if len(parts) > 1 else None)] = float(match.group(1))
        read = {(r["metric_config"]["additional_details"]["column"], r["metric_config"]["additional_details"].get("part")):
                r["score_details"]["score"] for r in record["evaluation_results"]}  # fmt: skip
        assert read == numbers, (path, model)
        for r in record["evaluation_results"]:
            assert r["score_details"]["details"]["printed"] == cells[r["metric_config"]["additional_details"]["column"]]
    again = tmp_path / "again"
    assert main(["export", "every-eval-ever", "--papers", "--out", str(again)]) == 0
    assert [p.read_bytes() for p in sorted(out.rglob("*.json"))] == [p.read_bytes() for p in sorted(again.rglob("*.json"))]
