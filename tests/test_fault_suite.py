"""The fault suite: every command that writes an output folder, under the same faults.

``COMMANDS`` is the table: a command that writes a folder is added there and inherits every case (a foreign
folder at its target, another output's folder, a symlinked target, leftovers of killed runs beside it, a
SIGKILL and a Ctrl-C at the swap). Then the single faults: symlinked lock and cache, broken run files for
``report``, the score inputs that cannot give a number, and the data-parallel launcher's processes.
Each case asserts the exit status, one line naming what is wrong, and nothing lost or left behind.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from physprobe.cli import main
from physprobe.data.dataset_folder import data_file
from physprobe.record import run_folder, run_record
from physprobe.run.samples import Sample
from physprobe.util.paths import MARKER, STAGING, TEMPORARY, Owner, mark

from . import tiny_models
from .conftest import REPO
from .run_folders import record, write_run


def tree_digest(folder: Path) -> str:
    """sha256 of every entry's relative path and bytes under ``folder`` (symlinks by their target)."""
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0")
        if path.is_symlink():
            digest.update(os.readlink(path).encode())
        elif path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


def results_digest(folder: Path) -> str:
    """``tree_digest`` without what differs between two runs of the same command on the same inputs: a run
    folder's lock, cache, run.json (timings, times) and the marker that hashes it; run.json must be there whenever
    metrics.json is."""
    assert (folder / "run.json").is_file() == (folder / "metrics.json").is_file()
    varying = ("run.lock", "run.json", MARKER) if (folder / "run.json").is_file() else ()
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.name not in varying and not path.name.startswith("cache."):
            digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def gone(pid: int, seconds: float = 20) -> bool:
    """Whether process ``pid`` ends (or is a zombie) within ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.1)
    return False


def load_upload():
    spec = importlib.util.spec_from_file_location("upload", REPO / "upload.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["upload"] = module
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class Command:
    """A command that writes one output folder: its arguments (from the suite's inputs and an output
    parent folder), the folder it writes, and an owner of another kind for that folder."""

    name: str
    argv: object  # (inputs, parent) -> list[str]
    target: object  # parent -> Path
    other: Owner
    entry: str = "physprobe"  # or "upload" (upload.py's main)
    slow: bool = False  # its kill test (three runs, one in a fresh process) takes over 10 s: marked slow (ctrl-c: the fast one)

    def run(self, inputs: dict, parent: Path) -> int:
        if self.entry == "upload":
            return load_upload().main(self.argv(inputs, parent))
        return main(self.argv(inputs, parent))


SPEC = ("name: sharp\nquestion: 'Which of {object1}, {object2} is sharp?'\n"
        "conditions: [{attribute: Sharpness, polarity: high, padding: 1}]\nmax_questions: 5\n")  # fmt: skip

COMMANDS = [
    Command("build", lambda i, o: ["build", "prost", "--out", str(o), "--source-dir", str(i["upstream"])],
            lambda o: o / "prost", Owner("challenge", {"name": "prost"})),
    Command("generate-cccons", lambda i, o: ["generate", "cccons", "--n", "20", "--out", str(o), "--source-dir", str(i["upstream"])],
            lambda o: o / "cccons_generated", Owner("challenge", {"name": "cccons_generated"})),
    Command("generate-newton", lambda i, o: ["generate", "newton", "--spec", str(i["spec"]), "--out", str(o), "--source-dir", str(i["upstream"])],
            lambda o: o / "sharp", Owner("build", {"benchmark": "sharp"})),
    Command("score", lambda i, o: ["score", "--model", str(i["model"]), "--benchmark", "prost", "--config", "mass", "--limit", "6",
                                   "--data", str(i["build"]), "--out", str(o / "run"), "--bootstrap-iters", "0"],
            lambda o: o / "run", Owner("run", {"model": "another/gpt2", "benchmark": "prost"})),
    Command("export", lambda i, o: ["export", "lm-eval", "--out", str(o / "tasks"), "--data", str(i["build"])],
            lambda o: o / "tasks", Owner("report", {})),
    Command("upload", lambda i, o: ["--out", str(o), "--only", "probe_accuracy"],
            lambda o: o / "spaces" / "probe_accuracy", Owner("lm-eval", {}), entry="upload"),
    Command("upload-datasets", lambda i, o: ["--out", str(o), "--only", "prost", "--source-dir", str(i["upstream"])],
            lambda o: o / "datasets" / "prost", Owner("lm-eval", {}), entry="upload", slow=True),
    Command("upload-runs", lambda i, o: ["--runs", str(i["runs"]), "--runs-repo", "my-runs", "--out", str(o)],
            lambda o: o / "runs" / "my-runs", Owner("report", {}), entry="upload", slow=True),
]  # fmt: skip
IDS = [c.name for c in COMMANDS]


@pytest.fixture(scope="module")
def inputs(built_all, upstream_dir, tiny_model, tmp_path_factory):
    folder = tmp_path_factory.mktemp("suite")
    spec = folder / "spec.yaml"
    spec.write_text(SPEC)
    rows = pq.read_table(built_all / "prost" / data_file("default", "test")).to_pylist()[::40]
    texts = [f"{r['context']} {r['question']} {r['A']} {r['B']} {r['C']} {r['D']}" for r in rows]
    model = tiny_model("causal", texts, "gpt")
    runs = folder / "runs" / "gpt2"  # a parent of finished runs, for upload --runs
    figures = {"mass": {"accuracy": 0.5, "n": 2, "undecided": 0}}
    run_record.write(runs / "prost", run_folder.owner("gpt2", "prost", False), record("prost", "causal", figures, model="gpt2"),
                     [Sample("mass", i, {}, (0,), "decided", 0, (-1.0, -2.0), 2) for i in range(2)])  # fmt: skip
    return {"upstream": upstream_dir, "build": built_all, "spec": spec, "model": model, "runs": runs}


def one_error_line(err: str, *parts: str) -> None:
    """``err`` is one error line holding ``parts`` (progress bars aside: the tests' stderr is not a terminal)."""
    lines = [line.split("\r")[-1] for line in err.splitlines()]
    lines = [line for line in lines if line.strip() and not re.search(r"\d+%\|", line)]
    assert len(lines) == 1 and "error: " in lines[0] and all(p in lines[0] for p in parts), err


# --- every command ------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", COMMANDS, ids=IDS)
def test_a_foreign_folder_at_the_target_is_never_touched(command, inputs, tmp_path, capsys):
    target = command.target(tmp_path / "out")
    target.mkdir(parents=True)
    (target / "notes.txt").write_text("years of work")
    before = tree_digest(tmp_path)
    assert command.run(inputs, tmp_path / "out") == 2
    one_error_line(capsys.readouterr().err, str(target), "is not a physprobe output", "--out")
    assert tree_digest(tmp_path) == before


@pytest.mark.parametrize("command", COMMANDS, ids=IDS)
def test_another_outputs_folder_is_refused(command, inputs, tmp_path, capsys):
    target = command.target(tmp_path / "out")
    target.mkdir(parents=True)
    (target / "README.md").write_text("another output")
    mark(target, command.other)
    before = tree_digest(tmp_path)
    assert command.run(inputs, tmp_path / "out") == 2
    one_error_line(capsys.readouterr().err, str(target), f"holds {command.other.describe()}", "--out")
    assert tree_digest(tmp_path) == before


@pytest.mark.parametrize("command", COMMANDS, ids=IDS)
def test_a_symlinked_target_is_refused_and_its_folder_untouched(command, inputs, tmp_path, capsys):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "notes.txt").write_text("mine")
    target = command.target(tmp_path / "out")
    target.parent.mkdir(parents=True)
    target.symlink_to(elsewhere)
    before = tree_digest(tmp_path)
    assert command.run(inputs, tmp_path / "out") == 2
    one_error_line(capsys.readouterr().err, str(target), "symlink")
    assert tree_digest(tmp_path) == before


