"""physprobe benchmarks as EleutherAI lm-evaluation-harness (0.4.x) tasks: ``physprobe export lm-eval --out DIR``.

One source of truth: the exported tasks hold no prompt of their own. Each task's ``utils.py`` builds a
``Task`` that imports the benchmark's ``dataset_scripts/<bench>/evaluation.py`` and calls the same protocol
``request`` the scorer calls, per row, in ``process_docs``; ``process_results`` decides with the protocol's
own ``decide``/``match``, and the ``paper`` metric hands the decided rows to the benchmark's own metric
wiring (``Evaluation.metrics``), so PROST's macro over concepts, NEWTON Track 1's agreement weighting and
Text2Afford's pairwise accuracy are the scorer's, not a re-implementation. So lm-eval needs physprobe
installed in its environment.

What lm-eval can express (per request type, ``physprobe.protocols.requests``): ``Choice`` (lm-eval
``multiple_choice``: the context is the ``query``, the continuations the choices; an empty context is
scored after the BOS token, as physprobe does), ``Seq2Seq`` with text targets (input as query, targets
as choices), ``YesNo`` (one lm-eval doc per class: the prompt, then " YES" / " NO"), ``Generate``
(``generate_until``). Not expressible: ``MeanTokens`` (PROST ``released-gpt``: mean log-probability over
token sequences with EOS; lm-eval's results carry no token count), first-token targets or choices (PROST
``released-t5``, ``released-unifiedqa``), masked LM and NLI (lm-eval scores causal and seq2seq LMs only). Where a family's default protocol is not expressible, the first expressible protocol
of the family is exported and the folder's README.md says so. One difference lm-eval imposes on seq2seq
models: it encodes a choice without special tokens, so it scores the target without the end-of-sequence
token that physprobe's engine keeps where the tokenizer appends one (every T5 tokenizer: ``</s>``); with
such a model a close call can be decided otherwise (the README says so per task). A generating task decodes
greedily, or with ``decoding="released"`` as the protocol's released script decoded ``model`` (``generation_kwargs``;
lm-eval samples with its own global seed, not physprobe's per-row ones).

>>> row = {"context": "A coin and an egg fall.", "question": "The [MASK] is heavier.", "A": "coin", "B": "egg",
...        "C": "leaf", "D": "brick", "label": 0, "name": "mass_1", "group": "mass", "ex_question": "Which is heavier?"}
>>> [task[:3] for task in exported_tasks("prost", {"default": row})]
[('default', 'causal', 'sentence-sum'), ('default', 'seq2seq', 'span-sum')]
"""

from __future__ import annotations

from pathlib import Path

import yaml

from physprobe.data import hub_data, registry
from physprobe.errors import ExportError, PhysprobeError
from physprobe.protocols import GENERATIVE
from physprobe.protocols.answers import cut, yes_probability
from physprobe.protocols.decoding import GREEDY, Decoding
from physprobe.protocols.requests import Choice, Generate, GenerateEach, Seq2Seq, YesNo
from physprobe.protocols.results import Answer, Scores

SEQ2SEQ_EOS = (
    "lm-eval scores each target without the end-of-sequence token a T5 tokenizer appends (physprobe "
    "scores it with): a close call can be decided otherwise"
)


def _expressible(protocol, family: str, config: str, row: dict) -> bool:
    """Whether lm-eval can ask ``family`` models what the protocol asks, from text alone (nothing the
    model's tokenizer resolves)."""
    if family not in protocol.families:
        return False
    request = protocol.build(row, config)
    if isinstance(request, Seq2Seq):
        return request.first_token_after is None
    if isinstance(request, Generate):
        return not request.first_token_choices
    return isinstance(request, (Choice, YesNo))


def exported_tasks(benchmark: str, first_rows: dict[str, dict]) -> list[tuple[str, str, str, str]]:
    """``(config, family, protocol, note)`` of each task exported for a benchmark: per family (causal,
    seq2seq) the default protocol, or the first expressible one of the family when lm-eval cannot express
    the default; one task per config and distinct protocol. ``first_rows``: a row of each config (probe)."""
    evaluation = registry.evaluation(benchmark)
    tasks, seen = [], set()
    for family in GENERATIVE:
        for config in evaluation.configs:
            row = first_rows[config]
            try:
                default = evaluation.default(family)
            except PhysprobeError:
                continue
            chosen, note = default, ""
            if not _expressible(default, family, config, row):
                usable = [p for p in evaluation.protocols if _expressible(p, family, config, row)]
                if not usable:
                    continue
                chosen = usable[0]
                request = default.build(row, config)
                why = (
                    "lm-eval generates one answer per document"
                    if isinstance(request, GenerateEach)
                    else "its input depends on the tokenizer"
                )
                note = f"default {default.name!r} asks for {request.asked_for} ({why}), which lm-eval cannot express; exported {chosen.name!r}"
            if (config, chosen.name, _form(chosen, family)) not in seen:
                seen.add((config, chosen.name, _form(chosen, family)))
                tasks.append((config, family, chosen.name, note))
    return tasks


