"""The run record's types (``physprobe.record``): a folder of the previous schema (3) read through its migration, figure
ranges from the kind the benchmark declares (not from the key's name), and predictions.parquet's lines held to their
type. The schema-3 folder is written here by hand, field by field, as physprobe's schema 3 wrote it."""

import hashlib
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from physprobe.cli import main
from physprobe.errors import RunRecordError
from physprobe.protocols import RUN_FIGURES, Kind
from physprobe.record import figures, run_record

from .run_folders import write_run

SPEC_3 = {  # spec.json and run.json's spec as schema 3 wrote them (a greedy run: no decoding, samples or seed)
    "backend": "hf", "benchmark": "prost", "bootstrap_iters": 0, "chunk": 256, "command": ["physprobe", "score"],
    "configs": ["default"], "family": "causal", "label": None, "limit": 4, "method": "causal", "model": "gpt2",
    "model_identity": {}, "out": "runs/gpt2-prost", "processes": 1, "protocol": "released-gpt", "sends": "MeanTokens",
    "data": {"benchmark": "prost", "config_names": ["default"], "path": "data/prost", "revision": None},
    "settings": {"batch_size": None, "chat": {"mode": "off", "system_instruction": None, "template": None}, "device": None,
                 "dtype": None, "family": "causal", "gguf_file": None, "model": "gpt2", "model_args": {}, "truncate": False},
}  # fmt: skip
RUN_3 = {  # run.json of schema 3: every field it had, no figure kinds
    "schema_version": 3, "spec": SPEC_3, "protocol_source": "PROST §4", "backend": {"name": "hf", "gguf_file": None},
    "chat": {"applied": False, "system_instruction": None, "template": None, "template_sha256": None},
    "config_revisions": {"default": "sha256:0"}, "scored_now": 4, "versions": {"physprobe": "0.1.0"},
    "started": "2026-11-25T00:00:00Z", "timings": {"configs_s": {"default": 1.5}, "load_model_s": 0.5, "total_s": 2.0},
    "bootstrap": {"figures": {}, "iterations": 0, "seed": 1234}, "headline": {"default": ["macro_accuracy", 0.5]},
    "baselines": {},
}  # fmt: skip
METRICS = {"default": {"n": 4, "undecided": 0, "accuracy": 0.5, "macro_accuracy": 0.5, "inverse_gap": 0.25,
                       "inverse_gap_by_group": {"mass": -0.25}, "by_group": {"mass": {"accuracy": 0.5, "n": 4}}}}  # fmt: skip


def _line_3(row: int, prediction: int, label: int) -> dict:
    """A line of predictions.parquet as schema 3 wrote it (a PROST row scored by mean token log-probability)."""
    data = {"A": "coin", "B": "egg", "C": "leaf", "D": "brick", "context": "A coin and an egg fall.", "ex_question": "",
            "group": "mass", "label": label, "name": "mass_1_a", "question": "The [MASK] is heavier."}  # fmt: skip
    content = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return {"config": "default", "row": row, "status": "decided", "prediction": prediction, "scores": [-1.0, -2.0, -3.0, -4.0],
            "reference": [label], "generated": None, "generated_tokens": None, "prompts": ["A coin and an egg fall."] * 4,
            "prompt_tokens": [7, 7, 7, 7], "row_json": content, "row_sha256": hashlib.sha256(content.encode()).hexdigest()}  # fmt: skip


def _folder_of_schema_3(folder):
    folder.mkdir()
    for name, data in (("spec.json", SPEC_3), ("run.json", RUN_3), ("metrics.json", METRICS)):
        (folder / name).write_text(json.dumps(data, indent=2, sort_keys=True))
    lines = [_line_3(0, 0, 0), _line_3(1, 1, 1), _line_3(2, 0, 1), _line_3(3, 1, 0)]
    pq.write_table(pa.Table.from_pylist(lines), folder / "predictions.parquet")
    return folder


def test_a_schema_3_folder_is_read_through_its_migration_and_reported(tmp_path):
    folder = _folder_of_schema_3(tmp_path / "old")
    record = run_record.load(folder)
    assert record.schema_version == 4 and record.spec.model == "gpt2" and record.metrics == METRICS
    assert record.figure_kinds["inverse_gap"] is Kind.DIFFERENCE and record.figure_kinds["macro_accuracy"] is Kind.FRACTION
    found = record.config_figures("default")
    assert found["default.inverse_gap_by_group.mass"] == figures.Figure(-0.25, Kind.DIFFERENCE, 4)
    assert found["default.by_group.mass.accuracy"] == figures.Figure(0.5, Kind.FRACTION, 4)
    assert json.loads((folder / "run.json").read_text())["schema_version"] == 3  # read, never rewritten
    assert main(["report", str(folder), "--out", str(tmp_path / "report")]) == 0
    assert "gpt2" in (tmp_path / "report" / "report.md").read_text()


