"""``physprobe report``: the transcribed tables against the papers' text, and a report of two real tiny runs
per benchmark read as a person would — its Markdown parsed, its HTML opened in headless Chromium."""

import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from physprobe import report
from physprobe.cli import main
from physprobe.dataset_scripts import BENCHMARKS
from physprobe.dataset_scripts.cccons import evaluation as cccons
from physprobe.errors import DeclarationError
from physprobe.report import differences, tables, writers
from physprobe.util import paths

from .browser import launch_options
from .run_folders import record, write_run

SEEDS = Path(__file__).resolve().parents[2] / "shared" / "seeds"
# The text of each paper the tables were transcribed from (../shared/seeds/README.md); development-only, never in a report.
SEED = {
    "cccons": "001_563285c1ca1307ef.txt",
    "newton": "003_12e75509c0ac8211.txt",
    "prost": "004_293bae152b395d3c.txt",
    "text2afford": "002_08a0b41d866fc2a1.txt",
}
NUMBER = re.compile(r"\d+(?:\.\d+)?")

# (rows, columns) of every declared table, counted by hand in the papers (../shared/seeds).
SHAPES = {
    "prost": {"table5": (22, 11), "table6": (8, 4), "table7": (22, 10)},
    "cccons": {"table2": (10, 3), "table3": (10, 4)},
    "newton": {"table4": (12, 9), "table5_boolean": (11, 9), "table5_mc": (11, 9), "table5_combined": (11, 9),
               "table6": (11, 10), "table9_boolean": (10, 9), "table9_mc": (10, 9), "table9_combined": (10, 9),
               "table10": (10, 9)},
    "text2afford": {"table5": (10, 8), "table6_llm": (8, 2), "table6_vlm": (5, 4), "table7": (4, 2), "per_class": (0, 15)},
}  # fmt: skip

# Cells the papers' prose also states: (benchmark, table, model, column, printed cell, sentence in the seed).
SPOT = [
    ("prost", "table5", "ALBERT V2 XL", "Macro Average", "31.8", "ALBERT-V2-XL performs best, with an accuracy of  $31.8"),
    ("prost", "table5", "GPT-2", "Macro Average", "23.6", "GPT-2 performs worst, with an accuracy of 23.6%"),
    ("prost", "table5", "Task Average", "Slide", "19.9", "both with an average accuracy of 19.9%"),
    ("prost", "table5", "UnifiedQA 3B", "Macro Average", "46.7*", "only achieving a 46.7% accuracy"),
    ("prost", "table6", "T5", "1", "52.4", "an accuracy of 52.4% for objects at position 1"),
    ("prost", "table6", "T5", "3", "1.9", "an accuracy of only 1.9% for objects at position 3"),
    ("prost", "table7", "GPT-2 XL", "Macro Average", "30.6", "averaging 30.6% higher"),
    ("cccons", "table2", "GPT-3", "Ordinary", "0.856", "yielding 85% accuracy"),
    ("cccons", "table2", "GPT-3", "CCommon", "0.415", "(41 % accuracy)"),
    ("newton", "table6", "GPT-4", "Overall", "87.7", "overall average of 87.7%"),
    ("newton", "table6", "Average", "Overall", "44.5", "compared to the average of 44.5%"),
    ("newton", "table4", "Human", "Overall", "84.4", "(50% vs. 84%)"),
    ("text2afford", "table6_llm", "FLAN-T5-large", "Acc (zero-shot)", "0.06", "the accuracy is less than 7%"),
]  # fmt: skip


def numbers(cells) -> list[str]:
    return [token for cell in cells if cell is not None for token in NUMBER.findall(cell)]


def contains_run(tokens: list[str], run: list[str]) -> bool:
    return any(tokens[i : i + len(run)] == run for i in range(len(tokens) - len(run) + 1))


@pytest.mark.parametrize("benchmark", sorted(BENCHMARKS))
def test_transcribed_tables_match_the_papers_text(benchmark):
    paper = report.paper_tables(benchmark)
    seed = (SEEDS / SEED[benchmark]).read_text(encoding="utf-8")
    lines = [NUMBER.findall(line) for line in seed.splitlines()]
    assert {t.id: (len(t.rows), len(t.columns)) for t in paper.tables} == SHAPES[benchmark]
    for table in paper.tables:
        for row in table.rows:
            run = numbers(row.cells)
            # every printed row appears in the paper's text, its numbers in order on one line
            assert any(contains_run(tokens, run) for tokens in lines), f"{benchmark} {table.id} {row.model}: {run}"


@pytest.mark.parametrize("benchmark, table_id, model, column, printed, sentence", SPOT)
def test_spot_values_agree_with_the_papers_prose(benchmark, table_id, model, column, printed, sentence):
    paper = report.paper_tables(benchmark)
    table = paper.table(table_id)
    row = next(r for r in table.rows if r.model == model)
    assert row.cells[[c.name for c in table.columns].index(column)] == printed
    assert sentence in (SEEDS / SEED[benchmark]).read_text(encoding="utf-8")


def test_a_bad_declaration_names_the_table_and_row():
    raw = {"id": "t9", "format": {"scale": "percent", "digits": 1}, "columns": [{"name": "A", "key": "x.a"}],
           "rows": [{"model": "M", "cells": ["1.0", "2.0"]}]}  # fmt: skip
    with pytest.raises(DeclarationError, match=r"paper_tables.yaml table 't9' row 0 \(M\): 2 cells for 1 columns"):
        tables._table(raw, "paper_tables.yaml")
    raw["rows"] = [{"model": "M", "cells": [None]}]
    with pytest.raises(DeclarationError, match="a null cell needs a `note`"):
        tables._table(raw, "paper_tables.yaml")


