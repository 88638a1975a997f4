"""No shared module knows a benchmark: every module of ``physprobe/`` is parsed, and no identifier or string
literal in its code names a registered benchmark (docstrings and comments may cite the papers). A benchmark's
knowledge is declared in ``dataset_scripts/<benchmark>/``."""

import ast
from pathlib import Path

import pytest

from physprobe.data import registry

SHARED = Path(__file__).resolve().parents[1] / "physprobe"


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the string constants that are docstrings (a module's, class's or function's first statement)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                found.add(id(first.value))
    return found


def code_words(source: str) -> list[tuple[int, str]]:
    """(line, text) of every identifier and string literal in ``source``'s code: names, attributes, definitions,
    arguments, keywords, imports, and strings (f-string pieces included), docstrings left out."""
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    words = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            words.append((line, node.value))
        elif isinstance(node, ast.Name):
            words.append((line, node.id))
        elif isinstance(node, ast.Attribute):
            words.append((line, node.attr))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            words.append((line, node.name))
        elif isinstance(node, ast.arg):
            words.append((line, node.arg))
        elif isinstance(node, ast.keyword) and node.arg:
            words.append((line, node.arg))
        elif isinstance(node, ast.alias):
            words += [(line, node.name), (line, node.asname or "")]
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and getattr(node, "module", None):
            words.append((line, node.module))
    return sorted(words)


def benchmark_names_in(source: str) -> list[tuple[int, str, str]]:
    """(line, benchmark, word) for every code word of ``source`` that holds a registered benchmark's name."""
    return [(line, name, word) for line, word in code_words(source) for name in registry.names() if name in word.lower()]


def test_the_guard_sees_identifiers_strings_and_f_strings_but_not_prose():
    name = registry.names()[0]
    caught = [
        f"{name}_rows = 1",
        f"def score_{name}(): pass",
        f"obj.{name.upper()}",
        f"f(mode={name!r})",
        f"f(**{{'{name}': 1}})",
        f"x = f'{{a}}-{name}'",
        f"from physprobe.dataset_scripts.{name} import evaluation",
        f"from physprobe.dataset_scripts import {name}",
        f"def f({name}_count): pass",
        f"f({name}_count=1)",
    ]
    for source in caught:
        assert benchmark_names_in(source), source
    prose = f'"""Follows the {name} paper."""\nx = 1  # as in {name}\ndef f():\n    """{name} too."""\n    return x\n'
    assert benchmark_names_in(prose) == []


@pytest.mark.parametrize("path", sorted(SHARED.rglob("*.py")), ids=lambda p: p.relative_to(SHARED).as_posix())
def test_shared_modules_name_no_benchmark(path):
    found = benchmark_names_in(path.read_text(encoding="utf-8"))
    assert not found, "\n".join(f"{path.relative_to(SHARED.parent)}:{line}: {name} in {word!r}" for line, name, word in found)
