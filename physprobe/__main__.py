"""``python -m physprobe``: the command line (so ``accelerate launch -m physprobe score ...`` works)."""

import sys

from physprobe.cli import main

sys.exit(main())
