"""The card ``physprobe report`` opens with (``physprobe.report.card``): a row per headline figure, a column per
model (a card run's folder, or loose runs by model), beside the majority answer and chance of the same rows and the
paper's best model and human figure; n, the unparsed share, flags and a footnote for a figure over fewer groups
than the paper's; rendered in one call from run folders; looked at in headless Chromium."""

import re
from pathlib import Path

import pytest

from physprobe.cli import main
from physprobe.record.run_record import Baselines
from physprobe.report import card

from .run_folders import write_run
from .test_report import markdown_tables

PROST_CONCEPTS = ["directions", "mass", "height", "circumference", "stacking", "rolling", "grasping", "breaking", "sliding",
                  "bouncing"]  # fmt: skip


def prost_metrics(concepts: list[str], macro: float) -> dict:
    groups = {name: {"accuracy": 0.5, "n": 2} for name in concepts}
    return {"default": {"n": 2 * len(concepts), "undecided": 0, "accuracy": 0.5, "macro_accuracy": macro, "by_group": groups}}


def baselines(figure: str, majority: float, chance: float, answered: int, commonest: int) -> Baselines:
    return Baselines(1, {figure: majority}, {"1": {figure: majority}}, {figure: chance}, answered, commonest, 1)


def cccons_metrics() -> dict:
    return {"ordinary": {"n": 10, "undecided": 0, "unparsed": 2, "accuracy": 0.6},
            "ccommon": {"n": 10, "undecided": 0, "unparsed": 0, "accuracy": 0.4},
            "ordinary_nocontext": {"n": 5, "undecided": 0, "unparsed": 5, "accuracy": 0.0},
            "ccommon_nocontext": {"n": 5, "undecided": 0, "unparsed": 0, "accuracy": 0.8},
            "nocontext": {"n": 10, "undecided": 0, "unparsed": 5, "accuracy": 0.4}}  # fmt: skip


@pytest.fixture
def parents(tmp_path) -> list[Path]:
    """Two card runs' folders: model-a with PROST (a --limit 14 sample over 7 concepts, answers nearly all one) and
    CConS; model-b with PROST over all ten concepts."""
    a, b = tmp_path / "runs" / "model-a", tmp_path / "runs" / "model-b"
    write_run(a / "prost", "prost", "causal", prost_metrics(PROST_CONCEPTS[3:], 0.35), protocol="released-gpt", model="org/model-a",
              limit=14, baselines={"default": baselines("macro_accuracy", 0.3, 0.25, 14, 13)})  # fmt: skip
    write_run(a / "cccons", "cccons", "generate", cccons_metrics(), protocol="question-generate", model="org/model-a",
              configs=("ordinary", "ccommon", "ordinary_nocontext", "ccommon_nocontext"),
              baselines={c: baselines("accuracy", 0.5, 0.5, 8, 4) for c in ("ordinary", "ccommon", "nocontext")})  # fmt: skip
    write_run(b / "prost", "prost", "causal", prost_metrics(PROST_CONCEPTS, 0.40), protocol="released-gpt", model="org/model-b",
              limit=20, baselines={"default": baselines("macro_accuracy", 0.3, 0.25, 20, 6)})  # fmt: skip
    return [a, b]


def notes_of(text: str) -> dict[str, str]:
    return dict(re.findall(r"^- ([⁰¹²³⁴⁵⁶⁷⁸⁹]+) (.*)$", text, flags=re.M))


