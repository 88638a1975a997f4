"""The JSON Schema of run.json and metrics.json that physprobe ships (``physprobe/record/schemas/``) and publishes with
runs: read from the record's own types, it holds what ``physprobe score`` writes and refuses what ``load`` refuses."""

import json

import jsonschema
import pytest

from physprobe.record import run_record

from .run_folders import write_run

SHIPPED = run_record.SCHEMA_FOLDER


def _validators() -> dict:
    return {
        name: jsonschema.Draft202012Validator(json.loads((SHIPPED / name).read_text())) for name in run_record.SCHEMAS.values()
    }


def test_the_shipped_schemas_are_the_records_types():
    for name, schema in run_record.json_schemas().items():
        jsonschema.Draft202012Validator.check_schema(schema)
        assert json.loads((SHIPPED / name).read_text()) == schema, f"{name}: write it again from run_record.json_schemas()"


def test_a_run_folder_as_written_is_valid_and_a_broken_one_is_not(tmp_path):
    run = write_run(
        tmp_path / "run", "prost", "causal", {"mass": {"accuracy": 0.5, "n": 6}}, "released-gpt", model="gpt2", limit=6
    )
    validators = _validators()
    info, metrics = (json.loads((run / name).read_text()) for name in (run_record.RUN_JSON, run_record.METRICS_JSON))
    validators["run.schema.json"].validate(info)
    validators["metrics.schema.json"].validate(metrics)
    for broken in ({**info, "chat": {**info["chat"], "applied": "maybe"}}, {**info, "schema_version": 2},
                   {**info, "spec": {**info["spec"], "described": {}}}, {**info, "surprise": 1}):  # fmt: skip
        with pytest.raises(jsonschema.ValidationError):
            validators["run.schema.json"].validate(broken)
    with pytest.raises(jsonschema.ValidationError):
        validators["metrics.schema.json"].validate({"mass": {"accuracy": "0.5"}})


def test_the_metrics_schema_holds_each_figure_to_its_declared_kind():
    """Made from the benchmarks' figure kinds: a fraction within 0-1, PROST's signed gaps within -1..1, counts whole."""
    metrics = _validators()["metrics.schema.json"]
    metrics.validate(
        {"default": {"n": 4, "accuracy": 0.5, "inverse_gap_by_group": {"mass": -0.5}, "by_group": {"mass": {"map": 1}}}}
    )
    for broken in ({"default": {"accuracy": 1.5}}, {"default": {"by_group": {"mass": {"accuracy": -0.1}}}},
                   {"default": {"inverse_gap_by_group": {"mass": -1.5}}}, {"default": {"n": 2.5}}, {"default": {"f1": 0.5}}):  # fmt: skip
        with pytest.raises(jsonschema.ValidationError):
            metrics.validate(broken)
