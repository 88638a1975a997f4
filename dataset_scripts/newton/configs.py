"""NEWTON's configs (subsets), name -> description, each typed by ``newton.FEATURES[name]``.

Read by the builder (``newton.py``) and, without importing ``datasets``, by the argument checks.
"""

CONFIGS = {
    "track1": "foundational attribute questions exactly as annotated, three options",
    "track2_boolean": "True/False statements about one object or a pair (explicit application)",
    "track2_mc": "which object is the most/least <attribute>, four options (explicit application)",
    "track3": "the nine implicit scenarios, four options",
    "repository": "one row per object-attribute pair: polarity (low/high) and annotator agreement",
}
