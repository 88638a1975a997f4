"""The cyclic garbage collector kept off the objects a command keeps to its end.

A scoring command holds millions of objects that live as long as its process: torch's, transformers', datasets' and
evaluate's modules and the model. Python's collector walks them all in every full collection and once more when the
interpreter exits. Measured on the 2-core machine, whole PROST with a one-layer model (docs/speed.md): 2.8 s in 15
full collections during the run and 1.6 s at exit, of a 30-s run. ``settle`` moves every object alive into the
collector's permanent generation (``gc.freeze``), so later collections, and the one at exit, walk only what is made
after it. Objects frozen are still freed when nothing refers to them; a reference cycle among them is not, until
the process ends. So ``settle`` freezes only in a process the command owns: the console command and
``python -m physprobe`` (``own_process``), not a test or notebook that runs commands one after another.

>>> import gc
>>> before = gc.get_freeze_count()
>>> settle()  # this process was not handed to a command: nothing frozen
>>> gc.get_freeze_count() == before
True
"""

from __future__ import annotations

import gc

_owned = False  # whether this process ends when the command does


def own_process() -> None:
    """Mark this process as the command's own: it ends when the command does."""
    global _owned
    _owned = True


def settle() -> None:
    """Where the command owns its process, every object alive now out of the collector's sight (``gc.freeze``)."""
    if _owned:
        gc.freeze()
