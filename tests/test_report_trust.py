"""``physprobe report`` reads only what ``physprobe score`` wrote: each run's files against its marker's sha256 (as
``physprobe publish`` checks them), each predictions row against its ``row_sha256``, each column of the type written;
anything else is one line naming the run's file (and row or column), never a traceback nor a silent recomputation.
Also its arguments' bounds (``--resamples``), ``--reference`` however a run is named, a full disk, and the scorer's
``--num-processes`` and ``--samples`` bounds."""

from __future__ import annotations

import errno
import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from physprobe.cli import main
from physprobe.data.dataset_folder import data_file
from physprobe.record import run_folder, run_record
from physprobe.run.samples import Sample

from .run_folders import record
from .test_fault_suite import one_error_line
from .test_publish_faults import rehash
from .test_upload import upload

N = 12  # questions of PROST's default config each run answers


@pytest.fixture(scope="module")
def mass_rows(built_all) -> list[dict]:
    return pq.read_table(built_all / "prost" / data_file("default", "test")).to_pylist()[:N]


def prost_run(folder: Path, rows: list[dict], right: int, label: str) -> Path:
    """A finished PROST run of ``default`` whose first ``right`` answers are the gold one and the rest another option."""
    samples = [Sample("default", i, row, (row["label"],), "decided", row["label"] if i < right else (row["label"] + 1) % 4,
                      (-1.0, -2.0, -3.0, -4.0), 4) for i, row in enumerate(rows)]  # fmt: skip
    groups = {}
    for sample in samples:
        groups.setdefault(sample.data["group"], []).append(sample.prediction == sample.reference[0])
    by_group = {g: {"accuracy": sum(v) / len(v), "n": len(v)} for g, v in groups.items()}
    macro = sum(g["accuracy"] for g in by_group.values()) / len(by_group)
    metrics = {"default": {"by_group": by_group, "macro_accuracy": macro, "n": len(rows), "undecided": 0}}
    made = record("prost", "causal", metrics, model="gpt2", label=label, protocol="released-gpt", limit=len(rows))
    run_record.write(folder, run_folder.owner("gpt2", "prost", False), made, samples)
    return folder


@pytest.fixture
def runs(tmp_path, mass_rows) -> list[Path]:
    return [prost_run(tmp_path / "a", mass_rows, 6, "a"), prost_run(tmp_path / "b", mass_rows, 9, "b")]


def report(*args: str) -> int:
    return main(["report", *args])


def rewritten(run: Path, change, vouch: bool = True) -> Path:
    """``run``'s predictions rewritten by ``change`` (a table to a table); with ``vouch``, its marker made to vouch
    for them (what a forger does), so that only the rows can tell."""
    path = run / "predictions.parquet"
    pq.write_table(change(pq.read_table(path)), path)
    if vouch:
        rehash(run, "predictions.parquet")
    return run


def with_row(table: pa.Table, index: int, **values) -> pa.Table:
    rows = table.to_pylist()
    rows[index].update(values)
    return pa.Table.from_pylist(rows, schema=table.schema)


def test_the_untouched_runs_are_compared(runs, tmp_path):
    assert report(*map(str, runs), "--out", str(tmp_path / "report")) == 0
    (section,) = json.loads((tmp_path / "report" / "differences.json").read_text())
    assert section["reference"] == "a" and [c["other"] for c in section["comparisons"]] == ["b"]


def test_a_file_edited_since_scoring_is_refused_naming_run_and_file(runs, tmp_path, capsys):
    # issue 61: an edited row_json made the Differences recompute the reference's accuracy; nothing noticed
    rewritten(runs[0], lambda t: with_row(t, 0, row_json=json.dumps({"label": 0})), vouch=False)
    assert report(*map(str, runs), "--out", str(tmp_path / "report")) == 2
    one_error_line(capsys.readouterr().err, f"{runs[0] / 'predictions.parquet'} changed since physprobe score wrote it",
                   f"--out {runs[0]}")  # fmt: skip
    assert not (tmp_path / "report").exists()
    (runs[1] / "metrics.json").write_text(
        json.dumps({"default": {"macro_accuracy": 1.0, "n": N, "undecided": 0}})
    )  # a better figure
    assert report(str(runs[1]), "--out", str(tmp_path / "report")) == 2
    one_error_line(capsys.readouterr().err, f"{runs[1] / 'metrics.json'} changed since physprobe score wrote it")


