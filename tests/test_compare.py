"""Paired comparisons of runs on the same questions (``physprobe.report.compare``, ``paired``, ``differences``): synthetic
runs of known structure, checked against scipy and hand-worked values; a report of two real runs."""

import dataclasses
import json
import math
import re
from pathlib import Path

import matplotlib.text
import numpy as np
import pytest
import scipy.stats

from physprobe.cli import main
from physprobe.data import registry
from physprobe.errors import ComparisonError
from physprobe.protocols import Evaluation
from physprobe.protocols.units import Unit
from physprobe.record import run_folder, run_record
from physprobe.report import compare, detectable, difference_figure, differences, paired
from physprobe.report.cells import wilson
from physprobe.report.runs import load_run
from physprobe.run.samples import Sample
from tests import run_folders

REPO = Path(__file__).resolve().parents[1]
CCONS = registry.evaluation("cccons")


def _rows(n: int, tag: str = "") -> list[dict]:
    """CConS-shaped rows: a gold object (0 or 1), no difficulty and an object pair of their own (each its own unit), their
    content told apart by ``tag``."""
    return [
        {"context": f"question {i}{tag}", "obj1": f"a{i}", "obj2": f"b{i}", "label": i % 2, "difficulty": None} for i in range(n)
    ]


def write_run(folder: Path, right: list[bool], rows: list[dict] | None = None, protocol: str = "answer-loglik",
              revision: str = "sha256:0", model: str = "model", start: int = 0) -> Path:  # fmt: skip
    """A CConS run folder of config ``ordinary`` whose answer to row ``start + i`` is right where ``right[i]``, written
    as ``physprobe score`` writes one (``run_record.write``)."""
    rows = rows or _rows(start + len(right))
    samples, scored = [], []
    for i, good in enumerate(right, start):
        row = rows[i]
        answer = row["label"] if good else 1 - row["label"]
        samples.append(
            Sample("ordinary", i, row, (row["label"],), "decided", answer, (0.0, -1.0) if answer == 0 else (-1.0, 0.0), 2)
        )
        scored.append(row)
    metrics = {"ordinary": CCONS.metrics("ordinary", scored, [s.prediction for s in samples], [list(s.scores) for s in samples])}
    record = run_folders.record("cccons", "causal", metrics, protocol, model=model, label=model,
                                config_revisions={"ordinary": revision})  # fmt: skip
    run_record.write(folder, run_folder.owner(model, "cccons", False), record, samples)
    return folder


def _loaded(*folders: Path):
    runs = [load_run(f) for f in folders]
    for run, name in zip(runs, "AB"):
        run.id = name
    return runs


def test_mcnemar_is_scipys_exact_binomial_test():
    for only_a, only_b in [(30, 0), (0, 30), (21, 9), (9, 21), (1, 3), (7, 7), (0, 1), (250, 240)]:
        expected = scipy.stats.binomtest(min(only_a, only_b), only_a + only_b, 0.5).pvalue
        assert abs(paired.mcnemar(only_a, only_b) - expected) < 1e-12


def test_holm_matches_the_step_down_worked_by_hand():
    # p sorted 0.001, 0.01, 0.02, 0.04 of m = 4: times 4, 3, 2, 1 = 0.004, 0.03, 0.04, 0.04, each at least the one before
    assert paired.holm([0.04, 0.001, 0.02, 0.01]) == pytest.approx([0.04, 0.004, 0.04, 0.03])
    assert paired.holm([0.5, 0.9]) == [1.0, 1.0]  # 2 × 0.5 caps at 1, and the larger p is never adjusted below it


def test_identical_runs_differ_by_zero_with_p_one(tmp_path):
    right = [i % 3 != 0 for i in range(120)]
    a, b = _loaded(write_run(tmp_path / "a", right), write_run(tmp_path / "b", right, model="other"))
    found = compare.compare(a, b, resamples=200)
    assert [d.figure.key for d in found.differences] == ["ordinary.accuracy"]
    (d,) = found.differences
    assert (d.delta, d.low, d.high, d.test, d.differing, d.tested) == (0.0, 0.0, 0.0, "not tested", 0, False)
    assert (d.units, d.unit, d.questions) == (120, "object pair", 120)  # each row its own pair (``_rows``)
    assert found.matched == {"ordinary": 120} and found.dropped == {}


