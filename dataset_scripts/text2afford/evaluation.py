"""Text2Afford evaluation: protocols per model family and the metric wiring (read by ``physprobe score``).

Every protocol scores the 15 classes of a sentence-object pair; ``affordance_rank`` compares them with
the labels (pairwise, Appendix G). What differs is what the model reads and what a class's score is:

- YES/NO (generative models, paper Table 10): one prompt per class. The paper maps YES to 1 and NO
  to 0 and counts ties as wrong: the ``yes-no-*`` protocols score a class 1 when the model prefers
  "YES" to "NO" after the prompt, else 0 (their prediction is the set of YES classes as a 15-bit
  mask). ``yes-no-probability-*`` keep P(YES) as a continuous score instead (not the paper's).
- MLM (released ``src/probing.py``; paper Table 4): the class words at the mask of a sentence pair.
- NLI (paper Appendix F's zero-shot pipeline, multi-label; released ``src/multi_choice.py`` as an
  option): P(entailment) of a hypothesis per class.

>>> from physprobe.dataset_scripts.text2afford.evaluation import EVALUATION
>>> [p.name for p in EVALUATION.protocols][:4]
['yes-no-flan-t5', 'yes-no-falcon', 'yes-no-llama3-released', 'yes-no-vlm-text']
>>> yes_set([0.9, 0.2, 0.51] + [0.0] * 12), from_yes_set(5)[:4]
(5, [1.0, 0.0, 1.0, 0.0])
"""

from __future__ import annotations

from physprobe.generators import text2afford
from physprobe.protocols import Evaluation, Protocol, load_metric
from physprobe.requests import Entailment, Masked, MaskedPair, YesNo

CLASSES = text2afford.CLASSES
# Class words of the released FLAN-T5 script (src/LLM/zero_shot_LLM.py, its oov_class_map); the other
# generative prompts use the paper's phrases ("sit on", "type on", ...: CLASSES[i].phrase).
FLAN_WORDS = {"Play": "play using", "TypeOn": "type using"}

# The released LLaMA-3 script (src/LLM/zero_shot_llama-3.py): an Alpaca prompt with the script's five
# in-context examples, the question "Can human '<affordance>' the <object>?".
LLAMA3_PROMPT = """Below is an instruction that describes a task. Write a response that appropriately completes the request.

### Instruction:
You are an AI assistant that has strong reasoning capability. You are given a context containing an object, and you are asked to answer a question about the object based on the context. Just response 'Yes' or 'No'

### Context:
{sentence}

### Object:
{object}

### Example questions and answers:
{examples}

### Question:
Can human '{affordance}' the {object}?

### Answer: """
LLAMA3_EXAMPLES = """Example 1: can human ride bicycle? Answer: Yes

Example 2: can human lift donkey? Answer: No

Example 3: can human watch the tower? Answer: No

Example 4: can human ride violin? Answer: No

Example 5: can human write with chalk? Answer: Yes """


def yes_no_prompts(row: dict, family: str) -> list[str]:
    """The 15 YES/NO prompts of a pair for one prompt family (``flan-t5``, ``falcon``, ``llama3``, ``vlm``).

    >>> row = {"sentence": "He rode the horse .", "object": "horse"}
    >>> yes_no_prompts(row, "flan-t5")[6]
    'consider He rode the horse .. Now, from this information can human play using the horse? Answer YES or NO:'
    >>> yes_no_prompts(row, "falcon")[8].endswith("Context:He rode the horse . \\n »QUESTION« Can human sit on the horse? \\n »ANSWER«")
    True
    """
    sentence, obj = row["sentence"], row["object"]
    if family == "flan-t5":
        return [text2afford.PROMPTS["yes_no_flan_t5"].format(sentence=sentence, object=obj,
                affordance=FLAN_WORDS.get(c.name, c.phrase)) for c in CLASSES]  # fmt: skip
    if family == "llama3":
        return [LLAMA3_PROMPT.format(sentence=sentence, object=obj, examples=LLAMA3_EXAMPLES, affordance=c.phrase)
                for c in CLASSES]  # fmt: skip
    kind = {"falcon": "yes_no_falcon", "vlm": "yes_no_vlm"}[family]
    return [text2afford.prompt(kind, sentence, obj, c).strip() for c in CLASSES]


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
    return Masked(text2afford.prompt("mlm", row["sentence"], row["object"], sep_token="[SEP]"), tuple(c.mlm_word for c in CLASSES))


def _nli_pairs(row: dict) -> tuple[tuple[str, str], ...]:
    return tuple((row["sentence"], f"{row['object']} can be used for {c.mlm_word} by human") for c in CLASSES)


def _mlm_released(row: dict, config: str) -> MaskedPair:
    # src/probing.py: encode_plus(sentence, object + " can be used for  " + mask + " by human") (two spaces).
    return MaskedPair(row["sentence"], f"{row['object']} can be used for  [MASK] by human", tuple(c.mlm_word for c in CLASSES))


def _nli_released(row: dict, config: str) -> Entailment:
    # src/multi_choice.py: the whole hypotheses are the pipeline's candidate labels, put into its default
    # template "This example is {}."; single-label scoring (softmax across the 15).
    return Entailment(tuple((row["sentence"], f"This example is {row['object']} can be used for {c.mlm_word} by human.")
                            for c in CLASSES), reading="softmax_across")  # fmt: skip


