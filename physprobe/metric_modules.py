"""The three evaluate metric modules, shipped inside physprobe and loaded from the installed package's own files.

The folders ``metrics/<name>/`` of the repository are installed as ``physprobe.metrics.<name>`` (see
``setup.cfg``), so scoring reads the code of the installed version, never unpinned code from the Hub, and
works offline. The same folders are the sources of the Hub Spaces (``evaluate.load("physprobe/<name>")``).

>>> folder("probe_accuracy").joinpath("probe_accuracy.py").is_file()
True
"""

from __future__ import annotations

import contextlib
import importlib.util
from functools import cache
from pathlib import Path

from physprobe.errors import PhysprobeError

NAMES = ("affordance_rank", "agreement_accuracy", "probe_accuracy")


def folder(name: str) -> Path:
    """The installed folder of metric ``name`` (holding ``<name>.py``, its card and its Space's ``app.py``).

    >>> folder("agreement_accuracy").name
    'agreement_accuracy'
    """
    if name not in NAMES:
        raise PhysprobeError(f"unknown metric {name!r}; known: {', '.join(NAMES)}")
    spec = importlib.util.find_spec(f"physprobe.metrics.{name}.{name}")
    if spec is None or spec.origin is None:
        raise PhysprobeError(f"metric module physprobe.metrics.{name} is not installed; reinstall physprobe")
    return Path(spec.origin).parent


_direct = False


def load(name: str):
    """The ``evaluate`` module of metric ``name``, loaded by local path (once per process).

    >>> load("probe_accuracy").compute(predictions=[0, 1], references=[0, 0])["accuracy"]
    0.5
    """
    module = _load(name)
    return _Direct(module) if _direct else module


@cache
def _load(name: str):
    import evaluate

    return evaluate.load(str(folder(name)))


class _Direct:
    """A module whose ``compute`` is its own ``_compute``: the same numbers, without evaluate's Arrow round trip."""

    def __init__(self, module):
        self.compute = module._compute


@contextlib.contextmanager
def direct():
    """Within this block ``load`` gives modules that skip evaluate's Arrow writing, for inputs already checked
    once by a real ``compute`` (bootstrap resampling recomputes a metric hundreds of times).

    >>> with direct():
    ...     load("probe_accuracy").compute(predictions=[0, 1], references=[0, 0])["accuracy"]
    0.5
    """
    global _direct
    _direct = True
    try:
        yield
    finally:
        _direct = False