def test_a_row_edited_with_its_hash_left_is_refused_naming_the_row(runs, tmp_path, capsys):
    original = pq.read_table(runs[0] / "predictions.parquet").to_pylist()[3]["row_json"]
    edited = json.dumps({**json.loads(original), "label": 0}, sort_keys=True, separators=(",", ":"))
    rewritten(runs[0], lambda t: with_row(t, 3, row_json=edited))
    assert report(*map(str, runs), "--out", str(tmp_path / "report")) == 2
    one_error_line(capsys.readouterr().err, f"{runs[0] / 'predictions.parquet'}: row 3 of config default: its row_json is not "
                   "the row its row_sha256 records", "score the run again")  # fmt: skip


def _text_rows(table: pa.Table) -> pa.Table:
    return table.set_column(
        table.schema.get_field_index("row"), "row", pa.array([str(r) for r in table.column("row").to_pylist()])
    )


MALFORMED = {  # (change, what the line says)
    "row of text": (_text_rows, "column row holds string, not the whole number physprobe score writes"),
    "null row_json": (lambda t: with_row(t, 2, row_json=None), "row 2 of config default: column row_json is null"),
    "row_json not JSON": (lambda t: with_row(t, 2, row_json="{not json"), "row 2 of config default: column row_json is not JSON"),
    "no status column": (lambda t: t.drop_columns(["status"]), "column status is missing (physprobe score writes it)"),
    "unknown status": (lambda t: with_row(t, 1, status="great"), "row 1 of config default: column status is 'great', not one of"),
}


@pytest.mark.parametrize("fault", MALFORMED)
def test_a_malformed_predictions_column_is_one_line_naming_file_and_column(fault, runs, tmp_path, capsys):
    change, says = MALFORMED[fault]
    rewritten(runs[1], change)
    assert report(*map(str, runs), "--out", str(tmp_path / "report")) == 2
    err = capsys.readouterr().err
    one_error_line(err, f"{runs[1] / 'predictions.parquet'}: {says}")
    assert "Traceback" not in err and not (tmp_path / "report").exists()


def test_a_downloaded_run_without_marker_has_its_rows_checked(runs, tmp_path, capsys):
    assert upload.main(["--runs", *map(str, runs), "--runs-repo", "r", "--out", str(tmp_path / "hub")]) == 0
    downloaded = sorted((tmp_path / "hub" / "runs" / "r" / "runs").iterdir())
    assert report(*map(str, downloaded), "--out", str(tmp_path / "report")) == 0  # no marker: nothing to vouch, rows fine
    rewritten_rows = pq.read_table(downloaded[0] / "predictions.parquet")
    pq.write_table(with_row(rewritten_rows, 0, row_json='{"label":0}'), downloaded[0] / "predictions.parquet")
    assert report(*map(str, downloaded), "--out", str(tmp_path / "report2")) == 2
    one_error_line(capsys.readouterr().err, f"{downloaded[0] / 'predictions.parquet'}: row 0 of config default: its row_json")


# --- the report's arguments ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("resamples", ["1", "99", "100001", str(10**7)])
def test_resamples_out_of_bounds_are_one_line(resamples, runs, tmp_path, capsys):
    # issue 61: --resamples 1 ended in matplotlib's "'xerr' must not contain negative values"; 10**7 was accepted
    assert report(*map(str, runs), "--out", str(tmp_path / "report"), "--resamples", resamples) == 2
    one_error_line(capsys.readouterr().err, f"--resamples {resamples}: the Differences sections take 100 to 100000")
    assert not (tmp_path / "report").exists()


