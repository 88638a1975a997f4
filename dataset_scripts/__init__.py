"""Dataset builders, one sub-package per benchmark; ``BENCHMARKS`` lists those that exist."""

from physprobe.dataset_scripts.prost.prost import PROST
from physprobe.dataset_scripts.text2afford.text2afford import TEXT2AFFORD

BENCHMARKS = {benchmark.name: benchmark for benchmark in (PROST, TEXT2AFFORD)}
