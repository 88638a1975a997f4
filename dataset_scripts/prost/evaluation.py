"""PROST evaluation: default configs, protocols and metric wiring (read by ``physprobe score``).

Defaults follow the authors' released code, nala-cub/prost at d6285efa (``src/baselines/``):
``input_pipeline.py`` builds each architecture's input, ``zs_runner.py`` scores it, ``unifiedqa.py``
matches UnifiedQA's answers, ``results.py`` turns predictions into Tables 5-7. Each protocol's
``source`` names the lines; ``dataset_scripts/prost/card.md`` ("Evaluating") discusses them.

>>> from physprobe.dataset_scripts.prost.evaluation import EVALUATION
>>> [EVALUATION.default(family).name for family in ("causal", "mlm", "seq2seq")]
['released-gpt', 'released-mlm', 'released-t5']
>>> EVALUATION.default("seq2seq", model_name="allenai/unifiedqa-t5-small").name
'released-unifiedqa'
"""

from __future__ import annotations

import re
import string

from physprobe.generators.prost import superlative_pair
from physprobe.protocols import Evaluation, Kind, Protocol, decided, load_metric, scored_as_wrong
from physprobe.protocols.decoding import Decoding, Released
from physprobe.protocols.requests import Choice, Generate, Masked, MeanTokens, Seq2Seq
from physprobe.protocols.units import Unit

OPTIONS = "ABCD"
UPSTREAM = "nala-cub/prost@d6285efa src/baselines/"
# input_pipeline.py:83/132/207 substitute the mask together with the space before it.
_MASK = re.compile(r"( \[MASK\])|(\[MASK\])")


def sentence(row: dict) -> str:
    """PROST Table 2's input: the context, then the question with its ``[MASK]``.

    >>> sentence({"context": "A coin and an egg fall.", "question": "The [MASK] is heavier."})
    'A coin and an egg fall. The [MASK] is heavier.'
    """
    return f"{row['context']} {row['question']}"


def around_mask(row: dict) -> tuple[str, str]:
    """The input's text before the mask (without the space before it) and after it.

    >>> around_mask({"context": "A coin and an egg fall.", "question": "The [MASK] is heavier."})
    ('A coin and an egg fall. The', ' is heavier.')
    """
    left, right = _MASK.split(sentence(row), maxsplit=1)[::3]
    return left, right


def released_gpt(row: dict, config: str) -> MeanTokens:
    """The four token sequences of ``create_examples_gpt`` (``input_pipeline.py:74-116``) as released.

    The mask (and the space before it) is replaced by a pad token, the text tokenised, the pad's id then
    overwritten by the option's token (``' option'``, no special tokens, ``input_pipeline.py:38-42``). A
    tokenizer whose name starts with ``gpt`` gets ``BOS + text + EOS`` (``input_pipeline.py:88-89``); special
    tokens split the text, so the text before the mask, the option and the text after it are tokenised apart
    (the request's segments). Any other tokenizer encodes the text whole, as it does, its own special tokens
    included (``:92-93``), the pad found from position 1 on (``:95-96``) and overwritten by the option's
    tokens (``:106-110``). The backend resolves ``specials="gpt_names"``. An option of several tokens
    (upstream aborts) keeps them all.

    >>> released_gpt({"context": "A coin and an egg fall.", "question": "The [MASK] is heavier.", "A": "coin",
    ...               "B": "egg", "C": "leaf", "D": "brick"}, "default").options[1]
    ('A coin and an egg fall. The', ' egg', ' is heavier.')
    """
    left, right = around_mask(row)
    return MeanTokens(tuple((left, f" {row[o]}", right) for o in OPTIONS), specials="gpt_names")


def bos_eos(row: dict, config: str) -> MeanTokens:
    """``released_gpt``'s sequences with the GPT-2 branch for every tokenizer: its BOS + text + EOS, whatever
    its name (``input_pipeline.py:88-89``; physprobe's earlier default).

    >>> bos_eos({"context": "A coin falls.", "question": "The [MASK] lands.", "A": "coin", "B": "egg", "C": "leaf",
    ...          "D": "brick"}, "default").specials
    'bos_eos'
    """
    left, right = around_mask(row)
    return MeanTokens(tuple((left, f" {row[o]}", right) for o in OPTIONS), specials="bos_eos")


