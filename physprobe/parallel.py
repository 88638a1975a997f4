"""Data-parallel scoring: the processes of ``accelerate launch -m physprobe score ...`` split a run's requests.

Each rank scores its share of every config's requests (shares balanced by token count, fixed by the
requests alone, so a restarted rank gets the same share), keeps its own resume cache
(``cache.rank<r>.sqlite``; rank 0 ``cache.sqlite``) and its own lock (rank 0 holds ``run.lock``, the lock a
single-process run takes). The ranks' scores are then gathered; rank 0 alone writes the run folder, which
is the one a single process writes. Outside ``accelerate launch`` there is one rank and nothing changes.

>>> owners([5, 1, 4, 2, 3], 2)
[0, 0, 1, 0, 1]
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass


def owners(lengths: list[int], world: int) -> list[int]:
    """The rank of each request: longest first, each to the least-loaded rank (lowest rank on ties).

    Greedy longest-processing-time scheduling: within 4/3 of the best balance, and deterministic.
    """
    load = [0] * world
    owner = [0] * len(lengths)
    for index in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        rank = min(range(world), key=lambda r: (load[r], r))
        owner[index] = rank
        load[rank] += lengths[index]
    return owner


def request_tokens(request, tokenizer) -> int:
    """Tokens a request makes the model read: its texts tokenised, token-id lists counted."""
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

    walk(request[1])
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

    def share(self, requests: list, tokenizer) -> list[int]:
        """Indices of the requests this rank scores (all of them with one rank)."""
        if self.world == 1:
            return list(range(len(requests)))
        owner = owners([request_tokens(r, tokenizer) for r in requests], self.world)
        return [i for i, r in enumerate(owner) if r == self.rank]

    def gather(self, scores: dict) -> dict:
        """Every rank's scores merged (each rank gets them all)."""
        if self.world == 1:
            return scores
        from accelerate.utils import gather_object

        merged: dict = {}
        for part in gather_object([scores]):
            merged.update(part)
        return merged

    def total(self, count: int) -> int:
        """The sum over ranks of a count."""
        if self.world == 1:
            return count
        from accelerate.utils import gather_object

        return sum(gather_object([count]))


def current() -> Ranks:
    """The ranks of this process: from ``accelerate launch`` (its process group is set up here), else one."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return Ranks()
    import torch
    from accelerate import PartialState

    # Without cpu=True accelerate 1.x sets up no process group on a machine without GPUs (gloo on CPU).
    cpu = not torch.cuda.is_available() or os.environ.get("ACCELERATE_USE_CPU", "").lower() in ("1", "true")
    state = PartialState(cpu=cpu)
    return Ranks(state.process_index, state.num_processes)


def launch(argv: list[str], processes: int, cpu: bool) -> int:
    """Run ``physprobe <argv>`` in ``processes`` processes through ``accelerate launch``; its exit status.

    ``accelerate launch --cpu --num_processes N`` starts one process unless an MPI hostfile is given
    (accelerate 1.15), so CPU runs use torchrun (``--multi_gpu``) with ``ACCELERATE_USE_CPU`` set: gloo.
    """
    command = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", str(processes),
               "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no", "-m", "physprobe", *argv]  # fmt: skip
    env = dict(os.environ, ACCELERATE_USE_CPU="true") if cpu else None
    return subprocess.run(command, env=env).returncode