@pytest.mark.parametrize("command", COMMANDS, ids=IDS)
def test_a_file_physprobe_did_not_write_into_its_output_is_kept(command, inputs, tmp_path, capsys):
    assert command.run(inputs, tmp_path / "out") == 0
    target = command.target(tmp_path / "out")
    (target / "notes.txt").write_text("mine")
    before = tree_digest(tmp_path)
    status = command.run(inputs, tmp_path / "out")
    assert (target / "notes.txt").read_text() == "mine"
    if command.name == "score":  # a run folder grows in place and keeps what it did not write
        assert status == 0
        return
    assert status == 2
    one_error_line(capsys.readouterr().err, str(target), "holds notes.txt, which physprobe did not write there", "--out")
    assert tree_digest(tmp_path) == before
    (target / "notes.txt").unlink()
    written = next(p for p in sorted(target.rglob("*")) if p.is_file() and p.name != MARKER)
    written.write_bytes(written.read_bytes() + b"\n")  # a file physprobe wrote, changed since
    assert command.run(inputs, tmp_path / "out") == 2
    one_error_line(
        capsys.readouterr().err,
        f"holds {written.relative_to(target).as_posix()}, which physprobe did not write there (or which changed since)",
    )


def test_a_resume_keeps_the_users_folders_files_and_links_in_the_run_folder(inputs, tmp_path):
    run = COMMANDS[IDS.index("score")]
    out = tmp_path / "out"
    assert run.run(inputs, out) == 0
    folder = run.target(out)
    (folder / "analysis" / "figures").mkdir(parents=True)
    (folder / "analysis" / "figures" / "plot.png").write_bytes(b"\x89PNG mine")
    (folder / "analysis" / "link").symlink_to("figures/plot.png")
    (folder / "notes.txt").write_text("mine")
    (folder / "elsewhere").symlink_to(tmp_path)
    os.mkfifo(folder / "pipe")
    mine = ("analysis", "analysis/figures", "analysis/figures/plot.png", "analysis/link", "notes.txt", "elsewhere")

    def users_entries() -> dict:
        return {name: os.readlink(folder / name) if (folder / name).is_symlink() else
                (folder / name).read_bytes() if (folder / name).is_file() else (folder / name).is_dir() for name in mine}  # fmt: skip

    before, written = users_entries(), (folder / "run.json").stat().st_ino
    assert run.run(inputs, out) == 0  # a resume: everything cached, the results written again
    assert (folder / "run.json").stat().st_ino != written  # the folder was swapped for its next version
    assert users_entries() == before and (folder / "pipe").is_fifo()
    assert (folder / "elsewhere").is_symlink() and (folder / "analysis" / "link").is_symlink()  # links kept as links
    assert json.loads((folder / MARKER).read_text())["files"].keys() == {
        "metrics.json",
        "predictions.parquet",
        "run.json",
        "spec.json",
    }


def test_a_forged_marker_vouches_for_no_file_it_did_not_hash(inputs, tmp_path, capsys):
    run = write_run(
        tmp_path / "run", "prost", "causal", {"mass": {"accuracy": 0.5, "n": 6}}, "released-gpt", model="gpt2", limit=6
    )
    out = tmp_path / "report"
    out.mkdir()
    (out / "thesis.tex").write_text("years of work")
    (out / MARKER).write_text(json.dumps({"kind": "report", "of": {}, "files": {"thesis.tex": "0" * 64, "report.md": "1" * 64}}))
    assert main(["report", str(run), "--out", str(out)]) == 2
    one_error_line(capsys.readouterr().err, str(out), "holds thesis.tex, which physprobe did not write there")
    assert (out / "thesis.tex").read_text() == "years of work"


def test_one_report_writer_at_a_time_and_the_folder_matches_its_marker(inputs, tmp_path, capsys):
    from physprobe.util.folder_lock import FolderLock

    run = write_run(
        tmp_path / "run", "prost", "causal", {"mass": {"accuracy": 0.5, "n": 6}}, "released-gpt", model="gpt2", limit=6
    )
    out = tmp_path / "report"
    with FolderLock(tmp_path, ".report.lock", out, transient=True):  # another report being written there
        assert main(["report", str(run), "--out", str(out)]) == 2
    one_error_line(capsys.readouterr().err, f"{out} is in use by process {os.getpid()}")
    assert not out.exists() and not (tmp_path / ".report.lock").exists()
    for _ in range(2):
        assert main(["report", str(run), "--out", str(out)]) == 0
    listed = json.loads((out / MARKER).read_text())["files"]
    assert listed == {p.relative_to(out).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
                      for p in sorted(out.rglob("*")) if p.is_file() and p.name != MARKER}  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report", "run"]  # no lock or staging folder left beside it


