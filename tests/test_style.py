"""The code's style as CI checks it: ``ruff format --check`` and ``ruff check`` (pyproject.toml ``[tool.ruff]``) over the
whole checkout pass, so a change that would need reformatting or leaves an unused import fails the suite (CI runs
the suite). Fix either with ``.venv/bin/ruff format . && .venv/bin/ruff check --fix .``."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO

RUFF = Path(sys.executable).with_name("ruff")


@pytest.mark.parametrize("command", [["format", "--check"], ["check"]], ids=["format", "lint"])
def test_the_checkout_is_formatted_and_lint_free(command):
    ruff = str(RUFF) if RUFF.is_file() else shutil.which("ruff")
    assert ruff, "ruff is not installed: it is in the dev extra (pip install -e '.[dev]')"
    done = subprocess.run([ruff, *command, "--no-cache", "."], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, f"ruff {' '.join(command)} found:\n{done.stdout[-4000:]}{done.stderr[-2000:]}"