def test_wilson_interval_matches_newcombe_1998():
    # Newcombe (1998), Statistics in Medicine 17:857, Table I, method 3 (score interval without correction)
    for (k, n), expected in {(81, 263): (0.2553, 0.3662), (15, 148): (0.0624, 0.1605), (0, 20): (0.0, 0.1611)}.items():
        assert [round(x, 4) for x in report.wilson(k / n, n)] == list(expected)


def test_protocol_warnings(tmp_path):
    paper = report.paper_tables("prost")
    same = report.Run(tmp_path, record("prost", "mlm", {}, "released-mlm"))
    other = report.Run(tmp_path, record("prost", "mlm", {}, "whole-sentence"))
    unknown = report.Run(tmp_path, record("prost", "nli", {}))
    assert report.protocol_warning(same, paper) is None
    assert "used protocol `whole-sentence`" in report.protocol_warning(other, paper)
    assert "reports no model scored that way" in report.protocol_warning(unknown, paper)
    t2a = report.paper_tables("text2afford")  # each generative LLM of the paper has its own YES/NO prompt
    for name in ("yes-no-flan-t5", "yes-no-falcon", "yes-no-llama3-released"):
        assert report.protocol_warning(report.Run(tmp_path, record("text2afford", "yes_no", {}, name)), t2a) is None
    vlm = report.Run(tmp_path, record("text2afford", "yes_no", {}, "yes-no-vlm-text"))
    assert "used `yes-no-flan-t5` or `yes-no-falcon` or `yes-no-llama3-released`" in report.protocol_warning(vlm, t2a)


def test_paper_protocols_are_real_protocols_of_their_method():
    """Every benchmark's declared paper protocols are in `physprobe protocols`, listed under their method, and
    are the defaults the scorer gives the paper's model families (issue 10: the paper's protocol by default)."""
    from physprobe.data import registry
    from physprobe.protocols import ProtocolError

    expected = {"prost": {"causal": ("released-gpt",), "mlm": ("released-mlm",), "seq2seq": ("released-t5",),
                          "generate": ("released-unifiedqa",)},
                "cccons": {"mlm": ("mask-four",), "generate": ("question-generate",)},
                "newton": {"generate": ("released-generate",)},
                "text2afford": {"mlm": ("mlm-released-probing",), "nli": ("nli-released-multi-choice",),
                                "yes_no": ("yes-no-flan-t5", "yes-no-falcon", "yes-no-llama3-released")}}  # fmt: skip
    for benchmark in BENCHMARKS:
        declared = report.paper_tables(benchmark).protocols
        assert declared == expected[benchmark]
        evaluation = registry.evaluation(benchmark)
        for family in ("causal", "mlm", "seq2seq", "nli"):
            try:
                default = evaluation.default(family)
            except ProtocolError:
                continue
            assert default.name in declared[default.method], (benchmark, family)
    unifiedqa = registry.evaluation("prost").default("seq2seq", model_name="unifiedqa-t5-small")
    assert unifiedqa.reported_apart and unifiedqa.name in report.paper_tables("prost").protocols["generate"]
    with pytest.raises(DeclarationError, match=r"protocols.mlm: prost has no protocol 'prost-released-mlm'; known: released-gpt"):
        tables._paper_protocols("prost", {"mlm": "prost-released-mlm"}, "paper_tables.yaml")
    with pytest.raises(DeclarationError, match=r"protocol 'released-gpt' uses method 'causal'; list it under causal"):
        tables._paper_protocols("prost", {"mlm": "released-gpt"}, "paper_tables.yaml")


