"""The report's content: per benchmark, the runs, each published table with the runs' rows below it and its
footnotes, and the figures, as blocks."""

from __future__ import annotations

from pathlib import Path

from physprobe.data import registry
from physprobe.protocols.model_options import model_shown
from physprobe.report import contents, differences, explorer
from physprobe.report.blocks import Heading, Image, Links, Notes, Paragraph, TableBlock
from physprobe.report.card import card_blocks
from physprobe.report.card import rows as card_rows
from physprobe.report.cells import MISSING, Counts, Missing, RunCell, Spread, baseline_cell, counts, lookup, number, run_cell
from physprobe.report.figures import DRAW, chance_notes
from physprobe.report.notes import Footnotes, answered, apart_note, coverage, exclusion, left_out, missing_texts, protocol_warning
from physprobe.report.runs import Run
from physprobe.report.tables import Column, PaperTables, Table, paper_tables
from physprobe.run import baselines
from physprobe.util.redact import printable

BASELINE_ROW = "↳ majority answer, same rows"
BASELINES = (
    "Below each run, the figures of its majority answer (the commonest gold option given to every question; where a "
    "question has a label per class, each class scored by how often it holds) on the same questions, computed by the "
    "same metric wiring: a run no higher than this row has learnt nothing the labels' balance does not give. The "
    "per-config table gives the best constant answer and chance too. ⚠ marks a run whose answers are (nearly) all one, or mostly "
    "its protocol's fallback rule: its figures say little about the model."
)
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
        elif cell.spread is not None:
            shown.append(f"{number(cell.value, table)} ± {number(cell.spread.sd, table)}{notes.mark(Spread.NOTE)}")
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


def _summary_marks(run: Run, column: Column, table: Table, notes: Footnotes) -> str:
    """Footnote marks for an overall cell whose config the run's protocol scored only in part, or whose groups its
    ``--limit`` sample held only in part (``notes.coverage``)."""
    if not column.summary:
        return ""
    configs = dict.fromkeys(key.split(".")[0] for key in column.keys if key)
    texts = [f"run {run.id}: {text}" for text in (exclusion(run, c) for c in configs) if text]
    texts += [text for text in [coverage(run, table)] if text]
    return ",".join(notes.mark(text) for text in texts)


def _configs(table: Table) -> list[str]:
    """The configs (and pooled figures) a table's columns read, in order."""
    return list(dict.fromkeys(key.split(".")[0] for column in table.columns for key in column.keys if key))


def _run_label(run: Run, table: Table, paper: PaperTables, notes: Footnotes) -> str:
    """A run's name in a table, with its marks: ⚠ for a protocol other than the paper's and for figures that say
    little (``baselines.flags``), and footnotes for what the table's figures rest on (unparsed, undecided, questions the
    metric left out)."""
    pooled = registry.evaluation(run.record.benchmark).pooled
    configs = _configs(table)
    members = list(dict.fromkeys(member for config in configs for member in pooled.get(config, (config,))))
    warning, apart = protocol_warning(run, paper), apart_note(run)
    flags = [flag for flag in baselines.flags(run.record) if flag.config in members]
    warned = [warning] * bool(warning) + [f"run {run.id}: {flag.text}" for flag in flags]
    texts = warned + [apart] * bool(apart) + [f"run {run.id}, {text}" for text in (answered(run, c) for c in members) if text]
    texts += [text for text in (left_out(run, c) for c in members) if text]
    return run.id + (" ⚠" if warned else "") + ",".join(notes.mark(text) for text in texts)


def _baseline_row(run: Run, table: Table) -> list[str] | None:
    """The run's majority-answer figures in the table's columns, or None where it has none of them."""
    shown = []
    for column in table.columns:
        values = [baseline_cell(run, column, i) for i in range(len(column.parts))]
        shown.append("" if all(v is None for v in values) else " / ".join("—" if v is None else number(v, table) for v in values))
    return [BASELINE_ROW, *shown] if any(shown) else None


def table_block(table: Table, runs: list[Run], paper: PaperTables) -> tuple[TableBlock, list[str]]:
    """A published table with the runs' rows below (each with its majority-answer row), and its footnotes."""
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
        label = _run_label(run, table, paper, notes)
        shown = []
        for column in table.columns:
            text = _format_run_cell(cells[run.id, column.name], table, notes, texts)
            shown.append(text if text.startswith("—") else text + _summary_marks(run, column, table, notes))
        rows.append([label, *shown])
        kinds.append("run")
        baseline = _baseline_row(run, table)
        if baseline is not None:
            rows.append(baseline)
            kinds.append("baseline")
    left_out = [r for r in runs if r not in placed]
    extra = list(table.notes)
    if left_out:
        reports = (
            f"this table reports {', '.join(table.methods)} models"
            if table.methods
            else "physprobe does not score this table's models"
        )
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