def test_thirty_of_four_hundred_one_way_is_mcnemars_exact_p(tmp_path):
    a_right = [True] * 400
    b_right = [i >= 30 for i in range(400)]  # wrong where A was right, on 30 questions
    a, b = _loaded(write_run(tmp_path / "a", a_right), write_run(tmp_path / "b", b_right, model="other"))
    (d,) = compare.compare(a, b, resamples=300).differences
    assert d.discordant == (30, 0) and d.delta == pytest.approx(-30 / 400) and d.a == 1.0
    assert abs(d.p - scipy.stats.binomtest(0, 30, 0.5).pvalue) < 1e-12
    assert d.high < 0 and d.tested and d.differing == 30 and (d.units, d.unit) == (400, "object pair")


def test_paired_interval_is_narrower_than_unpaired_when_outcomes_correlate(tmp_path):
    """B answers as A does but on 22 of 300 questions (20 gained, 2 lost): the outcomes correlate strongly, so the
    paired interval is far narrower than the one of two independent samples' bootstrap."""
    rng = np.random.default_rng(7)
    a_right = rng.random(300) < 0.6
    b_right = a_right.copy()
    wrong, right = np.flatnonzero(~a_right), np.flatnonzero(a_right)
    b_right[wrong[:20]], b_right[right[:2]] = True, False
    a, b = _loaded(write_run(tmp_path / "a", a_right.tolist()), write_run(tmp_path / "b", b_right.tolist(), model="other"))
    (d,) = compare.compare(a, b, resamples=1000).differences
    draws = np.random.default_rng(1).integers(0, 300, size=(2, 1000, 300))  # each run resampled on its own
    unpaired = b_right[draws[1]].mean(axis=1) - a_right[draws[0]].mean(axis=1)
    low, high = np.percentile(unpaired, [2.5, 97.5])
    assert d.delta == pytest.approx(18 / 300) and d.discordant == (2, 20)
    assert (d.high - d.low) < 0.5 * (high - low)
    assert low < 0 < high and d.low > 0  # the unpaired interval misses a difference the paired one finds


def _macro(config, rows, predictions, scores):
    """A macro accuracy over groups (the mean of the groups' accuracies), hand-written in numpy."""
    right = np.array([p == r["label"] for p, r in zip(predictions, rows)], dtype=float)
    groups = np.array([r["group"] for r in rows])
    counts = np.bincount(groups)
    return {"n": len(rows), "macro_accuracy": float(np.mean(np.bincount(groups, right)[counts > 0] / counts[counts > 0]))}


@pytest.mark.slow
def test_a_macro_figures_interval_covers_the_true_difference():
    """200 replications at nominal 95%: per replication, 400 questions of 4 groups of unequal size and accuracy, B's
    outcome correlated with A's; the interval of the macro accuracy's difference covers the true one (the mean over
    groups of the groups' differences, 0.15) in at least 93% of them. A plain accuracy's interval would be centred on
    the questions' mean difference (0.075) and cover it in under half."""
    demo = Evaluation("demo", ("default",), (), metrics=_macro)
    shares = [0.4, 0.3, 0.2, 0.1]
    p_a, p_b = np.array([0.8, 0.5, 0.4, 0.3]), np.array([0.8, 0.6, 0.6, 0.6])
    truth = float(np.mean(p_b - p_a))
    rng = np.random.default_rng(2026)
    figure = compare.Figure("default.macro_accuracy", "macro")
    covered = 0
    for _ in range(200):
        groups = rng.choice(4, size=400, p=shares)
        difficulty = rng.random(400)  # the same for both runs on 70% of the questions
        other = np.where(rng.random(400) < 0.7, difficulty, rng.random(400))
        a_right, b_right = difficulty < p_a[groups], other < p_b[groups]
        rows = [{"label": 0, "group": int(g)} for g in groups]
        pairs = [(compare._Answer("", row, "decided", 0 if x else 1, []), compare._Answer("", row, "decided", 0 if y else 1, []))
                 for row, x, y in zip(rows, a_right, b_right)]  # fmt: skip
        (d,) = compare._differences(demo, "default", [figure], pairs, [{}, {}], 200, int(rng.integers(1 << 30)))
        assert d.test == "approximate randomisation" and d.resamples == 200
        covered += d.low <= truth <= d.high
    print(f"covered {covered} of 200")
    assert covered >= 186, covered


