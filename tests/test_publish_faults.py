"""The publishing fault suite: ``physprobe publish --runs`` (``upload.py --runs``) over run folders a hostile user or a
bad day left behind. Only the files physprobe wrote leave the machine, never through a link, as they were written,
agreeing with their record, with no secret and no local path in them; everything else is one line naming the file,
and nothing is written. Also: a parent folder of runs, the card's escaping, the options named when they are wrong."""

from __future__ import annotations

import hashlib
import io
import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from physprobe.cli import main
from physprobe.data.dataset_folder import data_file
from physprobe.data.hub_data import DataSource
from physprobe.record import run_folder, run_record
from physprobe.report.runs import load_run
from physprobe.run.samples import Sample
from physprobe.util.paths import MARKER
from physprobe.util.sizes import human_size

from .fake_hub import FakeHub
from .run_folders import record
from .test_fault_suite import one_error_line, tree_digest
from .test_upload import api_for, upload

PROST = {"mass": {"accuracy": 0.5, "n": 2, "undecided": 0}}
NEWTON = {"track1": {"accuracy": 0.5, "agreement_accuracy": 0.5, "n": 2, "undecided": 0}}


def scored(
    folder: Path,
    benchmark: str,
    metrics: dict,
    model: str = "openai-community/gpt2",
    local: bool = False,
    texts: dict[int, tuple[str, str]] | None = None,
    **fields,
) -> Path:
    """A finished run of ``benchmark`` whose predictions are one row per question ``metrics`` counts; ``texts``: the
    prompt and generated text of some rows."""
    made = record(benchmark, "causal", metrics, model=model, **fields)
    texts = texts or {}
    rows = [Sample(config, i, {}, (0,), "decided", 0, (-1.0, -2.0), 2, generated=texts.get(i, (None, None))[1],
                   prompts=(texts.get(i, (f"question {i}",))[0],))
            for config, figures in metrics.items() for i in range(figures["n"])]  # fmt: skip
    run_record.write(folder, run_folder.owner(model, benchmark, local), made, rows)
    return folder


def publish(*args: str) -> int:
    return upload.main(list(args))


def published_files(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file() and p.name != MARKER
    }


def texts_of(folder: Path) -> str:
    """Every text a published folder holds: its files' bytes (as UTF-8) and its Parquet files' values."""
    parts = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        parts.append(path.read_bytes().decode("utf-8", "replace"))
        if path.suffix == ".parquet":
            parts.append(json.dumps(pq.read_table(path).to_pylist(), ensure_ascii=False))
    return "\n".join(parts)


def rehash(folder: Path, name: str) -> None:
    """The run folder's marker made to vouch for ``name`` as it is now (what a forger, or a copied folder, does)."""
    marker = json.loads((folder / MARKER).read_text())
    marker["files"][name] = hashlib.sha256((folder / name).read_bytes()).hexdigest()
    (folder / MARKER).write_text(json.dumps(marker))


@pytest.fixture
def runs(tmp_path):
    parent = tmp_path / "runs" / "gpt2"
    scored(parent / "prost", "prost", PROST)
    scored(parent / "newton", "newton", NEWTON)
    return parent


# --- only what physprobe wrote, as it wrote it -------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["predictions.parquet", "run.json", "metrics.json"])
def test_a_symlinked_run_file_is_refused_and_the_linked_file_never_copied(name, runs, tmp_path, capsys):
    private = tmp_path / "home" / f"private-{name}"
    private.parent.mkdir()
    source = runs / ("newton" if name == "run.json" else "prost") / name  # run.json: another run's record
    private.write_bytes(source.read_bytes() if name == "run.json" else b"my private bytes " * 100)
    (runs / "prost" / name).unlink()
    (runs / "prost" / name).symlink_to(private)
    before = tree_digest(tmp_path)
    assert publish("--runs", str(runs), "--runs-repo", "my-runs", "--out", str(tmp_path / "hub")) == 2
    one_error_line(capsys.readouterr().err, f"{runs / 'prost' / name} is a symlink (to {private})", "score the run again")
    assert tree_digest(tmp_path) == before  # nothing written: no copy of the linked file anywhere


