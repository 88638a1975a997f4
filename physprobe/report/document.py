"""The report's content: per benchmark, the runs, each published table with the runs' rows below it and its
footnotes, and the figures, as blocks."""

from __future__ import annotations

from pathlib import Path

from physprobe import registry
from physprobe.redact import printable
from physprobe.report.blocks import Heading, Image, Notes, Paragraph, TableBlock
from physprobe.report.cells import Missing, RunCell, number, run_cell
from physprobe.report.figures import DRAW
from physprobe.report.notes import Footnotes, apart_note, exclusion, missing_texts, protocol_warning
from physprobe.report.runs import Run
from physprobe.report.tables import Column, PaperTables, Table, paper_tables

INTERVALS = (
    "95% intervals are Wilson score intervals computed from each cell's value and its n (the questions behind "
    "the cell, from metrics.json). For cells that average other figures (macro averages over templates or groups, "
    "agreement-weighted accuracy, accuracy over class pairs) they treat the value as a proportion of n questions: "
    "an approximation."
)


def _format_run_cell(cells: list[RunCell], table: Table, notes: Footnotes, texts: dict[Missing, str]) -> str:
    shown = []
    for cell in cells:
        if cell.missing is not None:
            shown.append("—" + notes.mark(texts[cell.missing]))
        elif cell.interval is not None:
            low, high = (number(x, table) for x in cell.interval)
            shown.append(f"{number(cell.value, table)} ({low}–{high})")
        else:
            shown.append(number(cell.value, table))
    ns = [c.n for c in cells if c.missing is None]
    text = " / ".join(shown)
    if ns and all(n is not None for n in ns):
        text += f" n={'/'.join(str(n) for n in ns)}"
    return text


def _summary_marks(run: Run, column: Column, notes: Footnotes) -> str:
    """Footnote marks for an overall cell whose config the run's protocol scored only in part."""
    if not column.summary:
        return ""
    configs = dict.fromkeys(key.split(".")[0] for key in column.keys if key)
    return "".join(notes.mark(f"run {run.id}: {text}") for text in (exclusion(run, c) for c in configs) if text)


def table_block(table: Table, runs: list[Run], paper: PaperTables) -> tuple[TableBlock, list[str]]:
    """A published table with the runs' rows below, and its footnotes."""
    notes = Footnotes()
    header = ["Model", *[c.name for c in table.columns]]
    rows, kinds, section = [], [], None
    for row in table.rows:
        if row.section and row.section != section:
            section = row.section
            rows.append([row.section, *[""] * len(table.columns)])
            kinds.append("section")
        cells = ["—" + notes.mark(f"{row.model}: {row.note}") if c is None else c for c in row.cells]
        rows.append([row.model, *cells])
        kinds.append("published")
    placed = [r for r in runs if table.methods is None or r.method in table.methods]
    if placed:
        rows.append(["physprobe runs", *[""] * len(table.columns)])
        kinds.append("section")
    cells = {(run.id, c.name): [run_cell(run, c, i) for i in range(len(c.parts))] for run in placed for c in table.columns}
    texts = missing_texts([cell.missing for parts in cells.values() for cell in parts if cell.missing])
    for run in placed:
        warning, apart = protocol_warning(run, paper), apart_note(run)
        label = run.id + (" ⚠" + notes.mark(warning) if warning else "") + (notes.mark(apart) if apart else "")
        shown = []
        for column in table.columns:
            text = _format_run_cell(cells[run.id, column.name], table, notes, texts)
            shown.append(text if text.startswith("—") else text + _summary_marks(run, column, notes))
        rows.append([label, *shown])
        kinds.append("run")
    left_out = [r for r in runs if r not in placed]
    extra = list(table.notes)
    if left_out:
        reports = f"this table reports {', '.join(table.methods)} models" if table.methods else "physprobe does not score this table's models"
        extra.append(f"Not placed here: {', '.join(f'{r.id} (method {r.method})' for r in left_out)}; {reports}.")
    return TableBlock(header, rows, kinds), extra + notes.items()


def headlines(benchmark: str, metrics: dict) -> str:
    """Each scored config's headline figure, as the benchmark's ``Evaluation.headline`` declares it.

    >>> headlines("prost", {"default": {"accuracy": 0.3, "macro_accuracy": 0.25}})
    'default: macro_accuracy 0.250'
    """
    evaluation = registry.evaluation(benchmark)
    found = [(config, evaluation.headline_of(values)) for config, values in metrics.items() if isinstance(values, dict)]
    return "; ".join(f"{config}: {key} {value:.3f}" for config, (key, value) in ((c, h) for c, h in found if h)) or "—"


def _runs_table(runs: list[Run], paper: PaperTables) -> TableBlock:
    rows = []
    for run in runs:
        configs = ", ".join(run.record.configs)
        limit = run.record.limit
        # The papers scored raw text: a chat template applied (run.json ``chat.applied``) is flagged.
        chat = " ⚠ chat template" if (run.record.chat is not None and run.record.chat.applied) else ""
        rows.append([run.id, printable(run.record.model), run.method, run.record.protocol + chat,
                     ", ".join(paper.protocols.get(run.method, ("—",))), configs + (f" (limit {limit})" if limit else ""),
                     headlines(run.record.benchmark, run.metrics), str(run.folder)])  # fmt: skip
    header = ["Run", "Model", "Method", "Protocol", "Paper's protocol", "Configs", "Headline", "Folder"]
    return TableBlock(header, rows, ["run"] * len(rows))


def document(runs: list[Run], figures_dir: Path) -> list:
    """The report as blocks (headings, tables, notes, images), drawing the figures into ``figures_dir``."""
    blocks: list = [Heading(1, "physprobe report"),
                    Paragraph("The papers' published tables, transcribed as printed, with your runs below them. "
                              "Cells are placed by column name; — marks a cell a run did not score (see its footnote). "
                              "Run cells read: value (95% interval) n=questions."),
                    Paragraph(INTERVALS)]  # fmt: skip
    by_benchmark: dict[str, list[Run]] = {}
    for run in runs:
        by_benchmark.setdefault(run.record.benchmark, []).append(run)
    for benchmark in sorted(by_benchmark):
        paper, group = paper_tables(benchmark), by_benchmark[benchmark]
        blocks += [Heading(2, paper.title), Paragraph(f"Paper: {paper.paper}. Runs in this section:"), _runs_table(group, paper)]
        warnings = [w for w in (protocol_warning(r, paper) for r in group) if w]
        if warnings:
            blocks.append(Notes([f"⚠ {w}" for w in warnings]))
        for table in paper.tables:
            block, notes = table_block(table, group, paper)
            source = f"the paper's {table.source}" if table.source else "physprobe; the paper prints no such table"
            blocks += [Heading(3, f"{table.source or 'physprobe'}: {table.title}"), Paragraph(f"Source: {source}."), block]
            if notes:
                blocks.append(Notes(notes))
        drawn = []
        for figure in paper.figures:
            path = figures_dir / f"{benchmark}-{figure.id}.png"
            if DRAW[figure.kind](figure, paper, group, path):
                drawn.append(Image(path, f"figures/{path.name}", figure.title))
            else:
                drawn.append(Paragraph(f"Figure not drawn: {figure.title} — no published row or run has a value for it.", "note"))
        if drawn:
            blocks += [Heading(3, f"{paper.title} figures"), *drawn]
    return blocks