def _form(protocol, family: str) -> str:
    """How the requests read in lm-eval: a generate protocol reads the same for both families."""
    return "any" if protocol.answer == "text" else family


def task_name(benchmark: str, config: str, family: str, protocol: str) -> str:
    return f"physprobe_{benchmark}_{config}_{protocol.replace('-', '_')}" + ("_seq2seq" if family == "seq2seq" else "")


class Task:
    """The runtime of one exported task (imported by the task folder's ``utils.py``).

    ``process_docs`` turns benchmark rows into lm-eval docs (``query``, ``choices``, ``gold``; a YES/NO
    protocol gives one doc per class); ``process_results`` gives per-doc ``acc`` and the ``paper`` item;
    ``paper`` aggregates items through the benchmark's own ``Evaluation.metrics``.
    """

    def __init__(self, benchmark: str, config: str, family: str, protocol: str):
        self.evaluation = registry.evaluation(benchmark)
        self.protocol = self.evaluation.protocol(protocol)
        self.config, self.family = config, family
        self.generate, self.yes_no = self.protocol.answer == "text", self.protocol.answer == "yes_no"
        self.rows: dict[int, dict] = {}

    def docs(self, row_index: int, row: dict) -> list[dict]:
        request = self.protocol.build(row, self.config)
        if isinstance(request, YesNo):  # one doc per prompt; gold YES (0) where the class is positive
            positives = self.evaluation.reference(row)
            answers = ["YES", "NO"] if self.family == "seq2seq" else [" YES", " NO"]
            return [{"row": row_index, "part": i, "query": p, "choices": answers, "gold": 0 if i in positives else 1}
                    for i, p in enumerate(request.prompts)]  # fmt: skip
        gold = self.evaluation.reference(row)[0]
        query, choices = {Generate: lambda r: (r.prompt, r.choices), Choice: lambda r: (r.context, r.continuations),
                          Seq2Seq: lambda r: (r.source, r.targets)}[type(request)](request)  # fmt: skip
        return [{"row": row_index, "part": 0, "query": query, "choices": list(choices), "gold": gold}]

    def process_docs(self, dataset):
        import datasets

        out = []
        for index, row in enumerate(dataset):
            if self.protocol.skip and self.protocol.skip(row):
                continue
            self.rows[index] = row
            out += self.docs(index, row)
        return datasets.Dataset.from_list(out)

    def result(self, results) -> Answer | Scores:
        """lm-eval's results of one doc as physprobe's backends give them: an ``Answer`` for generate (cut as physprobe
        cuts: lm-eval's until would cut a leading newline's answer away), else ``Scores`` (log-probabilities)."""
        if self.generate:
            return Answer(cut(results[0], self.protocol.stop))
        return Scores(tuple(float(r[0]) if isinstance(r, (tuple, list)) else float(r) for r in results))

    def process_results(self, doc: dict, results) -> dict:
        result = self.result(results)
        if self.yes_no:
            yes, no = result.values
            p_yes = yes_probability(yes, no)
            return {"acc": float((p_yes > 0.5) == (doc["gold"] == 0)), "paper": (doc["row"], doc["part"], p_yes)}
        prediction = self.protocol.predict(result, Generate(doc["query"], tuple(doc["choices"])))
        return {
            "acc": float(prediction == doc["gold"]),
            "paper": (doc["row"], prediction, None if self.generate else list(result.values)),
        }

    def decisions(self, items: list) -> tuple[list[int], list, list]:
        """Row indices, predictions and scores of complete rows, in row order."""
        if not self.yes_no:
            ordered = sorted(items, key=lambda item: item[0])
            return [i[0] for i in ordered], [i[1] for i in ordered], [i[2] if i[2] is not None else [] for i in ordered]
        classes: dict[int, dict[int, float]] = {}
        for row, part, p_yes in items:
            classes.setdefault(row, {})[part] = p_yes
        width = len(self.protocol.build(next(iter(self.rows.values())), self.config).prompts) if self.rows else 0
        rows = sorted(r for r, parts in classes.items() if len(parts) == width)  # a --limit may cut a row's classes
        scores = [[classes[r][i] for i in range(width)] for r in rows]
        return rows, [self.protocol.decide(s) for s in scores], scores

    def paper(self, items: list) -> float:
        """The config's headline figure (the benchmark's declared ``Evaluation.headline``) from its own metric
        wiring; NaN when none was computed."""
        indices, predictions, scores = self.decisions(items)
        values = self.evaluation.metrics(self.config, [self.rows[i] for i in indices], predictions, scores,
                                         **self.protocol.metric_options)  # fmt: skip
        found = self.evaluation.headline_of(values)
        return float("nan") if found is None else found[1]


