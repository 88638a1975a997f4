"""Fault injection for builds and generated sets: hostile output names, overlapping folders, kills at the
replace step, unwritable --out, Ctrl-C. Each asserts the exit status, a message naming the file or
argument, no partial output, and the previous output intact."""

import hashlib
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from physprobe.cli import main
from physprobe.data.dataset_folder import owner, read_built
from physprobe.dataset_scripts.newton import newton
from physprobe.errors import DataError, OutputFolderError
from physprobe.util.paths import RETIRED, STAGING, check_folder_name, file_hashes, mark, sweep

from .conftest import REPO


def tree_digest(folder):
    """sha256 of every file's relative path and bytes under ``folder``."""
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def spec_text(name_yaml):
    return (
        f"name: {name_yaml}\nquestion: 'Which of {{object1}}, {{object2}} is sharp?'\n"
        "conditions: [{attribute: Sharpness, polarity: high, padding: 1}]\nmax_questions: 5\n"
    )


@pytest.mark.parametrize(
    "name_yaml",
    [
        '"."',
        '""',
        '".."',
        '"./../victim"',
        '"../victim"',
        "a/b",
        '"~"',
        "~/x",
        "[x]",
        "5",
        "true",
        '"a\\0b"',
        '"a\\nb"',
        "x" * 101,
        "null",
        '".hidden"',
        '"C:evil"',
    ],
)
def test_generate_refuses_spec_names_that_are_not_plain_folder_names(name_yaml, upstream_dir, tmp_path, capsys):
    work = tmp_path / "work"
    out = work / "generated"
    (out / "keep").mkdir(parents=True)
    (out / "keep" / "file.txt").write_text("mine")
    (tmp_path / "victim").mkdir()
    (tmp_path / "victim" / "data.txt").write_text("theirs")
    spec = tmp_path / "spec.yaml"
    spec.write_text(spec_text(name_yaml))
    before = tree_digest(tmp_path)
    assert main(["generate", "newton", "--spec", str(spec), "--out", str(out), "--source-dir", str(upstream_dir)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("physprobe: error: ") and f"{spec}: name must be a plain folder name" in err and err.count("\n") == 1
    assert tree_digest(tmp_path) == before  # nothing deleted, nothing written, nothing left behind


def test_folder_names_worked_by_hand():
    for good in ("soft_things", "Track 3 v2", "a.b", "ü"):
        assert check_folder_name(good, "k") == good
    for bad in (".", "..", "", " x", "a/b", "a\\b", "~", "x\x1f", None, ["x"], 3):
        with pytest.raises(OutputFolderError, match="k must be a plain folder name"):
            check_folder_name(bad, "k")


@pytest.mark.parametrize("layout", ["same", "out_inside_source", "source_inside_out"])
def test_build_refuses_overlapping_out_and_source_dir(layout, upstream_copy, tmp_path, capsys):
    out = {"same": upstream_copy, "out_inside_source": upstream_copy / "build", "source_inside_out": upstream_copy.parent}[layout]
    before = tree_digest(upstream_copy)
    assert main(["build", "all", "--out", str(out), "--source-dir", str(upstream_copy)]) == 2
    assert "overlaps --source-dir" in capsys.readouterr().err
    assert tree_digest(upstream_copy) == before
    assert not (upstream_copy / "build").exists()


def test_generate_refuses_overlapping_out_and_source_dir(upstream_copy, tmp_path, capsys):
    args = ["generate", "cccons", "--n", "3", "--out", str(upstream_copy), "--source-dir", str(upstream_copy)]
    assert main(args) == 2
    assert "overlaps --source-dir" in capsys.readouterr().err


def test_out_that_is_a_file_or_a_symlink_is_one_line(upstream_dir, tmp_path, capsys):
    file = tmp_path / "file"
    file.write_text("x")
    assert main(["build", "prost", "--out", str(file), "--source-dir", str(upstream_dir)]) == 2
    assert f"--out {file} is a file" in capsys.readouterr().err and file.read_text() == "x"
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert main(["build", "prost", "--out", str(tmp_path / "link"), "--source-dir", str(upstream_dir)]) == 2
    assert f"--out {tmp_path / 'link'} is a symlink" in capsys.readouterr().err
    assert list((tmp_path / "real").iterdir()) == []


def test_a_folder_that_is_not_an_earlier_output_is_never_replaced(upstream_dir, tmp_path, capsys):
    mine = tmp_path / "prost"
    (mine / "mass").mkdir(parents=True)
    (mine / "README.md").write_text("my notes")
    (mine / "mass" / "thesis.tex").write_text("years of work")
    before = tree_digest(tmp_path)
    assert main(["build", "prost", "--out", str(tmp_path), "--source-dir", str(upstream_dir)]) == 2
    assert (
        f"physprobe: error: {mine} exists and is not a physprobe output (it holds README.md); nothing was changed"
        in capsys.readouterr().err
    )
    assert tree_digest(tmp_path) == before and sorted(p.name for p in tmp_path.iterdir()) == ["prost"]


def test_a_full_disk_is_one_line_and_leaves_nothing(upstream_dir, tmp_path, monkeypatch, capsys):
    import errno

    import pyarrow.parquet as pq

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "out" / "x.parquet"))

    monkeypatch.setattr(pq, "write_table", full)
    assert main(["build", "prost", "--out", str(tmp_path / "out"), "--source-dir", str(upstream_dir)]) == 1
    err = capsys.readouterr().err
    assert (
        err
        == f"physprobe: error: {tmp_path / 'out' / 'x.parquet'}: No space left on device; free some space or choose another --out\n"
    )
    assert list((tmp_path / "out").iterdir()) == []


