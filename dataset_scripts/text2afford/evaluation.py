"""Text2Afford evaluation: protocols per model family and the metric wiring (read by ``physprobe score``).

Every protocol scores the 15 classes of a sentence-object pair; ``affordance_rank`` compares them with
the labels (pairwise, Appendix G). What differs is what the model reads, what a class's score is, and
how equal scores count (``ties``: each protocol follows the released script it names):

- YES/NO (generative models, paper Table 10): one prompt per class, answered by greedy generation and
  read as the released scripts read it, YES when ``'yes' in answer.lower()`` (1) else NO (0); a
  positive class beats a negative one only with a higher score (``>``: ties wrong). The prediction is the
  set of YES classes as a 15-bit mask. ``yes-no-logprob-*`` decide YES when the model prefers " YES" to
  " NO" (physprobe's earlier default); ``yes-no-probability-*`` keep P(YES) as a continuous score.
- MLM (released ``src/probing.py``; paper Table 4): the class words at the mask of a sentence pair,
  ties correct (``>=``).
- NLI (released ``src/multi_choice.py``; paper Appendix F's zero-shot pipeline): P(entailment) of a
  hypothesis per class, ties correct (``>=``).

>>> from physprobe.dataset_scripts.text2afford.evaluation import EVALUATION
>>> [p.name for p in EVALUATION.protocols][:4]
['yes-no-flan-t5', 'yes-no-falcon', 'yes-no-llama3-released', 'yes-no-llama3-zero-shot']
>>> yes_set([0.9, 0.2, 0.51] + [0.0] * 12), from_yes_set(5)[:4]
(5, [1.0, 0.0, 1.0, 0.0])
"""

from __future__ import annotations

from physprobe.generators import text2afford
from physprobe.protocols import Evaluation, Kind, Protocol, load_metric
from physprobe.protocols.decoding import Decoding, Released
from physprobe.protocols.requests import Entailment, Masked, MaskedPair, YesNo
from physprobe.protocols.units import Unit

CLASSES = text2afford.CLASSES
# Class words of the released FLAN-T5 script (src/LLM/zero_shot_LLM.py, its oov_class_map); the other
# generative prompts use the paper's phrases ("sit on", "type on", ...: CLASSES[i].phrase).
FLAN_WORDS = {"Play": "play using", "TypeOn": "type using"}

# The released LLaMA-3 script (src/LLM/zero_shot_llama-3.py:35-52, 89-90): an Alpaca prompt with the script's five
# in-context examples, the question "Can human '<affordance>' the <object>?", sent as the user turn of the model's
# chat template after a system turn (:92-101).
LLAMA3_PROMPT = """Below is an instruction that describes a task. Write a response that appropriately completes the request.

### Instruction:
You are an AI assistant that has strong reasoning capability. You are given a context containing an object, and you are asked to answer a question about the object based on the context. Just response 'Yes' or 'No'

### Context:
{sentence}

### Object:
{object}

{examples}### Question:
Can human '{affordance}' the {object}?

### Answer: """
LLAMA3_SYSTEM = "You are a chatbot who always responds to the query!"
LLAMA3_EXAMPLES = """Example 1: can human ride bicycle? Answer: Yes

Example 2: can human lift donkey? Answer: No

Example 3: can human watch the tower? Answer: No

Example 4: can human ride violin? Answer: No

Example 5: can human write with chalk? Answer: Yes """
# The section the examples fill in the released prompt; the zero-shot variant leaves it out.
LLAMA3_EXAMPLE_SECTION = "### Example questions and answers:\n{examples}\n\n"