@pytest.mark.parametrize("command", COMMANDS, ids=IDS)
def test_leftovers_of_killed_runs_are_removed_by_the_next_run(command, inputs, tmp_path):
    parent = command.target(tmp_path / "out").parent
    parent.mkdir(parents=True)
    dead_staging = parent / f".other{STAGING}999999999-ab"
    dead_staging.mkdir()
    (dead_staging / "half.parquet").write_bytes(b"PAR1")
    dead_file = parent / f".run.json{TEMPORARY}999999999-cd"
    dead_file.write_text("{")
    live = parent / f".busy{STAGING}{os.getpid()}-ef"  # a running command's staging folder stays
    live.mkdir()
    assert command.run(inputs, tmp_path / "out") == 0
    assert not dead_staging.exists() and not dead_file.exists() and live.is_dir()
    assert (command.target(tmp_path / "out") / MARKER).is_file()


KILL_SCRIPT = """
import os, signal, sys
import physprobe.util.paths as paths

where = sys.argv[1]
real = paths._exchange

def exchange(new, target):
    if where == "after":
        real(new, target)  # swapped; the old version not yet removed
    os.kill(os.getpid(), signal.SIGKILL)

paths._exchange = exchange
if sys.argv[2] == "upload":
    sys.path.insert(0, os.getcwd())
    import upload
    sys.exit(upload.main(sys.argv[3:]))
from physprobe.cli import main
sys.exit(main(sys.argv[3:]))
"""


@pytest.mark.parametrize("where", ["before", "after"])
@pytest.mark.parametrize("command", [pytest.param(c, id=c.name, marks=[pytest.mark.slow] if c.slow else []) for c in COMMANDS])
@pytest.mark.processes
def test_a_kill_at_the_swap_leaves_a_complete_version_and_the_next_run_cleans_up(command, where, inputs, tmp_path):
    out = tmp_path / "out"
    target = command.target(out)
    assert command.run(inputs, out) == 0
    first = results_digest(target)
    script = tmp_path / "kill.py"
    script.write_text(textwrap.dedent(KILL_SCRIPT))
    env = dict(os.environ, PYTHONPATH=str(REPO))
    result = subprocess.run([sys.executable, str(script), where, command.entry, *command.argv(inputs, out)],
                            capture_output=True, cwd=REPO, env=env)  # fmt: skip
    assert result.returncode == -signal.SIGKILL, result.stderr.decode()[-2000:]
    assert results_digest(target) == first  # the same inputs: the old or the new version, both complete and equal
    assert any(STAGING in p.name for p in target.parent.iterdir())  # the killed run's staging (or the old version)
    assert command.run(inputs, out) == 0
    assert not any(p.name.startswith(".") for p in target.parent.iterdir())


@pytest.mark.parametrize("command", COMMANDS, ids=IDS)
def test_ctrl_c_at_the_swap_is_one_line_and_keeps_the_previous_output(command, inputs, tmp_path, monkeypatch, capsys):
    from physprobe.util import paths

    out = tmp_path / "out"
    target = command.target(out)
    assert command.run(inputs, out) == 0
    before = results_digest(target)
    capsys.readouterr()

    def interrupted(staging, target):
        raise KeyboardInterrupt

    monkeypatch.setattr(paths, "replace_folder", interrupted)
    assert command.run(inputs, out) == 130
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and "interrupted" in err[0]
    assert results_digest(target) == before
    assert not any(p.name.startswith(".") for p in target.parent.iterdir())


# --- single faults: where outputs go -------------------------------------------------------------------


def test_export_into_a_project_folder_never_overwrites_its_readme(inputs, tmp_path, monkeypatch, capsys):
    project = tmp_path / "project"
    project.mkdir()
    (project / "README.md").write_text("# my project\n")
    monkeypatch.chdir(project)
    before = tree_digest(tmp_path)
    assert main(["export", "lm-eval", "--out", ".", "--data", str(inputs["build"])]) == 2
    one_error_line(capsys.readouterr().err, str(project), "is not a physprobe output")
    assert tree_digest(tmp_path) == before


def test_build_all_checks_every_target_before_changing_any(inputs, tmp_path, capsys):
    out = tmp_path / "out"
    shutil.copytree(inputs["build"] / "cccons", out / "cccons")
    (out / "prost").mkdir()
    (out / "prost" / "thesis.tex").write_text("years of work")
    before = tree_digest(out)
    assert main(["build", "all", "--out", str(out), "--source-dir", str(inputs["upstream"])]) == 2
    one_error_line(capsys.readouterr().err, str(out / "prost"))
    assert tree_digest(out) == before


def test_a_challenge_set_never_replaces_a_benchmark_build(inputs, tmp_path, capsys):
    out = tmp_path / "out"
    shutil.copytree(inputs["build"] / "prost", out / "prost")
    spec = tmp_path / "prost.yaml"
    spec.write_text(SPEC.replace("name: sharp", "name: prost"))
    before = tree_digest(out)
    args = ["generate", "newton", "--spec", str(spec), "--out", str(out), "--source-dir", str(inputs["upstream"])]
    assert main(args) == 2
    one_error_line(capsys.readouterr().err, "holds a build of benchmark prost, not a challenge of name prost")
    assert tree_digest(out) == before


