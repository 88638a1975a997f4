"""Every example in the docstrings of every module under the ``physprobe`` namespace runs and gives what it shows.

The modules are found from the source tree through ``setup.cfg``'s ``package_dir`` (``generators/`` is
``physprobe.generators``, ...), not from ``physprobe.__path__``: with an editable install that path holds only
``physprobe/``, and the doctests of ``dataset_scripts/``, ``generators/`` and ``metrics/`` would never run.
"""

import configparser
import doctest
import importlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# The Spaces' entry scripts launch a server when imported; they are run as scripts, never imported (and hold no
# examples: checked below).
SCRIPTS = {"app.py"}


def package_dirs() -> dict[str, Path]:
    """``setup.cfg`` [options] package_dir: the physprobe package name of each top-level source folder."""
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg")
    lines = [line.split("=") for line in config["options"]["package_dir"].splitlines() if "=" in line]
    return {name.strip(): REPO / folder.strip() for name, folder in lines}


def source_modules() -> dict[str, Path]:
    """Every module file under the package folders (side by side in the checkout), by its module name."""
    modules = {}
    for package, folder in package_dirs().items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            if path.name in SCRIPTS or "__pycache__" in parts:
                continue
            name = ".".join((package, *parts)).removesuffix(".__init__")
            modules[name] = path
    return modules


MODULES = source_modules()


def test_every_package_folder_is_collected():
    assert {"physprobe.generators.prost", "physprobe.dataset_scripts.prost.evaluation", "physprobe.report.cells",
            "physprobe.metrics.probe_accuracy.probe_accuracy"} <= set(MODULES)  # fmt: skip
    for folder in package_dirs().values():  # no package folder without its modules in the list
        assert any(path.is_relative_to(folder) for path in MODULES.values()), folder


def test_the_scripts_left_out_hold_no_examples():
    scripts = [p for folder in package_dirs().values() for p in folder.rglob("*.py") if p.name in SCRIPTS]
    assert scripts and not any(">>>" in p.read_text(encoding="utf-8") for p in scripts)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_docstring_examples(name):
    module = importlib.import_module(name)
    assert Path(module.__file__).resolve() == MODULES[name].resolve(), f"{name} imports from {module.__file__}"
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
