"""The wheel as a user gets it: every module, card and data file inside; installed into a fresh virtual
environment (not editable, empty HF_HOME, working directory outside the checkout) it builds every benchmark
and scores a tiny model, with the metric modules read from the installed package."""

import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from physprobe.data import registry
from physprobe.protocols import metric_modules

from . import tiny_models
from .conftest import REPO, UPSTREAM

# Source folders and where setup.cfg installs them.
INSTALLED_AS = {"physprobe": "physprobe", "generators": "physprobe/generators", "dataset_scripts": "physprobe/dataset_scripts",
                "metrics": "physprobe/metrics"}  # fmt: skip


def tracked_files():
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-co", "--exclude-standard"], capture_output=True, text=True, check=True
    )
    return [line for line in listed.stdout.splitlines() if (REPO / line).is_file()]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """The wheel built by pip from a copy of the checkout's files (as an sdist would hold them)."""
    root = tmp_path_factory.mktemp("wheel")
    source = root / "src"
    for name in tracked_files():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(root / "dist"), str(source)],
                   check=True, capture_output=True)  # fmt: skip
    (path,) = (root / "dist").glob("physprobe-*.whl")
    return path


def test_wheel_holds_every_module_card_and_data_file(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = set()
    for name in tracked_files():
        top, _, rest = name.partition("/")
        if top in INSTALLED_AS and "__pycache__" not in name:
            expected.add(f"{INSTALLED_AS[top]}/{rest}")
    assert expected - names == set()
    # What the issue found missing, by name: every builder with its card, protocols and published tables; the metric
    # Spaces' files.
    for benchmark in registry.names():
        folder = f"physprobe/dataset_scripts/{benchmark}"
        assert {
            f"{folder}/{benchmark}.py",
            f"{folder}/card.md",
            f"{folder}/evaluation.py",
            f"{folder}/paper_tables.yaml",
        } <= names
    for metric in metric_modules.NAMES:
        assert {f"physprobe/metrics/{metric}/{f}" for f in (f"{metric}.py", "README.md", "app.py", "requirements.txt")} <= names
    assert not [n for n in names if n.startswith(("tests/", "benchmarks/", "build/")) or n == "upload.py"]
    # The score extra holds every registered backend's libraries (setup.py reads the registry) and the report's matplotlib.
    from physprobe import backends

    metadata = next(zipfile.Path(wheel, name).read_text() for name in names if name.endswith(".dist-info/METADATA"))
    from packaging.requirements import Requirement

    def plain(requirement: str) -> tuple[str, str]:
        parsed = Requirement(requirement)
        return parsed.name, str(sorted(map(str, parsed.specifier)))

    score = {plain(line.split(":", 1)[1].split(";")[0]) for line in metadata.splitlines()
             if line.startswith("Requires-Dist:") and 'extra == "score"' in line}  # fmt: skip
    assert score == {
        plain(r) for r in ("matplotlib>=3.8", *(r for registered in backends.REGISTRY.values() for r in registered.libraries))
    }


def constraints(path: Path) -> Path:
    """The test environment's versions as pip constraints, so the fresh install reuses the same (cached) wheels."""
    frozen = subprocess.run(
        [sys.executable, "-m", "pip", "freeze", "--exclude-editable"], capture_output=True, text=True, check=True
    )
    path.write_text("\n".join(line for line in frozen.stdout.splitlines() if "==" in line and not line.startswith("physprobe")))
    return path


@pytest.mark.slow
@pytest.mark.venv
def test_fresh_venv_builds_and_scores_without_the_checkout(wheel, tmp_path):
    started = time.perf_counter()
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    install = subprocess.run([str(python), "-m", "pip", "install", "-q", "-c", str(constraints(tmp_path / "constraints.txt")),
                              f"{wheel}[score]"], capture_output=True, text=True)  # fmt: skip
    assert install.returncode == 0, install.stderr[-3000:]
    installed = time.perf_counter()
    work = tmp_path / "work"  # outside the checkout: nothing of it is importable from here
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "HF_", "PHYSPROBE_"))}
    env.update(HF_HOME=str(tmp_path / "hf"), HF_HUB_OFFLINE="1", PATH=f"{venv / 'bin'}:{env['PATH']}")

    def physprobe(*args):
        result = subprocess.run(["physprobe", *args], cwd=work, env=env, capture_output=True, text=True, timeout=1200)
        assert result.returncode == 0, result.stderr[-3000:]
        return result.stdout

    where = subprocess.run([str(python), "-c", "import physprobe, physprobe.protocols.metric_modules as m; print(physprobe.__file__); "
                            "print(m.folder('probe_accuracy'))"], cwd=work, env=env, capture_output=True, text=True, check=True)  # fmt: skip
    assert all(line.startswith(str(venv)) for line in where.stdout.split()), where.stdout
    summary = physprobe("build", "all", "--out", "built", "--source-dir", str(UPSTREAM))
    assert "prost" in summary and "newton" in summary and "cccons" in summary and "text2afford" in summary
    built = time.perf_counter()
    texts = [line for line in (UPSTREAM / "SOURCES.md").read_text().splitlines() if line] * 3
    model = tiny_models.causal_lm(tmp_path / "tiny-gpt", texts)
    physprobe("score", "--model", str(model), "--benchmark", "prost", "--data", "built", "--config", "mass", "--limit", "24",
              "--out", "runs/prost")  # fmt: skip
    physprobe("score", "--model", str(model), "--benchmark", "newton", "--data", "built", "--config", "track1", "--limit", "24",
              "--out", "runs/newton")  # fmt: skip
    prost = json.loads((work / "runs/prost/metrics.json").read_text())
    newton = json.loads((work / "runs/newton/metrics.json").read_text())
    assert prost["mass"]["n"] == 24 and 0 <= prost["mass"]["accuracy"] <= 1
    assert newton["track1"]["n"] == 24 and 0 <= newton["track1"]["agreement_accuracy"] <= newton["track1"]["accuracy"]
    info = json.loads((work / "runs/prost/run.json").read_text())
    assert info["versions"]["physprobe"] == "0.1.0" and info["versions"]["torch"]
    assert not list((tmp_path / "hf").glob("**/modules/evaluate_modules/metrics/physprobe*"))  # nothing fetched by Hub id
    # A wheel user publishes: the runs of a parent folder (dry run), a Space from the files the wheel installed.
    physprobe("publish", "--runs", "runs", "--runs-repo", "my-runs", "--out", "hub")
    physprobe("publish", "--only", "probe_accuracy", "--out", "hub")
    repo = work / "hub" / "runs" / "my-runs"
    digest = info["backend"]["model_revision"][7:19]  # a local model's runs are named by its published name
    assert sorted(p.name for p in (repo / "runs").iterdir()) == [
        f"newton-tiny-gpt-sha256-{digest}",
        f"prost-tiny-gpt-sha256-{digest}",
    ]
    published = "".join(p.read_bytes().decode("utf-8", "replace") for p in repo.rglob("*") if p.is_file())
    assert str(tmp_path) not in published and "tiny-gpt@sha256:" in published  # the local model by name and digest
    space = work / "hub" / "spaces" / "probe_accuracy"
    assert (space / "probe_accuracy.py").read_bytes() == (
        metric_modules.folder("probe_accuracy") / "probe_accuracy.py"
    ).read_bytes()
    print(
        f"\nfresh venv: install {installed - started:.0f} s, build all {built - installed:.0f} s, "
        f"score {time.perf_counter() - built:.0f} s, total {time.perf_counter() - started:.0f} s"
    )
