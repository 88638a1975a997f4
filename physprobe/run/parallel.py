"""Data-parallel scoring: ``physprobe score --num-processes N`` runs its ``RunSpec`` in N processes
(``run``: the run folder claimed, then ``launch``: ``accelerate launch`` of ``physprobe.run.launched``, each rank handed
the spec as JSON, never the command line).

A config's requests are cut, in row order, into chunks of a fixed size that does not depend on the number
of processes (``chunks``). Ranks own whole chunks, balanced by token count (``owners`` over the chunks'
token totals, fixed by the requests alone, so a restarted rank owns the same chunks; a backend without a
tokenizer balances them by characters). Only backends registered as ``data_parallel`` are launched so
(a server runs requests at once with ``num_concurrent``). First the ranks pool what their caches hold
(``Ranks.merged``: each rank keeps its own cache file, ``run_folder.cache_file``), so no cached request is
rescored; then each rank scores the
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


def request_load(request, tokenizer) -> int:
    """What a request (``physprobe.protocols.requests``) makes the model read: the tokens of its texts, or without a
    tokenizer their characters.

    >>> from physprobe.protocols.requests import Choice
    >>> request_load(Choice("Ice is", (" cold", " hot")), None)
    21
    """
    texts = request.texts()
    if tokenizer is None:
        return sum(map(len, texts))
    return sum(len(encoded) for encoded in tokenizer(texts, add_special_tokens=False)["input_ids"]) if texts else 0


@dataclass(frozen=True)
class Ranks:
    """This process's place among the scoring processes (``rank`` of ``world``)."""

    rank: int = 0
    world: int = 1

    @property
    def main(self) -> bool:
        return self.rank == 0

    def owners(self, cuts: list[range], requests: list, tokenizer) -> list[int]:
        """The rank that owns each chunk of ``requests`` (``owners`` over the chunks' token totals), the same
        on every rank and in every run over the same requests."""
        if self.world == 1:
            return [0] * len(cuts)
        tokens = [request_load(r, tokenizer) for r in requests]
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


SPEC = "PHYSPROBE_SPEC"  # the RunSpec ``launch`` hands its ranks, as JSON


ERROR = "physprobe: error: "  # how a rank (or the launcher) states its one-line error on stderr


def score_in_processes(spec):
    """Score ``spec`` (a ``physprobe.record.spec.RunSpec``) in ``spec.processes`` processes into its run folder, claimed
    here and held until the ranks end (``run_folder.claimed``: a folder another run holds is refused before any launch,
    another run meanwhile is refused; the ranks score into it; nothing this claim created is left when the launch fails
    before any score was cached); the record rank 0 wrote."""
    from physprobe.errors import PhysprobeError
    from physprobe.record import run_folder, run_record

    with run_folder.claimed(spec.out, spec.owner):
        status = launch(spec)
        if status:
            raise PhysprobeError(f"score failed in its {spec.processes} processes (exit status {status}); "
                                 "the first error above says why")  # fmt: skip
    return run_record.load(spec.folder)


def launch(spec) -> int:
    """Run ``spec`` (a ``physprobe.record.spec.RunSpec``) in ``spec.processes`` processes through ``accelerate launch``;
    its exit status. Each rank reads the spec from the environment (``launched.rank_main``): nothing is resolved
    twice.

    ``accelerate launch --cpu --num_processes N`` starts one process unless an MPI hostfile is given
    (accelerate 1.15), so CPU runs use torchrun (``--multi_gpu``) with ``ACCELERATE_USE_CPU`` set: gloo.
    The launch runs in its own session (Ctrl-C reaches this process only, which ends the whole launch at
    once and re-raises) and dies with this process (``PR_SET_PDEATHSIG``); each rank watches this process
    too (``die_with_launcher``), so killing the launcher or its process group, even with SIGKILL, ends them all.

    The launch's stderr (its ranks' too) is relayed but for the one-line errors: the first of them (a rank's, else
    ``launched.launcher_main``'s for a rank that died without one) is raised as this command's one line, so several
    ranks failing alike say it once. The run folder is its caller's to hold (``score_in_processes``): rank 0 takes no
    lock of its own, each other rank its cache's."""
    from physprobe.errors import PhysprobeError

    command = [sys.executable, "-m", "physprobe.run.launched", "--launch", "--multi_gpu", "--num_processes", str(spec.processes),
               "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", "-m", "physprobe.run.launched"]  # fmt: skip
    env = dict(os.environ, **{LAUNCHER: str(os.getpid()), SPEC: spec.to_json()},
               **({"ACCELERATE_USE_CPU": "true"} if spec.settings.device == "cpu" else {}))  # fmt: skip
    child = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, start_new_session=True, preexec_fn=_kill_me_with_parent)  # noqa: PLW1509 - the death signal is set between fork and exec, where nothing else can
    errors: list[str] = []

    def relay() -> None:
        for line in child.stderr:
            text = line.decode("utf-8", "replace")
            if text.startswith(ERROR):
                errors.append(text[len(ERROR) :].rstrip("\n"))
            else:
                sys.stderr.write(text)
                sys.stderr.flush()

    reader = threading.Thread(target=relay, name="physprobe-launch-stderr", daemon=True)
    reader.start()
    try:
        status = child.wait()
    except BaseException:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        raise
    reader.join()
    if status and errors:
        raise PhysprobeError(errors[0])
    return status
