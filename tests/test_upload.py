"""upload.py: dry run and validation, the push plan against an HfApi-shaped object, and the read side
through a real Hub-compatible server (olah) serving the exported folders."""

import hashlib
import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest
import yaml

from .conftest import REPO


def load_upload():
    spec = importlib.util.spec_from_file_location("upload", REPO / "upload.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["upload"] = module  # dataclasses look their module up while the class is created
    spec.loader.exec_module(module)
    return module


upload = load_upload()


@pytest.fixture(scope="module")
def hub_dir(upstream_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("hub")
    assert upload.main(["--out", str(out), "--source-dir", str(upstream_dir)]) == 0
    return out


def front_matter(path):
    return yaml.safe_load(path.read_text().split("---\n")[1])


def test_dry_run_writes_seven_validated_repo_folders(hub_dir):
    assert sorted(p.name for p in (hub_dir / "datasets").iterdir()) == ["cccons", "newton", "prost", "text2afford"]
    assert sorted(p.name for p in (hub_dir / "spaces").iterdir()) == ["affordance_rank", "agreement_accuracy", "probe_accuracy"]
    for folder in (hub_dir / "datasets").iterdir():
        meta = front_matter(folder / "README.md")
        for key in ("configs", "dataset_info", "license", "task_categories", "language", "size_categories", "pretty_name", "source_datasets"):
            assert key in meta, (folder.name, key)
    for folder in (hub_dir / "spaces").iterdir():
        meta = front_matter(folder / "README.md")
        assert meta["sdk"] == "gradio" and {"evaluate", "metric"} <= set(meta["tags"])
        assert f'Path(__file__).with_name("{folder.name}.py")' in (folder / "app.py").read_text()  # its own module, not a Hub copy
        assert (folder / "requirements.txt").is_file() and (folder / f"{folder.name}.py").is_file()


def test_validation_catches_a_card_that_lies(hub_dir, tmp_path):
    folder = tmp_path / "prost"
    shutil.copytree(hub_dir / "datasets" / "prost", folder)
    card = folder / "README.md"
    card.write_text(card.read_text().replace("num_examples: 1440", "num_examples: 1441", 1))
    repo = upload.RepoFolder("prost", "dataset", folder, "x")
    # datasets itself checks split sizes against the card; either way the config is named.
    with pytest.raises(upload.PublishError, match=r"prost: config 'circumference' does not load: NonMatchingSplitsSizesError"):
        upload.validate(repo, tmp_path / "cache")


def test_validation_catches_a_broken_metric(hub_dir, tmp_path):
    folder = tmp_path / "probe_accuracy"
    shutil.copytree(hub_dir / "spaces" / "probe_accuracy", folder)
    module = folder / "probe_accuracy.py"
    module.write_text(module.read_text().replace("{'accuracy': 0.75}", "{'accuracy': 0.5}"))
    with pytest.raises(upload.PublishError, match="1 of .* docstring examples fail"):
        upload.validate(upload.RepoFolder("probe_accuracy", "space", folder, "x"), tmp_path)


class FakeHub:
    """An HfApi-shaped object that keeps repos in memory (files as bytes) and records every call."""

    def __init__(self, role="write"):
        self.repos, self.tags, self.calls, self.role = {}, {}, [], role

    def whoami(self, token=None):
        return {"name": "maintainer", "auth": {"accessToken": {"role": self.role}}}

    def create_repo(self, repo_id, repo_type, exist_ok, token, **extra):
        self.calls.append(("create_repo", repo_id, repo_type, extra))
        self.repos.setdefault(repo_id, {".gitattributes": b"*.parquet filter=lfs\n"})

    def list_repo_tree(self, repo_id, recursive, repo_type, token):
        for path, data in self.repos[repo_id].items():
            lfs = {"sha256": hashlib.sha256(data).hexdigest()} if path.endswith(".parquet") else None
            yield SimpleNamespace(path=path, blob_id=upload.git_blob_id(data) if lfs is None else "pointer", lfs=lfs)

    def create_commit(self, repo_id, operations, commit_message, repo_type, token):
        self.calls.append(("create_commit", repo_id, commit_message, sorted(type(op).__name__ for op in operations)))
        for op in operations:
            if isinstance(op, upload.CommitOperationDelete):
                del self.repos[repo_id][op.path_in_repo]
            else:
                self.repos[repo_id][op.path_in_repo] = open(op.path_or_fileobj, "rb").read()

    def list_repo_refs(self, repo_id, repo_type, token):
        return SimpleNamespace(tags=[SimpleNamespace(name=t) for t in self.tags.get(repo_id, [])])

    def create_tag(self, repo_id, tag, repo_type, token):
        self.calls.append(("create_tag", repo_id, tag))
        self.tags.setdefault(repo_id, []).append(tag)


def repos(hub_dir, names=("prost", "probe_accuracy")):
    out = []
    for name in names:
        kind = "space" if name in upload.METRICS else "dataset"
        out.append(upload.RepoFolder(name, kind, hub_dir / ("spaces" if kind == "space" else "datasets") / name, "src@abc"))
    return out


def test_push_creates_commits_then_is_a_no_op_and_tags_once(hub_dir):
    hub = FakeHub()
    first = upload.push(repos(hub_dir), hub, "physprobe", token="secret", tag="v0.1.0")
    assert first == {"physprobe/prost": "committed", "physprobe/probe_accuracy": "committed"}
    assert ("create_repo", "physprobe/probe_accuracy", "space", {"space_sdk": "gradio"}) in hub.calls
    commit = next(c for c in hub.calls if c[0] == "create_commit" and c[1] == "physprobe/prost")
    assert commit[2].startswith("physprobe 0.1.0: prost from src@abc")
    local = {p.relative_to(hub_dir / "datasets" / "prost").as_posix() for p in (hub_dir / "datasets" / "prost").rglob("*") if p.is_file()}
    assert set(hub.repos["physprobe/prost"]) == local | {".gitattributes"}
    hub.calls.clear()
    again = upload.push(repos(hub_dir), hub, "physprobe", token="secret", tag="v0.1.0")
    assert again == {"physprobe/prost": "unchanged", "physprobe/probe_accuracy": "unchanged"}
    assert [c[0] for c in hub.calls] == ["create_repo", "create_repo"]  # no commit, no second tag


def test_plan_uploads_changes_and_deletes_stale_files(hub_dir, tmp_path):
    folder = tmp_path / "prost"
    shutil.copytree(hub_dir / "datasets" / "prost", folder)
    mass = folder / "mass" / "test-00000-of-00001.parquet"
    remote = {
        "README.md": (folder / "README.md").read_bytes(),  # unchanged, regular file
        "mass/test-00000-of-00001.parquet": b"an older build",  # changed, LFS
        "data/train-00000-of-00001.parquet": b"earlier layout",  # stale
        ".gitattributes": b"kept",
    }
    listing = [
        SimpleNamespace(path=p, blob_id=upload.git_blob_id(d), lfs={"sha256": hashlib.sha256(d).hexdigest()} if p.endswith(".parquet") else None)
        for p, d in remote.items()
    ]
    operations = upload.plan(folder, listing)
    added = {op.path_in_repo for op in operations if isinstance(op, upload.CommitOperationAdd)}
    deleted = {op.path_in_repo for op in operations if isinstance(op, upload.CommitOperationDelete)}
    assert "mass/test-00000-of-00001.parquet" in added and "README.md" not in added
    assert deleted == {"data/train-00000-of-00001.parquet"}
    assert mass.is_file()


def test_token_is_required_and_never_printed(hub_dir, upstream_dir, monkeypatch, capsys):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr(upload, "get_token", lambda: None)
    assert upload.main(["--push", "--out", str(hub_dir), "--only", "prost"], api=FakeHub()) == 2
    assert "no Hugging Face token" in capsys.readouterr().err
    monkeypatch.setenv("HF_TOKEN", "hf_secret_value")
    hub = FakeHub(role="read")
    args = ["--push", "--out", str(hub_dir), "--only", "probe_accuracy", "--source-dir", str(upstream_dir)]
    assert upload.main(args, api=hub) == 2
    output = capsys.readouterr()
    assert "read-only" in output.err and "hf_secret_value" not in output.out + output.err
    assert not [c for c in hub.calls if c[0] != "whoami"]  # nothing created or committed


def test_push_through_main_with_only(hub_dir, upstream_dir, monkeypatch, capsys):
    monkeypatch.setenv("HF_TOKEN", "hf_secret_value")
    hub = FakeHub()
    args = ["--push", "--out", str(hub_dir), "--only", "text2afford", "--tag", "v0.1.0", "--source-dir", str(upstream_dir)]
    assert upload.main(args, api=hub) == 0
    out = capsys.readouterr().out
    assert "committed  physprobe/text2afford" in out and "hf_secret_value" not in out
    assert hub.tags == {"physprobe/text2afford": ["v0.1.0"]}


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_every_config_loads_by_hub_id_through_olah(hub_dir, tmp_path):
    olah = shutil.which("olah-cli", path=os.path.dirname(sys.executable)) or shutil.which("olah-cli")
    assert olah, "olah-cli is not installed (it is in the dev extra)"
    mirrors = tmp_path / "mirrors"
    expected = {}
    for folder in sorted((hub_dir / "datasets").iterdir()):
        repo = mirrors / "datasets" / "physprobe" / folder.name
        shutil.copytree(folder, repo)
        git = ["git", "-C", str(repo), "-c", "user.name=physprobe", "-c", "user.email=ci@physprobe.invalid"]
        subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-q", "-m", "export"], check=True)
        meta = front_matter(folder / "README.md")
        expected[folder.name] = {i["config_name"]: i["splits"][0]["num_examples"] for i in meta["dataset_info"]}
    port, dead = free_port(), free_port()
    config = tmp_path / "olah.toml"
    config.write_text(f"""[basic]
host = "127.0.0.1"
port = {port}
ssl-key = ""
ssl-cert = ""
repos-path = "{tmp_path / 'repos'}"
cache-size-limit = ""
cache-clean-strategy = "LRU"
hf-scheme = "http"
hf-netloc = "127.0.0.1:{dead}"
hf-lfs-netloc = "127.0.0.1:{dead}"
mirror-scheme = "http"
mirror-netloc = "127.0.0.1:{port}"
mirror-lfs-netloc = "127.0.0.1:{port}"
mirrors-path = ["{mirrors}"]

[accessibility]
offline = true
""")
    server = subprocess.Popen([olah, "-c", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.3)
        else:
            pytest.fail("olah did not start within 60 s")
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
        env = {**os.environ, "HF_ENDPOINT": f"http://127.0.0.1:{port}", "HF_HUB_OFFLINE": "0", "HF_HOME": str(tmp_path / "hf")}
        result = subprocess.run([sys.executable, "-c", script, json.dumps(expected), str(tmp_path / "cache")],
                                env=env, capture_output=True, text=True, timeout=600)  # fmt: skip
        assert result.returncode == 0, result.stderr[-3000:]
        assert json.loads(result.stdout.strip().splitlines()[-1]) == expected
    finally:
        server.terminate()
        server.wait(timeout=30)