def test_two_models_with_the_same_folder_name_do_not_share_a_run_folder(inputs, tmp_path, monkeypatch, capsys):
    for org in ("A", "B"):
        shutil.copytree(inputs["model"], tmp_path / org / "gpt")
    monkeypatch.chdir(tmp_path)
    args = ["--benchmark", "prost", "--config", "mass", "--limit", "4", "--data", str(inputs["build"]), "--bootstrap-iters", "0"]
    assert main(["score", "--model", "A/gpt", *args]) == 0
    before = tree_digest(tmp_path / "runs")
    capsys.readouterr()
    assert main(["score", "--model", "B/gpt", *args]) == 2
    one_error_line(capsys.readouterr().err, "runs/gpt-prost holds a run of", f"model {tmp_path / 'A' / 'gpt'}", "--out")
    assert tree_digest(tmp_path / "runs") == before


@pytest.mark.parametrize("name", ["run.lock", "cache.sqlite"])
def test_a_symlinked_lock_or_cache_is_refused_and_the_linked_file_untouched(name, inputs, tmp_path, capsys):
    run = COMMANDS[IDS.index("score")]
    out = tmp_path / "out"
    assert run.run(inputs, out) == 0
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's file")
    (out / "run" / name).unlink()
    (out / "run" / name).symlink_to(victim)
    capsys.readouterr()
    assert run.run(inputs, out) == 2
    one_error_line(capsys.readouterr().err, str(out / "run" / name), "symlink")
    assert victim.read_text() == "the user's file"


# --- single faults: score inputs that cannot give a number ----------------------------------------------


def _score(inputs, data, out, *extra):
    return main(["score", "--model", str(inputs["model"]), "--benchmark", "prost", "--config", "mass", "--limit", "6",
                 "--data", str(data), "--out", str(out), "--bootstrap-iters", "0", *extra])  # fmt: skip


def _data_with(inputs, tmp_path, change) -> Path:
    """A copy of the PROST build whose ``mass`` Parquet file is ``change(rows)``."""
    data = tmp_path / "data"
    shutil.copytree(inputs["build"] / "prost", data / "prost")
    path = data / "prost" / data_file("mass", "test")
    table = pq.read_table(path)
    pq.write_table(pa.Table.from_pylist(change(table.to_pylist()), schema=table.schema), path)
    return data


def test_a_label_outside_the_options_is_one_line_naming_the_row(inputs, tmp_path, capsys):
    def seven(rows):
        rows[0]["label"] = 7
        return rows

    assert _score(inputs, _data_with(inputs, tmp_path, seven), tmp_path / "run") == 2
    one_error_line(capsys.readouterr().err, "config mass row 0: the gold answer 7 is not one of the row's 4 options")
    assert not (tmp_path / "run" / "metrics.json").exists()


def test_an_empty_config_is_one_line_not_n_0(inputs, tmp_path, capsys):
    assert _score(inputs, _data_with(inputs, tmp_path, lambda rows: []), tmp_path / "run") == 2
    one_error_line(capsys.readouterr().err, "config mass of", "has no rows")


def test_non_finite_scores_are_one_line_naming_the_first_question(inputs, tmp_path, capsys):
    import torch
    from transformers import AutoModelForCausalLM

    broken = tmp_path / "nan-model"
    shutil.copytree(inputs["model"], broken)
    model = AutoModelForCausalLM.from_pretrained(broken)
    with torch.no_grad():
        model.lm_head.weight.fill_(float("nan"))  # what an fp16 overflow leaves in the logits
    model.save_pretrained(broken)
    assert main(["score", "--model", str(broken), "--benchmark", "prost", "--config", "mass", "--limit", "6",
                 "--data", str(inputs["build"]), "--out", str(tmp_path / "run"), "--bootstrap-iters", "0"]) == 2  # fmt: skip
    one_error_line(capsys.readouterr().err, "config mass row 0: the model gave a non-finite score (nan)")
    assert not (tmp_path / "run" / "metrics.json").exists()


def test_a_model_folder_without_tokenizer_files_is_refused(inputs, tmp_path, capsys):
    bare = tmp_path / "bare"
    shutil.copytree(inputs["model"], bare)
    for path in bare.iterdir():
        if "token" in path.name or path.name in ("vocab.json", "merges.txt"):
            path.unlink()
    assert main(["score", "--model", str(bare), "--benchmark", "prost", "--config", "mass", "--limit", "6",
                 "--data", str(inputs["build"]), "--out", str(tmp_path / "run")]) == 2  # fmt: skip
    err = capsys.readouterr().err
    one_error_line(err, str(bare))
    assert not (tmp_path / "run" / "metrics.json").exists()


@pytest.mark.parametrize("value", ["[]", "[NaN]", "not json", '{"a": 1}', "[true, 0.5]"])
def test_cached_values_of_the_wrong_shape_are_set_aside_with_one_warning(value, inputs, tmp_path, capsys):
    out = tmp_path / "run"
    assert _score(inputs, inputs["build"], out) == 0
    expected = json.loads((out / "metrics.json").read_text())
    with sqlite3.connect(out / "cache.sqlite") as db:
        key = db.execute("SELECT key FROM scores LIMIT 1").fetchone()[0]
        db.execute("UPDATE scores SET value = ? WHERE key = ?", (value, key))
    capsys.readouterr()
    assert _score(inputs, inputs["build"], out) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "scores of the wrong shape" in warnings[0] and "kept its 5 good entries" in warnings[0]
    assert json.loads((out / "metrics.json").read_text()) == expected
    assert json.loads((out / "run.json").read_text())["scored_now"] == 1
    assert len([p for p in out.iterdir() if p.name.startswith("cache.corrupt-")]) == 1


def test_truncate_and_model_args_are_in_the_cache_key_and_run_json(inputs, tmp_path):
    out = tmp_path / "run"
    assert _score(inputs, inputs["build"], out) == 0
    assert _score(inputs, inputs["build"], out, "--truncate") == 0
    info = json.loads((out / "run.json").read_text())
    assert info["backend"]["truncate"] is True and info["scored_now"] == 6  # not served the scores of the run without it
    assert _score(inputs, inputs["build"], out, "--truncate", "--model-args", "attn_implementation=eager") == 0
    info = json.loads((out / "run.json").read_text())
    assert info["backend"]["model_args"] == {"attn_implementation": "eager"} and info["scored_now"] == 6


# --- single faults: report's run files -------------------------------------------------------------------