def test_the_migration_adds_only_the_kinds_and_the_version(tmp_path):
    """run.json of schema 3 and the same run written now differ by the schema version and the figure kinds alone."""
    old = run_record.load(_folder_of_schema_3(tmp_path / "old"))
    now = write_run(tmp_path / "now", "prost", "causal", METRICS, "released-gpt", spec=old.spec, protocol_source="PROST §4",
                    scored_now=4, timings=old.timings, headline=old.headline)  # fmt: skip
    written = json.loads((now / "run.json").read_text())
    assert {k: v for k, v in written.items() if k not in ("schema_version", "figure_kinds")} == {
        k: v for k, v in RUN_3.items() if k != "schema_version"
    }
    assert written["schema_version"] == 4 and written["figure_kinds"]["accuracy"] == "fraction"


def test_a_schema_without_a_migration_is_one_line_naming_the_fix(tmp_path):
    folder = _folder_of_schema_3(tmp_path / "older")
    (folder / "run.json").write_text(json.dumps({**RUN_3, "schema_version": 2}))
    with pytest.raises(RunRecordError, match=r"schema_version is 2: the folder was written by an earlier physprobe, "
                                             r"which this one \(schema 4, reading 3 and later\) does not read; score"):  # fmt: skip
        run_record.load(folder)
    (folder / "run.json").write_text(json.dumps({**RUN_3, "spec": {**SPEC_3, "benchmark": "nope"}}))
    with pytest.raises(RunRecordError, match="schema 3 cannot be read as 4: its benchmark 'nope' declares no figure kinds"):
        run_record.load(folder)


def test_a_figures_range_comes_from_its_declared_kind_not_its_name():
    kinds = {**RUN_FIGURES, "accuracy": Kind.PERCENT, "f1": Kind.FRACTION}
    assert figures.read({"c": {"accuracy": 75.0, "n": 8}}, kinds, "m.json")["c.accuracy"] == figures.Figure(75.0, Kind.PERCENT, 8)
    with pytest.raises(RunRecordError, match=r"^m.json: c.f1 is 1.5, outside 0-1 for a fraction; score the run again$"):
        figures.read({"c": {"f1": 1.5}}, kinds, "m.json")
    with pytest.raises(RunRecordError, match=r"c.accuracy is 101.0, outside 0-100 for a percent"):
        figures.read({"c": {"accuracy": 101.0}}, kinds, "m.json")
    with pytest.raises(RunRecordError, match=r"c.recall is 0.5, a figure of no kind the benchmark declares"):
        figures.read({"c": {"recall": 0.5}}, kinds, "m.json")
    with pytest.raises(RunRecordError, match=r"c.n is 2.5, not a count"):
        figures.read({"c": {"n": 2.5}}, kinds, "m.json")


def test_a_benchmarks_declared_kind_holds_in_a_written_run(tmp_path):
    """PROST declares its gaps signed differences (-1..1): -0.5 is written, -1.5 refused before anything is."""
    write_run(tmp_path / "ok", "prost", "causal", {"default": {"n": 4, "inverse_gap": -0.5}}, "released-gpt")
    with pytest.raises(RunRecordError, match=r"default.inverse_gap is -1.5, outside -1..1 for a difference"):
        write_run(tmp_path / "bad", "prost", "causal", {"default": {"n": 4, "inverse_gap": -1.5}}, "released-gpt")
    assert not (tmp_path / "bad" / "run.json").exists()


def test_a_predictions_line_of_the_wrong_code_is_one_line_naming_the_row(tmp_path):
    run = write_run(tmp_path / "run", "prost", "causal", METRICS, "released-gpt")
    line = {"config": "default", "row": 3, "status": "decided", "prediction": -1, "scores": [-1.0, float("nan")],
            "reference": [0], "generated": None, "generated_tokens": None, "prompts": ["A coin falls."], "prompt_tokens": [4]}  # fmt: skip
    pq.write_table(pa.Table.from_pylist([{**line, "prediction": 1}]), run / "predictions.parquet")
    assert run_record.predictions(run)[0]["prediction"] == 1
    pq.write_table(pa.Table.from_pylist([line]), run / "predictions.parquet")
    with pytest.raises(RunRecordError, match=r"predictions.parquet: row 3 of default: status 'decided' is written with "
                                             r"prediction an option \(0 or more\), not -1; score the run again$"):  # fmt: skip
        run_record.predictions(run)