def unreleased_chat(run: Run) -> bool:
    """Whether the run read its prompts through a chat template where the protocol's released script read raw
    text (run.json ``chat.applied``; ``Protocol.needs_chat``)."""
    if run.record.chat is None or not run.record.chat.applied:
        return False
    known = {p.name: p for p in registry.evaluation(run.record.benchmark).protocols}
    protocol = known.get(run.record.protocol)
    return protocol is None or not protocol.needs_chat


def chat_setting(run: Run) -> str:
    """How a run's prompts were read: raw, or through a chat template (flagged ⚠ where the protocol's released
    script read raw text: ``unreleased_chat``), with a system instruction if any."""
    chat = run.record.chat
    if chat is None:
        return "— (no prompts)"
    mark = "⚠ " if unreleased_chat(run) else ""
    text = (f"{mark}chat template {chat.template or '(default)'}" + (f" sha256 {chat.template_sha256[:12]}" if chat.template_sha256 else "")
            if chat.applied else "raw prompts")  # fmt: skip
    return text + (" + system instruction" if chat.system_instruction else "")


def _backend(run: Run) -> str:
    backend = run.record.backend
    return backend["name"] + (f", {printable(Path(backend['gguf_file']).name)}" if backend.get("gguf_file") else "")


def _runs_table(runs: list[Run], paper: PaperTables) -> TableBlock:
    """One short row per run: what was scored, how, and where it is (its figures: ``_configs_table``)."""
    rows = []
    for run in runs:
        limit = run.record.limit
        protocol = f"{run.record.protocol} ({run.method})" + (" ⚠" if protocol_warning(run, paper) else "")
        rows.append([run.id, model_shown(run.record.model), _backend(run), protocol, chat_setting(run),
                     f"{len(run.record.configs)}" + (f", limit {limit}" if limit else ", all rows"), str(run.folder)])  # fmt: skip
    return TableBlock(["Run", "Model", "Backend", "Protocol (method)", "Prompts", "Configs", "Folder"], rows, ["run"] * len(rows))


def _share(count: int, found: Counts) -> str:
    return f"{count} ({100 * found.share(count):.0f}%)" if count else ""


def sampled(values: dict, key: str) -> str:
    """A sampled config's spread of its headline figure ``key`` (``--samples`` K > 1: metrics.json ``samples``), marked ˢ,
    to follow the figure (the first sample's); nothing for a config answered once.

    >>> sampled({"accuracy": 0.5, "samples": {"drawn": 3, "mean": {"accuracy": 0.55}, "sd": {"accuracy": 0.05}, "agreement": 0.8}}, "accuracy")
    ' ˢ mean 0.550 ± 0.050 sd over 3 samples, agreement 0.80'
    >>> sampled({"accuracy": 0.5}, "accuracy")
    ''
    """
    spread = values.get("samples")
    if not isinstance(spread, dict) or lookup(spread["mean"], key) is MISSING:
        return ""
    return (f" ˢ mean {lookup(spread['mean'], key):.3f} ± {lookup(spread['sd'], key):.3f} sd over {spread['drawn']} samples, "
            f"agreement {spread['agreement']:.2f}")  # fmt: skip


def _configs_table(runs: list[Run]) -> TableBlock:
    """Per run and scored config (and pooled figure): n (of the questions answered, where the metric left some out),
    the headline figure, what it rests on, the baselines of the same rows by the headline figure, and the flag of one
    that says little (``baselines.flags``); n and the shares read where the card reads them (``cells.counts``)."""
    rows = []
    for run in runs:
        benchmark, found = run.record.benchmark, run.record.baselines
        flagged = {}
        for flag in baselines.flags(run.record):
            flagged.setdefault(flag.config, []).append(flag.kind)
        for config in [*run.record.configs, *(c for c in run.metrics if c not in run.record.configs)]:  # pooled figures last
            values = run.metrics.get(config, {})
            shares = counts(run, config) or Counts(0)
            n = str(shares.n) + (f" of {shares.answered}" if shares.skipped else "")
            headline = registry.evaluation(benchmark).headline_of(values)
            same_rows = found.get(config)
            majority = same_rows and baselines.headline(benchmark, same_rows.majority)
            constant = same_rows and baselines.best_constant(benchmark, same_rows)
            chance = same_rows and baselines.headline(benchmark, same_rows.chance)
            rows.append([run.id, config, n, "—" if headline is None else f"{headline[0]} {headline[1]:.3f}" + sampled(values, headline[0]),
                         _share(shares.unparsed, shares), _share(shares.undecided, shares),
                         "" if not majority else f"{majority[1]:.3f} ({baselines.answer_text(same_rows.majority_answer)})",
                         "" if not constant else f"{constant[1][1]:.3f}", "" if not chance else f"{chance[1]:.3f}",
                         " ".join(f"⚠ {kind}" for kind in flagged.get(config, []))])  # fmt: skip
    header = [
        "Run",
        "Config",
        "n",
        "Headline figure",
        "Unparsed",
        "Undecided",
        "Majority answer",
        "Best constant",
        "Chance",
        "Flag",
    ]
    return TableBlock(header, rows, ["detail"] * len(rows))


