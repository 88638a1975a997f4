"""Dataset builders, one sub-package per benchmark: ``<name>/<name>.py`` declares the builder ``<NAME>``
(a ``physprobe.data.builder.Benchmark``) and ``<name>/configs.py`` its config names, which the argument checks
read without importing the builders (they import ``datasets``, about a second).

``NAMES`` lists the registered benchmarks; ``BENCHMARKS`` maps each to its builder, imported on first use.

>>> from physprobe.dataset_scripts import BENCHMARKS, NAMES
>>> list(BENCHMARKS) == list(NAMES)
True
"""

from importlib import import_module

NAMES = ("cccons", "newton", "prost", "text2afford")


def __getattr__(attribute: str):
    if attribute != "BENCHMARKS":
        raise AttributeError(f"module {__name__!r} has no attribute {attribute!r}")
    builders = {name: getattr(import_module(f"{__name__}.{name}.{name}"), name.upper()) for name in NAMES}
    globals()["BENCHMARKS"] = builders
    return builders
