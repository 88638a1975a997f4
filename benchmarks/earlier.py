"""An earlier commit of physprobe, runnable beside this checkout: a ``git worktree`` of it (made once under a work
folder), importable through ``PYTHONPATH`` alone. setup.cfg's ``package_dir`` installs ``generators/``,
``dataset_scripts/`` and ``metrics/`` as ``physprobe.<name>``; links inside the worktree's ``physprobe/`` give the
same names without installing it. The two sides share this Python and its libraries, so they differ in
physprobe's code alone. Used by ``host_speed.py`` and ``same_predictions.py``.

>>> [name for name, folder in namespace_folders("[options]\\npackage_dir =\\n    physprobe = physprobe\\n    physprobe.metrics = metrics\\n")]
['metrics']
"""

from __future__ import annotations

import configparser
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def namespace_folders(setup_cfg: str) -> list[tuple[str, str]]:
    """(name under ``physprobe``, source folder) for each folder ``package_dir`` installs inside the package."""
    config = configparser.ConfigParser()
    config.read_string(setup_cfg)
    pairs = [line.replace(" ", "").split("=") for line in config["options"]["package_dir"].splitlines() if "=" in line]
    return [(name.split(".", 1)[1], folder) for name, folder in pairs if name.startswith("physprobe.")]


def worktree(commit: str, work: Path) -> Path:
    """``commit``'s tree, checked out once as a detached worktree of this repository under ``work`` and made
    importable (``namespace_folders`` linked into its ``physprobe/``)."""
    sha = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--verify", f"{commit}^{{commit}}"], capture_output=True,
                         text=True, check=True).stdout.strip()  # fmt: skip
    tree = work / f"physprobe-{sha[:12]}"
    if not (tree / "setup.cfg").is_file():
        work.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), sha], check=True, capture_output=True)
    for name, folder in namespace_folders((tree / "setup.cfg").read_text()):
        link = tree / "physprobe" / name
        if not link.exists():
            link.symlink_to(Path("..") / folder)
    return tree


def environment(tree: Path | None) -> dict:
    """The environment of a command run with ``tree``'s physprobe (None: the installed one, this checkout's)."""
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(tree), *filter(None, [env.get("PYTHONPATH")])])
    return env


def physprobe_file(tree: Path | None, cwd: Path) -> str:
    """Where ``import physprobe`` resolves in ``tree``'s environment (a check that a side runs the code it names)."""
    probe = "import physprobe, physprobe.dataset_scripts; print(physprobe.__file__)"
    return subprocess.run([sys.executable, "-c", probe], env=environment(tree), cwd=cwd, capture_output=True, text=True,
                          check=True).stdout.strip()  # fmt: skip