BROKEN_RUNS = [  # (what is changed, the field the error names)
    ({"metrics": {"mass": {"accuracy": float("inf"), "n": 6}}}, "mass.accuracy is inf"),
    ({"metrics": {"mass": {"accuracy": 7.5, "n": 6}}}, "mass.accuracy is 7.5, outside 0-1"),
    ({"metrics": {"mass": {"accuracy": -3, "n": 6}}}, "mass.accuracy is -3, outside 0-1"),
    ({"metrics": {"mass": {"accuracy": 0.5, "n": 1e30}}}, "mass.n is 1e+30, not a count"),
    ({"metrics": {"mass": {"accuracy": 0.5, "n": 6, "undecided": -1}}}, "mass.undecided is -1, not a count"),
    ({"metrics": {"mass": {"accuracy": "0.5", "n": 6}}}, "mass.accuracy is '0.5', not a number"),
    ({"spec": {"configs": "default"}}, "spec.configs is 'default', expected a list"),
    ({"spec": {"model": ""}}, "spec.model is '', expected the model's name"),
    ({"spec": {"limit": -2}}, "spec.limit is -2"),
    ({"info": {"chat": {"applied": "maybe", "template": None, "template_sha256": None, "system_instruction": None}}},
     "chat.applied is 'maybe', expected true or false"),
    ({"info": {"chat": "yes"}}, "chat is 'yes', expected an object"),
    ({"info": {"backend": {"name": "openai", "requests_sent": -3}}}, "backend.requests_sent is -3, expected a whole number from 0"),
    ({"metrics": {"mass": {"accuracy": 0.5, "n": 6, "unparsed": 7}}}, "mass.unparsed is 7, more than the 6 questions scored (n)"),
    ({"metrics": {"mass": {"accuracy": 10**400, "n": 6}}}, "mass.accuracy is 1000"),
]  # fmt: skip


@pytest.mark.parametrize("change,field", BROKEN_RUNS, ids=[f for _, f in BROKEN_RUNS])
def test_report_refuses_broken_run_files_in_one_line_naming_file_and_field(change, field, tmp_path, capsys):
    run = write_run(
        tmp_path / "run", "prost", "causal", {"mass": {"accuracy": 0.5, "n": 6}}, "released-gpt", model="gpt2", limit=6
    )
    info = json.loads((run / "run.json").read_text()) | change.get("info", {})
    info["spec"] |= change.get("spec", {})
    (run / "run.json").write_text(json.dumps(info))
    (run / "metrics.json").write_text(json.dumps(change.get("metrics", {"mass": {"accuracy": 0.5, "n": 6}})))
    name = "metrics.json" if "metrics" in change else "run.json"
    assert main(["report", str(run), "--out", str(tmp_path / "report")]) == 2
    one_error_line(capsys.readouterr().err, f"{run / name}: {field}")
    assert not (tmp_path / "report").exists()


# --- single faults: processes ------------------------------------------------------------------------------


def test_a_bad_config_with_several_processes_is_one_line_before_any_launch(inputs, tmp_path, capsys):
    started = time.perf_counter()
    assert main(["score", "--model", str(inputs["model"]), "--benchmark", "prost", "--config", "mas",
                 "--out", str(tmp_path / "run"), "--num-processes", "2"]) == 2  # fmt: skip
    one_error_line(capsys.readouterr().err, "prost has no config 'mas'")
    assert time.perf_counter() - started < 10 and not (tmp_path / "run").exists()


def test_a_folder_in_use_with_several_processes_is_one_line_before_any_launch(inputs, tmp_path, capsys):
    from physprobe.record.run_folder import open_folder, owner
    from physprobe.util.folder_lock import FolderLock

    out = tmp_path / "run"
    open_folder(out, owner(str(inputs["model"]), "prost", local=True))
    with FolderLock(out):  # another run scoring into the folder
        assert main(["score", "--model", str(inputs["model"]), "--benchmark", "prost", "--config", "mass", "--limit", "2",
                     "--data", str(inputs["build"]), "--out", str(out), "--num-processes", "2"]) == 2  # fmt: skip
    one_error_line(capsys.readouterr().err, f"{out} is in use by process {os.getpid()}")
    assert not (out / "run.rank1.lock").exists()


WATCHED = """
import sys, time
from physprobe.run import parallel
parallel.die_with_launcher()
print("watching", flush=True)
time.sleep(120)
"""

LAUNCHER = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", sys.argv[1]], env=dict(os.environ, PHYSPROBE_LAUNCHER_PID=str(os.getpid())),
                         start_new_session=True, stdout=subprocess.PIPE, text=True)
assert child.stdout.readline() == "watching\\n"
print(child.pid, flush=True)
time.sleep(120)
"""


@pytest.mark.parametrize("how", ["kill -9 the launcher", "kill -9 its process group"])
@pytest.mark.processes
def test_a_rank_dies_with_its_launcher(how, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER, WATCHED], stdout=subprocess.PIPE, text=True, env=env,
                                start_new_session=True)  # fmt: skip
    rank = int(launcher.stdout.readline())
    os.killpg(launcher.pid, signal.SIGKILL) if "group" in how else launcher.kill()
    launcher.wait(30)
    if not gone(rank):
        os.kill(rank, signal.SIGKILL)
        pytest.fail(f"the rank outlived its launcher ({how})")


@pytest.mark.processes
def test_a_launched_process_dies_with_its_parent(tmp_path):
    parent = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import subprocess, sys, time
        from physprobe.run import parallel
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], preexec_fn=parallel._kill_me_with_parent,
                                 start_new_session=True)
        print(child.pid, flush=True)
        time.sleep(120)
    """)], stdout=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)))  # fmt: skip
    child = int(parent.stdout.readline())
    parent.kill()
    parent.wait(30)
    if not gone(child):
        os.kill(child, signal.SIGKILL)
        pytest.fail("the launched process outlived its parent")


# --- single faults: metric and Space inputs ------------------------------------------------------------------

