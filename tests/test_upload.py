"""upload.py: dry run and validation, publishing through a fake Hub server on 127.0.0.1 that fails
requests on demand (half-way failures, transient errors, a closed endpoint), and the read side through a
real Hub-compatible server (olah) serving the exported folders."""

import importlib.util
import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from physprobe.errors import PublishError
from physprobe.publish import folders
from physprobe.publish import hub as hub_calls
from physprobe.util.paths import MARKER

from . import olah_hub
from .conftest import REPO
from .fake_hub import FakeHub


def load_upload():
    """``upload.py``, the checkout's entry to ``physprobe publish`` (``physprobe.publish.main``)."""
    spec = importlib.util.spec_from_file_location("upload", REPO / "upload.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["upload"] = module  # dataclasses look their module up while the class is created
    spec.loader.exec_module(module)
    return module


upload = load_upload()


@pytest.fixture(scope="module")
def hub_dir(upstream_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("hub")
    # NEWTON's card states no licence (its upstream states none): the dry run, as --push, refuses it unless allowed
    assert upload.main(["--out", str(out), "--source-dir", str(upstream_dir), "--allow-unknown-license"]) == 0
    return out


def front_matter(path):
    return yaml.safe_load(path.read_text().split("---\n")[1])


def test_dry_run_writes_seven_validated_repo_folders(hub_dir):
    assert sorted(p.name for p in (hub_dir / "datasets").iterdir()) == ["cccons", "newton", "prost", "text2afford"]
    assert sorted(p.name for p in (hub_dir / "spaces").iterdir()) == ["affordance_rank", "agreement_accuracy", "probe_accuracy"]
    for folder in (hub_dir / "datasets").iterdir():
        meta = front_matter(folder / "README.md")
        for key in (
            "configs",
            "dataset_info",
            "license",
            "task_categories",
            "language",
            "size_categories",
            "pretty_name",
            "source_datasets",
        ):
            assert key in meta, (folder.name, key)
    for folder in (hub_dir / "spaces").iterdir():
        meta = front_matter(folder / "README.md")
        assert meta["sdk"] == "gradio" and {"evaluate", "metric"} <= set(meta["tags"])
        assert (
            f'Path(__file__).with_name("{folder.name}.py")' in (folder / "app.py").read_text()
        )  # its own module, not a Hub copy
        assert (folder / "requirements.txt").is_file() and (folder / f"{folder.name}.py").is_file()


def test_validation_catches_a_card_that_lies(hub_dir, tmp_path):
    folder = tmp_path / "prost"
    shutil.copytree(hub_dir / "datasets" / "prost", folder)
    card = folder / "README.md"
    card.write_text(card.read_text().replace("num_examples: 1440", "num_examples: 1441", 1))
    repo = folders.RepoFolder("prost", "dataset", folder, "x")
    # datasets itself checks split sizes against the card; either way the config is named.
    with pytest.raises(PublishError, match=r"prost: config 'circumference' does not load: NonMatchingSplitsSizesError"):
        folders.validate(repo, tmp_path / "cache")


def test_validation_catches_a_broken_metric(hub_dir, tmp_path):
    folder = tmp_path / "probe_accuracy"
    shutil.copytree(hub_dir / "spaces" / "probe_accuracy", folder)
    module = folder / "probe_accuracy.py"
    module.write_text(module.read_text().replace("{'accuracy': 0.75}", "{'accuracy': 0.5}"))
    with pytest.raises(PublishError, match="1 of .* docstring examples fail"):
        folders.validate(folders.RepoFolder("probe_accuracy", "space", folder, "x"), tmp_path)


def repos(hub_dir, names=("prost", "probe_accuracy", "text2afford")):
    out = []
    for name in names:
        kind = "space" if name in folders.METRICS else "dataset"
        out.append(folders.RepoFolder(name, kind, hub_dir / ("spaces" if kind == "space" else "datasets") / name, "src@abc"))
    return out


def local_files(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file() and p.name != MARKER}


@pytest.fixture
def hub(monkeypatch):
    monkeypatch.setattr(hub_calls, "RETRY_DELAYS", (0.0, 0.0, 0.0))
    with FakeHub() as server:
        yield server


def api_for(server):
    from huggingface_hub import HfApi

    return HfApi(endpoint=server.url, token="hf_secret_value")


def test_push_publishes_then_is_a_no_op_and_tags_once(hub_dir, hub):
    lines = []
    first = hub_calls.push(repos(hub_dir), api_for(hub), "physprobe", token="hf_secret_value", tag="v0.1.0", log=lines.append)
    assert first == {
        "physprobe/prost": "committed",
        "physprobe/probe_accuracy": "committed",
        "physprobe/text2afford": "committed",
    }
    for repo in repos(hub_dir):
        remote = hub.repos[(repo.repo_type, repo.repo_id("physprobe"))]
        assert remote.files == {**local_files(repo.folder), ".gitattributes": remote.files[".gitattributes"]}
        assert remote.tags == {"v0.1.0": remote.head}
    assert lines[:3] == ["committed  physprobe/prost", "committed  physprobe/probe_accuracy", "committed  physprobe/text2afford"]
    assert hub_calls.release_line(first, "v0.1.0") == "release complete: 3 of 3 repositories published and tagged v0.1.0"
    commits = hub.counts["commit"]
    again = hub_calls.push(repos(hub_dir), api_for(hub), "physprobe", token="hf_secret_value", tag="v0.1.0", log=lines.append)
    assert set(again.values()) == {"unchanged"} and hub.counts["commit"] == commits  # no empty commits
    assert hub.counts["tag"] == 3  # tagged once


def test_stale_remote_files_are_deleted_and_gitattributes_kept(hub_dir, hub, tmp_path):
    folder = tmp_path / "prost"
    shutil.copytree(hub_dir / "datasets" / "prost", folder)
    stale = folder / "data" / "train-00000-of-00001.parquet"
    stale.parent.mkdir()
    stale.write_bytes(b"earlier layout")
    repo = folders.RepoFolder("prost", "dataset", folder, "x")
    assert hub_calls.push([repo], api_for(hub), "physprobe", token="t", log=lambda line: None) == {"physprobe/prost": "committed"}
    shutil.rmtree(stale.parent)
    assert hub_calls.push([repo], api_for(hub), "physprobe", token="t", log=lambda line: None) == {"physprobe/prost": "committed"}
    remote = hub.repos[("dataset", "physprobe/prost")].files
    assert "data/train-00000-of-00001.parquet" not in remote and ".gitattributes" in remote
    assert set(remote) - {".gitattributes"} == set(local_files(folder))


@pytest.mark.slow
def test_a_publish_failing_half_way_is_reported_and_completed_by_rerunning(hub_dir, hub, upstream_dir, monkeypatch, capsys):
    monkeypatch.setenv("HF_TOKEN", "hf_secret_value")
    from huggingface_hub import HfApi

    hub.faults = {("commit", 2): 403}  # the second repository's commit is refused (not transient)
    args = ["--push", "--out", str(hub_dir), "--only", "prost,probe_accuracy,text2afford", "--tag", "v0.1.0",
            "--source-dir", str(upstream_dir)]  # fmt: skip
    assert upload.main(args, api=HfApi(endpoint=hub.url)) == 1
    out = capsys.readouterr().out.splitlines()
    pushed = [line for line in out if "physprobe/" in line]
    assert pushed[0] == "committed  physprobe/prost"
    assert pushed[1].startswith("failed     physprobe/text2afford: HTTP 403")
    assert pushed[2] == "committed  physprobe/probe_accuracy"
    assert out[-1] == ("release INCOMPLETE: 2 of 3 repositories published; tag v0.1.0 not created; "
                       "failed: physprobe/text2afford. Re-run the same command to finish")  # fmt: skip
    assert all(not repo.tags for repo in hub.repos.values())  # no repository tagged before all succeeded
    assert upload.main(args, api=HfApi(endpoint=hub.url)) == 0  # the same command again does exactly what is missing
    out = capsys.readouterr().out.splitlines()
    assert [line for line in out if line.startswith(("committed", "unchanged"))] == [
        "unchanged  physprobe/prost",
        "committed  physprobe/text2afford",
        "unchanged  physprobe/probe_accuracy",
    ]
    assert out[-1] == "release complete: 3 of 3 repositories published and tagged v0.1.0"
    assert hub.counts["commit"] == 4 and all(
        repo.tags == {"v0.1.0": repo.head} for repo in hub.repos.values()
    )  # 3 + the refused one
    assert "hf_secret_value" not in "\n".join(out)


def test_transient_errors_are_retried_with_backoff(hub_dir, hub):
    hub.faults = {("create", 1): 503, ("create", 2): 502, ("info", 1): 429}
    lines = []
    assert hub_calls.push(repos(hub_dir, ["prost"]), api_for(hub), "physprobe", token="t", log=lines.append) == {
        "physprobe/prost": "committed"
    }
    assert [line.split(" (")[0] for line in lines] == ["retrying  physprobe/prost in 0 s", "retrying  physprobe/prost in 0 s",
                                                      "retrying  physprobe/prost in 0 s", "committed  physprobe/prost"]  # fmt: skip
    hub.faults = {("create", n): 500 for n in range(3, 10)}  # never recovers: four attempts, then failed
    state = hub_calls.push(repos(hub_dir, ["text2afford"]), api_for(hub), "physprobe", token="t", log=lambda line: None)
    assert state["physprobe/text2afford"].startswith("failed: HTTP 500") and hub.counts["create"] == 2 + 1 + 4


def test_a_closed_endpoint_is_a_network_error_not_a_rejected_token(hub_dir, upstream_dir, monkeypatch, capsys):
    monkeypatch.setattr(hub_calls, "RETRY_DELAYS", (0.0,))
    monkeypatch.setenv("HF_TOKEN", "hf_secret_value")
    closed = f"http://127.0.0.1:{olah_hub.free_port()}"
    from huggingface_hub import HfApi

    assert upload.main(["--push", "--out", str(hub_dir), "--only", "probe_accuracy"], api=HfApi(endpoint=closed)) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"upload.py: error: cannot reach the Hub at {closed} (ConnectError") and "rejected" not in err


def test_token_is_required_and_never_printed(hub_dir, hub, monkeypatch, capsys):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr("huggingface_hub.get_token", lambda: None)
    assert upload.main(["--push", "--out", str(hub_dir), "--only", "prost"], api=api_for(hub)) == 2
    assert "no Hugging Face token" in capsys.readouterr().err
    monkeypatch.setenv("HF_TOKEN", "hf_secret_value")
    hub.role = "read"
    assert upload.main(["--push", "--out", str(hub_dir), "--only", "probe_accuracy"], api=api_for(hub)) == 2
    output = capsys.readouterr()
    # issue 51: "token of" was scrubbed as a Token credential ("the Hugging Face token *** maintainer is read-only")
    assert output.err == "upload.py: error: the Hugging Face token of maintainer is read-only; a write token is needed\n"
    assert "hf_secret_value" not in output.out + output.err
    assert not hub.repos and "create" not in hub.counts  # whoami only: nothing created or committed


def test_a_dataset_with_an_unknown_license_is_refused_unless_allowed(hub_dir, hub, tmp_path, monkeypatch, capsys):
    from huggingface_hub import HfApi

    out = tmp_path / "hub"
    shutil.copytree(hub_dir, out)
    card = out / "datasets" / "prost" / "README.md"
    card.write_text(card.read_text().replace(f"license: {front_matter(card)['license']}", "license: unknown", 1))
    monkeypatch.setattr(
        folders,
        "export",
        lambda out_, source_dir, only: [folders.RepoFolder("prost", "dataset", out / "datasets" / "prost", "x")],
    )
    monkeypatch.setenv("HF_TOKEN", "hf_secret_value")
    message = f"{card.parent}: the card's license is 'unknown'; state it, or pass --allow-unknown-license"
    assert upload.main(["--out", str(out)]) == 2  # the dry run refuses it as --push would, after saying what it would push
    output = capsys.readouterr()
    assert output.out.splitlines()[-1] == f"--push would refuse: {message} to publish it anyway"
    assert output.err == f"upload.py: error: dry run: --push would refuse {message} to publish it anyway\n"
    assert upload.main(["--out", str(out), "--allow-unknown-license"]) == 0
    assert f"note: {message}" in capsys.readouterr().out
    assert upload.main(["--out", str(out), "--push"], api=HfApi(endpoint=hub.url)) == 2
    assert f"upload.py: error: {message}" in capsys.readouterr().err and not hub.repos  # refused before any repo exists
    assert upload.main(["--out", str(out), "--push", "--allow-unknown-license"], api=HfApi(endpoint=hub.url)) == 0
    assert hub.repos[("dataset", "physprobe/prost")].files["README.md"] == card.read_bytes()


def test_only_git_tracked_metric_files_are_published(tmp_path, monkeypatch):
    root = tmp_path / "checkout"
    metric = root / "metrics" / "toy"
    metric.mkdir(parents=True)
    (metric / "toy.py").write_text("x = 1\n")
    (metric / "README.md").write_text("---\ntitle: toy\n---\n")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "toy"], check=True)
    (metric / ".env").write_text("HF_TOKEN=hf_leaked\n")  # stray, untracked
    (metric / "toy.py").write_text("x = 2  # an uncommitted edit\n")
    (metric / "__pycache__").mkdir()
    (metric / "__pycache__" / "toy.cpython-311.pyc").write_bytes(b"\0")
    monkeypatch.setattr(folders, "METRICS", ("toy",))
    monkeypatch.setattr(folders, "metric_folder", lambda name: root / "metrics" / name)
    [repo] = folders.export(tmp_path / "out", None, only={"toy"})
    assert sorted(local_files(repo.folder)) == ["README.md", "toy.py"]
    assert (repo.folder / "toy.py").read_text() == "x = 1\n"  # the committed content
    assert repo.folder.stat().st_mode & 0o777 == 0o755


