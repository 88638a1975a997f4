"""The import contracts of pyproject.toml's ``[tool.importlinter]`` hold, and an import against the grain breaks them.

``lint-imports`` (import-linter) checks every import of the ``physprobe`` package, direct and indirect, against the
layers docs/layout.md draws: cli > publish > report > run > record | exit_status > backends | data > protocols >
util > errors.
"""

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# ``lint-imports``, run by this interpreter (a venv without the console script, e.g. a worktree's, runs it too).
LINT_IMPORTS = [sys.executable, "-c", "from importlinter.cli import lint_imports_command; lint_imports_command()"]


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    """``lint-imports`` run in ``root`` (its pyproject.toml) on the ``physprobe`` package found there first."""
    return subprocess.run([*LINT_IMPORTS, "--no-cache"], cwd=root, capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root)})  # fmt: skip


def test_the_package_keeps_its_layers():
    done = lint_imports(REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Contracts: 3 kept, 0 broken." in done.stdout


def test_an_import_against_the_grain_breaks_the_layers(tmp_path):
    shutil.copytree(REPO / "physprobe", tmp_path / "physprobe", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    paths = tmp_path / "physprobe" / "util" / "paths.py"
    paths.write_text(paths.read_text(encoding="utf-8") + "\n\ndef _late():\n    from physprobe.run import runner\n",
                     encoding="utf-8")  # fmt: skip
    done = lint_imports(tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "The pipeline's layers: a subpackage imports only those below it BROKEN" in done.stdout
    assert "physprobe.util.paths -> physprobe.run.runner" in done.stdout
