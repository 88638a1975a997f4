"""physprobe: physical-reasoning probes (CConS, PROST, NEWTON, Text2Afford) as Hugging Face datasets and metrics."""

__version__ = "0.1.0"
