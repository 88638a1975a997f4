"""PROST builder (see ``prost.py``)."""