def test_a_file_changed_since_scoring_is_refused(runs, tmp_path, capsys):
    metrics = runs / "prost" / "metrics.json"
    metrics.write_text(json.dumps({"mass": {"accuracy": 0.99, "n": 2, "undecided": 0}}))  # a better figure, typed in
    assert publish("--runs", str(runs), "--runs-repo", "my-runs", "--out", str(tmp_path / "hub")) == 2
    one_error_line(capsys.readouterr().err, f"{metrics} changed since physprobe score wrote it", "score the run again")
    assert not (tmp_path / "hub").exists()


def test_a_run_folder_holding_another_benchmarks_predictions_is_refused(runs, tmp_path, capsys):
    prost = runs / "prost"
    (prost / "predictions.parquet").write_bytes((runs / "newton" / "predictions.parquet").read_bytes())
    assert publish("--runs", str(runs), "--runs-repo", "my-runs", "--out", str(tmp_path / "hub")) == 2
    one_error_line(capsys.readouterr().err, f"{prost / 'predictions.parquet'} changed since physprobe score wrote it")
    rehash(prost, "predictions.parquet")  # a marker made to vouch for them: the record still disagrees
    assert publish("--runs", str(runs), "--runs-repo", "my-runs", "--out", str(tmp_path / "hub")) == 2
    one_error_line(capsys.readouterr().err, f"{prost / 'predictions.parquet'} holds rows of config track1, which "
                   f"{prost / 'run.json'} (benchmark prost, configs mass) did not score")  # fmt: skip
    assert not (tmp_path / "hub").exists()


def test_predictions_of_another_length_than_the_metrics_count_are_refused(tmp_path, capsys):
    run = scored(tmp_path / "run", "prost", PROST)
    table = pq.read_table(run / "predictions.parquet")
    pq.write_table(table.slice(0, 1), run / "predictions.parquet")
    rehash(run, "predictions.parquet")
    assert publish("--runs", str(run), "--runs-repo", "my-runs", "--out", str(tmp_path / "hub")) == 2
    one_error_line(capsys.readouterr().err, f"{run / 'predictions.parquet'} holds 1 rows of config mass, but "
                   f"{run / 'metrics.json'} counts 2 questions (n)")  # fmt: skip


def test_a_run_without_its_predictions_is_one_line(runs, tmp_path, capsys):
    (runs / "prost" / "predictions.parquet").unlink()
    assert publish("--runs", str(runs), "--runs-repo", "my-runs", "--out", str(tmp_path / "hub")) == 2
    err = capsys.readouterr().err
    one_error_line(err, f"{runs / 'prost' / 'predictions.parquet'} is missing: the run folder is incomplete",
                   f"`physprobe score ... --out {runs / 'prost'}` resumes from its cache")  # fmt: skip
    assert "Traceback" not in err and not (tmp_path / "hub").exists()


# --- nothing local, nothing secret ----------------------------------------------------------------------------------------


def local_run(folder: Path, model: Path, data: Path, benchmark: str = "prost", metrics: dict = PROST, **fields) -> Path:
    revision = "sha256:" + hashlib.sha256(str(model).encode()).hexdigest()
    return scored(folder, benchmark, metrics, model=str(model), local=True, **fields,
                  backend={"name": "hf", "gguf_file": None, "model_revision": revision},
                  data=DataSource(benchmark, str(data), None, tuple(metrics)), out=str(folder),
                  command=("physprobe", "score", "--model", str(model), "--benchmark", benchmark, "--data", str(data),
                           f"--out={folder}"))  # fmt: skip


