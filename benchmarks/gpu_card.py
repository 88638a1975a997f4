"""The GPU card: physprobe's engines measured on one lent GPU (H100 or H200), in one prepared call of at most 9 minutes,
against lm-eval and the card's own limits; gpu_card.json and gpu_card.md are written to ``--out`` as each section ends.

    bash ../shared/gpu/prepare.sh      # here, once: wheels and the upstream mirror into ./.gpu (see docs/gpu_card.md)
    # on the GPU machine (device run, carry [".gpu"], timeout_s 590):
    bash .gpu/on_device.sh python3 benchmarks/gpu_card.py --data /tmp/build --out $OUT
    # anywhere, in seconds on a CPU: every section's code at tiny shapes (tests/test_gpu_card.py runs it)
    python benchmarks/gpu_card.py --smoke --data data --out /tmp/gpu-card

Sections, in order, each with its own budget (``Plan.budgets``; a section may also spend what the sections before it
left unspent, never more than the run's ``--budget``). A watchdog (SIGALRM) ends a section at its deadline and records
"timed out" with the figures of the rounds it finished; a section that fails records its one-line error; either way the
next section runs. A second watchdog (a thread) ends the whole process 10 s after the run's budget if a call never
returns, writing the card first. Models are random (weights do not change throughput), built on the device in bf16
(``score_vs_lm_eval.random_model``); tokenizers are byte-level BPEs trained on the benchmarks' text.

- ``correctness``: GPT-2-small's shape, saved; ``physprobe score --protocol released-gpt --limit 400 --dtype float32``
  on the CPU and on CUDA: decisions agreeing, max |Δ score|.
- ``loglik-1b``, ``loglik-8b``: TinyLlama-1.1B's and Llama-3-8B's shapes; PROST's paper format (protocol
  ``sentence-sum``) on evenly spread questions, physprobe's hf backend (``score_loaded``, what ``physprobe score``
  runs) against lm-eval's hf backend on the exported task (``physprobe export lm-eval``), the same model object,
  back to back, up to 3 rounds (fewer when the next would pass the deadline). Per tool: seconds, tokens fed, tokens/s,
  MFU, the share of the dense trunk's saturation (32 x 1,024 tokens, measured each round), GPU busy (NVML, sampled
  during the timed runs), peak memory; identical decisions.
- ``generate-1b``, ``generate-8b``: NEWTON ``released-generate`` (4 tracks) and CConS ``question-generate`` (2 configs),
  the first rows of each config, physprobe's ``generation.generate`` against lm-eval ``generate_until`` on the
  exported tasks (``generate_vs_lm_eval``), up to 3 rounds.
- ``host-1b``: the host's share at 1.1B: the TinyLlama-shaped model saved, then ``physprobe score`` of whole PROST
  (18,736 questions, ``released-gpt``) as a user runs it, the GPU's busy share sampled from NVML every 0.25 s over the
  whole command (start-up, loading, scoring, writing); rows, model load, scoring and wall seconds.
- ``card-8b``: the 8B model saved (to /dev/shm when it has room), then ``physprobe score`` as a user runs it, each
  benchmark's default protocol for a causal model (the folder, ``random-8b``, matches no protocol's model-name pattern:
  a ``/llama/`` name would pick Text2Afford's ``yes-no-llama3-released``, which needs a chat template): whole PROST
  (18,736 questions), then the whole card in one ``--benchmark all --limit 64`` command (64 rows per config of every
  benchmark, the model loaded once: every row does not fit the 9 minutes, NEWTON alone being 16,000 generations of up
  to 128 tokens); rows, model load, scoring and wall seconds.

Sizes, from FLOPs (H100 here: bf16 matrix products 798 TFLOP/s, copies 3.0 TB/s, KINDS.md) and the figures issue 41
quotes (physprobe 0.5x lm-eval at 8B, ~15% of the trunk's saturation, generation 0.58x):

- Work per token: Llama-3-8B shape 6.98B non-embedding parameters = 14.0 GFLOP per token fed, its 128,256-row head
  1.05 GFLOP per scored row; TinyLlama shape 0.97B = 1.94 GFLOP, head 0.13. PROST paper format with the trained
  tokenizer, measured here: 163 tokens per question run whole (4 options x ~41), 60 with the prefix run once, 28 head
  rows (3,057,904 / 1,122,354 / 520,888 over the 18,736 questions).
- loglik-8b, 1,000 questions: physprobe 60k tokens x 14.0 G + 28k rows x 1.05 G = 0.87 PFLOP (2.2 s at 50% MFU; ~13 s
  at the 15% of saturation last measured); lm-eval 159k tokens with the head on each = 2.4 PFLOP (7.5 s at 40%); the
  trunk's saturation 4 x 32k tokens = 1.8 PFLOP (~3 s). A round 13-30 s, 3 rounds and the model's build: budget 75 s.
- loglik-1b, 3,000 questions: physprobe 0.36 PFLOP, lm-eval 1.0 PFLOP and 12,000 requests of host work: a round
  6-12 s, budget 45 s.
- generation, 32 rows per config: 128 NEWTON rows x 128 new tokens (random weights rarely stop), 64 CConS rows x 20.
  An 8B decoding step reads 16 GB (5.3 ms at 3.0 TB/s), ~25-30 ms eager: physprobe (one batch) ~4 s, lm-eval
  (batches of 64) ~8 s, a round ~13 s: budget 60 s; 1.1B steps ~10-15 ms: budget 40 s.
- correctness: 400 questions x ~60 tokens on 16 CPU cores plus two ~5 s start-ups: budget 30 s.
- host-1b: save 2.2 GB ~3 s; ``physprobe score`` ~20 s to start, hash and load; whole PROST released-gpt at 1.1B is
  1.12M tokens x 1.94 GFLOP + 1.12M head rows x 0.13 = 2.3 PFLOP, ~6 s at 50% MFU, the rest the host's: budget 60 s.
- card-8b: save 16 GB ~15 s; each ``physprobe score`` ~20 s to start and load (the first also hashes the 16 GB
  folder, ~10 s); whole PROST released-gpt is 1.12M tokens with the head on each = 16.9 PFLOP: 21 s at 798 TFLOP/s,
  so the 40 s target is 53% MFU; NEWTON 256 rows x 128 tokens, CConS 512 x 20, Text2Afford 64 rows x 15 prompts,
  ~5 s each: ~150 s, budget 175 s.
- Set-up (imports, the card's matrix rate) 20 s. Sum: 20 + 30 + 45 + 60 + 40 + 75 + 60 + 175 = 505 s; with
  on_device.sh's own set-up before it (wheels ~20 s, ``physprobe build all`` ~15 s) 9 minutes.
"""

