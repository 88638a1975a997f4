"""Scoring: a resolved spec turned into samples, figures and a run record.

Holds ``runner`` (one benchmark scored: the loop over configs, ``runner.run(spec)``), ``card_run`` (``--benchmark
all``: one model on several benchmarks, loaded once), ``samples`` (``Sample``: one scored row), ``result_cache``
(the resume cache), ``parallel`` and ``launched`` (data-parallel ranks and their entry point),
``config_figures`` (a config's figures with their bootstrap and baselines) and ``baselines`` (majority, constant
and chance figures of the same rows; flags of runs whose figures say little).

May import: ``physprobe.record``, ``physprobe.backends``, ``physprobe.data``, ``physprobe.protocols``,
``physprobe.util``, ``physprobe.exit_status``, ``physprobe.errors``. Imported by: ``report``, ``publish``, ``cli``.
"""