class Function(str):
    """An lm-eval ``!function`` reference (``utils.name``), which ``to_yaml`` writes with its tag."""


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(Function, lambda dumper, value: dumper.represent_scalar("!function", str(value)))


def to_yaml(data: dict) -> str:
    """An lm-eval task file: ``data`` written by PyYAML (every string quoted where YAML needs it), ``Function`` values
    as ``!function`` tags.

    >>> print(to_yaml({"task": "t", "data_files": ["a #1: b.parquet"], "process_docs": Function("utils.t_docs")}), end="")
    task: t
    data_files:
    - 'a #1: b.parquet'
    process_docs: !function 'utils.t_docs'
    """
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, default_flow_style=False, width=float("inf"))


def _dataset(benchmark: str, config: str, data: Path | None) -> dict:
    if data is None:
        return {"dataset_path": f"physprobe/{benchmark}", "dataset_name": config}
    folder = (data / benchmark / config).resolve()
    files = sorted(folder.glob("*.parquet"))
    if not files:
        raise ExportError(f"--data {data}: no Parquet files in {folder}; run `physprobe build {benchmark} --out {data}` first")
    return {"dataset_path": "parquet", "dataset_kwargs": {"data_files": {"test": [str(f) for f in files]}}}


def generation_kwargs(protocol, decoding: Decoding) -> dict:
    """lm-eval's ``generation_kwargs`` of a generating task decoded with ``decoding`` (``Protocol.decoding``): no
    ``until`` (the protocol's stop strings are applied in ``process_results``), the decoding's budget where it sets
    one, else the protocol's, and its sampling or beam settings as ``model.generate`` takes them.

    >>> newton = registry.evaluation("newton").protocol("released-generate")
    >>> generation_kwargs(newton, GREEDY)
    {'until': [], 'max_gen_toks': 128, 'do_sample': False}
    >>> generation_kwargs(newton, newton.decoding("released", "tiiuae/falcon-7b"))
    {'until': [], 'max_gen_toks': 200, 'do_sample': True, 'temperature': 1.0, 'top_p': 1.0, 'top_k': 10}
    """
    kwargs = {"until": [], "max_gen_toks": decoding.max_new_tokens or protocol.max_new_tokens}
    if decoding.kind == "sampling":
        return kwargs | {"do_sample": True, "temperature": decoding.temperature, "top_p": decoding.top_p, "top_k": decoding.top_k}
    if decoding.kind == "beam":
        return kwargs | {"do_sample": False, "num_beams": decoding.num_beams, "length_penalty": decoding.length_penalty,
                         "early_stopping": decoding.early_stopping}  # fmt: skip
    return kwargs | {"do_sample": False}


def _task(name: str, function: str, config: str, protocol, family: str, dataset: dict, decoding: Decoding = GREEDY) -> dict:
    task = {"task": name, **dataset, "test_split": "test", "process_docs": Function(f"utils.{function}_docs")}
    if protocol.answer == "text":
        task |= {"output_type": "generate_until", "doc_to_text": "{{query}}", "doc_to_target": "gold",
                 "generation_kwargs": generation_kwargs(protocol, decoding)}  # fmt: skip
    else:
        task |= {"output_type": "multiple_choice", "doc_to_text": "{{query}}", "doc_to_choice": "{{choices}}",
                 "doc_to_target": "gold", "target_delimiter": ""}  # fmt: skip
    return task | {
        "process_results": Function(f"utils.{function}_results"),
        "metric_list": [{"metric": "acc", "aggregation": "mean", "higher_is_better": True},
                        {"metric": "paper", "aggregation": Function(f"utils.{function}_paper"), "higher_is_better": True}],
        "metadata": {"version": 1.0, "physprobe_config": config, "physprobe_protocol": protocol.name, "family": family},
    }  # fmt: skip


