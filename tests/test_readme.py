"""The README as a user follows it. Every fenced block is named after what it is for (```` ```bash quick-start ````), and
every command block is executed here: the user's path (install, quick start, report, other models) in one fresh copy
of the clone with a fresh virtual environment, an empty Hugging Face cache and a physprobe cache holding only the quick
start's GGUF conversion, then the maintainers' publishing block in the development set-up (the clone installed
editable as ``.venv``); the development block is what ``.ci/run`` runs. What the quick start prints must hold the lines the README shows.

The tests read the blocks, never their commands: changing the quick start (another benchmark, ``--benchmark all``)
is an edit of the README alone, whose shown output must then be pasted from what the command prints (the slow test's
failure shows it)."""

import os
import re
import shlex
import shutil
import subprocess

import pyarrow.parquet as pq
import pytest

from physprobe import cli

from .conftest import REPO, cache_with
from .test_wheel import constraints, tracked_files

README = REPO / "README.md"
FENCE = re.compile(r"^```(\w+)(?: ([^\n]+))?\n(.*?)^```$", re.M | re.S)
USER_PATH = ("install", "use", "quick-start", "report", "models")  # run in this order in one fresh clone
PYTHON = ("use",)  # Python blocks among them (run with the clone's python, the others with bash)
MAINTAINERS = ("publish",)  # then, in the same clone, from the development set-up
SHOWN = {"quick-start output": "quick-start"}  # a text block showing what a command block prints
CI = "develop"  # .ci/run's two commands
MOST_BYTES = 8_000  # the README is read in five minutes; the rest lives in docs/


def blocks() -> dict[str, str]:
    """The README's fenced blocks by name (the words after the language)."""
    found = FENCE.findall(README.read_text(encoding="utf-8"))
    assert all(name for _, name, _ in found), [text[:60] for _, name, text in found if not name]  # every block named
    named = {name.strip(): text for _, name, text in found}
    assert len(named) == len(found), "two blocks share a name"
    return named


