"""Every config of every benchmark, written and read back under the lowest pyarrow (and datasets) setup.cfg allows
and under the test environment's (the newest): pyarrow before 26 could not read a null inside a fixed-size list,
so Text2Afford's ``default`` once failed there whichever version wrote it. The floor environment is a fresh venv
(pip's cache makes a rerun cheap); ``benchmarks/floors.py`` does the same for every requirement, with scoring."""

import configparser
import json
import os
import shutil
import subprocess
import sys

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from .conftest import REPO, UPSTREAM

# Reads every config of the builds given, with pyarrow and with datasets.load_dataset; prints a digest of each one's rows.
READ = """
import hashlib, json, sys
import datasets, pyarrow as pa, pyarrow.parquet as pq
from pathlib import Path
datasets.disable_progress_bars()
digests = {}
for build in sys.argv[2:]:
    for parquet in sorted(Path(build).glob("*/*/test-00000-of-00001.parquet")):
        benchmark, config = parquet.parts[-3], parquet.parts[-2]
        rows = pq.read_table(parquet).to_pylist()
        loaded = datasets.load_dataset(str(parquet.parents[1]), config, split="test", cache_dir=sys.argv[1])
        assert loaded.to_list() == rows, (build, benchmark, config)
        digests[f"{benchmark}/{config}"] = digests.get(f"{benchmark}/{config}", []) + [
            hashlib.sha256(json.dumps(rows, sort_keys=True, default=str).encode()).hexdigest()]
print(json.dumps({"pyarrow": pa.__version__, "datasets": datasets.__version__, "digests": digests}))
"""


def floor(name: str) -> str:
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg")
    for line in config["options"]["install_requires"].splitlines():
        if line.strip() and Requirement(line).name == name:
            (version,) = [s.version for s in Requirement(line).specifier if s.operator == ">="]
            return version
    raise AssertionError(f"setup.cfg does not require {name}")


@pytest.mark.slow
@pytest.mark.venv
def test_every_config_round_trips_under_the_lowest_and_the_newest_pyarrow(built_all, tmp_path):
    import datasets
    import pyarrow

    source = tmp_path / "src"
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-co", "--exclude-standard"], capture_output=True, text=True, check=True
    )
    for name in listed.stdout.splitlines():
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    install = subprocess.run([python, "-m", "pip", "install", "-q", f"pyarrow=={floor('pyarrow')}", f"datasets=={floor('datasets')}",
                              str(source)], capture_output=True, text=True)  # fmt: skip
    assert install.returncode == 0, install.stderr[-3000:]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["HF_HOME"] = str(tmp_path / "hf")
    lowest_build = tmp_path / "lowest-build"
    built = subprocess.run([str(venv / "bin" / "physprobe"), "build", "all", "--out", str(lowest_build), "--source-dir", str(UPSTREAM)],
                           capture_output=True, text=True, env=env, cwd=tmp_path)  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]

    def read(python_path: str) -> dict:
        done = subprocess.run([python_path, "-c", READ, str(tmp_path / "cache"), str(built_all), str(lowest_build)],
                              capture_output=True, text=True, env=env, cwd=tmp_path)  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    lowest, newest = read(python), read(sys.executable)
    assert Version(lowest["pyarrow"]) == Version(floor("pyarrow")) and Version(lowest["datasets"]) == Version(floor("datasets"))
    assert (newest["pyarrow"], newest["datasets"]) == (pyarrow.__version__, datasets.__version__)
    assert "text2afford/default" in newest["digests"] and len(newest["digests"]) >= 40
    # Both environments read both builds, and the builds hold the same rows: one digest per config, four times.
    assert lowest["digests"] == newest["digests"]
    assert all(len(set(d)) == 1 and len(d) == 2 for d in newest["digests"].values())
    print(
        f"\nread back under pyarrow {lowest['pyarrow']} / datasets {lowest['datasets']} and pyarrow {newest['pyarrow']} / "
        f"datasets {newest['datasets']}: {len(newest['digests'])} configs, each built under both"
    )