def test_the_report_opens_with_the_card_a_column_per_model(parents, tmp_path):
    assert main(["report", *map(str, parents), "--out", str(tmp_path / "report")]) == 0
    text = (tmp_path / "report" / "report.md").read_text(encoding="utf-8")
    assert text.index("## Card") < text.index("## CConS") < text.index("## PROST")
    header, body = markdown_tables(text)[0]
    assert header == ["Figure", "model-a", "model-b", "Majority answer (same rows)", "Chance (same rows)", "Paper's best model",
                      "Human (paper)"]  # fmt: skip
    rows = {row[0]: row for row in body}
    assert list(rows) == ["**CConS (Kondo et al.)**", "Ordinary accuracy (0–1), Table 2", "CCommon accuracy (0–1), Table 2",
                          "NoCon accuracy (0–1), Table 2", "**PROST (Aroca-Ouellette et al.)**", "macro accuracy (%), Table 5"]  # fmt: skip
    notes = notes_of(text.split("## Card")[1].split("## ")[0])
    # CConS: the paper's best and human rows as printed in Table 2 (GPT-3 0.856, T0++ 0.530, GPT-3 0.764; humans 0.814/0.798/0.791)
    assert rows["Ordinary accuracy (0–1), Table 2"][1:] == [
        "0.600 n=10, 20% unparsed",
        "—¹",
        "0.500",
        "0.500",
        "GPT-3 0.856",
        "0.814",
    ]
    assert notes["¹"].startswith("model-b: no CConS run among the folders given")  # a benchmark not run: —, footnoted
    assert rows["CCommon accuracy (0–1), Table 2"][1:] == ["0.400 n=10", "—¹", "0.500", "0.500", "T0++ 0.530", "0.798"]
    assert rows["NoCon accuracy (0–1), Table 2"][1:] == [
        "0.400 n=10, 50% unparsed",
        "—¹",
        "0.500",
        "0.500",
        "GPT-3 0.764",
        "0.791",
    ]
    prost = rows["macro accuracy (%), Table 5"]
    cell_a = re.fullmatch(r"35\.0 n=14 ⚠([⁰¹²³⁴⁵⁶⁷⁸⁹]+),([⁰¹²³⁴⁵⁶⁷⁸⁹]+)", prost[1])
    assert cell_a, prost[1]
    assert "13 of 14 answers are the second option" in notes[cell_a.group(1)]  # the flag of nearly constant answers
    assert notes[cell_a.group(2)] == ("run model-a: over 7 of the paper's 10 concepts; its --limit 14 sample held no question "
                                      "of Direction, Mass, Height")  # fmt: skip
    assert prost[2] == "40.0 n=20"  # every concept: no footnote
    assert prost[3:] == ["30.0", "25.0", "UnifiedQA 3B 46.7\\*⁴", "—"]  # the paper's best, as printed; no human row
    assert notes["⁴"].startswith("\\* in Table 5: T5 and UnifiedQA are not evaluated on sliding")  # the paper's marker
    # the same footnote beside the run's macro average in Table 5 itself
    table5 = text.split("### Table 5")[1].split("### Table 6")[0]
    row = next(line for line in table5.splitlines() if line.startswith("| **model-a"))
    mark = re.search(r"35\.0 \(\S+\) n=14([⁰¹²³⁴⁵⁶⁷⁸⁹,]+) \|$", row).group(1)
    assert any("over 7 of the paper's 10 concepts" in notes_of(table5)[m] for m in mark.split(","))


def test_the_card_in_one_call_from_run_folders(parents, tmp_path):
    figure = tmp_path / "repo" / "card.png"
    figure.parent.mkdir()
    markdown = card.card_markdown(parents, figure)
    assert markdown_tables(markdown)[0][0][1:3] == ["model-a", "model-b"] and "![" in markdown and "(card.png)" in markdown
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    loose = card.card_markdown([parents[0] / "prost", parents[1] / "prost"])  # run folders themselves: a column per model
    assert markdown_tables(loose)[0][0][1:3] == ["model-a", "model-b"] and "![" not in loose
    everything = card.card_markdown([parents[0].parent])  # runs/: every card run's folder in it, by name
    assert markdown_tables(everything)[0] == markdown_tables(markdown)[0]
    write_run(parents[0].parent / "extra-prost", "prost", "causal", prost_metrics(PROST_CONCEPTS, 0.2), protocol="released-gpt",
              model="org/extra")  # a run of its own beside the card runs' folders: a column of its own  # fmt: skip
    header, body = markdown_tables(card.card_markdown([parents[0].parent]))[0]
    assert header[1:4] == ["extra", "model-a", "model-b"] and (body[-1][1], body[-1][3]) == ("20.0 n=20", "40.0 n=20")
    text = card.card_text(parents)
    assert "macro accuracy (%), Table 5" in text and "UnifiedQA 3B 46.7*⁴" in text and "over 7 of the paper's 10 concepts" in text
    assert "\n⁴ * in Table 5: T5 and UnifiedQA are not evaluated on sliding" in text  # the marker's footnote on the terminal too


@pytest.mark.slow
@pytest.mark.browser
def test_the_card_in_a_real_browser(parents, tmp_path):
    """Headless Chromium: the page opens with the card (its table and figure); the runs and per-config tables keep
    every row to one or two lines (a run's row was ~700 px tall when it listed each config's answers in prose)."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright for Python is not installed")
    if not Path("/usr/bin/chromium").exists():
        pytest.skip("no browser: Debian's chromium is not installed at /usr/bin/chromium")
    assert main(["report", *map(str, parents), "--out", str(tmp_path / "report")]) == 0
    errors = []
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=[
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"])  # fmt: skip
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
        page.goto((tmp_path / "report" / "report.html").as_uri())
        page.wait_for_load_state("load")
        first = page.eval_on_selector("h2", "h => h.firstChild.textContent")
        card_table = page.eval_on_selector("table", "t => [t.className, t.getBoundingClientRect().top, t.rows.length]")
        image = page.eval_on_selector("img", "i => [i.complete, i.naturalWidth, i.getBoundingClientRect().top]")
        heights = page.eval_on_selector_all(
            "table",
            "ts => ts.filter(t => ['Run', 'Figure'].includes(t.rows[0].cells[0].textContent))"
            ".map(t => Math.max(...Array.from(t.rows).map(r => r.getBoundingClientRect().height)))",
        )
        page.screenshot(path=str(tmp_path / "card.png"))
        browser.close()
    assert first == "Card" and card_table[0] == "card" and card_table[2] == 7
    assert image[0] and image[1] > 0 and card_table[1] < image[2] < 900 * 2  # the figure right below the card
    assert len(heights) == 5 and max(heights) < 60, heights  # card, and per benchmark its runs and per-config tables
    assert errors == []