@pytest.mark.slow
@pytest.mark.processes
def test_every_config_loads_by_hub_id_through_olah(hub_dir, tmp_path):
    repos = {f"physprobe/{folder.name}": folder for folder in sorted((hub_dir / "datasets").iterdir())}
    expected = {}
    for repo_id, folder in repos.items():
        meta = front_matter(folder / "README.md")
        expected[repo_id.split("/")[1]] = {i["config_name"]: i["splits"][0]["num_examples"] for i in meta["dataset_info"]}
    script = (
        "import json, sys, datasets\n"
        "datasets.disable_progress_bars()\n"
        "expected = json.loads(sys.argv[1])\n"
        "seen = {}\n"
        "for name, configs in expected.items():\n"
        "    assert sorted(datasets.get_dataset_config_names(f'physprobe/{name}')) == sorted(configs)\n"
        "    for config in configs:\n"
        "        seen.setdefault(name, {})[config] = datasets.load_dataset(f'physprobe/{name}', config, split='test', cache_dir=sys.argv[2]).num_rows\n"
        "print(json.dumps(seen))\n"
    )
    with olah_hub.serve(tmp_path, repos) as endpoint:
        env = {**os.environ, "HF_ENDPOINT": endpoint, "HF_HUB_OFFLINE": "0", "HF_HOME": str(tmp_path / "hf")}
        result = subprocess.run([sys.executable, "-c", script, json.dumps(expected), str(tmp_path / "cache")],
                                env=env, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == expected


def test_a_space_from_an_installed_wheel_publishes_the_files_its_record_lists(tmp_path, monkeypatch):
    import base64
    import hashlib
    import importlib.metadata

    site = tmp_path / "site-packages"
    metric = site / "physprobe" / "metrics" / "toy"
    (metric / "__pycache__").mkdir(parents=True)
    shipped = {"toy.py": b"x = 1\n", "README.md": b"---\ntitle: toy\n---\n", "app.py": b"import toy\n"}
    record = []
    for name, content in shipped.items():
        (metric / name).write_bytes(content)
        digest = base64.urlsafe_b64encode(hashlib.sha256(content).digest()).rstrip(b"=").decode()
        record.append(f"physprobe/metrics/toy/{name},sha256={digest},{len(content)}")
    (metric / ".env").write_text("HF_TOKEN=hf_leaked\n")  # beside the installed files, listed nowhere
    (metric / "__pycache__" / "toy.cpython-311.pyc").write_bytes(b"\0")
    info = site / "physprobe-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: physprobe\nVersion: 0.1.0\n")
    (info / "RECORD").write_text("\n".join([*record, "physprobe-0.1.0.dist-info/RECORD,,"]) + "\n")
    wheel = importlib.metadata.PathDistribution(info)
    assert folders.installed_files(metric, wheel) == dict(sorted(shipped.items()))
    monkeypatch.setattr(importlib.metadata, "distribution", lambda name: wheel)
    monkeypatch.setattr(folders, "METRICS", ("toy",))
    monkeypatch.setattr(folders, "metric_folder", lambda name: metric)
    [repo] = folders.export(tmp_path / "out", None, only={"toy"})  # no git checkout around it: the wheel's files
    assert local_files(repo.folder) == shipped
    (metric / "toy.py").write_bytes(b"x = 2  # edited in site-packages\n")
    with pytest.raises(PublishError, match=r"toy.py changed since physprobe was installed"):
        folders.export(tmp_path / "out", None, only={"toy"})
