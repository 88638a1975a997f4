"""Data-parallel scoring: the processes of ``accelerate launch -m physprobe score ...`` split a run's requests.

A config's requests are cut, in row order, into chunks of a fixed size that does not depend on the number
of processes (``chunks``). Ranks own whole chunks, balanced by token count (``owners`` over the chunks'
token totals, fixed by the requests alone, so a restarted rank owns the same chunks). First the ranks pool
what their caches hold (``Ranks.merged``: rank ``r`` keeps ``cache.rank<r>.sqlite``, rank 0 ``cache.sqlite``
and ``run.lock``, a single-process run's), so no cached request is rescored; then each rank scores the
uncached requests of its chunks, one engine call and one cache commit per chunk. A fresh chunk is one
engine call in any number of processes, so its batches, and hence its float sums, are the same: two
processes write the single process's bytes at any batch size (given the same number of threads per
process). The scores are pooled again; rank 0 alone writes the run folder, the one a single process
writes, and stores every score in ``cache.sqlite``. Outside ``accelerate launch`` there is one rank and
nothing changes.

>>> owners([5, 1, 4, 2, 3], 2)
[0, 0, 1, 0, 1]
>>> [list(c) for c in chunks(5, 2)]
[[0, 1], [2, 3], [4]]
>>> Ranks().merged({"key": [0.5]})
{'key': [0.5]}
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass

from physprobe.requests import key


def owners(lengths: list[int], world: int) -> list[int]:
    """The rank of each item (a chunk of requests) from its load in tokens: heaviest first, each to the
    least-loaded rank (lowest rank on ties).

    Greedy longest-processing-time scheduling: within 4/3 of the best balance, and deterministic.
    """
    load = [0] * world
    owner = [0] * len(lengths)
    for index in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        rank = min(range(world), key=lambda r: (load[r], r))
        owner[index] = rank
        load[rank] += lengths[index]
    return owner


def chunks(count: int, size: int) -> list[range]:
    """``count`` requests cut in row order into chunks of ``size`` (the last may be shorter)."""
    return [range(start, min(start + size, count)) for start in range(0, count, size)]


def request_tokens(request, tokenizer) -> int:
    """Tokens a request (``physprobe.requests``) makes the model read, about: its strings tokenised, its
    numbers counted one each."""
    texts: list[str] = []
    ids = 0

    def walk(value):
        nonlocal ids
        if isinstance(value, str):
            texts.append(value)
        elif isinstance(value, int):
            ids += 1
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, (list, tuple)):
            for item in value:
                walk(item)

    walk(key(request)[1])
    return ids + sum(len(encoded) for encoded in tokenizer(texts, add_special_tokens=False)["input_ids"]) if texts else ids


@dataclass(frozen=True)
class Ranks:
    """This process's place among the scoring processes (``rank`` of ``world``)."""

    rank: int = 0
    world: int = 1

    @property
    def main(self) -> bool:
        return self.rank == 0

    @property
    def cache_name(self) -> str:
        return "cache.sqlite" if self.main else f"cache.rank{self.rank}.sqlite"

    @property
    def lock_name(self) -> str:
        return "run.lock" if self.main else f"run.rank{self.rank}.lock"

    def owners(self, cuts: list[range], requests: list, tokenizer) -> list[int]:
        """The rank that owns each chunk of ``requests`` (``owners`` over the chunks' token totals), the same
        on every rank and in every run over the same requests."""
        if self.world == 1:
            return [0] * len(cuts)
        tokens = [request_tokens(r, tokenizer) for r in requests]
        return owners([sum(tokens[i] for i in cut) for cut in cuts], self.world)

    def everyone(self, value) -> list:
        """Each rank's ``value``, in rank order (every rank gets them all)."""
        if self.world == 1:
            return [value]
        from accelerate.utils import gather_object

        return gather_object([value])

    def merged(self, scores: dict) -> dict:
        """Every rank's ``scores`` (key -> value) in one dict, the lowest rank's value where ranks share a key;
        every rank gets it."""
        merged: dict = {}
        for part in reversed(self.everyone(scores)):
            merged.update(part)
        return merged

    def total(self, count: int) -> int:
        """The sum over ranks of a count."""
        return sum(self.everyone(count))


def current() -> Ranks:
    """The ranks of this process: from ``accelerate launch`` (its process group is set up here), else one.

    A rank started by ``launch`` dies with the ``physprobe`` process that launched it (``die_with_launcher``)."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return Ranks()
    die_with_launcher()
    import torch
    from accelerate import PartialState

    # Without cpu=True accelerate 1.x sets up no process group on a machine without GPUs (gloo on CPU).
    cpu = not torch.cuda.is_available() or os.environ.get("ACCELERATE_USE_CPU", "").lower() in ("1", "true")
    state = PartialState(cpu=cpu)
    return Ranks(state.process_index, state.num_processes)


LAUNCHER = "PHYSPROBE_LAUNCHER_PID"  # set by ``launch`` for its ranks


def _kill_me_with_parent() -> None:
    """In the launched process, before it runs: the kernel sends it SIGKILL when its parent dies
    (``prctl(PR_SET_PDEATHSIG)``; no Python library exposes it)."""
    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_pdeathsig = 1
    libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)


def die_with_launcher() -> None:
    """End this process (SIGKILL) as soon as the launcher named by ``PHYSPROBE_LAUNCHER_PID`` is gone, by any
    death, ``kill -9`` included: a daemon thread waits on the launcher's pidfd. A rank holds no half-written
    output (the cache commits whole chunks; rank 0 swaps the run folder in one step), so nothing is lost."""
    pid = os.environ.get(LAUNCHER)
    if not pid:
        return
    try:
        handle = os.pidfd_open(int(pid))
    except ProcessLookupError:
        os.kill(os.getpid(), signal.SIGKILL)
        return

    def wait() -> None:
        select.select([handle], [], [])
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=wait, name="physprobe-launcher-watch", daemon=True).start()


def launch(argv: list[str], processes: int, cpu: bool) -> int:
    """Run ``physprobe <argv>`` in ``processes`` processes through ``accelerate launch``; its exit status.

    ``accelerate launch --cpu --num_processes N`` starts one process unless an MPI hostfile is given
    (accelerate 1.15), so CPU runs use torchrun (``--multi_gpu``) with ``ACCELERATE_USE_CPU`` set: gloo.
    The launch runs in its own session (Ctrl-C reaches this process only, which ends the whole launch at
    once and re-raises) and dies with this process (``PR_SET_PDEATHSIG``); each rank watches this process
    too (``die_with_launcher``), so killing the launcher or its process group, even with SIGKILL, ends them all.
    """
    command = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", str(processes),
               "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", "-m", "physprobe", *argv]  # fmt: skip
    env = dict(os.environ, **{LAUNCHER: str(os.getpid())}, **({"ACCELERATE_USE_CPU": "true"} if cpu else {}))
    child = subprocess.Popen(command, env=env, start_new_session=True, preexec_fn=_kill_me_with_parent)
    try:
        return child.wait()
    except BaseException:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        raise
