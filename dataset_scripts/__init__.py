"""Dataset builders, one sub-package per benchmark; ``BENCHMARKS`` lists those that exist."""

from physprobe.dataset_scripts.cccons.cccons import CCCONS
from physprobe.dataset_scripts.newton.newton import NEWTON
from physprobe.dataset_scripts.prost.prost import PROST
from physprobe.dataset_scripts.text2afford.text2afford import TEXT2AFFORD

BENCHMARKS = {benchmark.name: benchmark for benchmark in (CCCONS, NEWTON, PROST, TEXT2AFFORD)}