def yes_no_prompts(row: dict, family: str) -> list[str]:
    """The 15 YES/NO prompts of a pair for one prompt family (``flan-t5``, ``falcon``, ``llama3`` with the
    released script's five examples, ``llama3-zero-shot`` without them, ``vlm``).

    >>> row = {"sentence": "He rode the horse .", "object": "horse"}
    >>> yes_no_prompts(row, "flan-t5")[6]
    'consider He rode the horse .. Now, from this information can human play using the horse? Answer YES or NO:'
    >>> yes_no_prompts(row, "falcon")[8].endswith("Context:He rode the horse . \\n »QUESTION« Can human sit on the horse? \\n »ANSWER«")
    True
    """
    sentence, obj = row["sentence"], row["object"]
    if family == "flan-t5":
        return [PROMPTS["yes_no_flan_t5"].format(sentence=sentence, object=obj,
                affordance=FLAN_WORDS.get(c.name, c.phrase)) for c in CLASSES]  # fmt: skip
    if family in ("llama3", "llama3-zero-shot"):
        examples = LLAMA3_EXAMPLE_SECTION.format(examples=LLAMA3_EXAMPLES) if family == "llama3" else ""
        return [LLAMA3_PROMPT.format(sentence=sentence, object=obj, examples=examples, affordance=c.phrase)
                for c in CLASSES]  # fmt: skip
    kind = {"falcon": "yes_no_falcon", "vlm": "yes_no_vlm"}[family]
    return [prompt(kind, sentence, obj, c).strip() for c in CLASSES]


def yes_set(scores) -> int | None:
    """The classes answered YES (P(YES) > P(NO), i.e. > 0.5) as a bit mask: the paper's YES=1 / NO=0."""
    if any(s is None for s in scores):
        return None
    return sum(1 << i for i, s in enumerate(scores) if s > 0.5)


def from_yes_set(mask: int) -> list[float]:
    """The 15 class scores (1.0 YES, 0.0 NO) of a ``yes_set`` mask."""
    return [float(mask >> i & 1) for i in range(len(CLASSES))]


def _ranked(scores) -> None:
    return None  # ranked, not predicted: the metric reads the 15 scores


def _mlm(row: dict, config: str) -> Masked:
    # "[SEP]" stands for the tokenizer's separator (its sep token, else its EOS), which the backend puts in.
    return Masked(prompt("mlm", row["sentence"], row["object"], sep_token="[SEP]"), tuple(c.mlm_word for c in CLASSES))


def _nli_pairs(row: dict) -> tuple[tuple[str, str], ...]:
    return tuple((row["sentence"], f"{row['object']} can be used for {c.mlm_word} by human") for c in CLASSES)


def _mlm_released(row: dict, config: str) -> MaskedPair:
    # src/probing.py:93-94: encode_plus(sentence, object + " can be used for  " + mask + " by human") (two spaces),
    # read by a tokenizer loaded with do_lower_case=True (:38), the model called without token types (:130), a
    # word outside the vocabulary scored as <unk> (:151).
    return MaskedPair(row["sentence"], f"{row['object']} can be used for  [MASK] by human", tuple(c.mlm_word for c in CLASSES),
                      token_type_ids=False, unknown_as_unk=True, lower_case=True)  # fmt: skip


def _mlm_pair(row: dict, config: str) -> MaskedPair:
    return MaskedPair(row["sentence"], f"{row['object']} can be used for  [MASK] by human", tuple(c.mlm_word for c in CLASSES))


def _nli_released(row: dict, config: str) -> Entailment:
    # src/multi_choice.py:65-68 at f8593ffc: the hypotheses are overwritten by the bare class words, which the
    # zero-shot pipeline puts into its default template "This example is {}." (multi_label=True).
    return Entailment(tuple((row["sentence"], f"This example is {c.mlm_word}.") for c in CLASSES), reading="vs_contradiction")


def _nli_single_label(row: dict, config: str) -> Entailment:
    # src/multi_choice.py at 0463363d (its first revision): the whole hypotheses are the pipeline's candidate
    # labels, in its default template; single-label scoring (softmax across the 15).
    return Entailment(tuple((row["sentence"], f"This example is {row['object']} can be used for {c.mlm_word} by human.")
                            for c in CLASSES), reading="softmax_across")  # fmt: skip


def released_yes(text: str, _choices=None) -> int:
    """The released scripts' reading of a generated answer: YES (1) when it holds ``yes`` in any case, else
    NO (0) (``src/LLM/zero_shot_LLM.py:73-76``, ``zero_shot_llama-3.py:120-123``); as a protocol's ``match``
    it is given the choices ``("NO", "YES")``, which the rule does not need.

    >>> released_yes("Yes."), released_yes(" no, it cannot"), released_yes("Eyes are for watching"), released_yes("")
    (1, 0, 1, 0)
    """
    return int("yes" in text.lower())


