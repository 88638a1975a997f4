"""CConS's configs (subsets), name -> description, one per upstream file (``cccons.FILES``).

Read by the builder (``cccons.py``) and, without importing ``datasets``, by the argument checks.
"""

CONFIGS = {
    "ordinary": "contexts whose size relation agrees with commonsense (Ordinary)",
    "ccommon": "contexts whose size relation contradicts commonsense (CCommon)",
    "ordinary_easy": "Ordinary rows whose template has a preposition hint such as in/into (Easy)",
    "ordinary_hard": "Ordinary rows without such a hint (Hard)",
    "ccommon_easy": "CCommon rows with a preposition hint (Easy)",
    "ccommon_hard": "CCommon rows without a preposition hint (Hard)",
    "ordinary_nocontext": "the Ordinary pairs with no context",
    "ccommon_nocontext": "the CCommon pairs with no context",
}