def test_a_local_model_is_published_by_its_folder_name_and_digest_or_the_id_given(tmp_path, capsys):
    model, data = tmp_path / "home" / "me" / "models" / "tiny-gpt", tmp_path / "home" / "me" / "build"
    run = local_run(tmp_path / "home" / "me" / "runs" / "tiny-gpt" / "prost", model, data)
    digest = json.loads((run / "run.json").read_text())["backend"]["model_revision"][7:19]
    assert publish("--runs", str(run.parent), "--runs-repo", "my-runs", "--out", str(tmp_path / "hub")) == 0
    repo = tmp_path / "hub" / "runs" / "my-runs"
    config = f"prost-tiny-gpt-sha256-{digest}"  # the run's name in the card: the model's published name
    spec = json.loads((repo / "runs" / config / "run.json").read_text())["spec"]
    assert spec == json.loads((repo / "runs" / config / "spec.json").read_text())
    assert spec["model"] == spec["settings"]["model"] == f"tiny-gpt@sha256:{digest}"
    assert spec["data"]["path"] == "<data>" and spec["out"] == "<out>"
    assert spec["command"] == ["physprobe", "score", "--model", f"tiny-gpt@sha256:{digest}", "--benchmark", "prost",
                               "--data", "<data>", "--out=<out>"]  # fmt: skip
    assert str(tmp_path) not in texts_of(repo)  # the card and the report included
    assert (
        publish("--runs", str(run.parent), "--runs-repo", "my-runs", "--out", str(tmp_path / "hub"), "--model-id", "me/tiny-gpt")
        == 0
    )
    assert json.loads((repo / "runs" / "prost-tiny-gpt" / "run.json").read_text())["spec"]["model"] == "me/tiny-gpt"  # its name
    assert "me/tiny-gpt" in (repo / "README.md").read_text() and str(tmp_path) not in texts_of(repo)
    local_run(tmp_path / "other", tmp_path / "models" / "other-gpt", data)
    capsys.readouterr()
    assert publish("--runs", str(run), str(tmp_path / "other"), "--runs-repo", "my-runs", "--out", str(tmp_path / "hub"),
                   "--model-id", "me/tiny-gpt") == 2  # fmt: skip
    one_error_line(capsys.readouterr().err, "--model-id 'me/tiny-gpt' names one model, but the runs are of 2 local models "
                   "(other-gpt, tiny-gpt)")  # fmt: skip


def words_of(text: str) -> str:
    """``text``'s words (letters and digits) in lower case, one ``-`` between and around: a path however spelled."""
    return "-" + "-".join(re.findall(r"[a-z0-9]+", text.lower())) + "-"


def names_and_texts(repo: Path) -> str:
    """Every name (each file's path in the repository) and text of a published folder."""
    return "\n".join(p.relative_to(repo).as_posix() for p in sorted(repo.rglob("*"))) + "\n" + texts_of(repo)


@pytest.mark.parametrize("alike", ["folder name", "label"])
def test_runs_that_would_share_a_name_are_told_apart_by_what_is_published_never_by_their_paths(alike, tmp_path):
    # issue 51: two local models in folders of one name (or two runs of one --label) were told apart by their whole
    # local paths, dashed, in the repository's folder names and card; now by their published names
    models = [tmp_path / "a" / "alice-secret-project" / "ckpt", tmp_path / "a" / "bob-client" / "ckpt"]
    if alike == "label":
        models = [tmp_path / "a" / "alice-secret-project" / "tiny", tmp_path / "a" / "bob-client" / "small"]
    label = {"label": "mine"} if alike == "label" else {}
    runs = [local_run(tmp_path / "runs" / name, m, tmp_path / "build", **label) for name, m in zip(("one", "two"), models)]
    assert publish("--runs", *map(str, runs), "--runs-repo", "r", "--out", str(tmp_path / "hub")) == 0
    repo = tmp_path / "hub" / "runs" / "r"
    digests = [hashlib.sha256(str(m).encode()).hexdigest()[:12] for m in models]  # local_run's model_revision
    expected = {"folder name": [f"prost-ckpt-sha256-{d}" for d in digests],
                "label": [f"prost-mine-{m.name}-sha256-{d}" for m, d in zip(models, digests)]}[alike]  # fmt: skip
    assert sorted(p.name for p in (repo / "runs").iterdir()) == sorted(expected)
    published = names_and_texts(repo).casefold()
    assert "alice-secret-project" not in published and "bob-client" not in published and "alice" not in published
    assert words_of(str(tmp_path)) not in words_of(published)  # no path, however spelled


