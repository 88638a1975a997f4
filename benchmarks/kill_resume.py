"""A ``--backend openai`` run killed and resumed: the requests sent in the first run, at the kill, and by the resume.

    python benchmarks/kill_resume.py --server fake --kill client --limit 60 --at 30
    python benchmarks/kill_resume.py --server llama --kill server --limit 16 --at 6 --data data

NEWTON Track 1 (``released-generate``, raw prompts to ``/v1/completions``) is scored three times against one server:
uninterrupted (the reference), then into a fresh folder with the client (``physprobe score``, a process of its own) or
the server SIGKILLed once the server has been asked ``--at`` answers, then resumed into that folder. Every request
passes through a counting proxy on 127.0.0.1, so each is counted whichever side dies. ``--server fake`` is
``tests/fake_openai.py`` (each answer 20 ms late); ``llama`` is llama.cpp's server with SmolLM2-135M-Instruct
(``tests/llama_server.py``). Printed: requests and answers of each phase, the answers the cache held at the kill, and
whether the resumed run's predictions equal the reference's.
"""

from __future__ import annotations

import argparse
import json
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.fake_openai import MODEL, spawn  # noqa: E402
from tests.llama_server import ALIAS, LlamaServer  # noqa: E402


class Proxy:
    """Forwards every request to ``upstream`` and counts them (``/v1/models`` apart from answers)."""

    def __init__(self, upstream: str):
        self.upstream, self.lock = upstream, threading.Lock()
        self.models = self.answers = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _forward(self, method: str) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with proxy.lock:
                    if self.path.endswith("/models"):
                        proxy.models += 1
                    else:
                        proxy.answers += 1
                try:
                    answer = httpx.request(method, proxy.upstream + self.path.removeprefix("/v1"), content=body,
                                           headers={"Content-Type": "application/json"}, timeout=600)  # fmt: skip
                    status, content = answer.status_code, answer.content
                except httpx.TransportError:
                    status, content = 502, b'{"error": {"message": "upstream gone"}}'
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(content)))
                self.end_headers()
                self.wfile.write(content)

            def do_GET(self):
                self._forward("GET")

            def do_POST(self):
                self._forward("POST")

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.http.server_address[1]}/v1"
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def reset(self) -> tuple[int, int]:
        with self.lock:
            counts, self.models, self.answers = (self.models, self.answers), 0, 0
        return counts


def cached(out: Path) -> int:
    try:
        with sqlite3.connect(out / "cache.sqlite") as db:
            return db.execute("SELECT COUNT(*) FROM scores").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def score(model: str, url: str, out: Path, data: str, limit: int, concurrent: int) -> list[str]:
    return [sys.executable, "-m", "physprobe", "score", "--model", model, "--benchmark", "newton", "--config", "track1",
            "--limit", str(limit), "--data", data, "--bootstrap-iters", "0", "--out", str(out),
            "--model-args", f"base_url={url},max_retries=0,num_concurrent={concurrent}"]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", choices=["fake", "llama"], default="fake")
    parser.add_argument("--kill", choices=["client", "server"], default="client")
    parser.add_argument("--limit", type=int, default=60)
    parser.add_argument("--at", type=int, default=30, help="answers the server has been asked for when the kill comes")
    parser.add_argument("--concurrent", type=int, default=2)
    parser.add_argument("--data", default=str(REPO / "data"))
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kill-resume-"))

    def start():
        if args.server == "fake":
            process, url = spawn(work / "fake.log", port=port, delay=0.02)
            return process, url, MODEL
        server = LlamaServer(work / "llama.log", port=port).start()
        return server, server.base_url, ALIAS

    def stop(server) -> None:
        if isinstance(server, subprocess.Popen):
            server.send_signal(signal.SIGKILL)
            server.wait()
        else:
            server.kill()

    port = 0
    server, url, model = start()
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    proxy = Proxy(url)
    try:
        started = time.perf_counter()
        subprocess.run(
            score(model, proxy.base_url, work / "reference", args.data, args.limit, args.concurrent), check=True, cwd=REPO
        )
        reference = proxy.reset(), time.perf_counter() - started
        out = work / "run"
        client = subprocess.Popen(score(model, proxy.base_url, out, args.data, args.limit, args.concurrent), cwd=REPO,
                                  stderr=subprocess.PIPE, text=True)  # fmt: skip
        while proxy.answers < args.at and client.poll() is None:
            time.sleep(0.002)
        if args.kill == "client":
            client.send_signal(signal.SIGKILL)
        else:
            stop(server)
        _, err = client.communicate()
        killed, held = proxy.reset(), cached(out)
        if args.kill == "server":
            server, _, _ = start()
        started = time.perf_counter()
        subprocess.run(score(model, proxy.base_url, out, args.data, args.limit, args.concurrent), check=True, cwd=REPO)
        resumed = proxy.reset(), time.perf_counter() - started
    finally:
        stop(server)
    same = (
        pq.read_table(out / "predictions.parquet").to_pylist()
        == pq.read_table(work / "reference" / "predictions.parquet").to_pylist()
    )
    info = json.loads((out / "run.json").read_text())
    print(f"server {args.server}, {args.limit} NEWTON Track 1 questions, num_concurrent {args.concurrent}, "
          f"{args.kill} SIGKILLed after {args.at} answers were asked")  # fmt: skip
    print(
        f"uninterrupted run: {sum(reference[0])} requests ({reference[0][0]} model list, {reference[0][1]} answers incl. the probe), {reference[1]:.1f} s"
    )
    print(f"first run, at the kill: {sum(killed)} requests ({killed[1]} answers incl. the probe); the cache held {held} answers; "
          f"client exit {client.returncode}: {err.strip().splitlines()[-1] if err.strip() else ''}")  # fmt: skip
    print(f"resume: {sum(resumed[0])} requests ({resumed[0][1]} answers incl. the probe; {args.limit - held} were missing), "
          f"{resumed[1]:.1f} s; run.json requests_sent {info['backend']['requests_sent']}; predictions equal the uninterrupted run's: {same}")  # fmt: skip


if __name__ == "__main__":
    main()