def test_a_group_of_two_questions_both_lost_is_no_evidence():
    """A macro accuracy over two groups: two questions of one, right for A and wrong for B, and one of the other, right
    for both. B - A = -0.5, and every bootstrap resample says B is no better, but two differing questions cannot show a
    difference (swapping their answers gives -0.5, 0, 0, +0.5 alike, p at least 1/2): the figure is not tested, and
    takes no part in Holm's correction."""
    demo = Evaluation("demo", ("default",), (), metrics=_macro)
    rows = [{"label": 0, "group": 0}, {"label": 0, "group": 0}, {"label": 0, "group": 1}]
    pairs = [(compare._Answer("", row, "decided", 0, []), compare._Answer("", row, "decided", int(row["group"] == 0), []))
             for row in rows]  # fmt: skip
    (d,) = compare._differences(demo, "default", [compare.Figure("default.macro_accuracy", "macro")], pairs, [{}, {}], 1000, 5)
    assert d.delta == -0.5 and d.high <= 0
    assert (d.test, d.tested, d.differing, d.units, d.holm) == ("not tested", False, 2, 3, None)


def test_the_resampled_means_are_the_wirings_own_figures(tmp_path, monkeypatch):
    """A plain accuracy's resamples averaged in numpy equal the wiring's figures of the same resamples, and its
    randomisation p (by the wiring) is near McNemar's exact p."""
    rng = np.random.default_rng(3)
    a, b = _loaded(write_run(tmp_path / "a", (rng.random(80) < 0.5).tolist()),
                   write_run(tmp_path / "b", (rng.random(80) < 0.7).tolist(), model="other"))  # fmt: skip
    fast = compare.compare(a, b, resamples=100).differences[0]
    monkeypatch.setattr(compare, "is_mean", lambda *args: False)
    slow = compare.compare(a, b, resamples=100).differences[0]
    assert (fast.low, fast.high, fast.delta) == pytest.approx((slow.low, slow.high, slow.delta), abs=1e-12)
    assert fast.test == "McNemar exact" and slow.test == "approximate randomisation"
    assert slow.p == pytest.approx(fast.p, abs=0.05)  # randomisation's p near McNemar's exact one


def test_runs_on_other_rows_are_compared_on_their_intersection(tmp_path):
    """A has rows 0-99, B rows 40-139 (another sample), 10 of the shared rows with other content (another data
    revision): compared on the 50 rows both hold alike, the rest counted by reason; the revisions refused without
    --compare-across."""
    rows = _rows(140)
    changed = [dict(r, context=r["context"] + " (revised)") if 60 <= i < 70 else r for i, r in enumerate(rows)]
    a = write_run(tmp_path / "a", [True] * 100, rows)
    b = write_run(tmp_path / "b", [i % 2 == 0 for i in range(100)], changed, revision="sha256:1", model="other", start=40)
    first, second = _loaded(a, b)
    with pytest.raises(
        ComparisonError,
        match=r"^runs A and B are not compared: their data revisions of ordinary differ \(sha256:0, sha256:1\); pass --compare-across",
    ):
        compare.compare(first, second)
    found = compare.compare(first, second, resamples=100, across=True)
    assert found.matched == {"ordinary": 50}
    assert found.dropped == {"ordinary": {"reference": 40, "other": 40, "content": 10}}
    (d,) = found.differences
    shared = [i for i in range(40, 100) if not 60 <= i < 70]
    assert d.questions == 50 and d.b == pytest.approx(sum((i - 40) % 2 == 0 for i in shared) / 50) and d.a == 1.0