def test_names_alike_once_spelled_for_the_hub_get_a_hash_of_their_run(tmp_path):
    runs = [scored(tmp_path / name, "prost", PROST, model=f"{name}/gpt2", label=label)
            for name, label in (("one", "mine v1"), ("two", "mine/v1"))]  # fmt: skip
    assert publish("--runs", *map(str, runs), "--runs-repo", "r", "--out", str(tmp_path / "hub")) == 0
    keys = [load_run(run).content_key[:8] for run in runs]
    assert sorted(p.name for p in (tmp_path / "hub" / "runs" / "r" / "runs").iterdir()) == sorted(
        f"prost-mine-v1-{k}" for k in keys
    )


def test_a_local_path_in_another_spelling_is_refused_in_one_line(tmp_path, capsys):
    model = Path("/m/alice-secret/tiny")  # a run's record only: the folder need not be there
    dashed = "m-alice-secret-tiny"  # the label a user gave: the model's path, dashed
    run = local_run(tmp_path / "runs" / "prost", model, tmp_path / "build", label=dashed)
    assert publish("--runs", str(run), "--runs-repo", "r", "--out", str(tmp_path / "hub")) == 2
    one_error_line(capsys.readouterr().err, "would publish the local path", str(model), "nothing was published")
    assert not (tmp_path / "hub" / "runs" / "r").exists()


@pytest.mark.parametrize("spelling", ["as it is", "dashed", "underscored", "URL-encoded", "in capitals", "in a file name"])
def test_check_leaks_finds_every_spelling_of_a_local_path(spelling, tmp_path):
    from physprobe.errors import PublishError
    from physprobe.publish.redaction import check_leaks

    path = "/home/Me/alice secret/ckpt"
    shown = {"as it is": path, "dashed": "home-Me-alice-secret-ckpt", "underscored": "home_me_alice_secret_ckpt",
             "URL-encoded": "%2Fhome%2FMe%2Falice%20secret%2Fckpt", "in capitals": path.upper(),
             "in a file name": "ok"}[spelling]  # fmt: skip
    name = "prost-home-Me-alice-secret-ckpt" if spelling == "in a file name" else "README.md"
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / name).write_text(f"the model was {shown}, scored")
    with pytest.raises(PublishError, match="would publish the local path /home/Me/alice secret/ckpt; nothing was published"):
        check_leaks(tmp_path / "repo", {path: f"the local path {path}"})
    (tmp_path / "repo" / name).unlink()
    (tmp_path / "repo" / "README.md").write_text("home, Me: alice's secret ckpt")  # words: ".../alice secret/..." no
    check_leaks(tmp_path / "repo", {path: f"the local path {path}"})


# --- benchmark text published exactly as scored ---------------------------------------------------------------------------


def test_benchmark_text_is_published_byte_for_byte_and_only_a_known_secret_hidden(built_all, tmp_path, monkeypatch):
    # issue 51: "Basic <word>" was taken for a credential: Text2Afford's row was published as "Basic *** 's equipment !"
    sentence = pq.read_table(built_all / "text2afford" / data_file("high_agreement", "test")).to_pylist()[365]["sentence"]
    assert sentence == "Basic nurse 's equipment !"
    words = [sentence, "The token of thanks", "Bearer of bad news", "api key: a value", "mean token loss"]
    run = scored(tmp_path / "run", "prost", {"mass": {"accuracy": 0.5, "n": len(words), "undecided": 0}},
                 texts={i: (f"Context: {w} Answer:", f"{w} again") for i, w in enumerate(words)})  # fmt: skip
    assert publish("--runs", str(run), "--runs-repo", "r", "--out", str(tmp_path / "hub")) == 0
    (config,) = (tmp_path / "hub" / "runs" / "r" / "runs").iterdir()
    assert (config / "predictions.parquet").read_bytes() == (run / "predictions.parquet").read_bytes()  # byte for byte
    monkeypatch.setenv("OPENAI_API_KEY", KEY)  # a key the server quoted back, known here: hidden, nothing else changed
    quoting = scored(tmp_path / "quoting", "prost", PROST, texts={1: (f"Context: {sentence}", f"headers: Bearer {KEY}")})
    assert publish("--runs", str(quoting), "--runs-repo", "r", "--out", str(tmp_path / "hub")) == 0
    (config,) = (tmp_path / "hub" / "runs" / "r" / "runs").iterdir()
    local, published = (pq.read_table(f / "predictions.parquet").to_pylist() for f in (quoting, config))
    assert published[1]["generated"] == "headers: Bearer ***" and published[1]["prompts"] == [f"Context: {sentence}"]
    assert [r for r in published if r["row"] != 1] == [r for r in local if r["row"] != 1]


