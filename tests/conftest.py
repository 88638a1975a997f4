"""Shared fixtures: the upstream mirror in ../shared, quiet progress bars, throwaway caches."""

import doctest
import os
import shutil
import sys
from pathlib import Path

import datasets
import evaluate
import pytest

REPO = Path(__file__).resolve().parents[1]
UPSTREAM = Path(os.environ.get("PHYSPROBE_SOURCE_DIR", REPO.parent / "shared" / "data" / "upstream"))

datasets.disable_progress_bars()
datasets.logging.set_verbosity_error()


@pytest.fixture(scope="session", autouse=True)
def physprobe_cache(tmp_path_factory):
    """GGUF conversions (``physprobe.backends.hf.gguf_cache``) go to a throwaway cache, not the user's."""
    patch = pytest.MonkeyPatch()
    patch.setenv("PHYSPROBE_CACHE", str(tmp_path_factory.mktemp("physprobe-cache")))
    yield
    patch.undo()


@pytest.fixture(scope="session")
def upstream_dir() -> Path:
    """The read-only upstream mirror (``../shared/data/upstream``)."""
    if not (UPSTREAM / "SOURCES.md").is_file():
        pytest.fail(f"upstream mirror not found at {UPSTREAM}; set PHYSPROBE_SOURCE_DIR")
    return UPSTREAM


@pytest.fixture
def upstream_copy(upstream_dir, tmp_path) -> Path:
    """A writable copy of the upstream mirror, for tests that corrupt a file."""
    copy = tmp_path / "upstream"
    shutil.copytree(upstream_dir, copy)
    for path in copy.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return copy


@pytest.fixture(scope="session")
def prost_build(upstream_dir, tmp_path_factory) -> Path:
    """PROST built once for the session into a temporary folder; returns ``OUT/prost``."""
    from physprobe.data.dataset_folder import build
    from physprobe.dataset_scripts.prost.prost import PROST

    return build(PROST, tmp_path_factory.mktemp("build"), upstream_dir).path


def run_metric_examples(metric) -> doctest.TestResults:
    """Run the ``Examples:`` of an evaluate module's ``_KWARGS_DESCRIPTION`` (they load it by relative path)."""
    module = sys.modules[type(metric).__module__]
    test = doctest.DocTestParser().get_doctest(module._KWARGS_DESCRIPTION, {}, metric.name, None, 0)
    runner = doctest.DocTestRunner()
    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        runner.run(test)
    finally:
        os.chdir(cwd)
    return runner.summarize(verbose=False)


@pytest.fixture(scope="session")
def built_all(upstream_dir, tmp_path_factory) -> Path:
    """Every benchmark built once for the session; returns the folder holding them."""
    from physprobe.data.dataset_folder import build
    from physprobe.dataset_scripts import BENCHMARKS

    out = tmp_path_factory.mktemp("built")
    for benchmark in BENCHMARKS.values():
        build(benchmark, out, upstream_dir)
    return out


@pytest.fixture(scope="module")
def probe():
    """The probe_accuracy module loaded from the checkout."""
    return evaluate.load(str(REPO / "metrics" / "probe_accuracy"))


@pytest.fixture(scope="module")
def agreement():
    """The agreement_accuracy module loaded from the checkout."""
    return evaluate.load(str(REPO / "metrics" / "agreement_accuracy"))


@pytest.fixture(scope="module")
def rank():
    """The affordance_rank module loaded from the checkout."""
    return evaluate.load(str(REPO / "metrics" / "affordance_rank"))


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory):
    """llama.cpp's OpenAI-compatible server with SmolLM2-135M-Instruct (``tests/llama_server.py``), once per session."""
    from tests.llama_server import LlamaServer

    with LlamaServer(tmp_path_factory.mktemp("llama") / "server.log") as server:
        yield server
