"""Dataset builders, one sub-package per benchmark; ``BENCHMARKS`` lists those that exist."""

from physprobe.dataset_scripts.prost.prost import PROST

BENCHMARKS = {benchmark.name: benchmark for benchmark in (PROST,)}