def test_a_text_shaped_like_an_unknown_key_is_published_as_it_is_and_warned_of(tmp_path, monkeypatch, capsys):
    # issue 61: it was refused; what the model wrote is published exactly, the place named in one warning line
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    run = scored(tmp_path / "run", "prost", PROST, texts={1: ("Context: a ball", f"quoted: Authorization: Bearer {KEY}")})
    assert publish("--runs", str(run), "--runs-repo", "r", "--out", str(tmp_path / "hub")) == 0
    (warning,) = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert f"{run / 'predictions.parquet'}: 1 text shaped like a credential" in warning and KEY not in warning
    assert "(first: row 1 of config mass (generated))" in warning and "$OPENAI_API_KEY or HF_TOKEN" in warning
    (config,) = (tmp_path / "hub" / "runs" / "r" / "runs").iterdir()
    assert (config / "predictions.parquet").read_bytes() == (run / "predictions.parquet").read_bytes()


def test_published_predictions_that_differ_from_the_runs_are_refused(tmp_path, monkeypatch, capsys):
    from physprobe.publish import redaction

    run = scored(tmp_path / "run", "prost", PROST)

    def altered(files, redacted):  # the redaction of 4673c87: "Basic <word>" taken for a credential
        rows = files.predictions().to_pylist()
        rows[0]["prompts"] = ["Basic *** 's equipment !"]
        sink = io.BytesIO()
        pq.write_table(pa.Table.from_pylist(rows, schema=files.predictions().schema), sink)
        return sink.getvalue()

    monkeypatch.setattr(redaction, "predictions", altered)
    assert publish("--runs", str(run), "--runs-repo", "r", "--out", str(tmp_path / "hub")) == 2
    one_error_line(capsys.readouterr().err, "is not the run's predictions.parquet", "with only its known secrets and local "
                   "paths hidden: row 0 of config mass (prompts) altered; nothing was published")  # fmt: skip


def test_a_bidi_model_name_is_escaped_in_the_card(tmp_path):
    run = scored(tmp_path / "run", "prost", PROST, model="evil\u202emodel")
    assert publish("--runs", str(run), "--runs-repo", "my-runs", "--out", str(tmp_path / "hub")) == 0
    card = (tmp_path / "hub" / "runs" / "my-runs" / "README.md").read_text()
    assert "\u202e" not in card and "evil\\\\u202emodel" in card  # shown as its escape (Markdown-escaped backslash)
    assert (
        json.loads((tmp_path / "hub" / "runs" / "my-runs" / "runs" / "prost-evil-u202emodel" / "run.json").read_text())["spec"][
            "model"
        ]
        == "evil\u202emodel"
    )  # the record keeps the server's id as it is: only what a person reads is escaped


def test_a_runs_repo_name_with_an_escape_sequence_names_the_option_and_shows_it_escaped(runs, tmp_path, capsys):
    assert publish("--runs", str(runs), "--runs-repo", "my\x1b[2J\u202eruns", "--org", "me", "--out", str(tmp_path / "hub")) == 2
    err = capsys.readouterr().err
    one_error_line(err, "--runs-repo 'my\\x1b[2J\\u202eruns': me/my\\x1b[2J\\u202eruns is not a valid Hub repo id")
    assert "\x1b" not in err and "\u202e" not in err and "--org" not in err and not (tmp_path / "hub").exists()


@pytest.mark.parametrize("command", ["publish", "report"])
def test_a_skipped_folder_name_is_shown_escaped(command, runs, tmp_path, capsys):
    odd = tmp_path / "half\x1b[31m\u202edone"
    odd.mkdir()  # a folder of the user's, no run
    if command == "publish":
        assert publish("--runs", str(runs / "prost"), str(odd), "--runs-repo", "my-runs", "--out", str(tmp_path / "hub")) == 0
    else:
        assert main(["report", str(runs / "prost"), str(odd), "--out", str(tmp_path / "report")]) == 0
    err = capsys.readouterr().err
    skipped = [line for line in err.splitlines() if "skipped" in line]
    assert len(skipped) == 1 and "half\\x1b[31m\\u202edone" in skipped[0], err
    assert "\x1b" not in err and "\u202e" not in err