from __future__ import annotations

import time

STARTED = time.monotonic()  # the run's budget counts from here, imports included (hence the imports below it)

import argparse
import contextlib
import dataclasses
import datetime
import gc
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import datasets
import gpu_card_md  # sibling scripts
import pyarrow.parquet as pq
import torch
from generate_vs_lm_eval import SUITE, Fed, Measured, bos_prepended, measure_benchmark, small_build, suite_requests
from generate_vs_lm_eval import lm_eval_runner as generate_runner
from score_vs_lm_eval import (
    SHAPES,
    BusySampler,
    FedTokens,
    Phase,
    lm_eval_runner,
    matrix_rate,
    non_embedding_parameters,
    random_model,
    train_tokenizer,
    trunk_rate,
)
from transformers import GPT2Config, LlamaConfig

from physprobe.backends.hf import score_loaded
from physprobe.backends.hf.model import Loaded
from physprobe.data import registry
from physprobe.publish import lm_eval_export
from physprobe.record import run_record
from physprobe.util import provenance

SCHEMA = 1
HARD_STOP_GRACE_S = 10  # past the run's budget, the process ends even if a call never returns
HARD_STOP_STATUS = 3  # its exit status (not 124 or 137, which the device tool reads as its own time limit)
MIN_SECTION_S = 5  # a section with less time left is skipped
SHAPE_NAMES = {"small": "GPT-2-small shape (124M)", "1b": "TinyLlama-1.1B shape", "8b": "Llama-3-8B shape (7.5B)"}
# Tiny stand-ins for --smoke: the same architectures, a few layers.
SMOKE_SHAPES = {
    "small": lambda special: GPT2Config(vocab_size=8001, n_layer=2, n_embd=64, n_head=4, **special),
    "1b": lambda special: LlamaConfig(vocab_size=8001, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048, **special),
    "8b": lambda special: LlamaConfig(vocab_size=8001, hidden_size=96, intermediate_size=192, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048, **special),
}  # fmt: skip


