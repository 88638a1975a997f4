"""A run's instance-level lines: one per scored question (and per sampled answer of a ``--samples K`` run), read from
its published predictions (``physprobe.publish.redaction.predictions``: the texts as scored, only known secrets and
local paths hidden).

A line holds the question as the benchmark's row holds it (``input.raw``: the row as read, canonical JSON), the texts
the model read (``input.formatted``: the one prompt, or several as a JSON array), the options the protocol's request
offered (``input.choices``, rebuilt from the row by the run's protocol), the gold answer, what the model returned
(``output.raw``: its generated text(s), or each option's score as text), how the answer was read (the protocol's
rule, or its fallback) and the question's score: 1 or 0 for an option benchmark, the benchmark's own metric over the
one question where the gold is a set of classes (Text2Afford). ``metadata`` keeps what a line needs to read back
exactly: the config and row, the status and prediction code, the scores as JSON, the row's sha256.

A question the protocol left out (``excluded``) or that the metric left out of every figure (Text2Afford's rows with
nothing to rank, ``skipped``) has no score: it has no line, and the aggregate's details count it.

>>> options_of(Choice("Ice is", (" cold", " hot"))), options_of(Masked("A [MASK] one.", ("big", "small")))
([' cold', ' hot'], ['big', 'small'])
>>> score_texts([-1.5, float("nan")])
['-1.5', 'NaN']
"""

from __future__ import annotations

import hashlib
import json
import math

from physprobe.data import registry
from physprobe.protocols import UNPARSED, YES_NO
from physprobe.protocols.requests import (
    Choice,
    Entailment,
    Generate,
    GenerateEach,
    Masked,
    MaskedPair,
    MeanTokens,
    Seq2Seq,
    YesNo,
)
from physprobe.publish.every_eval_ever.record import SCHEMA_VERSION
from physprobe.record.run_record import RunRecord

OPTIONS = {Choice: lambda r: r.continuations, MeanTokens: lambda r: r.texts(), Masked: lambda r: r.candidates,
           MaskedPair: lambda r: r.words, Seq2Seq: lambda r: r.targets, Entailment: lambda r: [p[1] for p in r.pairs],
           YesNo: lambda r: r.prompts, Generate: lambda r: r.choices, GenerateEach: lambda r: r.prompts}  # fmt: skip


def options_of(request) -> list[str]:
    """The options a request offers, in the order of its scores: continuations, candidates, targets, hypotheses, or
    one prompt per class."""
    return [str(option) for option in OPTIONS[type(request)](request)]


def score_texts(scores) -> list[str]:
    """Each option's score as text that reads back exactly (``repr``; ``NaN`` where the model gave none)."""
    return [
        "NaN" if value is None or (isinstance(value, float) and math.isnan(value)) else repr(float(value)) for value in scores
    ]


