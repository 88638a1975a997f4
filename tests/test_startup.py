"""Start-up: ``physprobe --help`` and argument errors import none of the heavy libraries (datasets, torch,
transformers, evaluate), which take about a second; ``benchmarks/startup.py`` prints the times."""

import subprocess
import sys

import pytest

HEAVY = ("torch", "transformers", "datasets", "evaluate", "pyarrow", "pandas", "tqdm")
PROBE = ("import sys\nfrom physprobe.cli import main\ntry:\n    code = main({argv!r})\nexcept SystemExit as e:\n    code = e.code\n"
         "print('LOADED', sorted(m for m in {heavy!r} if m in sys.modules), code)")  # fmt: skip


CONFIG_ERRORS = [["score", "--model", "x", "--benchmark", name, "--config", config]
                 for name, config in [("prost", "nope"), ("cccons", "ordinary,ordinary"), ("newton", "repository"), ("text2afford", "")]]  # fmt: skip


@pytest.mark.parametrize("argv, code", [(["--help"], 0), (["score", "--help"], 0), (["score", "--model", "x", "--benchmark", "nope"], 2),
                                        (["build", "--help"], 0), (["generate", "--help"], 0), (["publish", "--help"], 0),
                                        (["publish", "--runs", "runs/x", "--only", "prost"], 2),
                                        *((argv, 2) for argv in CONFIG_ERRORS)])  # fmt: skip
@pytest.mark.processes
def test_help_and_argument_errors_import_nothing_heavy(argv, code):
    """Argument errors that need a benchmark's config names (unknown, repeated, unscorable, empty) too."""
    result = subprocess.run(
        [sys.executable, "-c", PROBE.format(argv=argv, heavy=HEAVY)], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip().splitlines()[-1] == f"LOADED [] {code}", result.stdout + result.stderr


def test_every_benchmark_folder_is_registered():
    """A folder with an ``evaluation.py`` is a benchmark: ``NAMES`` (what the parser offers) lists them all."""
    import importlib.util
    from pathlib import Path

    from physprobe import cli
    from physprobe.data import registry

    folder = Path(importlib.util.find_spec("physprobe.dataset_scripts").submodule_search_locations[0])
    assert registry.names() == sorted(p.parent.name for p in folder.glob("*/evaluation.py"))
    assert cli._generating() == [name for name in registry.names() if registry.new_examples(name)]
    assert cli._generating() == [name for name in registry.names() if registry.new_examples(name)]


@pytest.mark.parametrize("name", ["cccons", "newton", "prost", "text2afford"])
def test_config_names_read_cheaply_are_the_builders(name):
    from physprobe.data import registry

    assert registry.config_names(name) == [config.name for config in registry.builder(name).configs]


@pytest.mark.processes
def test_the_console_command_keeps_the_collector_off_what_it_loaded():
    """``physprobe`` as a command (``cli.command``: the console script, ``python -m physprobe``) owns its process: new
    objects are looked at less often, and what it holds is frozen when it ends, so the collection at exit walks none
    of it; a caller running commands in its own process (``main([...])``: a test, a notebook) keeps its collector as
    Python has it."""
    import subprocess
    import sys

    probe = ("import gc, sys; from physprobe import cli; sys.argv = ['physprobe', 'protocols']; before = gc.get_threshold()[0]; "
             "{call}; print(before, gc.get_threshold()[0], gc.get_freeze_count(), file=sys.stderr)")  # fmt: skip
    owned = subprocess.run([sys.executable, "-c", probe.format(call="cli.command()")], capture_output=True, text=True, check=True)
    borrowed = subprocess.run([sys.executable, "-c", probe.format(call="cli.main()")], capture_output=True, text=True,
                              check=True)  # fmt: skip
    before, threshold, frozen = map(int, owned.stderr.split()[-3:])
    assert threshold == 20_000 != before and frozen > 10_000  # every module's objects
    before, threshold, frozen = map(int, borrowed.stderr.split()[-3:])
    assert threshold == before and frozen == 0
    script = subprocess.run([sys.executable, "-m", "physprobe", "protocols"], capture_output=True, text=True, check=True)
    assert "prost" in script.stdout


@pytest.mark.processes
def test_settling_frees_what_loading_left_in_cycles_before_it_freezes():
    """``collector.settle`` (after a model loads): garbage in reference cycles is collected, not frozen for the rest of
    the process (a GGUF file's converted tensors would be kept); what lives is frozen."""
    import subprocess
    import sys

    probe = ("import gc, weakref\nfrom physprobe.util import collector\ncollector.own_process()\n"
             "class Node: pass\nnode = Node(); node.itself = node; ref = weakref.ref(node); del node\n"
             "collector.settle()\nprint(ref() is None, gc.get_freeze_count() > 0)")  # fmt: skip
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["True", "True"]
