"""Every example in the package's docstrings runs and gives what it shows."""

import doctest
import importlib
import pkgutil

import pytest

import physprobe


def modules():
    for info in pkgutil.walk_packages(physprobe.__path__, "physprobe."):
        yield info.name


@pytest.mark.parametrize("name", list(modules()))
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