def _sentences(row: dict, config: str) -> Choice:
    return Choice("", tuple(sentence(row).replace("[MASK]", row[o]) for o in OPTIONS))


def _masked(row: dict, config: str) -> Masked:
    return Masked(sentence(row), tuple(row[o] for o in OPTIONS))


def released_t5_input(row: dict) -> str:
    """``create_examples_t5``'s input text: the mask and its leading space become ``<extra_id_0>``
    (``input_pipeline.py:131-136``).

    >>> released_t5_input({"context": "A coin and an egg fall.", "question": "The [MASK] is heavier."})
    'A coin and an egg fall. The<extra_id_0> is heavier.'
    """
    left, right = around_mask(row)
    return f"{left}<extra_id_0>{right}"


def _released_t5(row: dict, config: str) -> Seq2Seq:
    # Decoder reads <pad> <extra_id_0>; the logits at position 1 are compared at each option's first token
    # (' option', no special tokens: zs_runner.py:107-116). Scoring [<extra_id_0>, option] adds
    # log P(<extra_id_0>), the same for all four.
    return Seq2Seq(released_t5_input(row), tuple(f" {row[o]}" for o in OPTIONS), first_token_after="<extra_id_0>")


def _span_sum(row: dict, config: str) -> Seq2Seq:
    return Seq2Seq(sentence(row).replace("[MASK]", "<extra_id_0>"), tuple(f"<extra_id_0> {row[o]} <extra_id_1>" for o in OPTIONS))


def unifiedqa_input(row: dict) -> str:
    """PROST Table 2's UnifiedQA format as ``create_examples_unifiedqa`` writes it: a literal backslash-n
    between the parts (``input_pipeline.py:279``).

    >>> print(unifiedqa_input({"ex_question": "Which is heavier?", "A": "coin", "B": "egg", "C": "leaf",
    ...                        "D": "brick", "context": "A coin and an egg fall."}))
    Which is heavier? \\n (A) coin (B) egg (C) leaf (D) brick \\n A coin and an egg fall.
    """
    return "{ex_question} \\n (A) {A} (B) {B} (C) {C} (D) {D} \\n {context}".format_map(row)


def _unifiedqa(row: dict, config: str) -> Generate:
    # The answer is matched against the options' first tokens decoded together and split on spaces
    # (zs_runner.py:161), as upstream does: the backend resolves first_token_choices.
    return Generate(unifiedqa_input(row), tuple(row[o] for o in OPTIONS), first_token_choices=True)


def normalize_answer(text: str) -> str:
    """UnifiedQA's answer normalisation (``unifiedqa.py:38-58``): lower case, no punctuation, no
    ``{}^\\`<`` characters, no articles, single spaces.

    >>> normalize_answer("The Egg!")
    'egg'
    """
    text = text.lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    text = re.sub("[{}^\\\\`\u2047<]", " ", text)
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def unifiedqa_score(prediction: str, truth: str) -> float:
    """``score_unifiedqa`` (``unifiedqa.py:61-81``): 3 exact, 2 equal after normalisation, else the token
    overlap when either has several words, else 0.

    >>> unifiedqa_score("egg", "egg"), unifiedqa_score("The egg.", "egg"), unifiedqa_score("egg white", "egg")
    (3.0, 2.0, 0.5)
    """
    if prediction == truth:
        return 3.0
    prediction, truth = normalize_answer(prediction), normalize_answer(truth)
    if prediction == truth:
        return 2.0
    if " " in prediction or " " in truth:
        p, t = prediction.split(" "), truth.split(" ")
        return len(set(p) & set(t)) / max(len(p), len(t))
    return 0.0


