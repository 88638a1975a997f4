"""A run as a typed value, from its plan to its record on disk.

Holds ``spec`` (``RunSpec``: a score run resolved whole from its arguments before any weight loads; spec.json),
``run_record`` (``RunRecord``: spec.json, run.json, metrics.json and predictions.parquet written and read through
one schema), ``record_schema`` (that schema's rules) and ``run_folder`` (a run folder's owner, caches and locks).

May import: ``physprobe.backends`` and ``physprobe.data`` (to resolve a spec), ``physprobe.protocols``,
``physprobe.util``, ``physprobe.errors``. Imported by: ``run``, ``report``, ``publish``, ``cli``.
"""
