"""How many threads torch computes with on the CPU (its intra-op threads), chosen from the model's size and the cores
this process may use, unless the user chose them (``OMP_NUM_THREADS``).

torch's default is a thread per core of the machine, and its threads spin while they wait for each other. A small
model's steps (SmolLM2-135M generating a token for a batch: matrices of a few hundred rows) are too short to share:
on the 2-core machine with other jobs running, a 576-wide layer's step took 15 ms on two threads and 1.2 ms on one,
and the README's quick start on torch's two threads had not finished NEWTON after 4 minutes when on one thread the
whole card took 4 (docs/speed.md). So a model computes on a thread per ``PARAMETERS_PER_THREAD`` of its parameters
(one at least: SmolLM2, Gemma-3-270M), never more than the cores this process may use (``os.sched_getaffinity``: a
container's or ``taskset``'s share of the machine, not the machine's count). On a GPU torch's threads only feed the
device: they are left as they are.

>>> threads_for(135_000_000, cores=2), threads_for(2_500_000_000, cores=2), threads_for(8_000_000_000, cores=16)
(1, 2, 8)
>>> chosen_by_user({"OMP_NUM_THREADS": "2"}), chosen_by_user({"OMP_NUM_THREADS": ""}), chosen_by_user({})
(True, False, False)
"""

from __future__ import annotations

import os

PARAMETERS_PER_THREAD = 1_000_000_000


def threads_for(parameters: int, cores: int) -> int:
    """The threads a model of ``parameters`` computes on with ``cores`` cores to use."""
    return max(1, min(cores, parameters // PARAMETERS_PER_THREAD))


def chosen_by_user(environ=os.environ) -> bool:
    """Whether the user set torch's threads (``OMP_NUM_THREADS``, which torch reads when imported)."""
    return bool(environ.get("OMP_NUM_THREADS", "").strip())


def cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def choose(model, device) -> int:
    """Set torch's threads for ``model`` on ``device`` (a CPU), unless the user chose them; returns torch's threads."""
    import torch

    if device.type == "cpu" and not chosen_by_user():
        torch.set_num_threads(threads_for(sum(p.numel() for p in model.parameters()), cores()))
    return torch.get_num_threads()