def metrics(config: str, rows: list[dict], predictions: list, scores: list, ties: str = "wrong",
            map_ties: str = "class_order", in_context: bool = False) -> dict:  # fmt: skip
    """``affordance_rank`` pairwise (the paper's reading) and strict, over the 15 class scores of each
    pair, each with ``by_class`` (the comparisons of each positive class: the report's per-class
    accuracy); a YES/NO protocol's scores are its YES set (1/0). ``ties``: the protocol's tie rule for
    comparisons; ``map_ties``: for mAP, tied classes in class order (``map``, the released scripts' stable
    sort) or ``"pessimistic"`` (``map_pessimistic``); ``in_context``: the prompt holds worked examples, so
    the figures are Table 6's in-context ones, keyed ``in_context_pairwise`` and ``in_context_strict``.
    A label of -1 (a class the annotators did not agree on) is in no comparison; where no pair has both a
    positive and a negative class there is nothing to rank: ``n`` 0, every pair ``skipped``."""
    rank = load_metric("affordance_rank")
    refs = [list(r["labels"]) for r in rows]
    clean = [from_yes_set(p) if p is not None else [s if s is not None else -1e9 for s in row_scores]
             for p, row_scores in zip(predictions, scores, strict=True)]  # fmt: skip
    prefix = "in_context_" if in_context else ""
    if not any(1 in labels and 0 in labels for labels in refs):  # e.g. a --limit sample of pairs without a negative
        return {prefix + mode: {"n": 0, "skipped": len(rows)} for mode in ("strict", "pairwise")}
    return {prefix + mode: rank.compute(predictions=clean, references=refs, mode=mode, ties=ties, map_ties=map_ties,
                                        class_names=text2afford.CLASS_NAMES)
            for mode in ("strict", "pairwise")}  # fmt: skip


def _yes_no(family: str):
    return lambda row, config: YesNo(tuple(yes_no_prompts(row, family)))


RELEASED_RULE = "'yes' in answer.lower() is YES=1, else NO=0; pos > neg, ties wrong"
GREEDY = "greedy decoding (physprobe, every model)"
LLAMA3 = (
    "src/LLM/zero_shot_llama-3.py (alpaca_prompt as the user turn after the system message 'You are a chatbot "
    "who always responds to the query!' through the chat template, :89-101; max_new_tokens=5, :110; "
    f"{RELEASED_RULE}, :120-123, :184); {GREEDY}: the script samples (do_sample=True, temperature 0.7, "
    "top_p 0.9, :112-114)"
)
AFFORDANCE = "sayantan11995/Affordance@f8593ff "
# How the released scripts decode (--decoding released): greedy but for the LLaMA-3 script, which samples with the
# settings it passes and transformers' default top_k (50), which generate applies when sampling and the script sets none.
FLAN_T5_DECODING = Released(Decoding.greedy(f"{AFFORDANCE}src/LLM/zero_shot_LLM.py:68 (generate max_new_tokens=20, no sampling)"))
FALCON_DECODING = Released(Decoding.greedy(f"no Falcon script released; {AFFORDANCE}src/LLM/zero_shot_LLM.py:68, whose "
                                           "answer rule and budget the protocol takes, decodes greedily"))  # fmt: skip
LLAMA3_DECODING = Released(Decoding.sampling(f"{AFFORDANCE}src/LLM/zero_shot_llama-3.py:108-115 (generate max_new_tokens=5, "
                                             "do_sample=True, temperature=0.7, top_p=0.9; top_k transformers' default 50)",
                                             temperature=0.7, top_p=0.9, top_k=50, max_new_tokens=5))  # fmt: skip
VLM_DECODING = Released(Decoding.greedy(f"{AFFORDANCE}src/VLM/zero_shot_llava.py:92 (pipeline generate_kwargs "
                                        "max_new_tokens=5, no sampling)"))  # fmt: skip