SCORES = {"predictions": [[0.9, 0.1, 0.7]], "references": [[1, 0, 1]]}
CHOICES = {"predictions": [0, 1, 1, 0], "references": [0, 1, 0, 0]}
PAIRS = {"pairs": ["m1", "m1", "m1", "m1"]}
METRIC_INPUTS = [  # (module, arguments, what the one-line error says)
    ("affordance_rank", {**SCORES, "k": 2.7}, "k must be a whole number of classes (an int), got 2.7"),
    ("affordance_rank", {**SCORES, "k": "2"}, "k must be a whole number of classes (an int), got '2'"),
    ("affordance_rank", {**SCORES, "k": True}, "k must be a whole number of classes (an int), got True"),
    ("affordance_rank", {**SCORES, "k": 0}, "k must be at least 1"),
    ("affordance_rank", {**SCORES, "class_names": [1, "1", "x"]}, "class_names must be non-empty strings"),
    ("probe_accuracy", {**CHOICES, **PAIRS, "inverted": [0.5, 0, 1, 1]}, "inverted[0] = 0.5 is not a bool"),
    ("probe_accuracy", {**CHOICES, "num_choices": 2.5}, "num_choices must be a whole number of at least 1, got 2.5"),
    ("probe_accuracy", {**CHOICES, "num_choices": 0}, "num_choices must be a whole number of at least 1, got 0"),
    ("probe_accuracy", {"predictions": [0, 2**70], "references": [0, 1]}, "predictions[1] = 1180591620717411303424 is far out of range"),
    ("agreement_accuracy", {"predictions": [0, 1], "references": [0, 1], "by_position": "no"}, "by_position must be True or False, got 'no'"),
    ("agreement_accuracy", {"predictions": [0, -(2**70)], "references": [0, 1]}, "predictions[1] = -1180591620717411303424 is far out of range"),
]  # fmt: skip


@pytest.mark.parametrize("name,arguments,message", METRIC_INPUTS, ids=[m for _, _, m in METRIC_INPUTS])
def test_metric_inputs_of_the_wrong_type_or_range_are_refused(name, arguments, message, monkeypatch):
    import evaluate

    monkeypatch.chdir(REPO)
    with pytest.raises(ValueError) as raised:
        evaluate.load(f"metrics/{name}").compute(**arguments)
    assert message in str(raised.value) and "\n" not in str(raised.value)