def metrics(config: str, rows: list[dict], predictions: list, scores: list) -> dict:
    """``affordance_rank`` (pairwise, ties wrong: the paper's reading) and strict, over the 15 class
    scores of each pair, each with ``by_class`` (the comparisons of each positive class: the report's
    per-class accuracy); a YES/NO protocol's scores are its YES set (1/0)."""
    rank = load_metric("affordance_rank")
    refs = [list(r["labels"]) for r in rows]
    clean = [from_yes_set(p) if p is not None else [s if s is not None else -1e9 for s in row_scores]
             for p, row_scores in zip(predictions, scores)]  # fmt: skip
    return {mode: rank.compute(predictions=clean, references=refs, mode=mode, class_names=text2afford.CLASS_NAMES)
            for mode in ("strict", "pairwise")}  # fmt: skip


def _yes_no(family: str):
    return lambda row, config: YesNo(tuple(yes_no_prompts(row, family)))


PAPER_RULE = "YES=1, NO=0, ties wrong (Appendix G)"
EVALUATION = Evaluation(
    benchmark="text2afford",
    configs=("default",),
    scorable=("default",),  # the one-class configs are for training classifiers, not the paper's ranking
    protocols=(
        Protocol("yes-no-flan-t5", "yes_no", _yes_no("flan-t5"),
                 f"Text2Afford Table 10 (FLAN-T5 prompt), class words of src/LLM/zero_shot_LLM.py; {PAPER_RULE}",
                 "FLAN-T5 prompt per class; YES if the model prefers YES to NO", default_for=("seq2seq",),
                 default_for_models=(r"flan",), decide=yes_set),
        Protocol("yes-no-falcon", "yes_no", _yes_no("falcon"),
                 f"Text2Afford Table 10 (Falcon prompt, .strip()); {PAPER_RULE}",
                 "Falcon prompt per class; YES if the model prefers YES to NO", default_for=("causal",),
                 default_for_models=(r"falcon",), decide=yes_set),
        Protocol("yes-no-llama3-released", "yes_no", _yes_no("llama3"),
                 f"src/LLM/zero_shot_llama-3.py (alpaca_prompt, its five examples; no chat template here); {PAPER_RULE}",
                 "the released LLaMA-3 prompt per class; YES if the model prefers YES to NO",
                 default_for_models=(r"llama",), decide=yes_set),
        Protocol("yes-no-vlm-text", "yes_no", _yes_no("vlm"),
                 f"Text2Afford Table 10 (I-BLIP, IDEFICS, LLaVA text prompt, without the image); {PAPER_RULE}",
                 "VLM text prompt per class; YES if the model prefers YES to NO", decide=yes_set),
        Protocol("yes-no-probability-flan-t5", "yes_no", _yes_no("flan-t5"),
                 "Text2Afford Table 10 (FLAN-T5 prompt); P(YES) as a continuous score (physprobe, not the paper's)",
                 "P(YES) / (P(YES) + P(NO)) after the FLAN-T5 prompt", decide=_ranked),
        Protocol("yes-no-probability-falcon", "yes_no", _yes_no("falcon"),
                 "Text2Afford Table 10 (Falcon prompt); P(YES) as a continuous score (physprobe, not the paper's)",
                 "P(YES) / (P(YES) + P(NO)) after the Falcon prompt", decide=_ranked),
        Protocol("mlm-released-probing", "mlm", _mlm_released,
                 "Text2Afford src/probing.py (predict_affordance_proba: encode_plus of the sentence pair, "
                 "convert_tokens_to_ids of the oov_class_map words); paper Table 4",
                 "sentence pair '<sentence>' + '<object> can be used for  [MASK] by human'; class words at the mask",
                 default_for=("mlm",), decide=_ranked),
        Protocol("mlm-table4", "mlm", _mlm,
                 "Text2Afford Table 4 (one string with the separator), class words of src/probing.py",
                 "class words at the mask after '<sentence> <sep> <object> can be used for'", decide=_ranked),
        Protocol("nli-zero-shot-multi-label", "nli", lambda row, config: Entailment(_nli_pairs(row), reading="vs_contradiction"),
                 "Text2Afford Appendix F (zero-shot-classification pipeline, several labels true) and Table 4 "
                 "(hypothesis); class words of src/multi_choice.py",
                 "P(entailment) against contradiction only, of '<object> can be used for <word> by human'",
                 default_for=("nli",), decide=_ranked),
        Protocol("nli-released-single-label", "nli", _nli_released,
                 "Text2Afford src/multi_choice.py (pipeline default template, multi_label=False)",
                 "'This example is <hypothesis>.' per class; softmax of the entailment logits across the 15",
                 decide=_ranked),
        Protocol("nli-table4", "nli", lambda row, config: Entailment(_nli_pairs(row)),
                 "Text2Afford Table 4 / Appendix B.2.1 (hypothesis), class words of src/multi_choice.py",
                 "P(entailment) over the model's three labels of '<object> can be used for <word> by human'",
                 decide=_ranked),
    ),  # fmt: skip
    metrics=metrics,
    reference=lambda row: list(row["labels"]),
)