@dataclass(frozen=True)
class Plan:
    """What a run measures, at which sizes, in how many seconds per section: ``GPU`` on a lent card, ``SMOKE`` on a CPU."""

    dtype: str
    shapes: dict  # role ("small", "1b", "8b") -> SHAPES-like config factory
    correctness_questions: int
    loglik_questions: dict[str, int]  # size -> PROST questions, evenly spread
    generate_rows: dict[str, int]  # size -> first rows of each config
    card_limit: int  # rows per config of the whole card's command (``--benchmark all``)
    whole_prost_limit: int | None  # None: all 18,736 questions
    runs: int  # rounds at most per comparison
    lm_eval_batch: int  # lm-eval's batch size: 64 is the most its "auto" picks (max_batch_size), without its probing passes
    matrix_n: int
    trunk_shape: tuple[int, int]  # rows x tokens of the saturation pass
    budgets: dict[str, float]  # "setup" and each section -> seconds
    shape_names: dict[str, str] = field(default_factory=lambda: dict(SHAPE_NAMES))

    @property
    def budget_s(self) -> float:
        return sum(self.budgets.values())


GPU = Plan(dtype="bfloat16", shapes={k: SHAPES[k] for k in ("small", "1b", "8b")}, correctness_questions=400,
           loglik_questions={"1b": 3000, "8b": 1000}, generate_rows={"1b": 32, "8b": 32}, card_limit=64, whole_prost_limit=None,
           runs=3, lm_eval_batch=64, matrix_n=8192, trunk_shape=(32, 1024),
           budgets={"setup": 20, "correctness": 30, "loglik-1b": 45, "host-1b": 60, "generate-1b": 40, "loglik-8b": 75,
                    "generate-8b": 60, "card-8b": 175})  # fmt: skip
SMOKE = Plan(dtype="float32", shapes=SMOKE_SHAPES, correctness_questions=8, loglik_questions={"1b": 8, "8b": 8},
             generate_rows={"1b": 1, "8b": 1}, card_limit=2, whole_prost_limit=8, runs=1, lm_eval_batch=8, matrix_n=128,
             trunk_shape=(2, 32), budgets={"setup": 120, "correctness": 120, "loglik-1b": 120, "host-1b": 120, "generate-1b": 120,
                                           "loglik-8b": 120, "generate-8b": 120, "card-8b": 300},
             shape_names={k: f"{v}: a tiny stand-in" for k, v in SHAPE_NAMES.items()})  # fmt: skip


class TimedOut(BaseException):
    """A section reached its deadline (a BaseException, so that no library's ``except Exception`` swallows it)."""


class CommandFailed(Exception):
    """A ``physprobe score`` command of a section did not finish (its figures say which, and why)."""


@dataclass
class SectionResult:
    """One section as the card records it; ``figures`` fill in as its rounds finish, so a timed-out section keeps them."""

    name: str
    allowed_s: float
    status: str = "not run"
    seconds: float | None = None
    error: str | None = None
    figures: dict = field(default_factory=dict)


@dataclass
class Card:
    """gpu_card.json: the run's device and versions, each section's result, and the targets read from them."""

    smoke: bool
    device: str
    gpu: str | None
    dtype: str
    versions: dict
    shapes: dict
    started: str
    budget_s: float
    plan: dict
    sections: list[SectionResult] = field(default_factory=list)
    wall_s: float | None = None
    finished: bool = False
    schema: int = SCHEMA

    def as_json(self) -> dict:
        data = dataclasses.asdict(self)
        data["targets"] = gpu_card_md.targets(data)
        return data


class Writer:
    """Writes gpu_card.json and gpu_card.md to ``out`` (each whole, swapped in), and appends to gpu_card.log what it
    prints; one lock, so that the hard stop's last write never interleaves with a section's."""

    def __init__(self, out: Path, card: Card):
        self.out, self.card, self.lock = out, card, threading.RLock()
        out.mkdir(parents=True, exist_ok=True)
        self.log_file = open(out / "gpu_card.log", "w", buffering=1)

    def log(self, message: str) -> None:
        line = f"[{time.monotonic() - STARTED:6.1f} s] {message}"
        with self.lock:
            print(line, flush=True)
            self.log_file.write(line + "\n")

    def close(self) -> None:
        self.log_file.close()

    def write(self) -> None:
        with self.lock:
            self.card.wall_s = round(time.monotonic() - STARTED, 1)
            data = self.card.as_json()
            for name, text in (
                ("gpu_card.json", json.dumps(data, indent=1, default=str)),
                ("gpu_card.md", gpu_card_md.render(data)),
            ):
                partial_file = self.out / f".{name}.partial"
                partial_file.write_text(text)
                os.replace(partial_file, self.out / name)


