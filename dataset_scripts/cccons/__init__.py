"""CConS builder (see ``cccons.py``)."""