def _json(value) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class Reader:
    """What the lines of one run share: its benchmark's evaluation and protocol, the ids they join on."""

    def __init__(self, record: RunRecord, evaluation_id: str, model_id: str, exported: set[str]):
        self.record, self.evaluation_id, self.model_id, self.exported = record, evaluation_id, model_id, exported
        self.evaluation = registry.evaluation(record.benchmark)
        self.protocol = self.evaluation.protocol(record.protocol)

    def lines(self, predictions: list[dict]) -> list[dict]:
        """The instance lines of a run's predictions lines, in their order (each sampled answer after its question's)."""
        out = []
        for line in predictions:
            if line["status"] == "excluded":
                continue
            draws = line.get("draws_generated")
            answers = [(line["generated"], line["prediction"], None)]
            if draws:
                answers = [
                    (text, prediction, k)
                    for k, (text, prediction) in enumerate(zip(draws, line["draws_prediction"], strict=True))
                ]
            for generated, prediction, draw in answers:
                found = self.line(line, generated, prediction, draw)
                if found is not None:
                    out.append(found)
        return out

    def _scores(self, line: dict, generated, draw: int | None) -> list:
        """The option scores of one answer: the line's (its first sample's, None where the model gave none), or a later
        sample's YES/NO answers read again by the protocol's rule (a sampled generation of one answer has none)."""
        if not draw:
            return [None if isinstance(v, float) and math.isnan(v) else v for v in line["scores"]]
        return [float(self.protocol.match(text, list(YES_NO))) for text in generated] if isinstance(generated, list) else []

    def score(self, config: str, row: dict, prediction: int, scores: list) -> float | None:
        """The question's score: 1 or 0 (the decided option is the gold one); where the gold is a set of classes, the
        benchmark's headline figure over this one question (None: the metric scores it in no figure)."""
        if self.evaluation.classes is None:
            return float(prediction >= 0 and prediction in self.evaluation.reference(row))
        metric = None if prediction == -1 else prediction
        figures = self.evaluation.metrics(config, [row], [metric], [scores], **self.protocol.metric_options)
        found = self.evaluation.headline_of(figures)
        return None if found is None else found[1]

    def line(self, line: dict, generated, prediction: int, draw: int | None) -> dict | None:
        """One instance line; None for a question no figure scores."""
        config, row = line["config"], json.loads(line["row_json"])
        request = self.protocol.build(row, config)
        options, gold = options_of(request), list(line["reference"])
        scores = self._scores(line, generated, draw)
        score = self.score(config, row, prediction, scores)
        if score is None:
            return None
        plain = self.evaluation.classes is None and self.protocol.answers is None and all(g < len(options) for g in gold)
        reference = [options[g] for g in gold] if plain else [str(g) for g in gold]
        prompts = list(line["prompts"] or [])
        raw = line["row_json"]
        output = (
            ([generated] if isinstance(generated, str) else list(generated))
            if self.protocol.generates
            else score_texts(line["scores"])
        )
        found = {
            "schema_version": SCHEMA_VERSION, "evaluation_id": self.evaluation_id, "model_id": self.model_id,
            "evaluation_name": f"{self.record.benchmark}/{config}",
            "sample_id": f"{config}/{line['row']}" + (f"/sample-{draw}" if draw is not None else ""),
            "sample_hash": hashlib.sha256(_json([raw, reference]).encode()).hexdigest(),
            "interaction_type": "single_turn",
            "input": {"raw": raw, "formatted": prompts[0] if len(prompts) == 1 else _json(prompts), "reference": reference,
                      "choices": options},
            "output": {"raw": output},
            "answer_attribution": [self.attribution(generated, prediction, scores, options, plain)],
            "evaluation": {"score": score, "is_correct": score == 1.0},
            "metadata": self.metadata(line, prediction, scores, draw),
        }  # fmt: skip
        headline = self.evaluation.headline_of(self.record.metrics.get(config) or {})
        if headline is not None and f"{config}.{headline[0]}" in self.exported:
            found["evaluation_result_id"] = f"{config}.{headline[0]}"
        usage = _usage(line, generated if self.protocol.generates else None, draw)
        if usage is not None:
            found["token_usage"] = usage
        return found

    def attribution(self, generated, prediction: int, scores: list, options: list[str], plain: bool) -> dict:
        """How the answer was read: the protocol's rule (its ``match`` of the text, or its ``decide`` of the scores),
        or its fallback rule where that decided."""
        rule = self.protocol.match if self.protocol.generates else self.protocol.decide
        method = f"{getattr(rule, '__name__', 'custom')} (protocol {self.protocol.name})"
        fell_back = (self.protocol.fallback is not None and isinstance(generated, str) and prediction >= 0
                     and self.protocol.fallback(generated, options))  # fmt: skip
        if fell_back:
            method = f"fallback: {self.protocol.fallback_reason} (protocol {self.protocol.name})"
        elif prediction == UNPARSED:
            method += ": the answer names no option (unparsed, counted wrong)"
        elif prediction < 0 and self.evaluation.classes is None:
            method += ": no option won, a score was missing (undecided)"
        if self.evaluation.classes is not None:  # the metric reads the classes' scores (a YES set, or a ranking)
            value = _json(scores)
        else:
            value = "" if prediction < 0 else options[prediction] if plain and prediction < len(options) else str(prediction)
        return {"turn_idx": 0, "source": "output.raw", "extracted_value": value, "extraction_method": method,
                "is_terminal": True}  # fmt: skip

    def metadata(self, line: dict, prediction: int, scores: list, draw: int | None) -> dict[str, str]:
        status = line["status"] if draw in (None, 0) else ("unparsed" if prediction == UNPARSED else "decided")
        out = {"config": line["config"], "row": str(line["row"]), "status": status, "prediction": str(prediction),
               "reference": _json(list(line["reference"])), "scores": _json(scores), "row_sha256": line["row_sha256"]}  # fmt: skip
        if draw is not None:
            out |= {"sample": str(draw), "agreement": repr(line["agreement"])}
        return out


def _usage(line: dict, generated, draw: int | None) -> dict | None:
    """The tokens the model read (its prompts) and generated, where the backend counted both."""
    prompt_tokens = line.get("prompt_tokens")
    if not prompt_tokens or draw not in (None, 0):
        return None
    made = line.get("generated_tokens") if generated is not None else 0
    made = sum(made) if isinstance(made, list) and None not in made else made
    if not isinstance(made, int):
        return None
    read = sum(prompt_tokens)
    return {"input_tokens": read, "output_tokens": made, "total_tokens": read + made}