@contextlib.contextmanager
def deadline(seconds: float):
    """Raise ``TimedOut`` in this (main) thread after ``seconds``."""

    def expire(signum, frame):
        raise TimedOut

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.01))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@dataclass
class Context:
    """What every section reads: the plan, the device, the built benchmarks, a scratch folder, the one model kept on the
    device between sections, and the running section's deadline."""

    plan: Plan
    device: str
    data: Path
    scratch: Path
    writer: Writer
    model_size: str | None = None
    model: object = None
    section_deadline: float = 0.0

    def remaining(self) -> float:
        return self.section_deadline - time.monotonic()

    def model_for(self, size: str, tokenizer):
        """The random model of ``size`` on the device (built once; another size replaces it): every tokenizer here gives
        ``<|endoftext|>`` the same id, the model's BOS and EOS."""
        if self.model_size != size:
            self.release_model()
            started = time.monotonic()
            self.model = random_model(self.plan.shapes[size], tokenizer, self.device, self.plan.dtype)
            self.model_size = size
            self.writer.log(f"built the random {size} model in {time.monotonic() - started:.1f} s")
        assert self.model.config.eos_token_id == tokenizer.eos_token_id, "tokenizers disagree on <|endoftext|>"
        return self.model

    def release_model(self) -> None:
        self.model = self.model_size = None
        free_memory()

    def rounds(self, record: list, one_round: Callable[[], dict]) -> None:
        """Up to ``plan.runs`` rounds, each appended to ``record`` as it ends; no new round when the last one's time
        (x 1.2) would pass the deadline."""
        for index in range(self.plan.runs):
            started = time.monotonic()
            record.append(one_round())
            took = time.monotonic() - started
            self.writer.log(f"  round {index + 1}/{self.plan.runs}: {took:.1f} s")
            self.writer.write()
            if self.remaining() < 1.2 * took:
                break


def free_memory() -> None:
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def prost_texts(data: Path) -> list[str]:
    """The texts the PROST tokenizer is trained on (every question of the default config, as score_vs_lm_eval)."""
    rows = pq.read_table(data / "prost" / "default").to_pylist()
    return [f"{r['context']} {r['question']} {r['ex_question']}" for r in rows]


def score_command(ctx: Context, model: Path, benchmark: str, out: Path, device: str, dtype: str, limit: int | None,
                  protocol: str | None = None) -> list[str]:  # fmt: skip
    """``physprobe score`` as a user runs it, on the built benchmarks, without bootstrap resamples."""
    return [sys.executable, "-m", "physprobe", "score", "--model", str(model), "--benchmark", benchmark, "--data", str(ctx.data),
            "--device", device, "--dtype", dtype, "--bootstrap-iters", "0", "--out", str(out),
            *(["--limit", str(limit)] if limit is not None else []), *(["--protocol", protocol] if protocol else [])]  # fmt: skip


def run_command(ctx: Context, argv: list[str], log: Path, later: int = 0, reserve: float = 25) -> dict:
    """Run ``argv`` (its output to ``log``) until the section's deadline less ``reserve`` seconds for each of the
    ``later`` commands still to run: status (ok, timed out, failed, skipped), wall seconds and, on failure, the last line
    it printed."""
    timeout = ctx.remaining() - reserve * later - 2
    if timeout < 5:
        return {"status": "skipped: no time left in the section", "wall_s": 0.0, "error": None}
    ctx.writer.log(f"  $ {' '.join(argv[1:])}  (at most {timeout:.0f} s)")
    started = time.monotonic()
    with open(log, "w") as handle:
        try:
            # From the scratch folder: ``-m physprobe`` in the checkout's root would import its source folder, which lacks
            # the installed package's dataset_scripts, before the installed package.
            code = subprocess.run(argv, stdout=handle, stderr=subprocess.STDOUT, timeout=timeout, cwd=ctx.scratch).returncode
        except subprocess.TimeoutExpired:
            return {"status": f"timed out after {timeout:.0f} s", "wall_s": round(time.monotonic() - started, 1), "error": None}
    wall = round(time.monotonic() - started, 1)
    if code == 0:
        return {"status": "ok", "wall_s": wall, "error": None}
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    return {"status": f"failed (exit {code})", "wall_s": wall, "error": lines[-1][:300] if lines else None}


