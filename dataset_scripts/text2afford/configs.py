"""Text2Afford's configs (subsets), name -> description: ``default`` and one per affordance class.

Read by the builder (``text2afford.py``) and, without importing ``datasets``, by the argument checks.
"""

from physprobe.generators.text2afford import CLASSES

CONFIGS = {
    "default": "one row per sentence-object pair with all 15 labels",
    **{c.config: f"can a human {c.phrase} the object? one row per pair" for c in CLASSES},
}