LOGPROB_RULE = "YES=1 if P(' YES') > P(' NO'), else NO=0; ties wrong (Appendix G; physprobe's earlier default)"
TIES_CORRECT = {"ties": "correct"}
SENTENCE = Unit(
    "sentence",
    lambda row, config: row["sentence"],
    "a sentence is rated for each of its objects (1,879 sentences for 2,368 rows, 166 rows repeating a sentence-object "
    "pair), and a row's fifteen classes are rated on the one sentence-object pair",
)

EVALUATION = Evaluation(
    benchmark="text2afford",
    unit=SENTENCE,
    # affordance_rank's figures of each mode, overall and per class: accuracy and mAP (either reading of ties)
    figures={"accuracy": Kind.FRACTION, "map": Kind.FRACTION, "map_pessimistic": Kind.FRACTION},
    headline=("pairwise.accuracy", "in_context_pairwise.accuracy"),
    skipped_reason=("no class pair to rank: the annotators agreed on no positive class (paper footnote 5) or on no negative one"),
    configs=("default",),
    scorable=("default", "released_generative", "high_agreement"),  # the one-class configs are for training classifiers
    protocols=(
        Protocol(
            "yes-no-flan-t5",
            YesNo,
            _yes_no("flan-t5"),
            f"Text2Afford Table 10 (FLAN-T5 prompt), class words and answer rule of src/LLM/zero_shot_LLM.py "
            f"(generate max_new_tokens=20, :68; {RELEASED_RULE}, :73-76, :132); {GREEDY}, as the script",
            "FLAN-T5 prompt per class; greedy answer, YES if it holds 'yes'",
            default_for=("seq2seq",),
            default_for_models=(r"flan",),
            decide=yes_set,
            match=released_yes,
            max_new_tokens=20,
            released=FLAN_T5_DECODING,
        ),
        Protocol(
            "yes-no-falcon",
            YesNo,
            _yes_no("falcon"),
            f"Text2Afford Table 10 (Falcon prompt, .strip()); answer rule and 20 new tokens of "
            f"src/LLM/zero_shot_LLM.py:68-76 (no Falcon script is released); {RELEASED_RULE}; {GREEDY}",
            "Falcon prompt per class; greedy answer, YES if it holds 'yes'",
            default_for=("causal",),
            default_for_models=(r"falcon",),
            decide=yes_set,
            match=released_yes,
            max_new_tokens=20,
            released=FALCON_DECODING,
        ),
        Protocol(
            "yes-no-llama3-released",
            YesNo,
            _yes_no("llama3"),
            f"{LLAMA3}; its five examples: Table 6's in-context (ICL) column; data_high_agreement.tsv from row "
            "1868, empty cells not scored (:57, :145, :164)",
            "the released LLaMA-3 prompt with its five examples per class, under the chat template with the "
            "script's system message; greedy answer, YES if it holds 'yes'",
            default_for_models=(r"llama",),
            families=("causal",),
            decide=yes_set,
            match=released_yes,
            max_new_tokens=5,
            system_message=LLAMA3_SYSTEM,
            needs_chat=True,
            configs=("high_agreement",),
            released=LLAMA3_DECODING,
            metric_options={"in_context": True},
        ),
        Protocol(
            "yes-no-llama3-zero-shot",
            YesNo,
            _yes_no("llama3-zero-shot"),
            f"{LLAMA3}, without its example section (physprobe's zero-shot variant, for Table 6's zero-shot column)",
            "the released LLaMA-3 prompt without the examples, under the chat template with the script's "
            "system message; greedy answer, YES if it holds 'yes'",
            families=("causal",),
            decide=yes_set,
            match=released_yes,
            max_new_tokens=5,
            system_message=LLAMA3_SYSTEM,
            needs_chat=True,
            released=LLAMA3_DECODING,
        ),
        Protocol(
            "yes-no-vlm-text",
            YesNo,
            _yes_no("vlm"),
            "Text2Afford Table 10 (I-BLIP, IDEFICS, LLaVA text prompt, without the image); answer rule of "
            f"src/VLM/zero_shot_llava.py (max_new_tokens=5, :92; {RELEASED_RULE}, :132, :195); {GREEDY}",
            "VLM text prompt per class; greedy answer, YES if it holds 'yes'",
            decide=yes_set,
            match=released_yes,
            max_new_tokens=5,
            released=VLM_DECODING,
        ),
        Protocol(
            "yes-no-logprob-falcon",
            YesNo,
            _yes_no("falcon"),
            f"Text2Afford Table 10 (Falcon prompt, .strip()); {LOGPROB_RULE}",
            "Falcon prompt per class; YES if the model prefers YES to NO",
            families=("causal",),
            decide=yes_set,
        ),
        Protocol(
            "yes-no-logprob-flan-t5",
            YesNo,
            _yes_no("flan-t5"),
            f"Text2Afford Table 10 (FLAN-T5 prompt), class words of src/LLM/zero_shot_LLM.py; {LOGPROB_RULE}",
            "FLAN-T5 prompt per class; YES if the model prefers YES to NO",
            decide=yes_set,
        ),
        Protocol(
            "yes-no-logprob-llama3",
            YesNo,
            _yes_no("llama3"),
            f"src/LLM/zero_shot_llama-3.py (alpaca_prompt, its five examples; no chat template here); {LOGPROB_RULE}",
            "the released LLaMA-3 prompt per class; YES if the model prefers YES to NO",
            decide=yes_set,
        ),
        Protocol(
            "yes-no-logprob-vlm-text",
            YesNo,
            _yes_no("vlm"),
            f"Text2Afford Table 10 (I-BLIP, IDEFICS, LLaVA text prompt, without the image); {LOGPROB_RULE}",
            "VLM text prompt per class; YES if the model prefers YES to NO",
            decide=yes_set,
        ),
        Protocol(
            "yes-no-probability-flan-t5",
            YesNo,
            _yes_no("flan-t5"),
            "Text2Afford Table 10 (FLAN-T5 prompt); P(YES) as a continuous score (physprobe, not the paper's)",
            "P(YES) / (P(YES) + P(NO)) after the FLAN-T5 prompt",
            decide=_ranked,
        ),
        Protocol(
            "yes-no-probability-falcon",
            YesNo,
            _yes_no("falcon"),
            "Text2Afford Table 10 (Falcon prompt); P(YES) as a continuous score (physprobe, not the paper's)",
            "P(YES) / (P(YES) + P(NO)) after the Falcon prompt",
            decide=_ranked,
        ),
        Protocol(
            "mlm-released-probing",
            MaskedPair,
            _mlm_released,
            "Text2Afford src/probing.py (do_lower_case=True, :38; encode_plus of the sentence pair, :100-106; "
            "model(input_ids, attention_mask) without token types, :130; convert_tokens_to_ids of the "
            "oov_class_map words, a word outside the vocabulary scored as <unk>, :151; pos >= neg, ties "
            "correct, :214); paper Table 4",
            "sentence pair '<sentence>' + '<object> can be used for  [MASK] by human', no segment ids; class "
            "words at the mask (<unk> for unknown words); ties correct",
            default_for=("mlm",),
            decide=_ranked,
            metric_options=TIES_CORRECT,
        ),
        Protocol(
            "mlm-pair-segments",
            MaskedPair,
            _mlm_pair,
            "Text2Afford src/probing.py's input (:93-106) with its segment ids passed (commented out at :128); "
            "words outside the vocabulary undecided; ties wrong (physprobe's earlier reading)",
            "sentence pair as mlm-released-probing, token type ids given; unknown class words score lowest",
            decide=_ranked,
        ),
        Protocol(
            "mlm-table4",
            Masked,
            _mlm,
            "Text2Afford Table 4 (one string with the separator), class words of src/probing.py",
            "class words at the mask after '<sentence> <sep> <object> can be used for'",
            decide=_ranked,
        ),
        Protocol(
            "nli-released-multi-choice",
            Entailment,
            _nli_released,
            "Text2Afford src/multi_choice.py at f8593ffc (hypotheses overwritten by the bare class words, :65-66; "
            "zero-shot pipeline, default template 'This example is {}.', multi_label=True, :68: entailment "
            "against contradiction per class; pos >= neg, ties correct, :132)",
            "'This example is <word>.' per class; P(entailment) against contradiction; ties correct",
            default_for=("nli",),
            decide=_ranked,
            metric_options=TIES_CORRECT,
        ),
        Protocol(
            "nli-zero-shot-multi-label",
            Entailment,
            lambda row, config: Entailment(_nli_pairs(row), reading="vs_contradiction"),
            "Text2Afford Appendix F (zero-shot-classification pipeline, several labels true) and Table 4 "
            "(hypothesis); class words of src/multi_choice.py",
            "P(entailment) against contradiction only, of '<object> can be used for <word> by human'",
            decide=_ranked,
        ),
        Protocol(
            "nli-released-single-label",
            Entailment,
            _nli_single_label,
            "Text2Afford src/multi_choice.py at 0463363d, its first revision (whole hypotheses as the "
            "pipeline's labels, default template, multi_label=False: softmax across the 15)",
            "'This example is <hypothesis>.' per class; softmax of the entailment logits across the 15",
            decide=_ranked,
        ),
        Protocol(
            "nli-table4",
            Entailment,
            lambda row, config: Entailment(_nli_pairs(row)),
            "Text2Afford Table 4 / Appendix B.2.1 (hypothesis), class words of src/multi_choice.py",
            "P(entailment) over the model's three labels of '<object> can be used for <word> by human'",
            decide=_ranked,
        ),
    ),  # fmt: skip
    metrics=metrics,
    reference=lambda row: [i for i, label in enumerate(row["labels"]) if label == 1],  # the positive classes
    classes=len(text2afford.CLASS_NAMES),
    groups=lambda row, config: tuple(
        name for name, label in zip(text2afford.CLASS_NAMES, row["labels"], strict=True) if label == 1
    ),
)


