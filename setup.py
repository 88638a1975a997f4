"""The package list, found rather than listed: every folder under the source folders that ``setup.cfg``'s
``package_dir`` installs into the ``physprobe`` namespace (``generators/`` as ``physprobe.generators``, ...); and the
``score`` extra completed with every registered backend's libraries, read from ``REGISTRY`` in
``physprobe/backends/__init__.py`` (parsed, not imported). Everything else is declared in ``setup.cfg``; a new
benchmark, metric, module folder or backend needs no line here."""

import ast
import configparser
from pathlib import Path

from setuptools import find_namespace_packages, setup

HERE = Path(__file__).resolve().parent
config = configparser.ConfigParser()
config.read(HERE / "setup.cfg")
roots = dict(line.replace(" ", "").split("=") for line in config["options"]["package_dir"].splitlines() if "=" in line)
packages = [name + (f".{sub}" if sub else "") for name, folder in roots.items()
            for sub in ["", *find_namespace_packages(HERE / folder, exclude=["*__pycache__*"])]]  # fmt: skip


def backend_libraries() -> list[str]:
    """The ``libraries`` of every ``Registered(...)`` line of the backend registry, as pip requirements."""
    tree = ast.parse((HERE / "physprobe" / "backends" / "__init__.py").read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Registered":
            for keyword in node.keywords:
                if keyword.arg == "libraries":
                    found += [item for item in ast.literal_eval(keyword.value) if item not in found]
    return found


extras = {name: [line for line in value.splitlines() if line.strip() and not line.strip().startswith("#")]
          for name, value in config["options.extras_require"].items()}  # fmt: skip
setup(packages=packages, extras_require={**extras, "score": extras["score"] + backend_libraries()})
