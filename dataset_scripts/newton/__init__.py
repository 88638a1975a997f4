"""NEWTON builder (see ``newton.py``)."""
