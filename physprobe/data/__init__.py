"""The benchmarks' data: upstream files in, Arrow-backed datasets out, and the rows a run reads.

Holds ``sources`` (pinned upstream files, sha256, a local mirror), ``templates`` (the CheckList-syntax expander),
``builder`` (a benchmark's configs, features and card, declared), ``dataset_folder`` (a build's Parquet and card,
written and read), ``registry`` (each registered benchmark's builder and evaluation, found by name), ``sampling`` (the
rows a ``--limit`` run scores) and ``hub_data`` (a run's data source: a local build or the Hub).

May import: ``physprobe.protocols`` (the evaluations a benchmark declares), ``physprobe.util``, ``physprobe.errors``.
Imported by: ``record``, ``run``, ``report``, ``publish``, ``cli``, and the benchmarks' own folders
(``physprobe.generators``, ``physprobe.dataset_scripts``).
"""
