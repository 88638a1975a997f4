"""Every question of a benchmark's runs in view: the question explorer, one self-contained HTML page per benchmark
(``explore/<benchmark>.html``, its data and script inline, nothing fetched), read from each run's predictions.parquet.

A question is a (config, row) some run answered: its group (``Evaluation.groups``: PROST's concept, NEWTON's
attribute, Text2Afford's classes), the prompt as the model read it, the options (the request the run's protocol builds
of the row) with each run's score of each, each run's answer and status, and the gold answer. A status is
``right`` (the decided answer is a gold one), ``wrong``, ``unparsed`` (a generated answer naming no option: counted
wrong), ``undecided`` (no option won: left out of the figures) or ``excluded`` (the protocol's skip rule); a right or
wrong answer its protocol's fallback rule decided says so, with the rule.

Links open the page on a view (``link``): its fragment names the configs, the group, a run's status and two runs whose
discordant questions to show (``discordant``: A right and B wrong, or the reverse; both: either), the questions a
figure's McNemar test counts as b + c.

>>> link("prost", configs=("default",), group="mass", a=0, b=1, discordant="both")
'explore/prost.html#config=default&group=mass&a=0&b=1&discordant=both'
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from urllib.parse import quote

from physprobe.data import registry
from physprobe.errors import ProtocolError, RunRecordError
from physprobe.protocols.requests import Entailment
from physprobe.record import run_record
from physprobe.report.runs import Run, run_protocol

FOLDER = "explore"
STATUS = {"R": "right", "W": "wrong", "U": "unparsed", "D": "undecided", "X": "excluded"}
UNPARSED_RULE = "named no option: counted wrong"
UNDECIDED_RULE = "no option won (a missing score): left out of the figures"


def link(benchmark: str, **view) -> str:
    """The explorer of ``benchmark`` opened on ``view`` (config, group, status, run, a, b, discordant, q), as a
    relative address from the report's folder; a config list is joined by commas."""
    shown = [f"{key}={quote(','.join(value) if isinstance(value, tuple) else str(value), safe=',')}"
             for key, value in (("config", view.pop("configs", None)), *view.items()) if value is not None]  # fmt: skip
    return f"{FOLDER}/{benchmark}.html" + ("#" + "&".join(shown) if shown else "")


@dataclass
class Explorer:
    """A benchmark's questions as the explorer holds them: ``data`` (JSON-ready, columnar) and, per config, the
    groups its questions count in; ``missing`` the runs whose predictions could not be read, each with why."""

    benchmark: str
    runs: list[Run]
    data: dict
    groups: dict[str, set[str]]
    missing: list[str]

    def group_of(self, configs: tuple[str, ...], path: str) -> str | None:
        """The group a figure's metrics.json path reads (the first of its parts that is a group of ``configs``),
        None for a figure over all of its configs' questions."""
        known = set().union(*(self.groups.get(c, set()) for c in configs))
        return next((part for part in path.split(".") if part in known), None)


def discordant(found: Explorer, configs: tuple[str, ...], group: str | None, a: int, b: int) -> int:
    """How many questions of ``configs`` (and ``group``) runs ``a`` and ``b`` both answered, one right and the other
    wrong (an unparsed answer counts wrong; undecided and excluded ones are in no figure): what the explorer's
    discordant filter shows."""
    wanted = {found.data["configs"].index(c) for c in configs if c in found.data["configs"]}
    count = 0
    for question in found.data["questions"]:
        x, y = question["a"][a], question["a"][b]
        if question["c"] in wanted and (group is None or group in question["g"]) and x and y:
            if x[0][0] in "RWU" and y[0][0] in "RWU" and (x[0][0] == "R") != (y[0][0] == "R"):
                count += 1
    return count


def _options(request) -> list[str]:
    """The options a request offers, as text: its counted items (continuations, candidates, targets, prompts,
    sentence pairs, token sequences), a Generate's choices; where they are whole texts that differ in a few words
    (PROST's four sentences), those words (``distinct``).

    >>> from physprobe.protocols.requests import MeanTokens
    >>> _options(MeanTokens((("A", " coin", " is heavier."), ("A", " cube", " is heavier."))))
    ['coin', 'cube']
    """
    items = getattr(request, request.counted) if request.counted else getattr(request, "choices", ())
    texts = [
        item if isinstance(item, str) else (" → " if isinstance(request, Entailment) else "").join(map(str, item))
        for item in items
    ]
    return distinct(texts)


def distinct(texts: list[str]) -> list[str]:
    """What tells ``texts`` apart: each without the whole words all of them start and end with (as they are where
    that leaves one empty).

    >>> distinct(["The ball rolls.", "The box slides."]), distinct([" yes", " no"])
    (['ball rolls.', 'box slides.'], ['yes', 'no'])
    """
    if len(texts) < 2:
        return texts
    start = os.path.commonprefix(texts)
    start = start[: start.rfind(" ") + 1]
    ends = [t[len(start) :][::-1] for t in texts]
    end = os.path.commonprefix(ends)[::-1]
    end = end[end.find(" ") :] if " " in end else ""
    middles = [t[len(start) : len(t) - len(end)].strip() for t in texts]
    return middles if all(middles) else [t.strip() for t in texts]


def _number(value) -> float | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return float(f"{value:.4g}")