def card_links(runs: list[Run], explorers: dict) -> list:
    """Below the card: each card figure's questions in its benchmark's explorer, on the configs it reads."""
    items = []
    for benchmark, paper, row in card_rows(runs):
        if benchmark not in explorers:
            continue
        key = next(k for _, column in row.sources for k in column.keys if k)
        configs = registry.evaluation(benchmark).pooled.get(key.split(".")[0], (key.split(".")[0],))
        items.append((0, f"{paper.title}: {row.figure} ({', '.join(configs)})", explorer.link(benchmark, configs=configs)))
    return [Links(items, "Every question behind the card's figures, in the question explorer", "explore")] if items else []


def difference_links(section, runs: list[Run], found) -> list:
    """Below a Differences table: each row's questions in the explorer, the two runs' discordant ones (one right, the
    other wrong), as many as the McNemar test's b + c where the row's test is McNemar's."""
    order = [r.id for r in runs]
    items = []
    for comparison in section.comparisons:
        a, b = order.index(comparison.reference), order.index(comparison.other)
        for d in comparison.differences:
            configs = registry.evaluation(section.benchmark).pooled.get(d.figure.config, (d.figure.config,))
            group = found.group_of(configs, d.figure.path)
            target = explorer.link(section.benchmark, configs=configs, group=group, a=a, b=b, discordant="both")
            if d.discordant is not None:
                told = (f"b + c = {sum(d.discordant)} discordant questions ({d.discordant[0]} right for {comparison.reference} "
                        f"alone, {d.discordant[1]} for {comparison.other} alone)")  # fmt: skip
            else:
                count = explorer.discordant(found, configs, group, a, b)
                how = "not tested" if d.test == "not tested" else f"tested by {d.test}, not McNemar's b + c"
                told = f"{count} discordant question{'' if count == 1 else 's'} ({how})"
            items.append((0, f"{comparison.other}, {d.figure.name}: {told}", target))
    return [Links(items, "Each row's questions in the question explorer", "explore")] if items else []


def document(runs: list[Run], figures_dir: Path, skipped: list[tuple[Path, str]] = (), compared: list = (),
             explorers: dict | None = None) -> list:  # fmt: skip
    """The report as blocks, drawing the figures into ``figures_dir``: its header and contents (``contents``), the
    card, then per benchmark its runs, Differences, tables and figures; ``skipped``: the folders given that are not
    in it, and why (listed at the end); ``compared``: the Differences sections (``differences.sections``), each after
    its benchmark's runs; ``explorers``: the question explorer of each benchmark (``explorer.explorers``), linked from
    the card and from each Differences row."""
    explorers = explorers or {}
    blocks: list = [*card_blocks(runs, figures_dir), *card_links(runs, explorers),
                    Paragraph("Then, per benchmark: the runs, their figures per config beside the baselines of the same "
                              "rows, and the papers' published tables, transcribed as printed, with your runs below them. "
                              "Cells are placed by column name; — marks a cell a run did not score (see its footnote). "
                              "Run cells read: value (95% interval) n=questions."),
                    Paragraph(BASELINES), Paragraph(INTERVALS)]  # fmt: skip
    by_benchmark: dict[str, list[Run]] = {}
    for run in runs:
        by_benchmark.setdefault(run.record.benchmark, []).append(run)
    for benchmark in sorted(by_benchmark):
        paper, group = paper_tables(benchmark), by_benchmark[benchmark]
        blocks += [Heading(2, paper.title), Paragraph(f"Paper: {paper.paper}. Runs in this section:"), _runs_table(group, paper)]
        warnings = [w for w in (protocol_warning(r, paper) for r in group) if w]
        if warnings:
            blocks.append(Notes([f"⚠ {w}" for w in warnings]))
        blocks += [
            Paragraph("Their figures per config, beside the baselines of the same rows (by the headline figure):"),
            _configs_table(group),
        ]
        flags = [f"⚠ run {r.id}: {flag.text}" for r in group for flag in baselines.flags(r.record)]
        flags += [text for r in group for c in r.metrics if (text := left_out(r, c))]
        if flags:
            blocks.append(Notes(flags))
        total = sum(len(c.differences) for s in compared for c in s.comparisons)
        for section in (s for s in compared if s.benchmark == benchmark):
            blocks += differences.blocks(section, figures_dir, total)
            if benchmark in explorers:
                blocks += difference_links(section, group, explorers[benchmark])
        if benchmark in explorers:
            blocks.append(Links([(0, f"{paper.title}: every question of these runs", explorer.link(benchmark))], css="explore"))
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
                chances = chance_notes(figure, paper, group)
                if chances:
                    drawn.append(Paragraph("Chance lines: " + " ".join(chances), "note"))
            else:
                drawn.append(Paragraph(f"Figure not drawn: {figure.title} — no published row or run has a value for it.", "note"))
        if drawn:
            blocks += [Heading(3, f"{paper.title} figures"), *drawn]
    if skipped:
        blocks += [Heading(2, "Folders not in this report"), Notes([why for _, why in skipped])]
    return contents.with_map(contents.header(runs), blocks)
