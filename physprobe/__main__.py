"""``python -m physprobe``: the command line (so ``accelerate launch -m physprobe score ...`` works)."""

import sys

from physprobe.cli import command

if __name__ == "__main__":
    sys.exit(command())