def commands(block: str) -> list[str]:
    """A bash block's commands, one a line, without comments."""
    return [line.split("  #")[0].strip() for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def shown_lines(text: str) -> list[str]:
    """Output lines as compared: durations (``real 1m12.3s``) masked, runs of blanks as one, blank lines dropped."""
    return [re.sub(r"\d+m[\d.]+s", "<time>", " ".join(line.split())) for line in text.splitlines() if line.strip()]


def test_the_readme_is_short_and_each_of_its_blocks_is_run_or_shown():
    assert README.stat().st_size <= MOST_BYTES, f"README.md is {README.stat().st_size:,} bytes: move detail to docs/"
    assert set(blocks()) == {*USER_PATH, *MAINTAINERS, *SHOWN, CI}
    for page in [README, *sorted((REPO / "docs").glob("*.md"))]:  # every link between the README and docs/ leads somewhere
        for link in re.findall(r"\]\(([\w./-]+\.md)(?:#[\w-]+)?\)", page.read_text(encoding="utf-8")):
            assert (page.parent / link).is_file(), (page.name, link)


LOG = REPO / "docs" / "measurements.md"  # the one dated log of measured figures
HISTORY = {  # what belongs in the log, not in the README or a reference page
    "a load average": re.compile(r"\bload averages?\b|\(load\b|\bload (?:of )?\d", re.I),
    "an issue number": re.compile(r"\bissues? #?\d+", re.I),
    "a date": re.compile(r"\b20\d\d-\d\d-\d\d\b"),
    # 7 to 40 hex digits with a letter and a digit, not a pinned upstream commit (repo@abc1234) nor part of a path or digest
    "a commit hash": re.compile(r"(?<![@\w:/.-])(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b"),
}
CODE = re.compile(r"^```.*?^```$|`[^`\n]*`", re.M | re.S)  # examples in code are values, not history


def history(text: str) -> list[str]:
    """What ``text``'s prose (its code left out) holds of the log's kind: load averages, issue numbers, dates, hashes.

    >>> history("Measured (load 10 to 14) at c77582d, issue 20, 2026-11-27; pinned nala-cub/prost@d6285ef, `sha 0123456789ab`")
    ['a load average: (load', 'a commit hash: c77582d', 'an issue number: issue 20', 'a date: 2026-11-27']
    """
    prose = CODE.sub("", text)
    found = [
        (match.start(), f"{what}: {match.group(0)}") for what, pattern in HISTORY.items() for match in pattern.finditer(prose)
    ]
    return [line for _, line in sorted(found)]


def test_the_readme_and_reference_pages_hold_no_history_and_link_the_log():
    assert history("Measured (load 10 to 14) at c77582d, issue 20, 2026-11-27; nala-cub/prost@d6285ef, `0123456789ab`") == [
        "a load average: (load", "a commit hash: c77582d", "an issue number: issue 20", "a date: 2026-11-27"
    ]  # fmt: skip
    pages = [README, REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md"))]
    found = {page.name: history(page.read_text(encoding="utf-8")) for page in pages if page != LOG}
    assert not {name: lines for name, lines in found.items() if lines}, "move measured figures to docs/measurements.md"
    assert "(docs/measurements.md)" in README.read_text(encoding="utf-8")
    entries = re.findall(r"^## .+\n\n\*([^*]+)\*", LOG.read_text(encoding="utf-8"), re.M)  # each entry says when and whence
    assert len(entries) == LOG.read_text(encoding="utf-8").count("\n## ") and all("from " in entry for entry in entries)


def test_the_development_block_is_what_ci_runs():
    ci = [line for line in commands((REPO / ".ci" / "run").read_text()) if not line.startswith(("set ", "cd ", "if ", "fi", "("))]
    assert commands(blocks()[CI]) == ci[-2:] == ["bash setup.sh", ".venv/bin/python -m pytest"]


def test_every_physprobe_command_of_the_readme_parses():
    # The quick sibling of the fresh-clone run: each physprobe command line as the command line's parser reads it.
    lines = [
        line.removeprefix("time ").removeprefix(".venv/bin/")
        for name in (*USER_PATH, *MAINTAINERS)
        if name not in PYTHON
        for line in commands(blocks()[name])
    ]
    invocations = [shlex.split(line.replace('"$SMOLLM2"', "smollm2-folder")) for line in lines if line.startswith("physprobe ")]
    assert {argv[1] for argv in invocations} >= {"build", "score", "report", "publish"}
    for argv in invocations:
        args = cli.parser().parse_args(argv[1:])
        assert args.command == argv[1]


def test_the_datasets_and_metrics_block_reads_the_built_data(built_all, tmp_path, monkeypatch, capsys):
    # The README's Python block as it runs in a clone whose datasets are built into data/: its figure is the share of
    # PROST's mass questions whose answer is the first option, read here from the Parquet file itself.
    (tmp_path / "data").symlink_to(built_all)
    (tmp_path / "metrics").symlink_to(REPO / "metrics")
    monkeypatch.chdir(tmp_path)
    exec(compile(blocks()["use"], "README.md", "exec"), {})
    labels = pq.read_table(built_all / "prost" / "mass" / "test-00000-of-00001.parquet")["label"].to_pylist()
    assert len(labels) == 1440
    assert capsys.readouterr().out.strip() == f"1440 questions; the first option every time: {round(labels.count(0) / 1440, 3)}"


@pytest.mark.slow
@pytest.mark.venv
def test_a_user_following_the_readme_in_a_fresh_clone(smollm2_conversion, tmp_path):
    """The README's blocks, in order, as a user runs them after cloning: a git repository holding the checkout's files
    beside the shared upstream mirror (``../shared``), the virtual environment the install block makes (``.venv``,
    active for every block after it, as in the user's shell), an empty Hugging Face cache; pip reuses this
    environment's versions (constraints), so it installs what a user would get from the same index.

    The physprobe cache holds one thing, the quick start's GGUF file converted as the run's other tests read it
    (``smollm2_conversion``, made with the same transformers): the quick start reads that conversion, as the README's
    timing says of a second run, and the Gemma-3 block converts its file in the clone (a first conversion by the
    installed package; test_gguf_cache checks what a first conversion writes)."""
    shared = REPO.parent / "shared"
    clone = tmp_path / "clone"
    venv = clone / ".venv"
    for name in tracked_files():  # the working tree's files, committed in a new repository: a clone of this state
        (clone / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, clone / name)
    git = ["git", "-C", str(clone), "-c", "user.name=readme", "-c", "user.email=readme@localhost"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "clone"]):
        subprocess.run([*git, *args], check=True, capture_output=True)
    (tmp_path / "shared").symlink_to(shared)  # ../shared/data/upstream, as beside the checkout
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "HF_", "PHYSPROBE_", "PYTEST_"))}
    env.update(PATH=f"{venv / 'bin'}:{env['PATH']}", VIRTUAL_ENV=str(venv), HF_HOME=str(tmp_path / "hf"), HF_HUB_OFFLINE="1",
               PHYSPROBE_CACHE=str(tmp_path / "physprobe-cache"), PIP_CONSTRAINT=str(constraints(tmp_path / "constraints.txt")))  # fmt: skip
    cache_with(smollm2_conversion, tmp_path / "physprobe-cache")
    named = blocks()
    printed = {}

    def run(name):
        command = [str(venv / "bin" / "python"), "-c"] if name in PYTHON else ["bash", "-e", "-o", "pipefail", "-c"]
        done = subprocess.run([*command, named[name]], cwd=clone, env=env, capture_output=True, text=True, timeout=3600)
        assert done.returncode == 0, f"README block {name!r} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        printed[name] = done.stdout + done.stderr

    for name in USER_PATH:
        run(name)
    # The development set-up, as `bash setup.sh` leaves it for these blocks: the clone installed editable, in .venv.
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", "-e", str(clone)], env=env,
                   check=True, capture_output=True)  # fmt: skip
    for name in MAINTAINERS:
        run(name)

    for shown, block in SHOWN.items():
        missing = [line for line in shown_lines(named[shown]) if line not in shown_lines(printed[block])]
        assert not missing, f"the README shows lines {block!r} did not print: {missing}\nit printed:\n{printed[block]}"
    runs = sorted(p.parent for p in (clone / "runs").rglob("run.json"))  # run folders, a card's among them
    assert runs and all((run / "metrics.json").is_file() and (run / "spec.json").is_file() for run in runs)
    html = (clone / "report" / "report.html").read_text(encoding="utf-8")
    assert "SmolLM2" in html or "smollm2" in html
    assert sorted(p.name for p in (clone / "hub" / "datasets").iterdir()) == [
        "cccons",
        "newton",
        "prost",
        "text2afford",
    ]
    # Nothing was written outside the clone and the caches given.
    assert {p.name for p in tmp_path.iterdir()} <= {"clone", "shared", "hf", "physprobe-cache", "constraints.txt"}
