"""The evaluate metric modules, one folder each (also the sources of their Hub Spaces); see ``physprobe.protocols.metric_modules``."""