def test_an_error_line_shows_a_path_escaped(tmp_path, capsys):
    odd = tmp_path / "run\u202e\x1b[2J"
    assert main(["report", str(odd), "--out", str(tmp_path / "report")]) == 2
    err = capsys.readouterr().err
    one_error_line(err, "run\\u202e\\x1b[2J")
    assert "\x1b" not in err and "\u202e" not in err


# --- a parent folder of runs ------------------------------------------------------------------------------------------------


def test_a_parent_folder_publishes_every_run_in_it_with_the_report_as_its_card(runs, tmp_path, monkeypatch, capsys):
    from physprobe.publish import hub as hub_calls

    monkeypatch.setattr(hub_calls, "RETRY_DELAYS", (0.0, 0.0, 0.0))
    (runs / "notes").mkdir()  # a user's folder beside the runs: no run, not published
    assert publish("--runs", str(runs), "--runs-repo", "gpt2-runs", "--out", str(tmp_path / "hub")) == 0
    repo = tmp_path / "hub" / "runs" / "gpt2-runs"
    files = published_files(repo)
    assert sorted(f for f in files if f.startswith("runs/")) == [f"runs/{c}/{n}" for c in ("newton-gpt2", "prost-gpt2")
                                                                 for n in ("metrics.json", "predictions.parquet", "run.json", "spec.json")]  # fmt: skip
    for config, benchmark in (("newton-gpt2", "newton"), ("prost-gpt2", "prost")):  # nothing to redact: the bytes written
        for name in ("metrics.json", "predictions.parquet"):
            assert files[f"runs/{config}/{name}"] == (runs / benchmark / name).read_bytes()
        spec = json.loads((runs / benchmark / "spec.json").read_text())  # but the paths: their placeholders
        spec["out"], spec["data"]["path"] = "<out>", "<data>"
        assert json.loads(files[f"runs/{config}/spec.json"]) == spec
        assert json.loads(files[f"runs/{config}/run.json"]) == {
            **json.loads((runs / benchmark / "run.json").read_text()),
            "spec": spec,
        }
    card = files["README.md"].decode()
    assert "## physprobe report" in card and "PROST" in card and "NEWTON" in card
    monkeypatch.setenv("HF_TOKEN", "hf_secret_value")
    with FakeHub() as hub:
        assert upload.main(["--runs", str(runs), "--runs-repo", "gpt2-runs", "--out", str(tmp_path / "hub"), "--push",
                            "--org", "me"], api=api_for(hub)) == 0  # fmt: skip
        remote = hub.repos[("dataset", "me/gpt2-runs")].files
    assert {k: v for k, v in remote.items() if k != ".gitattributes"} == files
    assert "release complete: 1 of 1" in capsys.readouterr().out
    # The dry run says what that push did: the repository's id, and each file the Hub received with its size. It is
    # `physprobe publish`, the same command as upload.py (test_physprobe_publish_is_the_same_command's dry run).
    assert main(["publish", "--runs", str(runs), "--runs-repo", "gpt2-runs", "--out", str(tmp_path / "hub"), "--org", "me"]) == 0
    lines = capsys.readouterr().out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("dataset  me/gpt2-runs: "))
    total = human_size(sum(map(len, files.values())))
    assert lines[start] == f"dataset  me/gpt2-runs: {len(files)} files, {total}"
    listed = sorted(line.split() for line in lines[start + 1 : start + 1 + len(files)])
    assert listed == sorted([name, *human_size(len(data)).split()] for name, data in files.items())
    assert lines[-1] == f"dry run: 1 repository from {tmp_path / 'hub'}; nothing pushed (use --push)"


def test_physprobe_publish_is_the_same_command(runs, capsys):
    # Its dry run of a parent folder of runs is the last publish of
    # test_a_parent_folder_publishes_every_run_in_it_with_the_report_as_its_card, which checks every line it prints.
    assert main(["publish", "--runs", str(runs), "--only", "prost"]) == 2
    one_error_line(capsys.readouterr().err, "physprobe: error: --runs publishes only the runs repository")
    assert main(["publish", "--model-id", "me/x"]) == 2
    one_error_line(capsys.readouterr().err, "--model-id names the model of published runs: give it with --runs")


