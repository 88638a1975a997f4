"""Text2Afford builder (see ``text2afford.py``)."""