def test_ctrl_c_is_one_line_and_leaves_nothing(upstream_dir, tmp_path, monkeypatch, capsys):
    import pyarrow.parquet as pq

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(pq, "write_table", interrupted)
    assert main(["build", "prost", "--out", str(tmp_path), "--source-dir", str(upstream_dir)]) == 130
    assert capsys.readouterr().err.startswith("physprobe: interrupted;")
    assert list(tmp_path.iterdir()) == []


# --- kills at the replace step ----------------------------------------------------------------
KILL_SCRIPT = """
import os, signal, sys
from pathlib import Path
import physprobe.util.paths as paths
from physprobe.cli import main

where = sys.argv[1]
real_exchange, real_rename = paths._exchange, Path.rename

def die():
    os.kill(os.getpid(), signal.SIGKILL)

def exchange(new, target):
    if where == "before_replace":
        die()
    if where == "between_renames":
        return False  # the fallback: rename the old aside, then the new in
    done = real_exchange(new, target)
    die()  # after the swap, before the old version is removed

def rename(self, target):
    result = real_rename(self, target)
    if where == "between_renames" and paths.RETIRED in Path(target).name:
        die()
    return result

paths._exchange = exchange
Path.rename = rename
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.parametrize("where", ["before_replace", "after_exchange", "between_renames"])
@pytest.mark.processes
def test_a_build_killed_at_the_replace_step_keeps_a_complete_version(where, prost_build, upstream_dir, tmp_path):
    out = tmp_path / "out"
    previous = out / "prost"
    import shutil

    shutil.copytree(prost_build, previous)
    with open(previous / "README.md", "a") as card:
        card.write("\nAn earlier build.\n")
    mark(previous, owner("prost"), file_hashes(previous))  # as the earlier build's marker vouches for its files
    old = tree_digest(previous)
    new = tree_digest(prost_build)
    script = tmp_path / "kill.py"
    script.write_text(textwrap.dedent(KILL_SCRIPT))
    args = ["build", "prost", "--out", str(out), "--source-dir", str(upstream_dir)]
    result = subprocess.run([sys.executable, str(script), where, *args], capture_output=True, cwd=REPO)
    assert result.returncode == -signal.SIGKILL
    leftovers = [p.name for p in out.iterdir() if p.name not in ("prost", ".prost.lock")]  # the lock: until the next write
    if where == "between_renames":
        # the only instant the target is missing on a file system without an atomic exchange
        assert not previous.exists() and any(RETIRED in name for name in leftovers)
        sweep(out)  # what the next run does first: the old version is put back
        assert tree_digest(previous) == old
    else:
        assert tree_digest(previous) == (old if where == "before_replace" else new)
        assert leftovers and all(STAGING in name for name in leftovers)
    # the next build removes what the killed run left and writes the new version
    assert main(["build", "prost", "--out", str(out), "--source-dir", str(upstream_dir)]) == 0
    assert [p.name for p in out.iterdir()] == ["prost"]
    assert tree_digest(previous) == new
    assert read_built(previous, "mass").num_rows == 1440


@pytest.mark.processes
def test_a_generate_killed_at_the_replace_step_keeps_the_previous_set(upstream_dir, tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(spec_text("sharp"))
    out = tmp_path / "generated"
    args = ["generate", "newton", "--spec", str(spec), "--out", str(out), "--source-dir", str(upstream_dir)]
    assert main([*args, "--seed", "1"]) == 0
    old = tree_digest(out / "sharp")
    script = tmp_path / "kill.py"
    script.write_text(textwrap.dedent(KILL_SCRIPT))
    result = subprocess.run([sys.executable, str(script), "before_replace", *args, "--seed", "2"], capture_output=True, cwd=REPO)
    assert result.returncode == -signal.SIGKILL
    assert tree_digest(out / "sharp") == old
    assert main([*args, "--seed", "2"]) == 0
    assert [p.name for p in out.iterdir()] == ["sharp"] and tree_digest(out / "sharp") != old


def test_a_running_build_staging_folder_is_not_cleaned(tmp_path):
    mine = tmp_path / f".prost{STAGING}{os.getpid()}-abc"
    dead = tmp_path / f".prost{STAGING}999999999-abc"
    other = tmp_path / ".prostate.staging-999999999-abc"  # any name's leftovers go: the next command of any kind cleans
    user = tmp_path / ".prost.notes"
    for folder in (mine, dead, other, user):
        folder.mkdir()
    sweep(tmp_path)
    assert mine.exists() and not dead.exists() and not other.exists() and user.exists()


def test_built_folders_have_normal_permissions(prost_build):
    umask = os.umask(0)
    os.umask(umask)
    assert prost_build.stat().st_mode & 0o777 == 0o777 & ~umask


# --- specs --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, message",
    [
        (b"name: x\nquestion: \xff\xfe\n", "not UTF-8 text"),
        (
            b"name: x\nquestion: q\nconditions: [{attribute: Softness, polarity: high, padding: true}]\n",
            r"conditions\[0\]: padding must be an integer, got True",
        ),
        (
            b"name: x\nquestion: q\nmax_questions: true\nconditions: [{attribute: Softness, polarity: high}]\n",
            "max_questions must be an integer, got True",
        ),
        (
            b"name: x\nquestion: q\nmax_questions: 1.5\nconditions: [{attribute: Softness, polarity: high}]\n",
            "max_questions must be an integer, got 1.5",
        ),
        (b"name: x\nquestion: 7\nconditions: [{attribute: Softness, polarity: high}]\n", "question must be a string, got 7"),
        (
            b"name: x\nquestion: q\ncontext: [a]\nconditions: [{attribute: Softness, polarity: high}]\n",
            "context must be a string",
        ),
        (
            b"name: x\nquestion: q\nconditions: [{attribute: [Softness], polarity: high}]\n",
            r"conditions\[0\]: attribute must be a string",
        ),
        (b"name: x\nname: y\nquestion: q\nconditions: [{attribute: Softness, polarity: high}]\n", "duplicate key 'name'"),
        (
            b"name: x\nquestion: q\nconditions: [{attribute: Softness, polarity: high, polarity: low}]\n",
            "duplicate key 'polarity'",
        ),
        (
            b"name: x\nquestion: 'Which of {object1, {object2}?'\nconditions: [{attribute: Softness, polarity: high}]\n",
            "question: unbalanced or malformed slot",
        ),
        (
            b"name: x\nquestion: q\nconditions: [{attribute: Softness, polarity: high, padding: 1000000000}]\n",
            r"padding must be between 1 and 100, got 1000000000",
        ),
        (
            b"name: x\nquestion: q\nmax_questions: 10000000000000\nconditions: [{attribute: Softness, polarity: high}]\n",
            "max_questions must be between 1 and",
        ),
    ],
)
def test_bad_specs_are_one_error_naming_the_file_and_key(text, message, tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_bytes(text)
    with pytest.raises(DataError, match=message) as error:
        newton.read_spec(spec)
    assert str(error.value).startswith(str(spec))