def test_runs_of_other_protocols_are_refused_in_one_line(tmp_path):
    a = write_run(tmp_path / "a", [True] * 10)
    b = write_run(tmp_path / "b", [False] * 10, protocol="question-generate", model="other")
    with pytest.raises(ComparisonError) as refused:
        compare.compare(*_loaded(a, b))
    assert str(refused.value) == ("runs A and B are not compared: their protocols differ (answer-loglik, question-generate); "
                                  "pass --compare-across to compare them on the questions they share")  # fmt: skip
    assert "\n" not in str(refused.value)


def test_the_worked_example_of_the_docs(tmp_path):
    """docs/comparing.md's example: 400 questions, A right on 300, B on 320, B right wherever A is."""
    text = (REPO / "docs" / "comparing.md").read_text()
    a_right, b_right = [i < 300 for i in range(400)], [i < 320 for i in range(400)]
    a, b = _loaded(write_run(tmp_path / "a", a_right), write_run(tmp_path / "b", b_right, model="other"))
    (d,) = compare.compare(a, b).differences
    low_a, high_a = wilson(0.75, 400)
    low_b, high_b = wilson(0.80, 400)
    stated = {
        "A": f"0.750 (95% Wilson interval {low_a:.3f}–{high_a:.3f})",
        "B": f"0.800 (95% Wilson interval {low_b:.3f}–{high_b:.3f})",
        "discordant": f"{d.discordant[0]} right for A alone, {d.discordant[1]} right for B alone",
        "p": f"p = 2 × 0.5^20 = {d.p:.3g}",
        "interval": f"B − A = {d.delta:+.3f}, 95% paired bootstrap interval {d.low:+.3f} to {d.high:+.3f}",
    }
    for what, line in stated.items():
        assert line in text, (what, line)
    assert high_a > low_b  # the separate intervals overlap


# --- a report of real runs -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_runs(built_all, benchmark_texts, tiny_model, made):
    """Two tiny causal models (tests/tiny_models.py, other seeds) on PROST, --limit 40; a third on another --limit and
    a fourth with another protocol; scored once per test run (conftest.made; read them, never write them)."""
    models = [tiny_model("causal", benchmark_texts, f"gpt{seed}", seed=seed) for seed in (0, 1)]
    plan = [("first", models[0], ["--limit", "40"]), ("second", models[1], ["--limit", "40"]),
            ("fewer", models[1], ["--limit", "25", "--label", "fewer"]),
            ("other-protocol", models[1], ["--limit", "40", "--protocol", "sentence-sum", "--label", "sum"])]  # fmt: skip

    def score(root):
        root.mkdir()
        for name, model, extra in plan:
            out = root / name
            assert main(["score", "--model", str(model), "--benchmark", "prost", "--data", str(built_all), "--out", str(out),
                         *extra]) == 0  # fmt: skip

    root = made.folder("compare_runs", [str(built_all), [(n, str(m), e) for n, m, e in plan]], score)
    return {name: root / name for name, _, _ in plan}


@pytest.fixture(scope="module")
def compared(tiny_runs, tmp_path_factory) -> Path:
    """The report of the two tiny models' runs (the first the reference)."""
    out = tmp_path_factory.mktemp("compared") / "report"
    assert main(["report", str(tiny_runs["first"]), str(tiny_runs["second"]), "--out", str(out)]) == 0
    return out