def finished(commands: list[tuple[str, dict]]) -> None:
    """Raise ``CommandFailed`` naming the first command that failed, else ``TimedOut`` where one ran out of time: the
    section's status then says so (its figures keep every command's)."""
    for name, run in commands:
        if run["status"].startswith("failed"):
            raise CommandFailed(f"{name}: {run['status']}{': ' + run['error'] if run['error'] else ''}")
    if any(run["status"] != "ok" for _, run in commands):
        raise TimedOut


def correctness(ctx: Context, figures: dict) -> None:
    """GPT-2-small's shape, float32: ``physprobe score`` of PROST released-gpt on the CPU, then on the device."""
    folder = ctx.scratch / "random-gpt2-small"
    tokenizer = train_tokenizer(folder, prost_texts(ctx.data))
    random_model(ctx.plan.shapes["small"], tokenizer, "cpu", "float32").save_pretrained(folder)
    n = ctx.plan.correctness_questions
    figures.update(questions=n, devices=["cpu", ctx.device], runs={})
    predictions = {}
    for later, tag, device in ((1, "reference", "cpu"), (0, "device", ctx.device)):
        out = ctx.scratch / f"correctness-{tag}"
        argv = score_command(ctx, folder, "prost", out, device, "float32", n, protocol="released-gpt")
        run = figures["runs"][tag] = {
            "device": device,
            **run_command(ctx, argv, ctx.scratch / f"correctness-{tag}.log", later, reserve=12),
        }
        finished([(f"physprobe score --device {device}", run)])
        predictions[tag] = {(p["config"], p["row"]): p for p in pq.read_table(out / "predictions.parquet").to_pylist()}
    reference, measured = predictions["reference"], predictions["device"]
    keys = sorted(reference.keys() & measured.keys())
    deltas = [abs(a - b) for k in keys for a, b in zip(reference[k]["scores"], measured[k]["scores"])]
    figures.update(compared=len(keys), agree=sum(reference[k]["prediction"] == measured[k]["prediction"] for k in keys),
                   max_abs_delta=max(deltas, default=0.0))  # fmt: skip


def phase_figures(phase: Phase) -> dict:
    """A log-likelihood phase's figures as the card records them (peak memory on CUDA only)."""
    return {"seconds": phase.seconds, "tokens": phase.tokens, "attention_flops": phase.attention_flops,
            "peak_gib": phase.peak if phase.device.startswith("cuda") else None, "busy": phase.sampled_busy,
            "busy_error": phase.sampler.error}  # fmt: skip


def loglik(ctx: Context, figures: dict, size: str) -> None:
    """PROST paper format at ``size``: physprobe's hf backend against lm-eval's on the exported task, same model."""
    scratch = ctx.scratch / f"loglik-{size}"
    data = small_build(ctx.data, scratch / "data", ctx.plan.loglik_questions[size], benchmarks=("prost",), spread=True)
    rows = pq.read_table(data / "prost" / "default").to_pylist()
    tokenizer = train_tokenizer(scratch / "model", prost_texts(ctx.data))
    model = ctx.model_for(size, tokenizer)
    lm_eval_export.export(scratch / "tasks", data=data, benchmarks=["prost"])
    protocol = registry.evaluation("prost").protocol("sentence-sum")
    requests = [protocol.build(row, "default") for row in rows]
    loaded = Loaded(model, tokenizer, "causal", torch.device(ctx.device))
    task = lm_eval_export.task_name("prost", "default", "causal", protocol.name)
    figures.update(size=size, shape=ctx.plan.shape_names[size], questions=len(rows), non_embedding=non_embedding_parameters(model),
                   matrix_flops=matrix_rate(ctx.device, ctx.plan.matrix_n), rounds=[])  # fmt: skip
    fed = FedTokens(model)
    try:
        phases = {tool: Phase(ctx.device, fed) for tool in gpu_card_md.TOOLS}
        run_lm_eval = lm_eval_runner(
            model, scratch / "model", scratch / "tasks", ctx.device, str(ctx.plan.lm_eval_batch), phases["lm-eval"]
        )

        def one_round() -> dict:
            trunk = trunk_rate(model, ctx.device, *ctx.plan.trunk_shape)
            theirs = run_lm_eval(task)
            results = phases["physprobe"](lambda: score_loaded(loaded, requests))
            ours = [protocol.predict(result, request) for result, request in zip(results, requests)]
            return {"trunk_tokens_s": trunk, "agreement": sum(a == b for a, b in zip(ours, theirs)) / len(ours),
                    **{tool: phase_figures(phase) for tool, phase in phases.items()}}  # fmt: skip

        ctx.rounds(figures["rounds"], one_round)
    finally:
        fed.remove()


