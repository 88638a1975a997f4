"""The test suite (docs/development.md). Imported before conftest.py and any library: each pytest-xdist worker runs
torch on one thread (two workers on two cores; more threads spin against each other), unless the caller set
``OMP_NUM_THREADS``; where it is set, physprobe leaves torch's threads as they are."""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