def load_space(name: str):
    """A metric's ``app.py`` imported (not launched): its form's functions and defaults."""
    spec = importlib.util.spec_from_file_location(f"{name}_space", REPO / "metrics" / name / "app.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_spaces_open_on_their_modules_defaults():
    import inspect

    for name, fields in {"affordance_rank": ("mode", "average"), "probe_accuracy": ("inverse_gap_reading", "position_reading"),
                         "agreement_accuracy": ("reading",)}.items():  # fmt: skip
        space = load_space(name)
        defaults = inspect.signature(type(space.metric)._compute).parameters
        values = {block.label: block.value for block in space.demo.blocks.values() if getattr(block, "label", None) in fields}
        assert values == {field: defaults[field].default for field in fields}, name
    assert values  # the last Space's fields were found


SPACE_INPUTS = [  # (Space, form values, what gr.Error says)
    ("affordance_rank", ("[[0.9, 0.1]]", "[[1, 0]]", "pairwise", "micro", 0), "k must be at least 1"),
    ("affordance_rank", ("[[0.9, 0.1]]", "[[1, 0]]", "pairwise", "micro", 2.7), "k must be a whole number"),
    ("probe_accuracy", ("0, 1", "0, 1", "", "", "", "", "", "pooled", "template_mean", 0), "num_choices must be a whole number of at least 1"),
    ("agreement_accuracy", ("0, 1.", "0, 1", "", "", "per_question"), "predictions[1] = '1.'"),
    ("probe_accuracy", ("0, 1.", "0, 1", "", "", "", "", "", "pooled", "template_mean", None), "predictions[1] = '1.'"),
]  # fmt: skip


@pytest.mark.parametrize("name,values,message", SPACE_INPUTS, ids=[f"{n}-{m}" for n, _, m in SPACE_INPUTS])
def test_spaces_show_bad_input_as_a_gradio_error(name, values, message):
    import gradio as gr

    with pytest.raises(gr.Error) as raised:
        load_space(name).compute(*values)
    assert message in str(raised.value)


# --- single faults: arguments that are not plain folders --------------------------------------------------


def test_an_out_that_reads_like_a_uri_is_a_local_folder(inputs, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert (
        main(["generate", "newton", "--spec", str(inputs["spec"]), "--out", "s3:x", "--source-dir", str(inputs["upstream"])]) == 0
    )
    assert (tmp_path / "s3:x" / "sharp" / "README.md").is_file()


@pytest.mark.parametrize("command", ["build", "score"])
def test_an_unexpanded_tilde_is_one_line_and_writes_nothing(command, inputs, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    argv = (["build", "prost", "--out", "~", "--source-dir", str(inputs["upstream"])] if command == "build" else
            ["score", "--model", str(inputs["model"]), "--benchmark", "prost", "--config", "mass", "--limit", "2",
             "--data", str(inputs["build"]), "--out", "~/run"])  # fmt: skip
    assert main(argv) == 2
    one_error_line(capsys.readouterr().err, "starts with '~', which no shell expanded")
    assert list(tmp_path.iterdir()) == []


def test_a_spec_nested_beyond_recursion_is_one_line(inputs, tmp_path, capsys):
    spec = tmp_path / "deep.yaml"
    spec.write_text("name: deep\nquestion: " + "[" * 20000 + "]" * 20000 + "\n")
    assert (
        main(["generate", "newton", "--spec", str(spec), "--out", str(tmp_path / "out"), "--source-dir", str(inputs["upstream"])])
        == 2
    )
    one_error_line(capsys.readouterr().err, f"{spec}: nested too deeply")


@pytest.mark.parametrize("question, padding, message", [
    ("Which of {object1}, {object2} is sharp?", 3, "question names object1, object2 but padding 3 makes 4 options; name every "
                                                   "one (missing: object3, object4) or lower padding"),
    ("Which of {object1}, {object3} is sharp?", 2, "question names object1, object3 but padding 2 makes 3 options"),
    ("Which of {object1}, {object2}, {object3} is sharp?", 1, "question has slot(s) ['object3']; with padding 1 the slots are object1 .. object2"),
])  # fmt: skip
def test_a_spec_whose_padding_and_slots_disagree_is_one_line(question, padding, message, inputs, tmp_path, capsys):
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        f"name: sharp\nquestion: '{question}'\nconditions: [{{attribute: Sharpness, polarity: high, padding: {padding}}}]\n"
    )
    assert (
        main(["generate", "newton", "--spec", str(spec), "--out", str(tmp_path / "out"), "--source-dir", str(inputs["upstream"])])
        == 2
    )
    one_error_line(capsys.readouterr().err, f"{spec}: {message}")
    assert not (tmp_path / "out" / "sharp").exists()


@pytest.mark.parametrize("argv, message", [
    (["generate", "newton", "--spec", "SPEC", "--n", "5"], "generate newton takes no --n: the spec's max_questions sets how many"),
    (["generate", "cccons", "--n", "5", "--spec", "SPEC"], "generate cccons takes no --spec"),
    (["generate", "cccons", "--n", "5", "--source-dir", ""], "--source-dir is empty; give the mirror's folder"),
    (["build", "prost", "--source-dir", ""], "--source-dir is empty; give the mirror's folder"),
])  # fmt: skip
def test_an_option_the_command_would_ignore_is_one_line(argv, message, inputs, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    argv = [str(inputs["spec"]) if a == "SPEC" else a for a in argv]
    if "--source-dir" not in argv:
        argv += ["--source-dir", str(inputs["upstream"])]
    assert main([*argv, "--out", str(tmp_path / "out")]) == 2
    one_error_line(capsys.readouterr().err, message)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_an_nli_model_without_an_entailment_label_is_refused_before_its_weights_load(inputs, tmp_path, capsys):
    import transformers

    model = tiny_models.nli(tmp_path / "nli", ["a cup holds water", "a knife cuts bread"])
    config = transformers.AutoConfig.from_pretrained(model)
    config.id2label, config.label2id = {0: "NEGATIVE", 1: "NEUTRAL", 2: "POSITIVE"}, {"NEGATIVE": 0, "NEUTRAL": 1, "POSITIVE": 2}
    config.save_pretrained(model)
    (model / "model.safetensors").write_bytes(b"not weights")  # loading them would fail otherwise
    assert main(["score", "--model", str(model), "--benchmark", "text2afford", "--method", "nli", "--limit", "2",
                 "--data", str(inputs["build"]), "--out", str(tmp_path / "run")]) == 2  # fmt: skip
    one_error_line(capsys.readouterr().err, "cannot find the entailment label in id2label=", "this is not an NLI model")


TEMPLATES = [  # (template, --system-instruction, what the one line says)
    ("{{ raise_exception('This template takes no prompts') }}", None, "cannot render a prompt (TemplateError: This template takes no prompts)"),
    ("{% for m in messages %}{{ m.content }", None, "is not a valid Jinja template (line 1: "),
    ("{{ messages[3]['content'] }}", None, "cannot render a prompt (UndefinedError: "),
    ("{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
     "{% for m in messages %}{{ m['content'] }}{% endfor %}", "Be brief.",
     "refuses the system message (System role not supported): leave out --system-instruction"),
]  # fmt: skip


@pytest.mark.parametrize("template, instruction, message", TEMPLATES, ids=["raise", "syntax", "missing-message", "system-role"])
def test_a_chat_template_that_fails_is_one_line_before_any_weight_loads(template, instruction, message, inputs, tmp_path, capsys):
    from transformers import AutoTokenizer

    model = tmp_path / "model"
    shutil.copytree(inputs["model"], model)
    tokenizer = AutoTokenizer.from_pretrained(model)
    tokenizer.chat_template = template
    tokenizer.save_pretrained(model)
    for weights in model.glob("*.safetensors"):
        weights.write_bytes(b"not weights")  # loading them would fail otherwise
    extra = ["--system-instruction", instruction] if instruction else []
    assert main(["score", "--model", str(model), "--benchmark", "prost", "--config", "mass", "--protocol", "sentence-sum",
                 "--limit", "2", "--data", str(inputs["build"]), "--out", str(tmp_path / "run"), "--apply-chat-template", *extra]) == 2  # fmt: skip
    one_error_line(capsys.readouterr().err, f"{model}'s default chat template (sha256 ", message)


def test_string_labels_are_one_line_naming_the_row(inputs, tmp_path, capsys):
    data = tmp_path / "data"
    shutil.copytree(inputs["build"] / "prost", data / "prost")
    path = data / "prost" / data_file("mass", "test")
    rows = pq.read_table(path).to_pylist()
    pq.write_table(pa.Table.from_pylist([{**row, "label": "A"} for row in rows]), path)
    assert _score(inputs, data, tmp_path / "run") == 2
    one_error_line(capsys.readouterr().err, "config mass row 0: the gold answer is not an option index ('A')")


def test_a_broken_card_in_data_is_one_line(inputs, tmp_path, capsys):
    data = tmp_path / "data"
    shutil.copytree(inputs["build"] / "prost", data / "prost")
    (data / "prost" / "README.md").write_text("---\nconfigs: [\n---\n")
    assert _score(inputs, data, tmp_path / "run") == 2
    one_error_line(capsys.readouterr().err, f"{data / 'prost' / 'README.md'}: the card's configs cannot be read")


def test_a_full_disk_under_the_cache_is_one_line_and_the_results_intact(inputs, tmp_path, monkeypatch, capsys):
    from physprobe.run import runner

    out = tmp_path / "run"
    assert _score(inputs, inputs["build"], out, "--limit", "3") == 0
    before = results_digest(out)
    real = runner.Cache._open

    def full(path):  # SQLite's own "database or disk is full" once the file may not grow
        db = real(path)
        pages = db.execute("PRAGMA page_count").fetchone()[0]
        db.execute(f"PRAGMA max_page_count = {pages}")
        return db

    monkeypatch.setattr(runner.Cache, "_open", staticmethod(full))
    capsys.readouterr()
    assert _score(inputs, inputs["build"], out, "--limit", "300") == 1
    one_error_line(capsys.readouterr().err, str(out / "cache.sqlite"), "full", "free some space")
    assert results_digest(out) == before


# --- single faults: publishing ---------------------------------------------------------------------------------


@pytest.mark.parametrize("argv,message", [
    (["--org", "my org", "--only", "probe_accuracy"], "--org 'my org': my org/probe_accuracy is not a valid Hub repo id"),
    (["--org", "a/b", "--only", "probe_accuracy"], "is not a valid Hub repo id"),
    (["--only", "probe_accuracy", "--source-dir", "{out}/mirror"], "overlaps --source-dir"),
])  # fmt: skip
def test_upload_refuses_bad_arguments_before_any_work(argv, message, tmp_path, capsys):
    out = tmp_path / "hub"
    argv = [a.replace("{out}", str(out)) for a in argv]
    assert load_upload().main(["--out", str(out), *argv]) == 2
    one_error_line(capsys.readouterr().err, message)
    assert not out.exists()


def test_upload_push_offline_is_one_line_before_any_work(tmp_path, monkeypatch, capsys):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    assert load_upload().main(["--out", str(tmp_path / "hub"), "--only", "probe_accuracy", "--push"]) == 2
    err = capsys.readouterr().err
    one_error_line(err, "HF_HUB_OFFLINE is set")
    assert "hf_secret" not in err and not (tmp_path / "hub").exists()


@pytest.mark.processes
def test_a_symlink_committed_in_a_metric_folder_is_refused(tmp_path, monkeypatch):
    from physprobe.errors import PublishError
    from physprobe.publish import folders

    root = tmp_path / "checkout"
    metric = root / "metrics" / "toy"
    metric.mkdir(parents=True)
    (metric / "toy.py").write_text("x = 1\n")
    (tmp_path / "secret.env").write_text("HF_TOKEN=hf_leaked\n")
    (metric / "config.env").symlink_to(tmp_path / "secret.env")
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "toy"], check=True)
    monkeypatch.setattr(folders, "METRICS", ("toy",))
    monkeypatch.setattr(folders, "metric_folder", lambda name: root / "metrics" / name)
    with pytest.raises(PublishError, match=r"config.env is a symlink in git; a Space publishes regular files only"):
        folders.export(tmp_path / "out", None, only={"toy"})
    assert not (tmp_path / "out" / "spaces" / "toy").exists()


@pytest.mark.slow
@pytest.mark.parametrize("how", ["ctrl-c", "kill -9 of the launcher's process group"])
@pytest.mark.processes
def test_a_data_parallel_score_ends_whole_with_its_launcher(how, inputs, tmp_path):
    from physprobe.errors import FolderInUse
    from physprobe.util.folder_lock import FolderLock

    out = tmp_path / "run"
    command = [sys.executable, "-m", "physprobe", "score", "--model", str(inputs["model"]), "--benchmark", "prost",
               "--data", str(inputs["build"]), "--out", str(out), "--limit", "4000", "--device", "cpu", "--bootstrap-iters", "0",
               "--protocol", "sentence-sum", "--batch-size", "1", "--num-processes", "2"]  # fmt: skip
    log = tmp_path / "stderr.txt"
    with open(log, "wb") as stderr:
        # Ctrl-C as from a terminal: the command starts with SIGINT's default action, whatever this process inherited
        # (a process that ignores SIGINT passes that on through exec; an earlier test in the suite can leave it so).
        launcher = psutil.Popen(command, env=dict(os.environ, OMP_NUM_THREADS="1"), stdout=subprocess.DEVNULL, stderr=stderr,
                                start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip
    deadline = time.monotonic() + 300
    while not (out / "run.rank1.lock").exists() and launcher.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    processes = launcher.children(recursive=True)
    try:
        assert launcher.poll() is None and len(processes) >= 3, log.read_text()[-3000:]  # accelerate launch and two ranks
        if how == "ctrl-c":
            launcher.send_signal(signal.SIGINT)
        else:
            os.killpg(launcher.pid, signal.SIGKILL)
        status = launcher.wait(60)
        assert all(gone(p.pid) for p in processes), [p.cmdline() for p in processes if not gone(p.pid, 0)]
    finally:
        for process in [launcher, *processes]:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
    if how == "ctrl-c":
        text = log.read_text()
        assert status == 130 and "Traceback" not in text, text[-3000:]
        assert [line for line in text.splitlines() if "physprobe" in line and "interrupted" in line]
    if how == "ctrl-c" and not out.exists():  # interrupted before any score reached a rank's cache: the folder it made is gone
        return
    # No rank holds the run folder any more. A rank's main thread shows as a zombie while its other threads
    # still exit (and hold its files for a moment): the lock is retried for a few seconds, as a user's rerun would.
    deadline = time.monotonic() + 10
    while True:
        try:
            FolderLock(out).acquire().release()
            break
        except FolderInUse:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    assert not (out / "metrics.json").exists()


def test_an_unmarked_folder_is_never_replaced(inputs, tmp_path, capsys):
    out = tmp_path / "out"
    shutil.copytree(inputs["build"] / "prost", out / "prost")
    (out / "prost" / MARKER).unlink()  # physprobe's files without its marker: not provably physprobe's
    spec = tmp_path / "prost.yaml"
    spec.write_text(SPEC.replace("name: sharp", "name: prost"))
    before = tree_digest(out)
    assert main(["generate", "newton", "--spec", str(spec), "--out", str(out), "--source-dir", str(inputs["upstream"])]) == 2
    one_error_line(capsys.readouterr().err, str(out / "prost"), "is not a physprobe output")
    assert tree_digest(out) == before
    assert main(["build", "prost", "--out", str(out), "--source-dir", str(inputs["upstream"])]) == 2
    one_error_line(capsys.readouterr().err, str(out / "prost"), "is not a physprobe output")
    assert tree_digest(out) == before