def unifiedqa_match(text: str, choices: list[str]) -> int | None:
    """``get_pred_idx`` (``unifiedqa.py:84-90``): the best-scoring option (first on ties); None (upstream
    -1) when every score is 0.

    >>> unifiedqa_match("egg", ["coin", "egg", "leaf", "brick"]), unifiedqa_match("a rock", ["coin", "egg"])
    (1, None)
    """
    scores = [unifiedqa_score(text, truth) for truth in choices]
    if not scores or max(scores) == 0:
        return None
    return scores.index(max(scores))


def template_position(name: str) -> int:
    """Table 6's position as the released analysis code reads it: the number after the concept in the
    template name (``results.py``, ``process_preds_positions``).

    >>> template_position("nonstacking_3"), template_position("mass_1_b"), template_position("directions_2_a")
    (3, 1, 2)
    """
    return int(name.split("_")[1])


def metrics(config: str, rows: list[dict], predictions: list, scores: list) -> dict:
    """Table 5 (templates into concepts, macro average), Table 6 (position), Table 7 (inverse gaps).

    An undecided question (an option that is not one token) is left out; a generated answer that names no
    option is wrong, as the released ``results.py`` counts it.

    ``by_position``: Table 6 as ``results.py`` computes it (position from the template name, template
    accuracies averaged, every concept); ``by_answer_position``: the answer's context position
    (``label`` + 1), questions pooled, directions left out. Table 7 pools each side's questions per
    concept (``results.py``, ``process_preds_inverse``).
    """
    out, kept = decided(rows, predictions)
    if not kept:
        return out
    accuracy = load_metric("probe_accuracy")
    refs = [int(rows[i]["label"]) for i in kept]
    # An answer that named no option is wrong (zs_runner.py:160-171 pred_idx -1; results.py correct = pred_idx == label).
    preds = scored_as_wrong([predictions[i] for i in kept], refs, len(OPTIONS))
    names = [rows[i]["name"] for i in kept]
    parsed = {name: superlative_pair(name) for name in set(names)}  # a few hundred templates for thousands of rows
    pairs, inverted = zip(*map(parsed.get, names), strict=True)
    position_of = {name: template_position(name) for name in parsed}
    # Table 7 pools each concept's questions per side (results.py process_preds_inverse), whether or not a
    # question's own pair has its other side among the rows (a --limit run may hold one side).
    if not any(pairs):
        pairs, inverted = None, None
    out.update(accuracy.compute(predictions=preds, references=refs, groups=[rows[i]["group"] for i in kept],
                                templates=names, pairs=pairs, inverted=None if inverted is None else list(inverted),
                                positions=[position_of[n] for n in names]))  # fmt: skip
    objects = [j for j, i in enumerate(kept) if rows[i]["group"] != "directions"]
    if objects:
        positions = accuracy.compute(predictions=[preds[j] for j in objects], references=[refs[j] for j in objects],
                                     positions=[refs[j] + 1 for j in objects], position_reading="question_mean")  # fmt: skip
        out["by_answer_position"] = positions["by_position"]
    return out


def _sliding(row: dict) -> bool:
    return "sliding" in row["name"]


CONCEPT_OBJECTS = Unit(
    "object set",
    lambda row, config: (row["group"], frozenset((row["A"], row["B"], row["C"], row["D"]))),
    "a concept's templates ask the same four objects in every order (647 sets for 18,736 questions: 24 questions each "
    "for an affordance, 96 for mass, height and circumference)",
)