# --- the grep check: a key-quoting server, credentials in base_url, a local model -------------------------------------------

KEY, PASSWORD = "sk-published-never-0123456789", "pa55-w0rd-never-published"


def test_nothing_secret_or_local_in_anything_published(inputs, tmp_path, monkeypatch, capsys):
    from .fake_openai import FakeServer

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setattr("physprobe.backends.openai.client.backoff", lambda retries: (0.0,) * retries)
    parent = tmp_path / "runs" / "mine"
    with FakeServer(fault="quotes_headers_200", fault_after=1) as server:  # every answer quotes the request's headers
        url = server.base_url.replace("http://", f"http://me:{PASSWORD}@")
        assert main(["score", "--model", server.model, "--model-args", f"base_url={url}", "--benchmark", "newton",
                     "--config", "track1", "--data", str(inputs["build"]), "--limit", "3", "--bootstrap-iters", "0",
                     "--out", str(parent / "newton")]) == 0  # fmt: skip
        assert main(["score", "--model", server.model, "--model-args", f"base_url={server.base_url}", "--benchmark", "newton",
                     "--config", "track1", "--data", str(inputs["build"]), "--limit", "2", "--bootstrap-iters", "0",
                     "--out", str(parent / "newton-key")]) == 0  # the key in the Authorization header, quoted back  # fmt: skip
    assert main(["score", "--model", str(inputs["model"]), "--benchmark", "prost", "--config", "mass", "--limit", "3",
                 "--data", str(inputs["build"]), "--bootstrap-iters", "0", "--out", str(parent / "prost")]) == 0  # fmt: skip
    assert "request headers" in json.dumps(pq.read_table(parent / "newton" / "predictions.parquet").to_pylist())
    forbidden = [KEY, PASSWORD, f"me:{PASSWORD}", str(inputs["model"]), str(inputs["build"]), str(tmp_path)]
    monkeypatch.setenv("HF_TOKEN", "hf_secret_value")
    with FakeHub() as hub:
        assert upload.main(["--runs", str(parent), "--runs-repo", "mine", "--out", str(tmp_path / "hub"), "--push",
                            "--org", "me"], api=api_for(hub)) == 0  # fmt: skip
        remote = hub.repos[("dataset", "me/mine")].files
    repo = tmp_path / "hub" / "runs" / "mine"
    published = texts_of(repo) + "\n".join(v.decode("utf-8", "replace") for v in remote.values())
    assert sorted(remote) == sorted([".gitattributes", *published_files(repo)])
    assert [text for text in forbidden if text in published] == []
    assert "'Authorization': 'Basic ***'" in published and "'Authorization': 'Bearer ***'" in published
    assert "http://***@127.0.0.1" in published  # each scrubbed where it was, not dropped
    (config,) = [p.name for p in (repo / "runs").iterdir() if p.name.startswith("prost-gpt-sha256-")]
    assert "gpt@sha256:" in json.loads((repo / "runs" / config / "run.json").read_text())["spec"]["model"]
    assert KEY not in capsys.readouterr().err


@pytest.fixture(scope="module")
def inputs(built_all, tiny_model):
    rows = pq.read_table(built_all / "prost" / data_file("mass", "test")).to_pylist()[::40]
    model = tiny_model("causal", [f"{r['context']} {r['question']} {r['A']} {r['B']}" for r in rows], "gpt")
    return {"build": built_all, "model": model}


def test_check_leaks_reads_parquet_texts_and_refuses_what_slipped_through(tmp_path):
    from physprobe.errors import PublishError
    from physprobe.publish.redaction import check_leaks

    pq.write_table(pa.table({"generated": [f"quoted {KEY} back"] * 50}), tmp_path / "predictions.parquet")  # compressed
    with pytest.raises(PublishError, match="predictions.parquet would publish a secret"):
        check_leaks(tmp_path, {KEY: "a secret (an API key, token or credential)"})