@pytest.mark.slow
def test_a_report_of_two_real_runs_holds_the_differences(tiny_runs, compared):
    from tests.test_report import markdown_tables

    text = (compared / "report.md").read_text()
    assert "### Differences" in text and "Holm" in text and "unit: the object set" in text
    saved = json.loads((compared / "differences.json").read_text())
    (section,) = saved
    (comparison,) = section["comparisons"]
    assert comparison["resamples"] == paired.RESAMPLES and comparison["seed"] == paired.SEED
    first, second = (json.loads((tiny_runs[k] / "metrics.json").read_text())["default"] for k in ("first", "second"))
    macro = comparison["differences"][0]
    assert macro["figure"]["key"] == "default.macro_accuracy" and macro["figure"]["percent"]
    assert (macro["a"], macro["b"]) == (first["macro_accuracy"], second["macro_accuracy"])  # the wiring's own figures
    assert macro["unit"] == "object set" and macro["questions"] == first["n"] and macro["units"] <= first["n"]
    tested = [d for d in comparison["differences"] if d["test"] != "not tested"]
    assert all(d["differing"] >= paired.MIN_DIFFERING and d["holm"] is not None for d in tested)
    assert all(d["holm"] is None for d in comparison["differences"] if d not in tested)
    tables = [t for t in markdown_tables(text) if t[0][:2] == differences.HEADER[:2]]
    assert [row[0] for t in tables for row in t[1]] == [d["figure"]["name"] for d in tested]  # the table: tested only
    if len(tested) < len(comparison["differences"]):
        assert re.search(r"not tested: (\d+ figures? with identical answers|\d+ on fewer than 6 object sets)", text)
    assert (compared / "figures" / "prost-differences.png").exists() == bool(tested)
    html = (compared / "report.html").read_text()
    assert re.search(r'<h3 id="[^"]+">Differences<a class="top" href="#[^"]+"', html)  # its anchor and the way back up


@pytest.mark.slow
@pytest.mark.browser
def test_the_differences_in_a_real_browser(compared, tmp_path):
    """Headless Chromium shows the Differences section: the run and its unit named once, the table and figure of the
    tested figures (where any is) and the line of those not tested, no console error."""
    from playwright import sync_api

    from tests.browser import launch_options

    tested = [d for s in json.loads((compared / "differences.json").read_text()) for c in s["comparisons"]
              for d in c["differences"] if d["test"] != "not tested"]  # fmt: skip
    errors = []
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(**launch_options())
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
        page.goto((compared / "report.html").as_uri())
        page.wait_for_load_state("load")
        heading = page.locator("h3", has_text="Differences")
        section = heading.locator("xpath=following-sibling::*[position() <= 6]").all_inner_texts()
        heading.scroll_into_view_if_needed()
        page.screenshot(path=str(tmp_path / "differences.png"), full_page=False)
        if tested:
            header = heading.locator("xpath=following::table[1]").locator("th").all_text_contents()
            image = page.locator('img[alt^="Differences from"]')
            size = image.evaluate("i => [i.complete, i.naturalWidth, i.naturalHeight]")
        browser.close()
    assert any("(A, the reference); unit: the object set" in text for text in section)
    assert tested or any("not tested:" in text for text in section)
    if tested:
        assert header == differences.HEADER and size[0] and size[1] > 300 and size[2] > 100
    assert errors == []
    print(f"screenshot: {tmp_path / 'differences.png'}")


@pytest.mark.slow
def test_a_report_states_the_intersection_and_refuses_another_protocol(tiny_runs, tmp_path):
    import pyarrow.parquet as pq

    out = tmp_path / "report"
    folders = [str(tiny_runs[k]) for k in ("first", "fewer", "other-protocol")]
    assert main(["report", *folders, "--out", str(out)]) == 0
    text = (out / "report.md").read_text()
    rows = [set(pq.read_table(tiny_runs[k] / "predictions.parquet").column("row").to_pylist()) for k in ("first", "fewer")]
    shared = len(rows[0] & rows[1])
    assert f"compared on the {shared} questions both answered" in text
    assert f"{len(rows[0] - rows[1])} only in the reference's rows" in text
    assert re.search(
        r"Not compared: runs \S+ and sum are not compared: their protocols differ \(released-gpt, sentence-sum\)", text
    )
    across = tmp_path / "across"
    assert main(["report", *folders, "--out", str(across), "--compare-across"]) == 0
    assert "compared across: their protocols differ" in (across / "report.md").read_text()