EVALUATION = Evaluation(
    benchmark="prost",
    unit=CONCEPT_OBJECTS,
    # probe_accuracy's figures: Table 5's accuracies (overall, per template, concept and position, macro), Table 7's
    # gaps |accuracy - inverted accuracy| per pair, per concept (``inverse_gap_by_group``: a gap per concept) and macro.
    figures={
        "accuracy": Kind.FRACTION,
        "macro_accuracy": Kind.FRACTION,
        "inverted_accuracy": Kind.FRACTION,
        "gap": Kind.DIFFERENCE,
        "inverse_gap": Kind.DIFFERENCE,
        "inverse_gap_by_group": Kind.DIFFERENCE,
        "macro_inverse_gap": Kind.DIFFERENCE,
    },  # fmt: skip
    headline=("macro_accuracy",),
    configs=("default",),
    protocols=(
        Protocol(
            "released-gpt",
            MeanTokens,
            released_gpt,
            default_for=("causal",),
            source=f"PROST §4 'Decoder Models', Table 2; {UPSTREAM}input_pipeline.py:74-116 (create_examples_gpt; "
            "BOS/EOS only for tokenizer names starting with 'gpt', :88-89), zs_runner.py:89-103 (mean token "
            "loss), results.py to_wide_rankings (lowest loss)",
            summary="context + question with the option's token, BOS + .. + EOS for 'gpt*' names, else as the "
            "tokenizer encodes it; highest mean token log-probability",
        ),
        Protocol(
            "released-gpt-bos-eos",
            MeanTokens,
            bos_eos,
            source=f"{UPSTREAM}input_pipeline.py:88-89 (the GPT-2 branch of create_examples_gpt) for every tokenizer, "
            "zs_runner.py:89-103; tokenizer-agnostic variant (physprobe's earlier default)",
            summary="the tokenizer's BOS + context + question with the option's token + EOS, whatever its name; "
            "highest mean token log-probability",
        ),
        Protocol(
            "sentence-sum",
            Choice,
            _sentences,
            source="PROST §4 'we select the sentence with the highest probability' (Warstadt et al., 2020)",
            summary="whole sentence with each option, no EOS; highest summed log-probability (physprobe's earlier default)",
        ),
        Protocol(
            "released-mlm",
            Masked,
            _masked,
            default_for=("mlm",),
            source=f"PROST §4 'Encoder Models', Table 2; {UPSTREAM}input_pipeline.py:166-262 (create_examples_bert/"
            "roberta/albert), zs_runner.py:117-135 (softmax over the four options at the mask)",
            summary="the four options' tokens at the mask, highest probability; an option of several tokens is undecided",
        ),
        Protocol(
            "released-t5",
            Seq2Seq,
            _released_t5,
            default_for=("seq2seq",),
            skip=_sliding,
            skip_reason="sliding: ice and frost are not single T5 tokens (PROST §4; Table 5 '*')",
            source=f"PROST §4 'Encoder-decoder Models', Table 2; {UPSTREAM}input_pipeline.py:120-163 (create_examples_t5, "
            "dropme sliding), zs_runner.py:107-116 (decoder position 1, options' first tokens)",
            summary="'<extra_id_0>' for the mask; the options' first tokens after <extra_id_0> in the decoder; sliding excluded",
        ),
        Protocol(
            "span-sum",
            Seq2Seq,
            _span_sum,
            source="PROST Table 2 (T5 target '<X> option <Y>'); physprobe reading",
            summary="'<extra_id_0> option <extra_id_1>' as target, summed log-probability (physprobe's earlier default)",
        ),
        Protocol(
            "released-unifiedqa",
            Generate,
            _unifiedqa,
            families=("seq2seq",),
            default_for_models=(r"unifiedqa",),
            match=unifiedqa_match,
            max_new_tokens=19,
            released=Released(
                Decoding.greedy(
                    f"{UPSTREAM}zs_runner.py:81 (model.generate(input_ids): transformers' defaults, greedy, max_length 20)"
                )
            ),
            reported_apart=True,
            skip=lambda row: _sliding(row) or row["ex_question"] == "",
            skip_reason="sliding and questions without ex_question (input_pipeline.py:290)",
            source=f"PROST §4 'Finetuned Conditional LMs', Table 2; {UPSTREAM}input_pipeline.py:265-301 "
            "(create_examples_unifiedqa), zs_runner.py:80-83 (generate, default max_length 20), "
            "unifiedqa.py:38-90 (answer matching; none matched: wrong, zs_runner.py:160-171, results.py "
            "process_preds_base); Table 5: outside the task average",
            summary="'ex_question \\n (A) .. (D) .. \\n context', greedy answer matched to an option as UnifiedQA scores it",
        ),
    ),  # fmt: skip
    metrics=metrics,
    groups=lambda row, config: (row["group"],),  # Table 5's concepts
)
