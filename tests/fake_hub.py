"""A Hub-compatible write server on 127.0.0.1 for publishing tests, with faults on demand.

It speaks the few endpoints ``huggingface_hub`` uses to publish (whoami, create repo, repo info, tree,
preupload, commit, refs, tag, validate-yaml), keeps repos in memory (every file uploaded inline as a regular git
blob), counts the requests of each kind across repos and fails the ones a test asks for. Written for the tests: olah, the
Hub mirror the read tests use, does not accept writes.

    with FakeHub() as hub:
        hub.faults = {("commit", 2): 503}      # the 2nd commit request answers 503
        HfApi(endpoint=hub.url).upload_folder(...)
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlparse


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Repo:
    def __init__(self, repo_id: str, repo_type: str):
        self.id, self.type = repo_id, repo_type
        self.files = {".gitattributes": b"*.parquet filter=lfs diff=lfs merge=lfs -text\n"}
        self.commits = [self._sha("initial")]
        self.tags: dict[str, str] = {}

    def _sha(self, salt: str) -> str:
        digest = hashlib.sha1(salt.encode())
        for path, data in sorted(self.files.items()):
            digest.update(path.encode() + git_blob_id(data).encode())
        return digest.hexdigest()

    @property
    def head(self) -> str:
        return self.commits[-1]

    def commit(self, added: dict[str, bytes], deleted: list[str]) -> str:
        for path in deleted:
            self.files.pop(path, None)
        self.files.update(added)
        self.commits.append(self._sha(str(len(self.commits))))
        return self.head


class FakeHub:
    """The server; ``faults`` maps (request kind, n) to the HTTP status its n-th request (from 1) answers.

    Kinds: ``create`` (repo creation), ``info``, ``tree``, ``preupload``, ``commit``, ``refs``, ``tag``.
    """

    def __init__(self, role: str = "write"):
        self.repos: dict[tuple[str, str], Repo] = {}
        self.role = role
        self.faults: dict[tuple[str, int], int] = {}
        self.counts: dict[str, int] = {}
        self.log: list[str] = []
        self.lock = threading.Lock()
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                hub._handle(self, "GET")

            def do_POST(self):
                hub._handle(self, "POST")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> FakeHub:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    # --- request handling -------------------------------------------------------------------
    def _handle(self, request: BaseHTTPRequestHandler, method: str) -> None:
        url = urlparse(request.path)
        length = int(request.headers.get("Content-Length") or 0)
        body = request.rfile.read(length) if length else b""
        with self.lock:
            self.log.append(f"{method} {url.path}")
            status, payload = self._route(method, unquote(url.path), body)
        data = json.dumps(payload).encode()
        request.send_response(status)
        request.send_header("Content-Type", "application/json")
        request.send_header("Content-Length", str(len(data)))
        if status >= 400:
            request.send_header("X-Error-Message", payload.get("error", "error"))
        request.end_headers()
        request.wfile.write(data)

    def _route(self, method: str, path: str, body: bytes):
        parts = path.strip("/").split("/")
        kind = "create" if path == "/api/repos/create" else (parts[4] if len(parts) > 4 else "info")
        if kind == "revision":
            kind = "info"
        self.counts[kind] = self.counts.get(kind, 0) + 1
        status = self.faults.get((kind, self.counts[kind]))
        if status:
            return status, {"error": f"injected failure of {kind} request {self.counts[kind]}"}
        if path == "/api/whoami-v2":
            return 200, {
                "type": "user",
                "name": "maintainer",
                "auth": {"type": "access_token", "accessToken": {"role": self.role}},
            }
        if path == "/api/validate-yaml":
            return 200, {"errors": [], "warnings": []}
        if path == "/api/repos/create" and method == "POST":
            spec = json.loads(body)
            repo_type = spec.get("type") or "model"
            repo_id = f"{spec['organization']}/{spec['name']}" if spec.get("organization") else spec["name"]
            if (repo_type, repo_id) in self.repos:
                return 409, {"error": "You already created this repo", "url": f"{self.url}/{repo_id}"}
            self.repos[(repo_type, repo_id)] = Repo(repo_id, repo_type)
            return 200, {"url": f"{self.url}/{repo_type}s/{repo_id}", "name": repo_id}
        if len(parts) < 4 or parts[0] != "api" or parts[1] not in ("datasets", "spaces", "models"):
            return 404, {"error": f"no route {path}"}
        repo_type, repo_id, rest = parts[1][:-1], f"{parts[2]}/{parts[3]}", parts[4:]
        repo = self.repos.get((repo_type, repo_id))
        if repo is None:
            return 404, {"error": "Repository not found"}
        action = rest[0] if rest else "info"
        if action in ("info", "revision"):
            return 200, {"id": repo_id, "sha": repo.head, "private": False, "siblings": [{"rfilename": p} for p in sorted(repo.files)],
                         "tags": [], "downloads": 0, "likes": 0, "disabled": False, "gated": False}  # fmt: skip
        if action == "tree":
            return 200, [
                {"type": "file", "path": p, "oid": git_blob_id(d), "size": len(d)} for p, d in sorted(repo.files.items())
            ]
        if action == "preupload":
            files = json.loads(body)["files"]
            return 200, {"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False,
                                    "oid": git_blob_id(repo.files[f["path"]]) if f["path"] in repo.files else None} for f in files]}  # fmt: skip
        if action == "commit":
            added, deleted = {}, []
            for line in body.decode().splitlines():
                item = json.loads(line)
                if item["key"] == "file":
                    added[item["value"]["path"]] = base64.b64decode(item["value"]["content"])
                elif item["key"] == "deletedFile":
                    deleted.append(item["value"]["path"])
                elif item["key"] != "header":
                    return 400, {"error": f"unsupported commit entry {item['key']}"}
            sha = repo.commit(added, deleted)
            return 200, {"commitOid": sha, "commitUrl": f"{self.url}/{repo_type}s/{repo_id}/commit/{sha}", "pullRequestUrl": None}
        if action == "refs":
            return 200, {"branches": [{"name": "main", "ref": "refs/heads/main", "targetCommit": repo.head}],
                         "tags": [{"name": t, "ref": f"refs/tags/{t}", "targetCommit": c} for t, c in repo.tags.items()],
                         "converts": []}  # fmt: skip
        if action == "tag" and method == "POST":
            tag = json.loads(body)["tag"]
            if tag in repo.tags:
                return 409, {"error": "tag exists"}
            repo.tags[tag] = repo.head
            return 200, {}
        return 404, {"error": f"no route {path}"}