class _Questions:
    """The questions being gathered: one entry per (config, row), each run's answer added as read."""

    def __init__(self, benchmark: str, runs: int):
        self.evaluation = registry.evaluation(benchmark)
        self.runs, self.entries, self.configs, self.groups = runs, {}, {}, {}

    def entry(self, line: dict, protocol, data: dict) -> dict:
        key = (line["config"], line["row"])
        if key not in self.entries:
            config = line["config"]
            try:
                groups = tuple(self.evaluation.groups(data, config)) if self.evaluation.groups else ()
            except (KeyError, TypeError):  # a row without its fields (predictions.parquet of an earlier physprobe)
                groups = ()
            self.groups.setdefault(config, set()).update(groups)
            options = []
            if protocol is not None:
                try:
                    options = _options(protocol.build(data, config))
                except (ProtocolError, KeyError, TypeError, ValueError):  # a row this protocol builds no request of
                    options = []
            self.entries[key] = {"c": self.configs.setdefault(config, len(self.configs)), "r": line["row"],
                                 "g": list(groups), **_prompts(line["prompts"] or []), "o": options,
                                 "gold": list(line["reference"] or []), "a": [None] * self.runs}  # fmt: skip
        return self.entries[key]


def _prompts(prompts: list[str]) -> dict:
    """The texts a question's model read, held once: ``p`` what they share at their start (to a whole word), ``ps``
    the rest of each (none for one text), so that four prompts of one context take little more room than one.

    >>> _prompts(["Ice is cold", "Ice is hot"]), _prompts(["The balls stack.", "The books stack."])["p"]
    ({'p': 'Ice is ', 'ps': ['cold', 'hot']}, 'The ')
    """
    if len(prompts) < 2:
        return {"p": "".join(prompts), "ps": []}
    shared = os.path.commonprefix(prompts)
    if shared[-1:].isalnum() and any(len(text) > len(shared) and text[len(shared)].isalnum() for text in prompts):
        shared = shared[: shared.rfind(" ") + 1]  # not inside a word
    return {"p": shared, "ps": [text[len(shared) :] for text in prompts]}


def _status(line: dict, protocol) -> tuple[str, bool]:
    """A line's status code (``STATUS``) and whether the protocol's fallback rule decided it."""
    status = line["status"]
    if status != "decided":
        return {"unparsed": "U", "undecided": "D", "excluded": "X"}[status], False
    right = line["prediction"] in (line["reference"] or [])
    fell_back = False
    text = line.get("generated")
    if protocol is not None and protocol.fallback is not None and isinstance(text, str):
        options = None
        try:
            options = _options(protocol.build(run_record.row_data(line), line["config"]))
        except (ProtocolError, KeyError, TypeError, ValueError):
            options = None
        fell_back = options is not None and protocol.fallback(text, options)
    return ("R" if right else "W"), fell_back


def _rules(run: Run, protocol) -> dict:
    """What each non-plain status means under the run's protocol."""
    return {"U": UNPARSED_RULE, "D": UNDECIDED_RULE,
            "X": (protocol.skip_reason if protocol is not None and protocol.skip_reason else "left out by the protocol's skip rule"),
            "F": protocol.fallback_reason if protocol is not None and protocol.fallback is not None else ""}  # fmt: skip


def explorer(benchmark: str, runs: list[Run]) -> Explorer:
    """The explorer of one benchmark's ``runs`` (in the report's order): every question any of them answered."""
    gathered, missing, described = _Questions(benchmark, len(runs)), [], []
    for index, run in enumerate(runs):
        protocol = run_protocol(run)
        try:
            lines = run_record.predictions(run.folder)
        except RunRecordError as error:
            missing.append(f"run {run.id}: {error}")
            lines = []
        for line in lines:
            entry = gathered.entry(line, protocol, run_record.row_data(line) if line.get("row_json") else {})
            status, fell_back = _status(line, protocol)
            generated = line.get("generated")
            prompts = _prompts(line["prompts"] or [])
            entry["a"][index] = [status + ("f" if fell_back else ""),
                                 line["prediction"] if status in "RW" else None,
                                 [_number(s) for s in line["scores"] or []],
                                 generated if isinstance(generated, str) or generated is None else "\n".join(map(str, generated)),
                                 None if prompts == {"p": entry["p"], "ps": entry["ps"]} else "\n\n".join(line["prompts"])]  # fmt: skip
        described.append({"name": run.id, "protocol": run.record.protocol, "method": run.method, "rules": _rules(run, protocol),
                          "answered": len(lines), "grouped": protocol is not None and protocol.answers is not None})  # fmt: skip
    questions = [gathered.entries[key] for key in sorted(gathered.entries, key=lambda k: (gathered.configs[k[0]], k[1]))]
    data = {"benchmark": benchmark, "configs": list(gathered.configs), "runs": described, "status": STATUS,
            "questions": questions, "missing": missing}  # fmt: skip
    return Explorer(benchmark, runs, data, gathered.groups, missing)


def explorers(runs: list[Run]) -> dict[str, Explorer]:
    """The explorer of each benchmark among ``runs`` whose runs hold a question (in the report's order of runs)."""
    by_benchmark: dict[str, list[Run]] = {}
    for run in runs:
        by_benchmark.setdefault(run.record.benchmark, []).append(run)
    found = {benchmark: explorer(benchmark, group) for benchmark, group in sorted(by_benchmark.items())}
    return {benchmark: e for benchmark, e in found.items() if e.data["questions"]}


def data_json(found: Explorer) -> str:
    """The explorer's data as JSON safe inside an HTML script element (no ``<``), the same bytes for the same runs."""
    text = json.dumps(found.data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
