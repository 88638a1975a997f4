"""Where physprobe finds a benchmark's builder and evaluation: ``physprobe.dataset_scripts.BENCHMARKS``
registers a builder (one line), and its folder's ``evaluation.py`` declares ``EVALUATION``.

>>> from physprobe import registry
>>> all(registry.evaluation(name).benchmark == name for name in registry.names())
True
"""

from __future__ import annotations

from importlib import import_module

from physprobe.protocols import Evaluation, ProtocolError


def names() -> list[str]:
    """The registered benchmarks, in registration order."""
    from physprobe.dataset_scripts import BENCHMARKS

    return list(BENCHMARKS)


def builder(name: str):
    """The dataset builder (``physprobe.builder.Benchmark``) of a registered benchmark."""
    from physprobe.dataset_scripts import BENCHMARKS

    _known(name)
    return BENCHMARKS[name]


def evaluation(name: str) -> Evaluation:
    """The ``EVALUATION`` declared in ``dataset_scripts/<name>/evaluation.py``."""
    _known(name)
    return import_module(f"physprobe.dataset_scripts.{name}.evaluation").EVALUATION


def _known(name: str) -> None:
    if name not in names():
        raise ProtocolError(f"unknown benchmark {name!r}; known: {', '.join(names())}")
