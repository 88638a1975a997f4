"""Text2Afford's configs (subsets), name -> description: ``default`` and one per affordance class.

Read by the builder (``text2afford.py``) and, without importing ``datasets``, by the argument checks.
"""

from physprobe.generators.text2afford import CLASSES

# The released generative scripts (src/LLM/zero_shot_LLM.py:98, zero_shot_llama-3.py:145, src/VLM/*) skip
# the rows with index < 1868 of the table they read: the release's last 500 pairs (zero_shot_LLM.py), or the last
# 630 of data_high_agreement.tsv (zero_shot_llama-3.py, whose last `filename` assignment, :57, is that file).
RELEASED_GENERATIVE_FROM = 1868

CONFIGS = {
    "default": "one row per sentence-object pair with all 15 labels",
    **{c.config: f"can a human {c.phrase} the object? one row per pair" for c in CLASSES},
    "released_generative": f"the pairs from row {RELEASED_GENERATIVE_FROM} on (the last 500), all 15 labels: those "
    "the released generative scripts score",
    "high_agreement": f"the pairs of data_high_agreement.tsv from row {RELEASED_GENERATIVE_FROM} on (the last 630), "
    "-1 where the annotators did not agree: those zero_shot_llama-3.py scores",
}