def test_exclusions_and_protocols_reported_apart_get_footnotes(tmp_path):
    """A T5 run (sliding excluded by `released-t5`) and a UnifiedQA run (`released-unifiedqa`, reported apart):
    the Slide cell says which protocol leaves it out and why, the Macro Average says what it is over, the
    UnifiedQA row says the paper keeps it out of its averages; a --limit run's unsampled concept says so."""
    groups = {"mass": {"accuracy": 0.5, "n": 4}, "rolling": {"accuracy": 0.25, "n": 4}}
    t5 = write_run(
        tmp_path / "t5",
        "prost",
        "seq2seq",
        {"default": {"by_group": groups, "macro_accuracy": 0.375, "n": 8, "undecided": 0, "excluded": 2}},
        "released-t5",
        model="t5-small",
        limit=10,
    )
    uqa = write_run(tmp_path / "uqa", "prost", "generate", {"default": {"n": 8, "undecided": 8, "unparsed": 8, "excluded": 2}},
                    "released-unifiedqa", model="unifiedqa-t5-small")  # fmt: skip
    text = (report.render([t5, uqa], tmp_path / "out") / "report.md").read_text()
    header, body = next((h, b) for h, b in markdown_tables(text) if h[1:3] == ["Direction", "Mass"])
    t5_row = dict(zip(header, next(r for r in body if r[0].startswith("**t5-small"))))
    uqa_row = next(r for r in body if r[0].startswith("**unifiedqa-t5-small"))
    notes = dict(re.findall(r"^- ([⁰¹²³⁴⁵⁶⁷⁸⁹]+) (.*)$", text.split("### Table 5")[1].split("### Table 6")[0], flags=re.M))
    assert t5_row["Mass"] == "50.0 (15.0–85.0) n=4"  # Wilson for 2 of 4: centre 0.5, half-width 0.350
    slide = notes[t5_row["Slide"].lstrip("—")]
    assert "protocol `released-t5` leaves this column's questions out: sliding: ice and frost are not single T5 tokens" in slide
    assert (
        "scored no question of this column" in notes[t5_row["Direction"].lstrip("—")]
        and "--limit 10" in notes[t5_row["Direction"].lstrip("—")]
    )
    macro = re.fullmatch(r"37\.5 \(\S+\) n=8([⁰¹²³⁴⁵⁶⁷⁸⁹]+),([⁰¹²³⁴⁵⁶⁷⁸⁹]+)", t5_row["Macro Average"])
    assert macro and "leaves out 2 questions of `default` (sliding: ice and frost" in notes[macro.group(1)]
    assert notes[macro.group(2)] == ("run t5-small: over 2 of the paper's 10 concepts; its --limit 10 sample held no question of "
                                     "Direction, Height, Circum., Stack, Grasp, Break, Bounce")  # fmt: skip
    apart, answers = re.search(r"([⁰¹²³⁴⁵⁶⁷⁸⁹]+),([⁰¹²³⁴⁵⁶⁷⁸⁹]+)\*\*$", uqa_row[0]).groups()
    assert "used `released-unifiedqa`, which the paper reports apart" in notes[apart]
    # what the row rests on: every answer unparsed (metrics.json's counts, 8 of 8)
    assert notes[answers] == (
        "run unifiedqa-t5-small, `default`: 8 of 8 (100%) answers named no option (unparsed, counted "
        "wrong); 8 of 8 (100%) questions undecided (left out of the figures)"
    )
    assert all(cell.startswith("—") for cell in uqa_row[1:])
    assert "every question of `default` was undecided in run unifiedqa-t5-small" in text
    assert not any("⚠" in row[0] for row in body)  # both used the paper's protocols
    assert "shared" not in text and "The text this table was transcribed from prints this row" in text  # no development path


# --- a report of real runs ---------------------------------------------------------------------------------

RUNS = [  # two tiny models per benchmark, every default config. A tiny model's generated answers name no
    # option, so CConS's causal run ranks the two answers by log-likelihood (a named alternative) to decide.
    ("prost", "causal", []), ("prost", "mlm", []),
    ("cccons", "mlm", []), ("cccons", "causal", ["--protocol", "answer-loglik"]),
    ("newton", "causal", []), ("newton", "seq2seq", []),
    ("text2afford", "nli", []), ("text2afford", "causal", []),
]  # fmt: skip

# Columns every run placed in a table fills (not "—") with --limit 24: the overall figures and each column
# the 24 questions reach. Derived from the metrics wiring (which keys each config writes), not from a report.
FILLED = {
    "prost": {"table5": {"Mass", "Height", "Roll", "Macro Average"}, "table6": {"1", "2", "3", "4"}},
    "cccons": {"table2": {"Ordinary", "CCommon", "NoCon"},
               "table3": {"Ordinary Easy", "Ordinary Hard", "CCommon Easy", "CCommon Hard"}},
    "newton": {"table4": {"Elasticity", "Softness", "Sharpness", "Overall"}, "table5_boolean": {"Overall"},
               "table5_mc": {"Overall"}, "table5_combined": {"Elasticity", "Softness", "Overall"},
               "table6": {"Scenario 1", "Scenario 3", "Overall"}, "table9_boolean": {"Overall"},
               "table9_mc": {"Overall"}, "table9_combined": {"Overall"}, "table10": {"Overall"}},
    "text2afford": {"table5": {"Actual Acc", "Actual mAP"}, "table6_llm": {"Acc (zero-shot)"}, "per_class": {"Grasp", "Lift"}},
}  # fmt: skip


@pytest.fixture(scope="module")
def runs(built_all, benchmark_texts, tiny_model, made):
    """Eight real run folders: ``physprobe score`` with tiny models (tests/tiny_models.py) and ``--limit``, scored once
    per test run (conftest.made; read them, never write them)."""
    texts = benchmark_texts + [" ".join(cccons.MLM_CANDIDATES)] * 100  # whole words in the vocabulary: the masked LM can decide
    models = {"causal": tiny_model("causal", texts, "gpt"), "mlm": tiny_model("masked", texts, "bert"),
              "seq2seq": tiny_model("seq2seq", texts, "t5"), "nli": tiny_model("nli", texts, "nli")}  # fmt: skip

    def score(root):
        root.mkdir()
        for benchmark, family, extra in RUNS:
            args = ["score", "--model", str(models[family]), "--benchmark", benchmark, "--limit", "24",
                    "--data", str(built_all), "--out", str(root / f"{benchmark}-{family}")]  # fmt: skip
            assert main(args + extra) == 0

    root = made.folder("report_runs", [str(built_all), {k: str(v) for k, v in models.items()}, RUNS], score)
    return [root / f"{benchmark}-{family}" for benchmark, family, _ in RUNS]