def generate(ctx: Context, figures: dict, size: str) -> None:
    """NEWTON and CConS generation at ``size``: physprobe's ``generation.generate`` against lm-eval generate_until."""
    scratch = ctx.scratch / f"generate-{size}"
    data = small_build(ctx.data, scratch / "data", ctx.plan.generate_rows[size])
    texts = [str(r) for b, (_, configs) in SUITE.items() for c in configs for r in pq.read_table(data / b / c).to_pylist()]
    tokenizer = bos_prepended(train_tokenizer(scratch / "model", texts), scratch / "model")
    model = ctx.model_for(size, tokenizer)
    lm_eval_export.export(scratch / "tasks", data=data, benchmarks=list(SUITE))
    suite = suite_requests(data, tokenizer, chat=False)
    figures.update(size=size, shape=ctx.plan.shape_names[size], rows_per_config=ctx.plan.generate_rows[size], non_embedding=non_embedding_parameters(model),
                   matrix_flops=matrix_rate(ctx.device, ctx.plan.matrix_n), trunk_tokens_s=trunk_rate(model, ctx.device, *ctx.plan.trunk_shape),
                   rounds=[])  # fmt: skip
    fed = Fed(model)
    fed.mark_prompt_passes()
    try:
        measured = {tool: Measured(ctx.device) for tool in gpu_card_md.TOOLS}
        run_lm_eval = generate_runner(
            model, scratch / "model", scratch / "tasks", ctx.device, str(ctx.plan.lm_eval_batch), False, measured["lm-eval"]
        )

        def one_round() -> dict:
            out = {}
            for name, benchmark in suite.items():
                counted = measure_benchmark(model, tokenizer, ctx.device, benchmark, fed, measured, run_lm_eval, chat=False)
                for tool, phase in measured.items():
                    counted[tool] |= {"seconds": phase.seconds, "busy": phase.sampler.share,
                                      "peak_gib": phase.peak if ctx.device.startswith("cuda") else None}  # fmt: skip
                out[name] = counted
            return out

        ctx.rounds(figures["rounds"], one_round)
    finally:
        fed.remove()


def model_home(size_gb: float) -> Path:
    """Where the card's model is saved: /dev/shm (memory: quick to write and to load) when it has room, else scratch."""
    shm = Path("/dev/shm")
    if shm.is_dir() and shutil.disk_usage(shm).free > 1.5 * size_gb * 2**30:
        return Path(tempfile.mkdtemp(prefix="physprobe-card-", dir=shm))
    return Path(tempfile.mkdtemp(prefix="physprobe-card-"))


def card(ctx: Context, figures: dict) -> None:
    """The 8B model saved, then ``physprobe score`` as a user runs it (default protocols): whole PROST, then the whole
    card (``--benchmark all``) limited."""
    texts = prost_texts(ctx.data)
    for benchmark, (_, configs) in SUITE.items():
        texts += [str(r) for c in configs for r in pq.read_table(ctx.data / benchmark / c).slice(0, 500).to_pylist()]
    texts += [str(r) for r in pq.read_table(ctx.data / "text2afford" / "default").slice(0, 500).to_pylist()]
    started = time.monotonic()
    home, folder = saved_model(ctx, "8b", train_tokenizer(ctx.scratch / "card-tokenizer", texts))
    try:
        figures.update(model=f"{ctx.plan.shape_names['8b']}, saved in {home.parent}", save_s=round(time.monotonic() - started, 1))
        figures.update(commands=[])
        # Whole PROST (its 40 s target), then the whole card in one command, --limit rows per config: every row of every
        # benchmark (NEWTON's 16,000 prompts of up to 128 tokens, Text2Afford's 15 per row) does not fit the 9 minutes.
        plan = [(["prost"], ctx.plan.whole_prost_limit), (["all"], ctx.plan.card_limit)]
        for index, (benchmarks, limit) in enumerate(plan):
            later = len(plan) - index - 1
            out = ctx.scratch / f"card-{'-'.join(benchmarks)}"
            entry = {"benchmarks": benchmarks, "limit": limit, "runs": []}
            figures["commands"].append(entry)
            argv = score_command(ctx, folder, ",".join(benchmarks), out, ctx.device, ctx.plan.dtype, limit)
            entry.update(run_command(ctx, argv, ctx.scratch / f"card-{index}.log", later))
            entry["runs"] = command_runs(out) if entry["status"] == "ok" else []
            ctx.writer.write()
        finished([(f"physprobe score --benchmark {','.join(c['benchmarks'])}", c) for c in figures["commands"]])
    finally:
        shutil.rmtree(home, ignore_errors=True)