# --- units, the tested rule, the verdict, what a run can detect ---------------------------------------------------


def _accuracy(config, rows, predictions, scores):
    """A plain accuracy, hand-written: the share of questions whose prediction is the row's label."""
    return {"n": len(rows), "accuracy": sum(p == r["label"] for p, r in zip(predictions, rows)) / len(rows)}


def _pairs(a_right, b_right, units):
    """Matched answers of two runs on rows whose ``unit`` is given, right where ``*_right``."""
    rows = [{"label": 0, "unit": int(u)} for u in units]
    return [(compare._Answer("", row, "decided", 0 if x else 1, []), compare._Answer("", row, "decided", 0 if y else 1, []))
            for row, x, y in zip(rows, a_right, b_right)]  # fmt: skip


BY_UNIT = Evaluation("demo", ("default",), (), metrics=_accuracy, unit=Unit("cluster", lambda row, config: row["unit"], "demo"))
BY_QUESTION = Evaluation("demo", ("default",), (), metrics=_accuracy)
ACCURACY = compare.Figure("default.accuracy", "accuracy")


def test_the_unit_resampled_interval_is_wider_by_the_design_effect():
    """150 units of m = 4 questions each; both runs' answers depend only on the unit (the same within it), so the
    intra-unit correlation is 1 and the design effect 1 + (m - 1) = 4: resampling whole units gives an interval and a
    standard error sqrt(4) = 2 times those of resampling single questions, up to the bootstrap's own noise."""
    rng = np.random.default_rng(11)
    a_unit, b_unit = rng.random(150) < 0.55, rng.random(150) < 0.7
    units = np.repeat(np.arange(150), 4)
    pairs = _pairs(a_unit[units], b_unit[units], units)
    (by_unit,) = compare._differences(BY_UNIT, "default", [ACCURACY], pairs, [{}, {}], 4000, 3)
    (by_question,) = compare._differences(BY_QUESTION, "default", [ACCURACY], pairs, [{}, {}], 4000, 3)
    assert (by_unit.units, by_unit.unit, by_question.units, by_question.unit) == (150, "cluster", 600, "question")
    assert by_unit.delta == by_question.delta
    width = (by_unit.high - by_unit.low) / (by_question.high - by_question.low)
    assert 1.8 < width < 2.2, width
    assert 1.85 < by_unit.detectable / by_question.detectable < 2.15
    assert by_question.test == "McNemar exact" and by_unit.test == "approximate randomisation"  # units of 4: swapped whole
    assert by_unit.p > by_question.p  # the clustered test is the more cautious


def test_a_figure_is_tested_only_where_six_units_differ():
    """Five discordant questions all one way cannot reach p < 0.05 (McNemar: 2 x 0.5^5 = 0.0625): not tested; six
    can (0.031): tested."""
    for discordant, tested in ((5, False), (6, True)):
        b_right = [i >= discordant for i in range(40)]
        (d,) = compare._differences(BY_QUESTION, "default", [ACCURACY], _pairs([True] * 40, b_right, range(40)), [{}, {}], 200, 1)
        assert (d.differing, d.tested) == (discordant, tested)
        assert (d.test, d.p) == (("McNemar exact", 2 * 0.5**6) if tested else ("not tested", 1.0))
    assert paired.mcnemar(5, 0) == 0.0625 > paired.ALPHA > paired.mcnemar(6, 0)


def _difference(name, p, differing=10, percent=False, delta=0.1):
    figure = compare.Figure(f"default.{name}", name, percent, 1 if percent else 3)
    return compare.Difference(figure, 0.5, 0.5 + delta, delta, delta - 0.05, delta + 0.05, p,
                              "approximate randomisation" if differing >= paired.MIN_DIFFERING else "not tested",
                              40, 200, units=40, unit="cluster", differing=differing, detectable=0.08)  # fmt: skip