@pytest.fixture(scope="module")
def rendered(runs, tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "report"
    assert main(["report", *map(str, runs), "--out", str(out)]) == 0
    return out


RUNS_HEADER = ["Run", "Model", "Backend", "Protocol (method)", "Prompts", "Configs", "Folder"]
CONFIGS_HEADER = ["Run", "Config", "n", "Headline figure", "Unparsed", "Undecided", "Majority answer", "Best constant", "Chance",
                  "Flag"]  # fmt: skip


def runs_table(text: str) -> list[list[str]]:
    """The rows of the first runs table of a report's Markdown."""
    return next(body for header, body in markdown_tables(text) if header == RUNS_HEADER)


def markdown_tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """Every table of a Markdown text as (header cells, body rows), parsed by markdown-it (GFM tables)."""
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    tables, current, row = [], None, None
    for i, token in enumerate(tokens):
        if token.type == "table_open":
            current = ([], [])
        elif token.type == "tr_open":
            row = []
        elif token.type in ("th_open", "td_open"):
            row.append(tokens[i + 1].content if tokens[i + 1].type == "inline" else "")
        elif token.type == "tr_close":
            (current[0].extend(row) if not current[0] else current[1].append(row))
        elif token.type == "table_close":
            tables.append(current)
    return tables


def compared(loaded: list, benchmark: str) -> bool:
    """Whether the report has a Differences table for ``benchmark``: two of its runs share a protocol (runs of other
    protocols get a "not compared" line, no table) and a figure of theirs is tested (enough units differ; the
    tested rule's own cases are test_compare's)."""
    protocols = [run.record.protocol for run in loaded if run.record.benchmark == benchmark]
    if len(protocols) == len(set(protocols)):
        return False
    found = differences.sections(loaded, None, 1000, False)
    return any(d.tested for s in found if s.benchmark == benchmark for c in s.comparisons for d in c.differences)


@pytest.mark.slow
def test_report_markdown_holds_every_paper_table_with_the_runs(rendered, runs):
    text = (rendered / "report.md").read_text(encoding="utf-8")
    tables = markdown_tables(text)
    loaded = [report.load_run(r) for r in runs]
    card_header = tables[0][0]
    assert card_header[0] == "Figure" and sorted(card_header[1:-4]) == ["bert", "gpt", "nli", "t5"]  # a column per model
    assert card_header[-4:] == ["Majority answer (same rows)", "Chance (same rows)", "Paper's best model", "Human (paper)"]
    expected = []
    for benchmark in sorted(BENCHMARKS):
        expected.append(RUNS_HEADER)
        expected.append(CONFIGS_HEADER)
        expected += [differences.HEADER] * compared(loaded, benchmark)
        expected += [["Model", *[c.name for c in t.columns]] for t in report.paper_tables(benchmark).tables]
    assert [header for header, _ in tables[1:]] == expected  # every table, each column by its printed name
    header = ["Model", *[c.name for c in report.paper_tables("prost").table("table5").columns]]
    table5 = next(body for found, body in tables if found == header)
    report.name_runs(loaded)
    for run in (r for r in loaded if r.record.benchmark == "prost"):
        row = next(r for r in table5 if run.id in r[0])
        cell = dict(zip(header, row))
        mass = run.metrics["default"]["by_group"]["mass"]
        assert cell["Mass"].startswith(f"{100 * mass['accuracy']:.1f} (") and cell["Mass"].endswith(f"n={mass['n']}")
        low, high = report.wilson(mass["accuracy"], mass["n"])
        assert f"({100 * low:.1f}–{100 * high:.1f})" in cell["Mass"]
        macro = run.metrics["default"]["macro_accuracy"]
        assert cell["Macro Average"].startswith(f"{100 * macro:.1f}")
        configs_table = [body for found, body in tables if found == CONFIGS_HEADER][sorted(BENCHMARKS).index("prost")]
        configs_row = next(r for r in configs_table if run.id == r[0])  # PROST's headline: Table 5's macro average
        assert configs_row[1:4] == ["default", str(run.metrics["default"]["n"]), f"macro\\_accuracy {macro:.3f}"]
    published = next(r for r in table5 if r[0] == "T5 S")
    assert published[-1] == "27.0\\*" or published[-1] == "27.0*"  # printed as the paper prints it
    # a column the run did not score is a dash with a footnote saying why
    t2a = next(body for header, body in tables if header[:3] == ["Model", "Actual Acc", "Actual mAP"])
    nli = next(r for r in t2a if r[0].startswith("**nli"))
    assert nli[3].startswith("—") and "not part of physprobe" in text
    # images come after the tables, as paragraphs of their own, and exist
    images = re.findall(r"^!\[[^\]]*\]\((figures/[^)]+\.png)\)$", text, flags=re.M)
    assert len(images) >= 9 and all((rendered / i).is_file() for i in images)
    for section in text.split("\n## ")[1:]:  # per benchmark: its figures follow all its tables
        lines = section.splitlines()
        tables_end = max(i for i, line in enumerate(lines) if line.startswith("|"))
        # (the Differences section's figure follows its own table, before the paper's tables)
        assert all(i > tables_end + 1 for i, line in enumerate(lines) if line.startswith("![") and "-differences.png" not in line)
    assert not any("![" in cell for _, body in tables for row in body for cell in row)


def report_name(name: str) -> str:
    """A run's name as report.md writes it (Markdown-escaped)."""
    return writers._md_escape(name)


def _cell_parts(cell: str) -> list[str]:
    return re.sub(r" n=[\d/]+$", "", cell).split(" / ")


@pytest.mark.slow
def test_report_fills_every_cell_the_runs_scored(rendered, runs):
    """Each run cell shows the figure metrics.json holds under the column's key (the scorer's real keys); a
    "—" is only where metrics.json has none, and its footnote gives a reason other than a key the report
    looked up in vain. The overall columns (and those the --limit sample reaches) are filled for every run."""
    text = (rendered / "report.md").read_text(encoding="utf-8")
    tables = iter(markdown_tables(text))
    loaded = [report.load_run(r) for r in runs]
    report.name_runs(loaded)
    assert "has no `" not in text  # no footnote "metrics.json of run ... has no `<key>`"
    next(tables)  # the card
    for benchmark in sorted(BENCHMARKS):
        next(tables), next(tables)  # the runs and their figures per config
        if compared(loaded, benchmark):
            assert next(tables)[0] == differences.HEADER
        for table in report.paper_tables(benchmark).tables:
            header, body = next(tables)
            placed = [
                r for r in loaded if r.record.benchmark == benchmark and (table.methods is None or r.method in table.methods)
            ]
            filled = set(header[1:])
            for run in placed:
                row = dict(zip(header, next(r for r in body if r[0].startswith(f"**{report_name(run.id)}"))))
                for column in table.columns:
                    for key, part in zip(column.keys, _cell_parts(row[column.name])):
                        value = None if key is None else report.lookup(run.metrics, key)
                        if isinstance(value, (int, float)):
                            assert part.startswith(report.number(value, table)), (run.id, table.id, column.name, part)
                        else:
                            assert part.startswith("—"), (run.id, table.id, column.name, part)
                            filled.discard(column.name)
            if placed:
                assert FILLED[benchmark].get(table.id, set()) <= filled, (benchmark, table.id, filled)
    assert {b for b in BENCHMARKS} == {r.record.benchmark for r in loaded}


@pytest.mark.slow
@pytest.mark.browser
def test_report_html_in_a_real_browser(rendered, runs, tmp_path):
    """Headless Chromium opens report.html with no network: every table and image renders, no console error."""
    from playwright import sync_api

    errors, requests = [], []
    options = launch_options()
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(**options)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.on("request", lambda request: requests.append(request.url))
        page.goto((rendered / "report.html").as_uri())
        page.wait_for_load_state("load")
        tables = page.eval_on_selector_all("table", "ts => ts.map(t => t.rows.length)")
        images = page.eval_on_selector_all("img", "is => is.map(i => [i.complete, i.naturalWidth, i.naturalHeight])")
        headers = page.eval_on_selector_all("h2", "hs => hs.map(h => h.firstChild.textContent)")
        page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
        browser.close()
    loaded = [report.load_run(r) for r in runs]
    # the card, then per benchmark its runs, configs, Differences (where two runs share a protocol) and paper tables
    expected_tables = 1 + sum(len(report.paper_tables(b).tables) + 2 + compared(loaded, b) for b in BENCHMARKS)
    assert len(tables) == expected_tables and all(rows > 1 for rows in tables[:1])
    assert len(images) >= 10 and all(complete and width > 0 and height > 0 for complete, width, height in images)
    assert headers == ["Card", *[report.paper_tables(b).title for b in sorted(BENCHMARKS)]]
    assert errors == []
    assert all(url.startswith(("file:", "data:")) for url in requests)  # self-contained: nothing fetched
    assert (tmp_path / "report.png").stat().st_size > 10_000
    print(f"screenshot: {tmp_path / 'report.png'}")


def png_chunks(data: bytes) -> list[bytes]:
    """The chunk types of a PNG file, in order (the PNG specification, section 5.3)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, at = [], 8
    while at < len(data):
        length = int.from_bytes(data[at : at + 4], "big")
        chunks.append(data[at + 4 : at + 8])
        at += 12 + length
    return chunks


@pytest.mark.slow
def test_same_runs_same_bytes_and_a_previous_report_is_replaced(runs, tmp_path):
    first, again = tmp_path / "first", tmp_path / "again"
    assert main(["report", *map(str, runs[:2]), "--out", str(first)]) == 0
    assert main(["report", *map(str, runs[:2]), "--out", str(again)]) == 0
    for name in ("report.md", "report.html", "figures/prost-positions.png"):
        assert (again / name).read_bytes() == (first / name).read_bytes()
    for figure in (first / "figures").iterdir():  # pixels only: no text, time or software chunk that could vary
        assert set(png_chunks(figure.read_bytes())) == {b"IHDR", b"pHYs", b"IDAT", b"IEND"}, figure.name
    listed = json.loads((first / paths.MARKER).read_text())["files"]  # the marker vouches for each file by its sha256
    assert listed == {p.relative_to(first).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
                      for p in sorted(first.rglob("*")) if p.is_file() and p.name != paths.MARKER}  # fmt: skip
    assert main(["report", str(runs[2]), "--out", str(again)]) == 0  # a report folder physprobe wrote is replaced
    text = (again / "report.md").read_text()
    assert "## CConS" in text and "## PROST" not in text and not (again / "figures" / "prost-positions.png").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["again", "first"]  # no staging folder left behind


# --- bad input: one line, exit 2, nothing left behind -------------------------------------------------------


@pytest.fixture
def one_run(tmp_path) -> Path:
    """A run folder as ``physprobe score`` writes it (CConS, taken from the metric on three questions)."""
    return write_run(
        tmp_path / "run",
        "cccons",
        "mlm",
        {"ordinary": {"accuracy": 2 / 3, "n": 3, "undecided": 0}},
        "mask-four",
        model="bert-base-uncased",
    )


def fails(args, capsys, *phrases):
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("physprobe: error: ") and err.count("\n") == 1, err
    for phrase in phrases:
        assert phrase in err, err


def test_bad_inputs_are_one_line_errors_leaving_nothing(tmp_path, one_run, capsys):
    out = tmp_path / "out" / "report"
    empty = tmp_path / "empty"
    empty.mkdir()
    fails(["report", str(empty), "--out", str(out)], capsys, f"{empty} is empty; give a folder `physprobe score` wrote")
    (empty / "notes").mkdir()  # a folder holding a folder, no run: not one "still scoring" either
    fails(["report", str(empty), "--out", str(out)], capsys, f"{empty} holds no physprobe run (no run.json, no run folder in it)")
    broken = tmp_path / "broken"
    shutil.copytree(one_run, broken)
    (broken / "metrics.json").write_text('{"ordinary": {"accuracy": 0.5,')
    fails(["report", str(broken), "--out", str(out)], capsys, "metrics.json is not valid JSON")
    alien = tmp_path / "alien"
    shutil.copytree(one_run, alien)
    info = json.loads((alien / "run.json").read_text())
    (alien / "run.json").write_text(json.dumps({**info, "spec": {**info["spec"], "benchmark": "piqa"}}))
    fails(["report", str(alien), "--out", str(out)], capsys, "unknown benchmark 'piqa'")
    assert not (tmp_path / "out").exists()
    a_file = tmp_path / "report.md"
    a_file.write_text("mine")
    fails(["report", str(one_run), "--out", str(a_file)], capsys, "is not a folder")
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "notes.txt").write_text("mine")
    fails(["report", str(one_run), "--out", str(theirs)], capsys, "is not a physprobe output")
    assert a_file.read_text() == "mine" and [p.name for p in theirs.iterdir()] == ["notes.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["alien", "broken", "empty", "report.md", "run", "theirs"]


def test_a_failure_while_drawing_leaves_nothing(tmp_path, one_run, monkeypatch):
    def broken(*args):
        raise RuntimeError("out of memory while drawing")

    monkeypatch.setitem(report.DRAW, "bars", broken)
    with pytest.raises(RuntimeError):
        report.render([one_run], tmp_path / "out" / "report")
    assert list((tmp_path / "out").iterdir()) == []


def test_runs_of_several_benchmarks_get_one_section_each(tmp_path, one_run):
    prost = write_run(
        tmp_path / "prost",
        "prost",
        "causal",
        {"default": {"by_group": {"mass": {"accuracy": 0.5, "n": 4}}, "n": 4}},
        "released-gpt",
        model="gpt2",
    )
    out = report.render([one_run, prost], tmp_path / "report")
    text = (out / "report.md").read_text()
    assert text.index("## CConS") < text.index("## PROST")
    row = next(line for line in text.splitlines() if line.startswith("| **bert-base-uncased**") and "0.667 (" in line)
    assert "0.667 (0.208–0.939) n=3" in row  # Wilson for 2 of 3, worked by hand: centre 0.5731, half-width 0.3654


# --- what each figure rests on, runs by name, folders that are not runs (issue 31) --------------------------


def test_a_glob_of_run_folders_reports_the_finished_runs_and_lists_the_rest(tmp_path, one_run, capsys):
    """`physprobe report runs/*` over a finished run, a failed one (scores cached, no run.json), an unfinished one
    (claimed, nothing written), one of another schema and a stray file: the finished run is reported, each other
    gets one line on stderr after the report is written and is listed at the end of the report."""
    from physprobe.protocols.results import Answer
    from physprobe.record import run_folder
    from physprobe.run.result_cache import Cache

    runs = tmp_path / "runs"
    runs.mkdir()
    shutil.move(one_run, runs / "finished")
    failed = run_folder.open_folder(runs / "failed", run_folder.owner("gpt2", "newton", False))
    Cache(run_folder.cache_file(failed)).put({"0" * 64: Answer("(a) rock")})
    run_folder.open_folder(runs / "unfinished", run_folder.owner("gpt2", "prost", False))
    old = shutil.copytree(runs / "finished", runs / "old")
    (old / "run.json").write_text(json.dumps({**json.loads((old / "run.json").read_text()), "schema_version": 2}))
    (runs / "notes.txt").write_text("mine")
    folders = sorted(map(str, runs.iterdir()))
    assert main(["report", *folders, "--out", str(tmp_path / "report")]) == 0
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert (
        out.strip() == f"-> {tmp_path / 'report'}"
        and len(lines) == 4
        and all(line.startswith("physprobe: skipped: ") for line in lines)
    )
    assert [line for line in lines if str(runs / "failed") in line] == [
        f"physprobe: skipped: {runs / 'failed'} is not a finished physprobe run (still scoring, or stopped before writing its "
        f"results): run.json is missing (`physprobe score ... --out {runs / 'failed'}` finishes it, resuming from its cache)"
    ]
    assert any(str(runs / "unfinished") in line and "run.json is missing" in line for line in lines)
    assert any(
        f"old/run.json: schema_version is 2: the folder was written by an earlier physprobe, which this one (schema 3) "
        f"does not read; score the run again into it (`physprobe score ... --out {runs / 'old'}`)" in line
        for line in lines
    )
    assert any("notes.txt is not a folder" in line for line in lines)
    text = (tmp_path / "report" / "report.md").read_text()
    assert [row[0] for row in runs_table(text)] == ["**bert-base-uncased**"]
    listed = text.split("## Folders not in this report")[1]
    assert all(name in listed for name in ("failed", "unfinished", "old", "notes.txt"))
    assert main(["report", str(runs / "failed"), str(runs / "unfinished"), "--out", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("physprobe: error: none of the 2 folders given is a finished physprobe run (") and err.count("\n") == 1
    assert not (tmp_path / "none").exists()


def test_runs_are_named_by_label_or_model_and_what_tells_them_apart(tmp_path, capsys):
    figures = {"ordinary": {"accuracy": 0.5, "n": 4, "undecided": 0}}
    a = write_run(tmp_path / "a", "cccons", "mlm", figures, "mask-four", model="google-bert/bert-base-uncased", limit=4)
    b = write_run(
        tmp_path / "b",
        "cccons",
        "mlm",
        {"ordinary": {**figures["ordinary"], "accuracy": 0.75}},
        "mask-vocab",
        model="google-bert/bert-base-uncased",
        limit=4,
    )
    c = write_run(
        tmp_path / "c",
        "cccons",
        "mlm",
        {"ordinary": {**figures["ordinary"], "accuracy": 0.25}},
        "mask-four",
        model="google-bert/bert-base-uncased",
        limit=4,
        label="BERT, my fine-tune",
    )
    d = write_run(
        tmp_path / "d", "cccons", "mlm", figures, "mask-four", model="google-bert/bert-base-uncased", limit=4
    )  # a's copy
    e = write_run(tmp_path / "e", "cccons", "mlm", figures, "mask-four", model="distilbert-base-uncased", limit=4)  # a's figures
    assert main(["report", str(a), str(b), str(c), str(d), str(e), "--out", str(tmp_path / "report")]) == 0
    assert capsys.readouterr().err == (f"physprobe: skipped: {d} is the same run as {a} (the same figures of the same protocol on "
                                       "the same rows); reported once\n")  # fmt: skip
    assert [row[0] for row in runs_table((tmp_path / "report" / "report.md").read_text())] == ["**bert-base-uncased (mask-four)**", "**bert-base-uncased (mask-vocab)**",
                                              "**BERT, my fine-tune**", "**distilbert-base-uncased**"]  # fmt: skip
    assert main(["score", "--model", "gpt2", "--benchmark", "cccons", "--label", "two\nlines"]) == 2
    assert "--label 'two\\nlines': give one printable line of at most 80 characters" in capsys.readouterr().err


def gemma_like(folder: Path) -> Path:
    """A NEWTON Track 1 run whose parsed answers are all the first option (Gemma-3-270M at --limit 5, as issue 31
    found it: agreement 0.65, accuracy 0.8), with the baselines physprobe.run.baselines gives its five rows."""
    from physprobe.record.run_record import Baselines

    by_group = {"Brittleness": {"accuracy": 1.0, "agreement_accuracy": 0.75, "n": 2},
                "Elasticity": {"accuracy": 0.0, "agreement_accuracy": 0.0, "n": 1},
                "Malleability": {"accuracy": 1.0, "agreement_accuracy": 0.875, "n": 2}}  # fmt: skip
    track1 = {
        "agreement_accuracy": 0.65,
        "accuracy": 0.8,
        "by_group": by_group,
        "n": 5,
        "undecided": 0,
        "unparsed": 1,
        "fallback": 1,
    }
    majority = {"agreement_accuracy": 0.8, "accuracy": 1.0, "n": 5, "undecided": 0,
                "by_group": {g: {**v, "accuracy": 1.0, "agreement_accuracy": {"Elasticity": 0.75}.get(g, v["agreement_accuracy"])}
                             for g, v in by_group.items()}}  # fmt: skip
    found = Baselines(0, majority, {"0": {"agreement_accuracy": 0.8, "accuracy": 1.0}, "1": {"agreement_accuracy": 0.0, "accuracy": 0.0},
                                    "2": {"agreement_accuracy": 0.0, "accuracy": 0.0}},
                      {"agreement_accuracy": 0.8 / 3, "accuracy": 1 / 3}, 4, 4, 0)  # fmt: skip
    return write_run(
        folder,
        "newton",
        "generate",
        {"track1": track1},
        "released-generate",
        model="/models/gemma",
        backend={"name": "hf", "gguf_file": "gemma-3-270m-q4_k_m.gguf"},
        limit=5,
        baselines={"track1": found},
    )


def test_a_run_of_constant_answers_is_marked_beside_its_baselines(tmp_path, monkeypatch):
    """The Gemma-like run: ⚠ and a footnote saying 4 of 4 answers are the first option in every table that
    shows Track 1, its majority-answer row below it, the unparsed and fallback shares, and ⚠ in the figures."""
    from physprobe.report import figures

    drawn, save = {}, figures._save

    def capture(fig, plt, path):
        drawn[path.name] = [t.get_text() for axis in fig.axes for t in axis.get_yticklabels()] + [
            t.get_text() for legend in fig.legends for t in legend.get_texts()
        ]
        save(fig, plt, path)

    monkeypatch.setattr(figures, "_save", capture)
    out = report.render([gemma_like(tmp_path / "gemma")], tmp_path / "report")
    text = (out / "report.md").read_text()
    tables_ = markdown_tables(text)
    header, body = next((h, b) for h, b in tables_ if h[-1] == "Overall" and "Elasticity" in h and "Stiffness" in h)  # Table 4
    at = next(i for i, row in enumerate(body) if row[0].startswith("**gemma-3-270m-q4\\_k\\_m ⚠"))
    run, baseline = dict(zip(header, body[at])), dict(zip(header, body[at + 1]))
    overall = re.fullmatch(r"65\.0 \(26\.4–90\.6\) n=5([⁰¹²³⁴⁵⁶⁷⁸⁹]+)", run["Overall"])
    assert overall and baseline["Model"] == "*↳ majority answer, same rows*"
    assert baseline["Overall"] == "*80.0*" and baseline["Brittleness"] == "*75.0*" and baseline["Elasticity"] == "*75.0*"
    marks = re.search(r"⚠([⁰¹²³⁴⁵⁶⁷⁸⁹,]+)\*\*$", body[at][0]).group(1).split(",")
    section = text.split("### Table 4")[1].split("###")[0]
    notes = dict(re.findall(r"^- ([⁰¹²³⁴⁵⁶⁷⁸⁹]+) (.*)$", section, flags=re.M))
    assert notes[marks[0]].startswith("run gemma-3-270m-q4\\_k\\_m: track1: 4 of 4 answers are the first option")
    assert "majority answer (the first option) 0.8, best constant (the first option) 0.8, chance 0.267" in notes[marks[0]]
    assert notes[marks[1]] == ("run gemma-3-270m-q4\\_k\\_m, `track1`: 1 of 5 (20%) answers named no option (unparsed, counted "
                               "wrong); 1 of 5 (20%) answers decided by the protocol's fallback rule")  # fmt: skip
    assert notes[overall.group(1)] == ("run gemma-3-270m-q4\\_k\\_m: over 3 of the paper's 8 attributes; its --limit 5 sample "
                                       "held no question of Stiffness, Surface Smoothness, Surface Hardness, Softness, Sharpness")  # fmt: skip
    table10 = next(
        b
        for h, b in tables_
        if h[-1] == "Overall" and b is not body and any("gemma" in r[0] for r in b) and any(r[-1] == "*100.0*" for r in b)
    )  # Table 10 (accuracy): the majority answer is right on all five
    assert any(r[0].startswith("**gemma-3-270m-q4\\_k\\_m ⚠") for r in table10)
    runs_row = dict(zip(RUNS_HEADER, runs_table(text)[0]))
    assert runs_row["Backend"] == "hf, gemma-3-270m-q4\\_k\\_m.gguf" and runs_row["Prompts"] == "raw prompts"
    configs_row = dict(zip(CONFIGS_HEADER, next(b for h, b in tables_ if h == CONFIGS_HEADER)[0]))
    assert configs_row == {"Run": "gemma-3-270m-q4\\_k\\_m", "Config": "track1", "n": "5", "Headline figure": "agreement\\_accuracy 0.650",
                           "Unparsed": "1 (20%)", "Undecided": "", "Majority answer": "0.800 (the first option)",
                           "Best constant": "0.800", "Chance": "0.267", "Flag": "⚠ constant"}  # fmt: skip
    assert "- ⚠ run gemma-3-270m-q4\\_k\\_m: track1: 4 of 4 answers are the first option" in text
    track1 = drawn["newton-attributes-track1.png"]
    assert "gemma-3-270m-q4_k_m ⚠" in track1 and "gemma-3-270m-q4_k_m ⚠ (95% interval)" in track1


def test_a_cell_with_nothing_to_score_says_so(tmp_path):
    """Text2Afford at --limit 3 can hold no pair with both a positive and a negative class: n = 0, no figure."""
    empty = {"default": {"pairwise": {"n": 0, "skipped": 3}, "strict": {"n": 0, "skipped": 3}}}
    run = write_run(
        tmp_path / "t2a", "text2afford", "nli", empty, "nli-released-multi-choice", model="roberta-large-mnli", limit=3
    )
    text = (report.render([run], tmp_path / "report") / "report.md").read_text()
    header, body = next((h, b) for h, b in markdown_tables(text) if h[:3] == ["Model", "Actual Acc", "Actual mAP"])
    row = dict(zip(header, next(r for r in body if r[0].startswith("**roberta-large-mnli"))))
    assert row["Actual Acc"] == row["Actual mAP"] and row["Actual Acc"].startswith("—")
    note = re.search(rf"^- {row['Actual Acc'][1:]} (.*)$", text, flags=re.M).group(1)
    assert note.startswith(
        "run roberta-large-mnli: no question of `default` could be scored for this figure (`default.pairwise.n` is 0"
    )


def test_figures_keep_long_names_and_their_legend_inside(tmp_path, monkeypatch):
    """Bars of runs with long names: every name, title and legend entry lies inside the saved figure."""
    from physprobe.report import figures

    outside, save = [], figures._save

    def check(fig, plt, path):
        renderer = fig.canvas.get_renderer()
        box = fig.bbox
        texts = [t for axis in fig.axes if axis.get_visible() for t in [*axis.get_yticklabels(), axis.title]]
        texts += [legend for legend in fig.legends]
        for artist in texts:
            extent = artist.get_window_extent(renderer)
            if extent.x0 < box.x0 - 1 or extent.x1 > box.x1 + 1 or extent.y0 < box.y0 - 1 or extent.y1 > box.y1 + 1:
                outside.append((path.name, getattr(artist, "get_text", lambda: "legend")()))
        save(fig, plt, path)

    monkeypatch.setattr(figures, "_save", check)
    t2a = {"default": {"pairwise": {"accuracy": 0.61, "map": 0.55, "n": 40, "by_class": {"grasp": {"accuracy": 0.7, "n": 10}}},
                       "strict": {"accuracy": 0.3, "map": 0.5, "n": 40}}}  # fmt: skip
    folders = [write_run(tmp_path / "nli", "text2afford", "nli", t2a, "nli-released-multi-choice",
                         model="MoritzLaurer/DeBERTa-v3-large-mnli-fever-anli-ling-wanli"),
               write_run(tmp_path / "smol", "text2afford", "yes_no", t2a, "yes-no-falcon", model="HuggingFaceTB/SmolLM2-135M",
                         label="SmolLM2-135M-Instruct with its chat template and a system instruction"),
               write_run(tmp_path / "flan", "text2afford", "yes_no", t2a, "yes-no-flan-t5", model="google/flan-t5-large")]  # fmt: skip
    report.render(folders, tmp_path / "report")
    assert outside == []