# --- prompts (paper Table 4 and Table 10) ---
PROMPTS = {
    "mlm": "{sentence} {sep_token} {object} can be used for {mask_token} by human",
    "nli_hypothesis": "{object} can be used for {affordance} by human",
    "yes_no_flan_t5": "consider {sentence}. Now, from this information can human {affordance} the {object}? Answer YES or NO:",
    "yes_no_falcon": (
        'You are a helpful AI assistant. Answer only "YES" or "NO" for the question based on the given context. '
        "Context:{sentence} \n \u00bbQUESTION\u00ab Can human {affordance} the {object}? \n \u00bbANSWER\u00ab"
    ),
    "yes_no_vlm": (
        "consider the sentence {sentence}. Now from this information, can human {affordance} the {object}? "
        "Accompanying this query is an image of the {object}. Note that the image may contain noise or variations "
        "in appearance. Given the textual description and the image, answer YES or NO whether the human can "
        '{affordance} the {object}. Answer: "'
    ),
}


def prompt(kind: str, sentence: str, obj: str, affordance: text2afford.AffordanceClass | None = None,
           mask_token: str = "[MASK]", sep_token: str = "[SEP]") -> str:  # fmt: skip
    """Format one of ``PROMPTS`` for a sentence-object pair (and class, except for ``mlm``).

    >>> prompt("mlm", "All the women in India wear bangles", "bangles", mask_token="<mask>", sep_token="</s>")
    'All the women in India wear bangles </s> bangles can be used for <mask> by human'
    >>> prompt("nli_hypothesis", "All the women in India wear bangles", "bangles", CLASSES[0])
    'bangles can be used for grasp by human'
    >>> prompt("yes_no_flan_t5", "All the women in India wear bangles", "bangles", CLASSES[8])
    'consider All the women in India wear bangles. Now, from this information can human sit on the bangles? Answer YES or NO:'
    """
    if kind not in PROMPTS:
        raise ValueError(f"unknown prompt kind {kind!r}; known: {', '.join(PROMPTS)}")
    if kind != "mlm" and affordance is None:
        raise ValueError(f"prompt {kind!r} needs an affordance class")
    return PROMPTS[kind].format(
        sentence=sentence, object=obj, affordance=affordance.phrase if affordance else "",
        mask_token=mask_token, sep_token=sep_token,
    )  # fmt: skip
