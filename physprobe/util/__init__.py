"""The ground floor every stage stands on: writing files safely, keeping secrets out, retrying, telling progress.

Holds ``paths`` (the one output primitive: staged folders, atomic files, checks on output folders), ``folder_lock``
(one writer per folder), ``typed_json`` (dataclasses to and from JSON), ``redact`` (keys and odd characters out of
every line), ``retries`` (one retry policy for HTTP), ``progress`` (bars on a terminal, lines in a log: ``progress_lines``), ``streams``
(a closed or full stdout or stderr stops no command), ``collector`` (the garbage collector kept off what a command
loads, in a process of its own), ``provenance`` (versions, revisions and bootstrap errors: what a figure rests on),
``cache_folder`` (where every cache lives) and ``sizes`` (byte counts as people read them).

May import: ``physprobe.errors`` and libraries. Imported by: every other subpackage.
"""
