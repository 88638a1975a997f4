"""The three evaluate metric modules, shipped inside physprobe and loaded from the installed package's own files.

The folders ``metrics/<name>/`` of the repository are installed as ``physprobe.metrics.<name>`` (see
``setup.cfg``), so scoring reads the code of the installed version, never unpinned code from the Hub, and
works offline. The same folders are the sources of the Hub Spaces (``evaluate.load("physprobe/<name>")``).

The metrics are found, not listed: every folder ``metrics/<name>/`` holding ``<name>.py`` is one.

>>> folder("probe_accuracy").joinpath("probe_accuracy.py").is_file()
True
>>> NAMES
('affordance_rank', 'agreement_accuracy', 'probe_accuracy')
"""

from __future__ import annotations

import importlib.resources
import importlib.util
import sys
from functools import cache
from pathlib import Path

from physprobe.errors import MetricInputError, PhysprobeError


def _found() -> tuple[str, ...]:
    """The metric folders of the installed ``physprobe.metrics`` package, sorted."""
    root = importlib.resources.files("physprobe.metrics")
    return tuple(sorted(d.name for d in root.iterdir() if d.is_dir() and d.joinpath(f"{d.name}.py").is_file()))


NAMES = _found()


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


def load(name: str) -> "Direct":
    """Metric ``name`` for physprobe's own scorer and report: its ``compute`` checks the raw inputs as the
    module's ``compute`` does, then runs the module's numpy core (``_compute``) — the same numbers as
    ``evaluate.load(...).compute``, without evaluate's Arrow round trip of the inputs (about 7x the core's
    time at a million rows). ``evaluate.load`` users keep the module itself: see ``module``.

    >>> load("probe_accuracy").compute(predictions=[0, 1], references=[0, 0])["accuracy"]
    0.5
    """
    return Direct(module(name))


@cache
def module(name: str):
    """The ``evaluate`` module of metric ``name``, loaded by local path (once per process).

    >>> module("probe_accuracy").compute(predictions=[0, 1], references=[0, 0])["accuracy"]
    0.5
    """
    import evaluate

    return evaluate.load(str(folder(name)))


class Direct:
    """A metric module called without evaluate's Arrow writing and reading of its inputs.

    The modules override ``compute`` to check the raw inputs (evaluate casts 0.5 to 0 on its way to Arrow)
    with their module-level ``_check_inputs``; this runs that same check, then ``_compute``.
    """

    def __init__(self, evaluate_module):
        self.module = evaluate_module
        self._check_inputs = sys.modules[type(evaluate_module).__module__]._check_inputs

    def compute(self, *, predictions=None, references=None, **kwargs) -> dict:
        """``evaluate_module.compute(...)`` without the Arrow round trip: same checks, same numbers; a refused
        input is a ``MetricInputError`` (a ``ValueError`` too, as the module's own is)."""
        try:
            if predictions is None or references is None:
                raise ValueError("predictions and references are both required")
            self._check_inputs(predictions, references)
            return self.module._compute(predictions=predictions, references=references, **kwargs)
        except ValueError as error:  # the module's own refusal of its inputs, as physprobe's one line
            raise MetricInputError(f"metric {self.module.name}: {error}") from None