def test_holm_is_over_the_tested_figures_and_is_the_one_verdict(tmp_path):
    """Holm over the two tested differences only (p 0.02 and 0.03: adjusted 0.04 and 0.04, both below 0.05); with
    the ten untested ones counted it would be 0.24. The star, the footnote and the figure's filled marker read it."""
    found = [_difference("one", 0.02), _difference("two", 0.03)] + [_difference(f"same{i}", 1.0, 0) for i in range(10)]
    comparison = compare.Comparison("demo", "A", "B", tuple(found), {"default": 40}, {}, 1, 200)
    section = differences.Section("demo", "A", (comparison,), ())

    class _Record:
        benchmark = "demo"

    class _Run:
        id, record, differences = "B", _Record(), {}

    run = _Run()
    (done,) = differences._holm([section], [run])
    adjusted = {d.figure.name: d.holm for d in done.comparisons[0].differences}
    assert adjusted["one"] == pytest.approx(0.04) and adjusted["two"] == pytest.approx(0.04) and adjusted["same0"] is None
    assert done.tested == 2 and [d.differs for d in done.comparisons[0].differences[:3]] == [True, True, False]
    note = differences.card_note(run, "default.one")
    assert "differs (p (Holm) 0.04)" in note and "+0.100" in note
    assert "not tested (identical answers)" in differences.card_note(run, "default.same0")
    (table, line) = [b for b in differences.blocks(done, tmp_path) if type(b).__name__ in ("TableBlock", "Notes")]
    assert [row[0] for row in table.rows] == ["one", "two"] and all(row[3].endswith(" *") for row in table.rows)
    assert line.items == [f"B: not tested: 10 figures with identical answers (no test of so few could reach p < {paired.ALPHA})"]
    figure = difference_figure.draw_figure(done)
    (axis,) = figure.axes
    filled = [line.get_markerfacecolor() != "white" for line in axis.lines if line.get_marker() == "o"]
    assert filled == [True, True]


def test_differences_print_on_the_cards_scale_and_to_the_decimals_their_units_resolve():
    d = _difference("macro", 0.01, percent=True, delta=0.0833)
    assert differences.signed(d.delta, d.figure) == "+8.3"  # PROST's card prints 8.3, not 0.083
    assert differences.interval(d) == "+3 to +13"  # 40 units: 2.5 points a unit, whole points
    few = compare.Difference(d.figure, 0.2, 0.25, 0.05, -1.0, 0.772, 1.0, "not tested", 4, 1000, units=4)
    assert differences.interval(few) == "-100 to +77"  # 4 units: 25 points a unit, whole points


def test_the_detectable_difference_has_eighty_percent_power_in_a_simulation():
    """docs/comparing.md's worked example: 400 independent questions, 200 right for both, 120 wrong for both, 40 right
    for A alone and 40 for B alone. The detectable difference the comparison states (2.80 x the resampled
    difference's standard error, 1000 resamples, seed 1234) is about 2.80 x sqrt(0.2 / 400) = 0.063, as the docs say;
    runs simulated with that true difference and the same discordance are told apart by McNemar's test at 5% in
    about 80% of 400 replications."""
    kinds = np.repeat([0, 1, 2, 3], [200, 120, 40, 40])  # both right, both wrong, A alone, B alone
    pairs = _pairs(np.isin(kinds, (0, 2)), np.isin(kinds, (0, 3)), range(400))
    (d,) = compare._differences(BY_QUESTION, "default", [ACCURACY], pairs, [{}, {}], paired.RESAMPLES, paired.SEED)
    assert d.delta == 0 and d.detectable == pytest.approx(2.8016 * math.sqrt(0.2 / 400), rel=0.08)
    text = (REPO / "docs" / "comparing.md").read_text()
    assert f"the comparison states ±{d.detectable:.3f}" in text, d.detectable
    assert "2.80 × sqrt(0.2 / 400) = 0.063" in text
    rng = np.random.default_rng(5)
    only_a, only_b = (0.2 - d.detectable) / 2, (0.2 + d.detectable) / 2
    told = 0
    for _ in range(400):
        drawn = rng.choice(3, size=400, p=[1 - 0.2, only_a, only_b])
        told += paired.mcnemar(int(np.sum(drawn == 1)), int(np.sum(drawn == 2))) < 0.05
    assert 0.72 <= told / 400 <= 0.88, told


