"""Build the benchmarks and metrics into Hub-ready repo folders, validate them, and publish them: the checkout's
entry to ``physprobe publish`` (``physprobe.publish``), with the same options.

    python upload.py --out hub                                        # dry run: build and validate, no network
    python upload.py --out hub --push [--org physprobe] [--only prost,newton] [--tag v0.1.0]
    python upload.py --runs runs/* --runs-repo my-runs --push --org ME  # score runs, as one dataset repo
"""

import sys

from physprobe.publish import main

if __name__ == "__main__":
    sys.exit(main())