def export(out: Path, data: Path | None = None, benchmarks: list[str] | None = None, decoding: str = "greedy",
           model: str = "") -> list[str]:  # fmt: skip
    """Write one lm-eval task folder per benchmark under ``out`` (YAML + ``utils.py``, a group per benchmark
    and family) and ``out/README.md`` listing each task's protocol; return the task names. ``decoding``: how the
    generating tasks decode, ``greedy`` or ``released`` (the protocol's released decoding of ``model``).

    ``data``: a local build (``physprobe build``) the tasks read; else ``physprobe/<benchmark>`` on the Hub
    (read here for one row per config, which tells which protocols lm-eval can express).

        physprobe export lm-eval --out lm_eval_tasks --data data
    """
    from physprobe.util.paths import Owner, staged

    with staged(out, Owner("lm-eval", {})) as staging:
        return _write(staging, data, benchmarks, decoding, model)


def _write(out: Path, data: Path | None, benchmarks: list[str] | None, decoding: str = "greedy", model: str = "") -> list[str]:
    """The task folders and README.md of ``export``, written into the (staging) folder ``out``."""
    names, readme = [], ["# physprobe tasks for lm-evaluation-harness", "",
                         "Run: `lm_eval --model hf --model_args pretrained=MODEL --include_path THIS_FOLDER --tasks physprobe_<benchmark>`",
                         "(physprobe must be installed where lm-eval runs: the prompts and metrics are physprobe's).", "",
                         "| task | protocol | family | note |", "|---|---|---|---|"]  # fmt: skip
    for benchmark in benchmarks or registry.names():
        folder = out / benchmark
        folder.mkdir(parents=True, exist_ok=True)
        utils = ['"""Generated by `physprobe export lm-eval`: each task calls physprobe\'s own protocol and metrics."""', "",
                 "from physprobe.publish.lm_eval_export import Task", ""]  # fmt: skip
        groups: dict[str, list[str]] = {}
        source = hub_data.local(data, benchmark) if data is not None else hub_data.hub(benchmark)
        first_rows = {config: source.load(config)[0] for config in registry.evaluation(benchmark).configs}
        for config, family, protocol_name, exported_note in exported_tasks(benchmark, first_rows):
            protocol, note = registry.evaluation(benchmark).protocol(protocol_name), exported_note
            if family == "seq2seq" and protocol.answer != "text":
                note = "; ".join(filter(None, [note, SEQ2SEQ_EOS]))
            decoded = protocol.decoding(decoding, model) if protocol.answer == "text" else GREEDY
            if decoding != "greedy" and protocol.answer == "text":
                note = "; ".join(filter(None, [note, f"decoding as released: {decoded.describe()} ({decoded.source})"]))
            name = task_name(benchmark, config, family, protocol_name)
            function = name.removeprefix("physprobe_")
            utils += [f"_{function} = Task({benchmark!r}, {config!r}, {family!r}, {protocol_name!r})",
                      f"{function}_docs = _{function}.process_docs", f"{function}_results = _{function}.process_results",
                      f"{function}_paper = _{function}.paper", ""]  # fmt: skip
            (folder / f"{name}.yaml").write_text(
                to_yaml(_task(name, function, config, protocol, family, _dataset(benchmark, config, data), decoded))
            )
            group = f"physprobe_{benchmark}" + ("_seq2seq" if family == "seq2seq" else "")
            groups.setdefault(group, []).append(name)
            names.append(name)
            readme.append(
                f"| {name} | {protocol_name} | {family if _form(protocol, family) != 'any' else 'causal, seq2seq'} | {note} |"
            )
        (folder / "utils.py").write_text("\n".join(utils))
        for group, members in groups.items():
            # The configs' headline figures side by side, unweighted: the papers report each config apart.
            text = to_yaml({"group": group, "task": members,
                            "aggregate_metric_list": [{"metric": "acc", "aggregation": "mean", "weight_by_size": False},
                                                      {"metric": "paper", "aggregation": "mean", "weight_by_size": False}],
                            "metadata": {"version": 1.0}})  # fmt: skip
            (folder / f"_{group}.yaml").write_text(text)
    (out / "README.md").write_text("\n".join(readme) + "\n")
    return names