def test_the_differences_figure_has_no_label_repeated_or_cut():
    """Text2Afford's fifteen classes for two runs, named as its groups table names them (one long table title): every
    text of the figure (title, axis label, tick labels, legend) is drawn once where it should be and inside the figure,
    the classes' labels shortened to the table's short name and the class."""
    classes = ["Grasp", "Lift", "Throw", "Push", "Fix", "Ride", "Play", "Watch", "SitOn", "Feed", "Row", "PourFrom",
               "LookThrough", "WriteWith", "TypeOn"]  # fmt: skip
    title = "Accuracy per affordance class (a physprobe breakdown; the paper prints no per-class table)"
    comparisons = []
    for run, shift in (("a-model-with-a-long-name", 0.0), ("another-model", 0.05)):
        found = [dataclasses.replace(_difference(c, 0.001 * (i + 1)), figure=compare.Figure(f"default.by_class.{c}", f"{title}: {c}"),
                                     delta=0.01 * i + shift, low=0.01 * i + shift - 0.04, high=0.01 * i + shift + 0.04, holm=0.01)
                 for i, c in enumerate(classes)]  # fmt: skip
        comparisons.append(compare.Comparison("text2afford", "reference-model", run, tuple(found), {"default": 40}, {}, 1, 200))
    figure = difference_figure.draw_figure(differences.Section("text2afford", "reference-model", tuple(comparisons), ()))
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    box = figure.bbox
    (axis,) = figure.axes
    low, high = axis.get_xlim()
    hidden = [t for t in axis.get_xticklabels() if not low <= t.get_position()[0] <= high]  # outside the axis: not drawn
    texts = [t for t in figure.findobj(matplotlib.text.Text) if t.get_visible() and t.get_text().strip() and t not in hidden]
    labels = [t.get_text().replace("\n", " ") for t in axis.get_yticklabels()]
    assert labels == [f"Accuracy per affordance class: {c}" for c in classes]
    assert len(set(labels)) == len(labels)
    shown = [t.get_text() for t in texts if t not in axis.get_xticklabels()]
    assert len(shown) == len(set(shown)), [s for s in shown if shown.count(s) > 1]
    for text in texts:
        extent = text.get_window_extent(renderer)
        assert extent.x0 >= box.x0 - 0.5 and extent.x1 <= box.x1 + 0.5, text.get_text()
        assert extent.y0 >= box.y0 - 0.5 and extent.y1 <= box.y1 + 0.5, text.get_text()
    ticks = [t.get_text() for t in axis.get_xticklabels() if t.get_text() and t not in hidden]
    assert len(ticks) >= 3 and len(set(ticks)) == len(ticks)  # ticks that tell values apart
    assert axis.get_title() == "text2afford: differences from reference-model"


def test_an_untested_figures_note_gives_the_runs_own_detectable_difference_not_the_few_units_paired_one(monkeypatch):
    """One differing sentence gives a paired spread of almost nothing (a detectable ±0.01 would look precise): the
    note of a figure not tested on too few differing units says what the run alone can detect instead."""
    d = _difference("few", 1.0, differing=1)
    own = detectable.Alone(0.2, 18, 18, "sentence", 0.09, 0.36)
    monkeypatch.setattr(detectable, "alone", lambda run, key: own if key == "default.few" else None)

    class _Run:
        id, differences = "B", {"default.few": ("A", d)}

    note = differences.card_note(_Run(), "default.few")
    assert "not tested (only 1 cluster differs)" in note and "±0.080" not in note and "detectable at 80%" not in note
    assert note.endswith("; alone, " + detectable.phrase(own, False))
