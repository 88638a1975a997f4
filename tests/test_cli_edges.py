"""The command line's small edges: ``--version``, plain-text help, hints that work offline, the README's outputs
ignored by git."""

import re
import subprocess

import pytest

import physprobe
from physprobe.cli import main, parser
from physprobe.data import hub_data, sources
from physprobe.errors import DataSourceError

from .conftest import REPO


def test_version_prints_the_package_version(capsys):
    try:
        main(["--version"])
    except SystemExit as done:
        assert done.code == 0
    assert capsys.readouterr().out == f"physprobe {physprobe.__version__}\n"
    assert re.search(r"^version = (.+)$", (REPO / "setup.cfg").read_text(), re.M).group(1) == physprobe.__version__


def test_help_is_plain_text():
    commands = parser()._subparsers._group_actions[0].choices  # every command's help, as --help prints it
    for text in [parser().format_help(), *(command.format_help() for command in commands.values())]:
        assert "``" not in text and "`" not in text, text[:200]
    assert "physprobe cache list" in parser().format_help()  # the examples are shown


def test_the_build_hint_works_offline(tmp_path, monkeypatch):
    monkeypatch.delenv("PHYSPROBE_SOURCE_DIR", raising=False)
    monkeypatch.chdir(tmp_path)  # no mirror beside: the hint names the option to fill in
    assert sources.build_command("prost", "data") == "physprobe build prost --out data --source-dir MIRROR"
    assert sources.build_hint("prost", "data") == (
        "`physprobe build prost --out data --source-dir MIRROR` (MIRROR: a local copy of the pinned upstream files)"
    )
    (tmp_path / "clone").mkdir()
    (tmp_path / "shared" / "data" / "upstream").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "clone")  # a checkout beside ../shared, as the README's commands run
    assert sources.build_hint("prost", "data") == "`physprobe build prost --out data --source-dir ../shared/data/upstream`"
    monkeypatch.setenv("PHYSPROBE_SOURCE_DIR", str(tmp_path / "mirror"))  # the build reads the variable itself
    assert sources.build_command("prost", "data") == "physprobe build prost --out data"
    with pytest.raises(DataSourceError, match=re.escape(f"run `physprobe build prost --out {tmp_path / 'nothing'}` first")):
        hub_data.local(tmp_path / "nothing", "prost")


def test_one_folder_that_is_no_run_is_said_in_the_singular(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["report", str(tmp_path / "empty"), "--out", str(tmp_path / "report")]) == 2
    assert capsys.readouterr().err.startswith("physprobe: error: the folder given is not a finished physprobe run (")


def test_what_the_readme_commands_write_is_ignored_by_git(tmp_path):
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    written = set(re.findall(r"--out (\S+)", readme)) | {"runs/x", ".venv"}  # score's default out: runs/<model>
    written |= {path.split("/")[0] for path in re.findall(r"assemble\('([^']+)'\)", readme)}
    assert {"data", "report", "hub", "gemma3"} <= {path.split("/")[0] for path in written}
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)  # the checkout's .gitignore in a repository of its own
    (tmp_path / ".gitignore").write_bytes((REPO / ".gitignore").read_bytes())
    for path in sorted(written):
        done = subprocess.run(["git", "check-ignore", "-q", "--no-index", f"{path}/"], cwd=tmp_path)
        assert done.returncode == 0, f"{path}/ (written by a README command) is not in .gitignore"


def test_a_build_inside_another_benchmarks_build_is_refused(tmp_path, capsys):
    """``build cccons --out nest/prost`` where nest/prost is PROST's build: refused in one line, nothing written (a
    build replaces its folder whole, so the inner one would be lost at PROST's next build)."""
    from physprobe.util.paths import MARKER, Owner, mark

    prost = tmp_path / "nest" / "prost"
    prost.mkdir(parents=True)
    mark(prost, Owner("build", {"benchmark": "prost"}), {})
    assert main(["build", "cccons", "--out", str(prost), "--source-dir", str(REPO.parent / "shared/data/upstream")]) != 0
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"is inside {prost}, a build of benchmark prost; choose an --out outside it" in err
    assert [p.name for p in prost.iterdir()] == [MARKER]
