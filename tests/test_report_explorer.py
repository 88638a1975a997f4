"""The report a researcher reads, opened in headless Chromium: its header and contents (every anchor resolves, every
section links back to the top), the card within a 1024 px window with three models, and the question explorer
(every question of predictions.parquet, its filters and the Differences rows' links giving the counts worked out
here from the runs' predictions, independently of the page)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from physprobe.cli import main
from physprobe.report import contents, differences, explorer
from physprobe.report.tables import paper_tables

from . import tiny_models
from .browser import launch_options

# The module's fixture scores six tiny runs and renders the report (about 9 minutes on the shared 2-core machine).
pytestmark = [pytest.mark.slow, pytest.mark.browser, pytest.mark.timeout(1500)]


@pytest.fixture(scope="module")
def runs(built_all, tmp_path_factory) -> list[Path]:
    """Three tiny causal models (other seeds) on the same 40 PROST questions, one protocol (a Differences section of
    approximate randomisation: PROST's figures average templates); two of them on 120 CConS questions ranked by
    log-likelihood (McNemar rows: --limit 120 takes evenly spaced questions whose object pairs are all distinct, so
    each unit is one question, and enough of them differ for a tested row); and one generating CConS answers (unparsed ones among them)."""
    root = tmp_path_factory.mktemp("explorer_runs")
    texts = tiny_models.benchmark_texts(built_all)
    models = [tiny_models.causal_lm(root / f"gpt{seed}", texts, layers=1, seed=seed) for seed in range(3)]
    plans = [(f"prost-gpt{i}", model, ["--benchmark", "prost", "--limit", "40"]) for i, model in enumerate(models)]
    plans += [(f"cccons-gpt{i}", models[i], ["--benchmark", "cccons", "--config", "ordinary", "--limit", "120", "--protocol",
                                            "answer-loglik"]) for i in range(2)]  # fmt: skip
    plans += [("cccons-generated", models[2], ["--benchmark", "cccons", "--config", "ordinary", "--limit", "12"])]
    folders = []
    for name, model, args in plans:
        assert main(["score", "--model", str(model), *args, "--data", str(built_all), "--out", str(root / name)]) == 0
        folders.append(root / name)
    return folders


@pytest.fixture(scope="module")
def rendered(runs, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("explorer_report") / "report"
    assert main(["report", *map(str, runs), "--out", str(out), "--resamples", "200"]) == 0
    return out


def lines(folder: Path) -> list[dict]:
    return pq.read_table(folder / "predictions.parquet").to_pylist()


def right(line: dict) -> bool:
    return line["status"] == "decided" and line["prediction"] in line["reference"]


def counted(line: dict) -> bool:
    """In an accuracy figure: decided or unparsed (an unparsed answer counts wrong), not undecided or excluded."""
    return line["status"] in ("decided", "unparsed")


@pytest.fixture(scope="module")
def browser():
    from playwright import sync_api

    with sync_api.sync_playwright() as playwright:
        found = playwright.chromium.launch(**launch_options())
        yield found
        found.close()


def opened(browser, url: str, width: int = 1400):
    page = browser.new_page(viewport={"width": width, "height": 900})
    errors = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("request", lambda request: None if request.url.startswith(("file:", "data:")) else errors.append(request.url))
    page.goto(url)
    page.wait_for_load_state("load")
    return page, errors


def test_header_and_contents_resolve(rendered, runs, browser):
    page, errors = opened(browser, (rendered / "report.html").as_uri())
    targets = page.eval_on_selector_all("nav.contents a", "as => as.map(a => a.getAttribute('href'))")
    missing = page.evaluate("ts => ts.filter(t => !document.getElementById(t.slice(1)))", targets)
    sections = page.eval_on_selector_all("h2[id], h3[id]", "hs => hs.map(h => [h.id, !!h.querySelector('a.top[href=\"#top\"]')])")
    header = page.inner_text("ul.about")
    page.close()
    assert missing == [] and len(targets) >= 10
    assert set(targets) == {f"#{i}" for i, _ in sections} | set(t for t in targets if t.startswith("#figure-"))
    assert all(back for _, back in sections)
    benchmarks = {f"#{contents.slug(paper_tables(b).title)}" for b in ("prost", "cccons")}
    assert benchmarks <= set(targets) and sum(t.endswith("-differences") and not t.startswith("#figure-") for t in targets) == 2
    for folder in runs:  # the header reads each run's record: its command, physprobe version, when it ran
        record = json.loads((folder / "run.json").read_text())
        assert " ".join(record["spec"]["command"]) in header
        assert record["versions"]["physprobe"] in header and record["started"][:10] in header
    assert errors == []


def test_card_fits_a_1024_px_window_with_three_models(rendered, browser, tmp_path):
    page, errors = opened(browser, (rendered / "report.html").as_uri(), width=1024)
    box = page.eval_on_selector(
        "table.card", "t => [t.parentElement.scrollWidth, t.parentElement.clientWidth, t.rows[0].cells.length]"
    )
    page.locator("table.card").screenshot(path=str(tmp_path / "card.png"))
    page.close()
    assert box[2] == 1 + 3 + 4 and box[0] <= box[1], box  # three models, and nothing behind a horizontal scroll
    assert errors == []


def test_explorer_holds_every_question_and_filters_as_the_predictions_say(rendered, runs, browser, tmp_path):
    page, errors = opened(browser, (rendered / explorer.link("prost")).as_uri())
    page.wait_for_selector("body[data-ready='1']")
    count = lambda: int(page.get_attribute("#count", "data-count"))  # noqa: E731
    found = lines(runs[0])
    assert count() == len(found) == 40
    for config in {line["config"] for line in found}:
        page.select_option("#config", config)
        assert count() == sum(line["config"] == config for line in found)
    page.select_option("#config", "")
    page.select_option("#run", "0")
    page.select_option("#status", "W")
    assert count() == sum(line["status"] == "decided" and not right(line) for line in found)
    page.select_option("#status", "")
    page.select_option("#run", "")
    page.select_option("#discordant", "ab")
    page.select_option("#a", "0")
    page.select_option("#b", "1")
    other = {line["row"]: line for line in lines(runs[1])}
    expected = sum(counted(x) and counted(other[x["row"]]) and right(x) and not right(other[x["row"]]) for x in found)
    assert count() == expected
    page.fill("#q", found[0]["prompts"][0][:30].lower())
    assert 1 <= count() <= expected or expected == 0
    page.fill("#q", "")
    page.screenshot(path=str(tmp_path / "explorer.png"))
    page.close()
    assert errors == []


def test_each_differences_row_opens_its_discordant_questions(rendered, runs, browser):
    """A Differences row's link opens the explorer on its figure's questions one run got right and the other wrong,
    as many as counted here from the two predictions; for a row McNemar's test decides, its b + c in
    differences.json."""
    compared = json.loads((rendered / differences.JSON).read_text())
    page, errors = opened(browser, (rendered / "report.html").as_uri())
    links = page.eval_on_selector_all("div.explore a", "as => as.map(a => [a.textContent, a.href])")
    page.close()
    folders = {"prost": {f"gpt{i}": runs[i] for i in range(3)}, "cccons": {"gpt0": runs[3], "gpt1": runs[4]}}
    checked, mcnemar = 0, 0
    for section in compared:
        reference = lines(folders[section["benchmark"]][section["reference"]])
        for comparison in section["comparisons"]:
            other = {(line["config"], line["row"]): line for line in lines(folders[section["benchmark"]][comparison["other"]])}
            for d in comparison["differences"]:
                text, href = next((t, h) for t, h in links if t.startswith(f"{comparison['other']}, {d['figure']['name']}:"))
                key = d["figure"]["key"].split(".")
                group = key[2] if key[1] == "by_group" else None
                expected = sum(counted(x) and counted(y) and right(x) != right(y) for x in reference
                               if (y := other.get((x["config"], x["row"]))) and x["config"] == key[0]
                               and (group is None or json.loads(x["row_json"])["group"] == group))  # fmt: skip
                if d["discordant"] is not None:
                    assert f"b + c = {sum(d['discordant'])} " in text and sum(d["discordant"]) == expected
                    mcnemar += 1
                page, found = opened(browser, href)
                page.wait_for_selector("body[data-ready='1']")
                assert int(page.get_attribute("#count", "data-count")) == expected, (text, href)
                page.close()
                errors += found
                checked += 1
    assert checked >= 10 and mcnemar >= 1 and errors == []


def test_explorer_names_statuses_and_rules_of_a_generation_protocol(rendered, runs, browser):
    page, errors = opened(browser, (rendered / explorer.link("cccons")).as_uri())
    page.wait_for_selector("body[data-ready='1']")
    found = lines(runs[5])
    page.select_option("#run", "2")
    page.select_option("#status", "U")
    assert int(page.get_attribute("#count", "data-count")) == sum(line["status"] == "unparsed" for line in found)
    cells = page.eval_on_selector_all("#rows td.s-U", "ts => ts.map(t => t.textContent)")
    page.close()
    assert all("counted wrong" in cell for cell in cells)
    generated = [line["generated"] for line in found if line["status"] == "unparsed"][:3]
    assert all(any(text.strip()[:20] in cell for cell in cells) for text in generated if text and text.strip())
    assert errors == []


def test_same_runs_same_explorer_bytes(runs, rendered, tmp_path):
    again = tmp_path / "again"
    assert main(["report", *map(str, runs), "--out", str(again), "--resamples", "200"]) == 0
    for name in ("report.html", "report.md", explorer.link("prost"), explorer.link("cccons")):
        assert (again / name).read_bytes() == (rendered / name).read_bytes(), name
