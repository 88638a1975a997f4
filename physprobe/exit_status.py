"""A command's exit status, with every failure physprobe foresees as its one line on stderr: ``physprobe`` and
``upload.py`` (``physprobe publish``) both end through ``handled``, so every command reports a fault the same way.

>>> def refused():
...     raise PhysprobeError("--limit must be at least 1, got 0")
>>> import contextlib, io
>>> with contextlib.redirect_stderr(io.StringIO()) as err:
...     status = handled(refused, "score")
>>> status, err.getvalue()
(2, 'physprobe: error: --limit must be at least 1, got 0\\n')

A command that succeeded but whose output could not be written (``physprobe.util.streams``: a full disk) ends with 1:

>>> from physprobe.util.streams import Guarded
>>> class Full(io.StringIO):
...     def write(self, text):
...         raise OSError(28, "No space left on device")
>>> with contextlib.redirect_stderr(io.StringIO()) as err, contextlib.redirect_stdout(Guarded(Full(), None)):
...     status = handled(lambda: print("prost  released-gpt ...") or 0, "protocols")
>>> status, err.getvalue()
(1, 'physprobe: error: stdout could not be written (No space left on device): what protocols printed is lost; any folder it wrote is complete\\n')
"""

from __future__ import annotations

import errno
import sys

from physprobe.errors import PhysprobeError
from physprobe.util.streams import lost


def score_extra() -> set[str]:
    """The packages of the ``score`` extra (setup.cfg): the report's matplotlib and every registered backend's
    libraries. A command that needs one a plain install lacks says how to get it."""
    from physprobe import backends

    return {"matplotlib", *backends.libraries()}


def handled(command, name: str, prog: str = "physprobe") -> int:
    """``command()``'s exit status, with every failure physprobe foresees as its one line on stderr (``prog: error:
    ...``; control and bidirectional characters of a name or path it quotes shown as their escapes, credentials
    scrubbed); 1 where it succeeded but what it printed could not be written (``streams.guarded``: a full disk; a
    closed stdout, or a reader that stopped reading, is no loss)."""
    from physprobe.util.redact import escaped, scrub

    try:
        status = command()
    except PhysprobeError as error:
        print(f"{prog}: error: {escaped(scrub(str(error)))}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as error:
        if error.name not in score_extra():
            raise
        print(f"{prog}: error: {name} needs {error.name}, which is not installed: "
              f"pip install 'physprobe[score]'", file=sys.stderr)  # fmt: skip
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted; nothing half-written was left and earlier outputs are intact "
              "(physprobe score resumes from its cache)", file=sys.stderr)  # fmt: skip
        return 130
    except OSError as error:
        fix = {errno.ENOSPC: "free some space or choose another --out", errno.EACCES: "choose a folder you can write",
               errno.EROFS: "choose a writable folder"}.get(error.errno, "check the path")  # fmt: skip
        print(f"{prog}: error: {escaped(str(error.filename or 'a file'))}: {error.strerror or error}; {fix}", file=sys.stderr)
        return 1
    why = lost(sys.stdout)
    if status != 0 or why is None or why.errno == errno.EPIPE:  # a reader that stopped reading (``| head``) lost nothing
        return status
    print(f"{prog}: error: stdout could not be written ({why.strerror or why}): what {name} printed is lost; "
          "any folder it wrote is complete", file=sys.stderr)  # fmt: skip
    return 1
