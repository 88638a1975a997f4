"""The ``physprobe`` commands that live beside the parser of ``physprobe.cli``: each module adds one command's
options (``add_arguments``) and runs it; it may import every layer below the command line."""
