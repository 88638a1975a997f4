"""The cyclic garbage collector kept off the objects a command keeps to its end.

A scoring command holds millions of objects that live as long as its process: torch's, transformers', datasets' and
evaluate's modules and the model. Python's collector walks them all in every full collection and once more when the
interpreter exits; and it looks for cycles among new objects every 700 allocations (Python 3.11, 3.12), where a run's millions of
short-lived rows, requests and token lists are freed by their reference counts anyway. Measured on the 2-core
machine, whole PROST with a one-layer model (docs/speed.md), of a 30-s run: 3.6 s of collections during the run (2.8 s
in 15 full ones) and 1.6 s at exit. So in a process the command owns (the console command and ``python -m physprobe``:
``own_process``), the collector looks among new objects every ``YOUNG_COLLECTION`` allocations, and ``settle`` moves
every object alive into its permanent generation (``gc.freeze``), so that later collections, and the one at exit,
walk only what is made after it: about 1 s in all (0.3 s of it the two collections before freezing), none at
exit. Objects frozen are still freed when nothing refers to them; a reference cycle among them is not, until the
process ends. So ``settle`` first collects once, so that what
loading a model left in cycles (a GGUF file's converted tensors) is freed, not kept; ``leaving``, at the command's
end, only freezes. Neither does anything in a test or notebook that runs commands one after another in its own
process.

>>> import gc
>>> before = gc.get_freeze_count()
>>> settle()  # this process was not handed to a command: nothing frozen
>>> gc.get_freeze_count() == before
True
"""

from __future__ import annotations

import gc

YOUNG_COLLECTION = 20_000  # allocations between looks among new objects (Python 3.11's default: 700)
_owned = False  # whether this process ends when the command does


def own_process() -> None:
    """Mark this process as the command's own (it ends when the command does): new objects are looked at every
    ``YOUNG_COLLECTION`` allocations, and ``settle`` freezes."""
    global _owned  # noqa: PLW0603 - the process's one flag, set once by the console command
    _owned = True
    gc.set_threshold(YOUNG_COLLECTION, 20, 10)


def settle() -> None:
    """Where the command owns its process: one full collection (what a model's loading left in cycles is freed), then
    every object alive out of the collector's sight (``gc.freeze``)."""
    if _owned:
        gc.collect()
        gc.freeze()


def leaving() -> None:
    """Where the command owns its process, at its end: every object out of the collector's sight, so that the
    collection at exit walks none of them."""
    if _owned:
        gc.freeze()
