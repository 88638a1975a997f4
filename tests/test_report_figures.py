"""The report's figures read at a glance (tests/figure_checks.py on every figure as drawn): no markup, no text
crossed by a line, a whisker or another text, text at least 11 px high at the page's width, every run drawn whatever
its value (a zero as a marker in its colour), legends listing only what is drawn, no empty panel. Runs of three
models per benchmark with every figure the paper tables read, one of them all zeros."""

from __future__ import annotations

import pytest

from physprobe import report
from physprobe.dataset_scripts import BENCHMARKS
from physprobe.report import card, figures, writers

from . import figure_checks
from .run_folders import write_run

VALUES = {"zero": 0.0, "mid": 0.55, "high": 0.9}
# Drawing and checking every figure of twelve runs' report takes minutes on the shared 2-core machine.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]


def _put(metrics: dict, path: str, value) -> None:
    *parents, leaf = path.split(".")
    node = metrics
    for part in parents:
        node = node.setdefault(part, {})
    node.setdefault(leaf, value)


def metrics_of(benchmark: str, value: float) -> dict:
    """A metrics.json with ``value`` under every key the benchmark's paper tables read (differences at a tenth of
    it) and n=20 under every n they name."""
    found: dict = {}
    for table in report.paper_tables(benchmark).tables:
        for column in table.columns:
            for key in (k for k in column.keys if k):
                _put(found, key, value / 10 if "gap" in key or "inverse" in key else value)
            for n in (n for n in column.ns if n):
                _put(found, n, 20)
    for config in found.values():
        config.setdefault("n", 20)
    return found


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> list:
    root = tmp_path_factory.mktemp("figure_runs")
    folders = []
    for benchmark in sorted(BENCHMARKS):
        paper = report.paper_tables(benchmark)
        method, protocol = next(iter(paper.protocols.items()))
        protocol = protocol if isinstance(protocol, str) else protocol[0]
        for name, value in VALUES.items():  # the mid run by a protocol not the paper's: ⚠, a footnote naming it
            used = "some-protocol" if name == "mid" else protocol
            folders.append(write_run(root / f"{benchmark}-{name}", benchmark, method, metrics_of(benchmark, value), used,
                                     model=f"org/{name}-model-with-a-rather-long-name"))  # fmt: skip
    return folders


@pytest.fixture(scope="module")
def checked(runs, tmp_path_factory) -> dict[str, list[str]]:
    """Every figure of the report of ``runs``, by file name, with what it breaks."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        found = figure_checks.capturing(monkeypatch, [figures, card], figures.SAVE_DPI, writers.PAGE_WIDTH)
        report.render(runs, tmp_path_factory.mktemp("figure_report") / "report")
    return found


def test_every_figure_is_checked(checked):
    """Every figure of the report is checked (on main before these rules, every figure broke the text-size rule, all
    but the lines figure a run's zero bar unmarked, all but Table 7's lines crossing values, the card markup and two
    legend entries drawn nowhere, Text2Afford's classes a "published" entry without a published bar)."""
    assert "card.png" in checked and {"prost-concepts.png", "newton-attributes-track1.png", "cccons-subsets.png"} <= set(
        checked
    ), sorted(checked)


@pytest.mark.parametrize("kind", ["markup", "px text", "overlap", "a line crosses", "has no marker", "legend lists", "is empty"])
def test_figures_read_at_a_glance(checked, kind):
    broken = {name: [p for p in found if kind in p] for name, found in checked.items()}
    assert {name: found[:3] for name, found in broken.items() if found} == {}