def test_a_reference_given_absolute_names_a_run_given_relative(runs, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert report("a", "b", "--reference", str(tmp_path / "b"), "--out", "report") == 0
    (section,) = json.loads((tmp_path / "report" / "differences.json").read_text())
    assert section["reference"] == "b"
    assert report(str(tmp_path / "a"), str(tmp_path / "b"), "--reference", "./b/", "--out", "report") == 0
    (section,) = json.loads((tmp_path / "report" / "differences.json").read_text())
    assert section["reference"] == "b"


def test_a_reference_of_another_benchmark_is_one_line(runs, tmp_path, capsys):
    from .test_publish_faults import NEWTON, scored

    newton = scored(tmp_path / "newton", "newton", NEWTON)
    assert report(*map(str, runs), str(newton), "--reference", str(newton), "--out", str(tmp_path / "report")) == 2
    one_error_line(capsys.readouterr().err, f"--reference {str(newton)!r} names run gpt2 of newton, which has no other run "
                   "to compare it with; the Differences sections are those of prost")  # fmt: skip


def test_nothing_tested_is_said_so_not_adjusted_over_0(tmp_path, mass_rows):
    runs = [prost_run(tmp_path / "a", mass_rows, 6, "a"), prost_run(tmp_path / "b", mass_rows, 7, "b")]  # 1 unit differs
    assert report(*map(str, runs), "--out", str(tmp_path / "report")) == 0
    text = (tmp_path / "report" / "report.md").read_text()
    assert "0 tested differences" not in text and "over all 0" not in text
    assert "no difference of the report is tested (too few units differ), so no p (Holm)" in text


# --- a full disk --------------------------------------------------------------------------------------------------------------


def test_a_full_disk_names_the_report_file_it_could_not_write(runs, tmp_path, monkeypatch, capsys):
    written = Path.write_text

    def full(self, text, *args, **kwargs):
        if self.name == "report.md":
            raise OSError(errno.ENOSPC, "No space left on device")  # as a write() fails: no file named
        return written(self, text, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", full)
    assert report(*map(str, runs), "--out", str(tmp_path / "report")) == 1
    err = capsys.readouterr().err
    assert (
        err
        == f"physprobe: error: {tmp_path / 'report' / 'report.md'}: No space left on device; free some space or choose another --out\n"
    )
    assert not (tmp_path / "report").exists()


def test_a_full_disk_while_publishing_is_one_line_per_error_without_temporary_paths(runs, tmp_path, monkeypatch, capsys):
    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    wrote = Path.write_bytes
    monkeypatch.setattr(shutil, "copyfile", full)  # every copy of a figure fails, as a write of one does
    monkeypatch.setattr(shutil, "copy2", full)
    monkeypatch.setattr(Path, "write_bytes", lambda self, data: full() if self.suffix == ".png" else wrote(self, data))
    assert upload.main(["--runs", *map(str, runs), "--runs-repo", "r", "--out", str(tmp_path / "hub")]) == 1
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert lines and all(line.startswith("upload.py: error: ") and "No space left on device" in line for line in lines), err
    assert f"{tmp_path / 'hub' / 'runs' / 'r' / 'figures'}/" in lines[0] and "staging" not in err and "[(" not in err
    assert not (tmp_path / "hub" / "runs" / "r").exists()


# --- the scorer's bounds ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("option, value, says", [("--num-processes", "0", "--num-processes must be at least 1, got 0"),
                                                 ("--samples", str(10**12), f"--samples {10**12}: give a whole number from 1 to 1000")])  # fmt: skip
def test_the_scorers_counts_are_bounded_in_one_line(option, value, says, built_all, tmp_path, capsys):
    assert main(["score", "--model", "gpt2", "--benchmark", "newton", "--config", "track1", "--data", str(built_all),
                 "--decoding", "released", option, value, "--out", str(tmp_path / "run")]) == 2  # fmt: skip
    one_error_line(capsys.readouterr().err, says)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("fails", ["report.md", "a figure"])
def test_a_full_disk_while_the_cards_report_is_drawn_names_the_published_file(fails, runs, tmp_path, monkeypatch, capsys):
    # the card's report is drawn in a temporary folder first: a write failing there names the repository's file it
    # becomes (the card, README.md, or figures/<name>), never the temporary folder
    from matplotlib.figure import Figure

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")  # as a write() fails: no file named

    written = Path.write_text
    if fails == "report.md":
        monkeypatch.setattr(
            Path, "write_text", lambda self, *a, **k: full() if self.name == "report.md" else written(self, *a, **k)
        )
    else:
        monkeypatch.setattr(Figure, "savefig", full)
    assert upload.main(["--runs", *map(str, runs), "--runs-repo", "r", "--out", str(tmp_path / "hub")]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    repo = tmp_path / "hub" / "runs" / "r"
    named = line.removeprefix("upload.py: error: ").removesuffix(
        ": No space left on device; free some space or choose another --out"
    )
    if fails == "report.md":
        assert named == str(repo / "README.md"), line
    else:
        assert Path(named).parent == repo / "figures" and named.endswith(".png"), line
    assert not repo.exists()