def saved_model(ctx: Context, size: str, tokenizer) -> tuple[Path, Path]:
    """The random model of ``size`` saved as a user's folder (its tokenizer prepending BOS, as Llama's does) under a
    new folder (``model_home``), and released from the device (a command loads its own copy): (home, model folder)."""
    model = ctx.model_for(size, tokenizer)
    home = model_home(sum(p.numel() * p.element_size() for p in model.parameters()) / 2**30)
    folder = home / f"random-{size}"
    bos_prepended(tokenizer, folder)
    model.save_pretrained(folder)
    ctx.release_model()
    return home, folder


def command_runs(out: Path) -> list[dict]:
    """What each run.json under ``out`` says of its run: benchmark, protocol, rows scored, load and scoring seconds."""
    found = []
    for path in sorted(out.rglob(run_record.RUN_JSON)):
        record = run_record.load(path.parent)
        found.append({"benchmark": record.benchmark, "protocol": record.protocol, "rows": record.scored_now,
                      "load_s": record.timings.load_model_s, "scoring_s": round(sum(record.timings.configs_s.values()), 2),
                      "configs": len(record.configs)})  # fmt: skip
    return found


def host_share(ctx: Context, figures: dict) -> None:
    """The host's share at 1.1B: ``physprobe score`` of whole PROST (its default protocol for a causal model,
    ``released-gpt``) as a user runs it, the GPU's busy share sampled from NVML every 0.25 s over the whole command
    (start-up, loading, scoring, the run folder) and its run.json's scoring seconds."""
    started = time.monotonic()
    home, folder = saved_model(ctx, "1b", train_tokenizer(ctx.scratch / "host-tokenizer", prost_texts(ctx.data)))
    try:
        figures.update(model=f"{ctx.plan.shape_names['1b']}, saved in {home.parent}", save_s=round(time.monotonic() - started, 1))
        out = ctx.scratch / "host-prost"
        argv = score_command(ctx, folder, "prost", out, ctx.device, ctx.plan.dtype, ctx.plan.whole_prost_limit)
        with BusySampler(ctx.device, interval=0.25) as sampler:
            figures["command"] = run_command(ctx, argv, ctx.scratch / "host-prost.log")
        figures.update(busy=sampler.share, busy_error=sampler.error, samples=len(sampler.samples),
                       runs=command_runs(out) if figures["command"]["status"] == "ok" else [])  # fmt: skip
        finished([("physprobe score --benchmark prost", figures["command"])])
    finally:
        shutil.rmtree(home, ignore_errors=True)


SECTIONS: dict[str, Callable[[Context, dict], None]] = {
    "correctness": correctness,
    "loglik-1b": partial(loglik, size="1b"),
    "host-1b": host_share,
    "generate-1b": partial(generate, size="1b"),
    "loglik-8b": partial(loglik, size="8b"),
    "generate-8b": partial(generate, size="8b"),
    "card-8b": card,
}


