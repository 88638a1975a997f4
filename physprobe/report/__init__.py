"""``physprobe report``: the papers' own tables with the user's runs in them, comparison figures, Markdown and HTML.

This package names no benchmark. Each benchmark declares its published tables in
``physprobe/dataset_scripts/<benchmark>/paper_tables.yaml``:

- ``paper`` (the citation), ``title``;
- ``protocols``: the protocol the paper used for each scoring method (run.json ``method`` -> the name, or the
  names, of protocols in ``physprobe protocols``; checked against the benchmark's ``evaluation.py``);
- ``tables``: ``id``, ``source`` (e.g. "Table 5"; null for a physprobe breakdown the paper does not print),
  ``title``, ``format`` (``scale``: percent or fraction, ``digits``), optional ``chance``, ``chance_label`` and
  ``chance_definition`` (a chance level other than a uniform random answer's: its name and what it is; figures draw it
  beside ``cells.SAME_ROWS``, the card's chance),
  ``methods`` (the run methods the table reports; all when absent), ``notes``, ``columns`` and ``rows``.
  A column has a ``name`` (its printed header), optional ``label`` (for figures), ``key`` (a dot path into a
  run's metrics.json, a list of paths for cells printed as several ``parts``, or null with a ``why``), ``n``
  (the number of questions behind the cell, a path or list of paths), ``summary`` (an overall column, left
  out of per-group figures), ``chance`` and ``excluded_by`` (protocols whose skip rule leaves the column's
  questions out, e.g. PROST's sliding for T5: a footnote says so). A row has ``model``, ``cells`` (strings exactly as printed;
  null for a cell the paper's text lost, explained by ``note``), optional ``kind`` (model, average, human,
  baseline) and ``section``;
- ``figures``: ``bars`` (one panel per column, published models and runs as bars) or ``lines`` (one line per
  model across a table's columns);
- ``card``: the paper's headline figures, the rows of the card the report opens with (``card``): each a ``figure``
  (its name), ``from`` (the tables and columns that print it: ``{table, column}``; a run's value is read through the
  first whose table reports the run's method) and optional ``groups`` (a table whose columns are the groups the
  figure spans; default: the first source's table, where it declares ``groups``). A table's ``groups`` names what its
  columns other than the summary ones are (``concepts``): a run's summary figure over fewer of them is footnoted.

A folder given that is no run but holds run folders (``physprobe score --benchmark all``'s ``runs/<model>``) is read
as its runs, and one holding such folders (``runs/``) as all of theirs; the report opens with the card, one column
per model (per card run's folder; runs given one by one, by their model).

Example (a run folder written by ``physprobe score``)::

    physprobe report runs/roberta-prost runs/gpt2-prost --out report

writes ``report/report.md``, ``report/report.html`` (self-contained), ``report/figures/*.png`` and
``report/explore/prost.html`` (the question explorer).

One job per module: ``tables`` (the paper_tables.yaml schema), ``runs`` (run folders and their names), ``cells`` (a run's
value, n and interval per cell), ``notes`` (footnote texts), ``card`` (the card), ``document`` (the blocks of the report),
``figures`` (matplotlib), ``writers`` (Markdown and HTML), ``output`` (the report folder); ``paired`` (McNemar, the
paired bootstrap, Holm), ``compare`` (two runs' questions matched and their figures' differences), ``differences`` (the
Differences section and differences.json), ``contents`` (the report's header, anchors and contents), ``explorer`` (every
question of a benchmark's runs, and links to a view of them) and ``explorer_page`` (the explorer's self-contained page).

May import: ``physprobe.run`` (baselines), ``physprobe.record``, ``physprobe.data``, ``physprobe.protocols``,
``physprobe.util``, ``physprobe.errors``; never ``backends``. Imported by: ``publish`` (a runs repository's card)
and ``cli``.
"""

from physprobe.errors import ReportError
from physprobe.report.cells import lookup, number, printed_value, run_cell, wilson
from physprobe.report.document import document
from physprobe.report.figures import DRAW
from physprobe.report.notes import missing_texts, protocol_warning
from physprobe.report.output import render
from physprobe.report.runs import Run, load_run, name_runs
from physprobe.report.tables import Column, Figure, PaperTables, Row, Table, paper_tables

__all__ = [
    "DRAW",
    "Column",
    "Figure",
    "PaperTables",
    "ReportError",
    "Row",
    "Run",
    "Table",
    "document",
    "load_run",
    "lookup",
    "missing_texts",
    "name_runs",
    "number",
    "paper_tables",
    "printed_value",
    "protocol_warning",
    "render",
    "run_cell",
    "wilson",
]
