"""A Hub-compatible server (olah) on loopback serving local folders as dataset repos, for Hub-side tests.

    with serve(tmp_path, {"physprobe/prost": build / "prost"}) as endpoint:
        ... HF_ENDPOINT=endpoint ...

Each folder becomes a git repository with one commit (tagged ``v1``); olah runs offline (its upstream is a
dead loopback port) and is stopped on exit.
"""

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def commit(repo, message):
    """Commit everything in ``repo`` and return the commit id."""
    git = ["git", "-C", str(repo), "-c", "user.name=physprobe", "-c", "user.email=ci@physprobe.invalid"]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", message], check=True)
    return subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()


@contextlib.contextmanager
def serve(tmp_path, repos: dict):
    """Serve ``{"org/name": folder}`` as dataset repos; yields the endpoint URL."""
    olah = shutil.which("olah-cli", path=os.path.dirname(sys.executable)) or shutil.which("olah-cli")
    assert olah, "olah-cli is not installed (it is in the dev extra)"
    mirrors = tmp_path / "mirrors"
    for repo_id, folder in repos.items():
        repo = mirrors / "datasets" / repo_id
        shutil.copytree(folder, repo)
        subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
        commit(repo, "export")
        subprocess.run(["git", "-C", str(repo), "tag", "v1"], check=True)
    port, dead = free_port(), free_port()
    config = tmp_path / "olah.toml"
    config.write_text(f"""[basic]
host = "127.0.0.1"
port = {port}
ssl-key = ""
ssl-cert = ""
repos-path = "{tmp_path / "repos"}"
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
    # `timeout` stops the server even if the test process dies before the finally clause.
    server = subprocess.Popen(["timeout", "900", olah, "-c", str(config)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, cwd=tmp_path)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if time.monotonic() > deadline or server.poll() is not None:
                raise RuntimeError("olah did not start within 60 s")
            time.sleep(0.3)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=30)