def run_sections(ctx: Context, names: list[str], sections: dict = SECTIONS, started: float = STARTED) -> None:
    """Each named section under its deadline: the run's start (``started``) + the budgets of setup and of the sections so
    far (time a section leaves unspent passes to the next), never past the run's end. Its result is written as it ends."""
    card = ctx.writer.card
    end = started + card.budget_s
    due = started + ctx.plan.budgets["setup"]
    for name in names:
        due = min(due + ctx.plan.budgets[name], end)
        result = SectionResult(name, allowed_s=round(due - time.monotonic(), 1))
        card.sections.append(result)
        if result.allowed_s < MIN_SECTION_S:
            result.status = "skipped: the run's budget is spent"
            ctx.writer.write()
            continue
        result.status = "running"
        ctx.writer.write()
        ctx.writer.log(f"section {name}: at most {result.allowed_s:.0f} s")
        ctx.section_deadline = due
        begun = time.monotonic()
        try:
            with deadline(due - time.monotonic()):
                sections[name](ctx, result.figures)
            result.status = "ok"
        except TimedOut:
            result.status = f"timed out at {result.allowed_s:.0f} s"
        except Exception as error:  # the next sections still run; the log keeps the traceback
            result.status = "failed"
            result.error = f"{type(error).__name__}: {error}".splitlines()[0][:300]
            ctx.writer.log(traceback.format_exc())
        finally:
            result.seconds = round(time.monotonic() - begun, 1)
            free_memory()
            ctx.writer.log(f"section {name}: {result.status} in {result.seconds:.1f} s")
            ctx.writer.write()


def hard_stop(writer: Writer) -> None:
    """The last resort: a call that never returned (a native call the deadline cannot interrupt) is recorded, then the
    process ends, so the device call never outruns the budget."""
    with writer.lock:
        for result in writer.card.sections:
            if result.status == "running":
                result.status = "timed out (hard stop: a call did not return)"
        writer.log("hard stop: the run's budget is spent")
        writer.write()
        os._exit(HARD_STOP_STATUS)


def versions() -> dict:
    return {
        "python": sys.version.split()[0],
        **provenance.installed(("physprobe", "torch", "transformers", "lm-eval", "datasets", "pyarrow")),
    }


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="the built benchmarks (on the GPU machine: /tmp/build, from on_device.sh)")
    parser.add_argument("--out", required=True, help="folder for gpu_card.json, gpu_card.md and gpu_card.log")
    parser.add_argument("--smoke", action="store_true", help="tiny shapes on the CPU: every section's code in seconds")
    parser.add_argument(
        "--sections", default=",".join(SECTIONS), help=f"comma-separated, in order (default: {','.join(SECTIONS)})"
    )
    parser.add_argument("--budget", type=float, help="seconds for the whole run, set-up included (default: the plan's sum)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    names = [n.strip() for n in args.sections.split(",") if n.strip()]
    unknown = [n for n in names if n not in SECTIONS]
    if unknown or not names:
        parser().error(f"--sections {args.sections}: unknown {', '.join(unknown) or 'empty'}; known: {', '.join(SECTIONS)}")
    data = Path(args.data).resolve()
    missing = [b for b in registry.names() if not (data / b / "README.md").is_file()]
    if missing:
        parser().error(f"--data {data}: no built {', '.join(missing)}; run `physprobe build all --out {data}` first")
    if not args.smoke and not torch.cuda.is_available():
        parser().error("no CUDA device here: the card measures a GPU; give --smoke to exercise it on the CPU")
    plan = SMOKE if args.smoke else GPU
    device = "cpu" if args.smoke else "cuda"
    if args.smoke:  # tiny matrices: one thread each, here and in the score commands (threads only wait on a shared CPU)
        os.environ["OMP_NUM_THREADS"] = "1"
        torch.set_num_threads(1)
    card = Card(smoke=args.smoke, device=device, gpu=torch.cuda.get_device_name() if device == "cuda" else None, dtype=plan.dtype,
                versions=versions(), shapes=plan.shape_names,
                started=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), budget_s=args.budget or plan.budget_s,
                plan={k: v for k, v in dataclasses.asdict(plan).items() if k not in ("shapes", "shape_names")})  # fmt: skip
    writer = Writer(Path(args.out), card)
    stop = threading.Timer(STARTED + card.budget_s + HARD_STOP_GRACE_S - time.monotonic(), hard_stop, [writer])
    stop.daemon = True
    stop.start()
    datasets.disable_progress_bars()
    writer.log(f"{card.gpu or device}; {card.versions}; budget {card.budget_s:.0f} s; sections {', '.join(names)}")
    with tempfile.TemporaryDirectory(prefix="gpu-card-") as scratch:
        ctx = Context(plan, device, data, Path(scratch), writer)
        run_sections(ctx, names)
        ctx.release_model()
    stop.cancel()
    card.finished = True
    writer.write()
    for target in card.as_json()["targets"]:
        writer.log(f"{target['status']:>12}  {target['figure']:<28} {target['target']}")
    writer.log(f"-> {Path(args.out) / 'gpu_card.md'}")
    writer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
