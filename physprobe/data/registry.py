"""Where physprobe finds a benchmark's builder and evaluation: ``physprobe.dataset_scripts.NAMES``
registers a benchmark (one word), its folder's ``<name>.py`` declares the builder, ``configs.py`` its config
names, ``evaluation.py`` its ``EVALUATION``, and an optional ``new_examples.py`` offers
``generate(n, spec, seed, out, source_dir)`` for ``physprobe generate``.

>>> from physprobe.data import registry
>>> all(registry.evaluation(name).benchmark == name for name in registry.names())
True
"""

from __future__ import annotations

from importlib import import_module

from physprobe.protocols import Evaluation, ProtocolError


def names() -> list[str]:
    """The registered benchmarks, in registration order."""
    from physprobe.dataset_scripts import NAMES

    return list(NAMES)


def builder(name: str):
    """The dataset builder (``physprobe.data.builder.Benchmark``) of a registered benchmark."""
    from physprobe.dataset_scripts import BENCHMARKS

    _known(name)
    return BENCHMARKS[name]


def config_names(name: str) -> list[str]:
    """The config names of a registered benchmark, as its builder declares them, read without importing the
    builder (``dataset_scripts/<name>/configs.py``).

    >>> all(config_names(name) == [config.name for config in builder(name).configs] for name in names())
    True
    """
    _known(name)
    return list(import_module(f"physprobe.dataset_scripts.{name}.configs").CONFIGS)


def evaluation(name: str) -> Evaluation:
    """The ``EVALUATION`` declared in ``dataset_scripts/<name>/evaluation.py``."""
    _known(name)
    return import_module(f"physprobe.dataset_scripts.{name}.evaluation").EVALUATION


def new_examples(name: str):
    """The ``generate`` of ``dataset_scripts/<name>/new_examples.py``, or None when the benchmark has none."""
    _known(name)
    module = f"physprobe.dataset_scripts.{name}.new_examples"
    try:
        return import_module(module).generate
    except ModuleNotFoundError as error:
        if error.name != module:
            raise
        return None


def _known(name: str) -> None:
    if name not in names():
        raise ProtocolError(f"unknown benchmark {name!r}; known: {', '.join(names())}")
