"""The floor of a log-likelihood run: the least time any host work could leave it. ``record`` runs a ``physprobe``
command with each batch of the packed plan kept as laid out (``packed.Layout``) and saves them; ``replay`` then, in a
process doing nothing else, imports transformers, loads the model and runs those batches' forward passes (the mask,
the model, the log-softmax at the scored positions: ``packed._batch_sums``) one after the other, and prints the
seconds of each part as JSON. Their sum (``floor_s``: from the script's first line, so the interpreter's own start and
the reading of the saved batches left out) is the floor: a run with no host work at all (no data read, no tokenizer,
no plan, no figures, nothing written) would still take it. ``host_speed.py`` sets each side's wall against it.

    python benchmarks/forward_floor.py record BATCHES.pt score --model DIR --benchmark prost --data data --out RUN
    python benchmarks/forward_floor.py replay BATCHES.pt DIR
"""

from __future__ import annotations

import json
import sys
import time

STARTED = time.perf_counter()


def record(batches: str, argv: list[str]) -> int:
    import torch

    from physprobe import cli
    from physprobe.backends.hf import packed

    laid: list = []
    layout = packed.layout

    def kept(trees, n_options, pin=False):
        one = layout(trees, n_options, pin)
        laid.append(one)
        return one

    packed.layout = kept
    status = cli.main(argv)
    torch.save([tuple(one) for one in laid], batches)
    return status


def replay(batches: str, model_dir: str) -> int:
    from physprobe.util import collector

    collector.own_process()  # the garbage collector as the console command has it: the floor pays no more of it

    import torch
    from transformers import AutoModelForCausalLM

    from physprobe.backends.hf import packed, threads

    imported = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    device = torch.device("cpu")
    threads.choose(model, device)  # the threads physprobe computes on (OMP_NUM_THREADS if set)
    collector.settle()
    loaded = time.perf_counter()
    laid = [packed.Layout(*one) for one in torch.load(batches)]
    read = time.perf_counter()
    with torch.inference_mode():
        for one in laid:
            packed._batch_sums(model, one, device)
    done = time.perf_counter()
    parts = {"import_s": imported - STARTED, "load_s": loaded - imported, "forward_s": done - read}
    print(json.dumps({**parts, "floor_s": sum(parts.values()), "read_batches_s": read - loaded, "passes": len(laid),
                      "threads": torch.get_num_threads()}))  # fmt: skip
    return 0


if __name__ == "__main__":
    command, *rest = sys.argv[1:]
    sys.exit(record(rest[0], rest[1:]) if command == "record" else replay(*rest))
