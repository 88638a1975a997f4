"""The package list, found rather than listed: every folder under the source folders that ``setup.cfg``'s
``package_dir`` installs into the ``physprobe`` namespace (``generators/`` as ``physprobe.generators``, ...).
Everything else is declared in ``setup.cfg``; a new benchmark, metric or module folder needs no line here."""

import configparser
from pathlib import Path

from setuptools import find_namespace_packages, setup

HERE = Path(__file__).resolve().parent
config = configparser.ConfigParser()
config.read(HERE / "setup.cfg")
roots = dict(line.replace(" ", "").split("=") for line in config["options"]["package_dir"].splitlines() if "=" in line)
packages = [name + (f".{sub}" if sub else "") for name, folder in roots.items()
            for sub in ["", *find_namespace_packages(HERE / folder, exclude=["*__pycache__*"])]]  # fmt: skip
setup(packages=packages)
