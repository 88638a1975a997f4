"""Paired comparisons of runs on the same questions (``physprobe.report.compare``, ``paired``, ``differences``): synthetic
runs of known structure, checked against scipy and hand-worked values; a report of two real runs."""

import json
import re
from pathlib import Path

import numpy as np
import pytest
import scipy.stats

from physprobe.cli import main
from physprobe.data import registry
from physprobe.errors import ComparisonError
from physprobe.protocols import Evaluation
from physprobe.record import run_folder, run_record
from physprobe.report import compare, differences, paired
from physprobe.report.cells import wilson
from physprobe.report.runs import load_run
from physprobe.run.samples import Sample
from tests import run_folders

REPO = Path(__file__).resolve().parents[1]
CCONS = registry.evaluation("cccons")


def _rows(n: int, tag: str = "") -> list[dict]:
    """CConS-shaped rows: a gold object (0 or 1) and no difficulty, their content told apart by ``tag``."""
    return [{"context": f"question {i}{tag}", "obj1": "a", "obj2": "b", "label": i % 2, "difficulty": None} for i in range(n)]


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
    assert (d.delta, d.low, d.high, d.p, d.test, d.discordant) == (0.0, 0.0, 0.0, 1.0, "McNemar exact", (0, 0))
    assert found.matched == {"ordinary": 120} and found.dropped == {}


def test_thirty_of_four_hundred_one_way_is_mcnemars_exact_p(tmp_path):
    a_right = [True] * 400
    b_right = [i >= 30 for i in range(400)]  # wrong where A was right, on 30 questions
    a, b = _loaded(write_run(tmp_path / "a", a_right), write_run(tmp_path / "b", b_right, model="other"))
    (d,) = compare.compare(a, b, resamples=300).differences
    assert d.discordant == (30, 0) and d.delta == pytest.approx(-30 / 400) and d.a == 1.0
    assert abs(d.p - scipy.stats.binomtest(0, 30, 0.5).pvalue) < 1e-12
    assert d.high < 0 and d.excludes_zero


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
    for both. B - A = -0.5, and most bootstrap resamples say so, but swapping the runs' answers gives -0.5, 0, 0, +0.5
    alike, so randomisation's p is near 1/2 (McNemar's on the two would be 0.5)."""
    demo = Evaluation("demo", ("default",), (), metrics=_macro)
    rows = [{"label": 0, "group": 0}, {"label": 0, "group": 0}, {"label": 0, "group": 1}]
    pairs = [(compare._Answer("", row, "decided", 0, []), compare._Answer("", row, "decided", int(row["group"] == 0), []))
             for row in rows]  # fmt: skip
    (d,) = compare._differences(demo, "default", [compare.Figure("default.macro_accuracy", "macro")], pairs, [{}, {}], 1000, 5)
    assert d.delta == -0.5 and d.high <= 0
    assert d.test == "approximate randomisation" and abs(d.p - 0.5) < 0.05, d.p


def test_the_resampled_means_are_the_wirings_own_figures(tmp_path, monkeypatch):
    """A plain accuracy's resamples averaged in numpy equal the wiring's figures of the same resamples, and its
    randomisation p (by the wiring) is near McNemar's exact p."""
    rng = np.random.default_rng(3)
    a, b = _loaded(write_run(tmp_path / "a", (rng.random(80) < 0.5).tolist()),
                   write_run(tmp_path / "b", (rng.random(80) < 0.7).tolist(), model="other"))  # fmt: skip
    fast = compare.compare(a, b, resamples=100).differences[0]
    monkeypatch.setattr(compare, "_is_mean", lambda *args: False)
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
    assert "### Differences" in text and "Holm" in text
    (header, body), *_ = [t for t in markdown_tables(text) if t[0][:2] == ["Run", "Figure"]]
    assert header == differences.HEADER
    figures = [row[1] for row in body]
    assert figures[0] == "Table 5: Macro Average" and "Table 5: Mass" in figures
    saved = json.loads((compared / "differences.json").read_text())
    (section,) = saved
    (comparison,) = section["comparisons"]
    assert comparison["resamples"] == paired.RESAMPLES and comparison["seed"] == paired.SEED
    first, second = (json.loads((tiny_runs[k] / "metrics.json").read_text())["default"] for k in ("first", "second"))
    macro = comparison["differences"][0]
    assert macro["figure"]["key"] == "default.macro_accuracy"
    assert (macro["a"], macro["b"]) == (first["macro_accuracy"], second["macro_accuracy"])  # the wiring's own figures
    assert macro["test"] == "approximate randomisation" and macro["low"] <= macro["delta"] <= macro["high"]
    assert body[0][4].startswith(f"{macro['delta']:+.3f}") and body[0][-1] == str(first["n"])
    assert (compared / "figures" / "prost-differences.png").stat().st_size > 5_000
    html = (compared / "report.html").read_text()
    assert "<h3>Differences</h3>" in html and "Table 5: Macro Average" in html


@pytest.mark.slow
@pytest.mark.browser
def test_the_differences_in_a_real_browser(compared, tmp_path):
    """Headless Chromium shows the Differences section: its table and its figure, loaded, no console error."""
    from playwright import sync_api

    from tests.browser import launch_options

    errors = []
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(**launch_options())
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
        page.goto((compared / "report.html").as_uri())
        page.wait_for_load_state("load")
        heading = page.locator("h3", has_text="Differences")
        table = heading.locator("xpath=following::table[1]")
        header = table.locator("th").all_text_contents()
        rows = table.locator("tbody tr").count()
        image = page.locator('img[alt^="Differences from"]')
        size = image.evaluate("i => [i.complete, i.naturalWidth, i.naturalHeight]")
        heading.scroll_into_view_if_needed()
        page.screenshot(path=str(tmp_path / "differences.png"), full_page=False)
        image.screenshot(path=str(tmp_path / "differences-figure.png"))
        browser.close()
    assert header == differences.HEADER and rows >= 2
    assert size[0] and size[1] > 300 and size[2] > 100
    assert errors == []
    print(f"screenshots: {tmp_path / 'differences.png'}, {tmp_path / 'differences-figure.png'}")


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
