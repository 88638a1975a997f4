"""A run as a typed value, from its plan to its record on disk.

Holds ``options`` (``ScoreOptions``: a run's options, one typed value), ``spec`` (``RunSpec``: a score run resolved
whole from its options before any weight loads; spec.json), ``run_record`` (``RunRecord``: spec.json, run.json,
metrics.json and predictions.parquet written and read through one schema of pydantic dataclasses), ``fields`` (the
constrained types of its fields), ``figures`` (metrics.json's figures by the kinds their benchmark declares),
``predictions`` (a line of predictions.parquet), ``migrations`` (run.json of an earlier schema version, read) and
``run_folder`` (a run folder's owner, caches and locks).

May import: ``physprobe.backends`` and ``physprobe.data`` (to resolve a spec), ``physprobe.protocols``,
``physprobe.util``, ``physprobe.errors``. Imported by: ``run``, ``report``, ``publish``, ``cli``.
"""
